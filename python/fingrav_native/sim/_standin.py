"""Where the stand-in vendor runtimes are: the simulator's side of native launch capture.

The stand-ins (``libfingrav_standin_rocprofiler.so``, ``libfingrav_standin_cupti.so``)
implement a vendor's documented tool contract (they load the tool library,
call its entry points and deliver dispatch records through its callbacks) so
the simulated application exercises the native capture path without a GPU.
They are installed in ``fingrav_native/sim/lib``, apart from the shipped tool
libraries (``fingrav_native/lib``), and declared by ``csrc/fingrav/sim/standin_abi.h``.
"""

from __future__ import annotations

from fingrav_native._tools import installed_file

__all__ = ["STANDIN_LIBRARIES", "standin_library"]

#: Each vendor's stand-in runtime.
STANDIN_LIBRARIES = {"rocm": "libfingrav_standin_rocprofiler.so", "cuda": "libfingrav_standin_cupti.so"}

_BUILD = {
    "rocm": "it is built with the package (pip install .); in a source tree, build the CMake target "
            "fingrav_standin_rocprofiler and copy it into python/fingrav_native/sim/lib/",
    # A plain `pip install .` puts the header wheels into its isolated build environment on Linux x86_64
    # (pyproject.toml's [build-system] requires); elsewhere the headers must be named.
    "cuda": "it is built only where the CUPTI headers are found at build time: on Linux x86_64 a plain pip "
            "install . brings them into its build environment (reinstall if this install was built without "
            "them, e.g. with --no-build-isolation in a Python lacking nvidia-cuda-cupti-cu12, "
            "nvidia-cuda-runtime-cu12 and nvidia-cuda-crt); elsewhere pass -C "
            "cmake.define.CUPTI_INCLUDE_DIR=<CUDA>/extras/CUPTI/include -C "
            "cmake.define.CUPTI_CUDA_INCLUDE_DIR=<CUDA>/include; in a source tree, build the CMake target "
            "fingrav_standin_cupti and copy it into python/fingrav_native/sim/lib/",
}


def standin_library(vendor: str) -> str:
    """The installed path of a vendor's stand-in runtime library.

    Parameters
    ----------
    vendor : {"rocm", "cuda"}

    Returns
    -------
    str
        Absolute path of the ``.so`` in ``fingrav_native/sim/lib``.

    Raises
    ------
    ValueError
        ``vendor`` is not one of the two.
    FileNotFoundError
        Not installed: the message names the file and how to build it.
    """
    if not isinstance(vendor, str) or vendor not in STANDIN_LIBRARIES:
        raise ValueError(f"vendor={vendor!r}: must be one of {sorted(STANDIN_LIBRARIES)}")
    path, tried = installed_file("sim", "lib", STANDIN_LIBRARIES[vendor])
    if path is None:
        raise FileNotFoundError(f"{' or '.join(tried)}: the {vendor} stand-in runtime is not installed; "
                                f"{_BUILD[vendor]}")
    return path
