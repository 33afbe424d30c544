"""The stand-in vendor runtimes (rocprofiler-sdk, libcupti) the simulated application drives through the tools."""

from __future__ import annotations

from fingrav_native._tools import PACKAGE_DIR, STANDINS, Vendor, check_vendor, find_library

__all__ = ["standin_library"]


def standin_library(vendor: Vendor) -> str:
    """The path of the stand-in vendor runtime the simulated application drives (tests, the demo).

    It exports the vendor functions the tool uses with their documented behaviour, and the stand-in
    C ABI (``fingrav_standin_init``, ``fingrav_standin_dispatch``, ``fingrav_standin_flush``,
    ``fingrav_standin_fini``; ``csrc/fingrav/sim/standin_abi.h``).

    Parameters
    ----------
    vendor : {"rocm", "cuda"}
        ``"rocm"``: the stand-in rocprofiler-sdk; ``"cuda"``: the stand-in libcupti (the tool finds
        it through ``FINGRAV_CUPTI_LIBRARY``).

    Returns
    -------
    str
        The library's path: ``FINGRAV_NATIVE_LIB_DIR`` first, else the installed ``fingrav_native/sim/lib/``.

    Raises
    ------
    ValueError
        ``vendor`` is not one of the two.
    FileNotFoundError
        The library was not built; the message says how to build it.
    """
    v = check_vendor(vendor)
    return find_library(STANDINS[v], PACKAGE_DIR / "sim" / "lib", v, f"the stand-in vendor runtime {STANDINS[v]}")
