"""Where the native launch-capture libraries are: the vendor tool libraries and the simulator's stand-ins.

The tool libraries (``libfingrav_rocprofiler_tool.so``, ``libfingrav_cupti_tool.so``) are installed
beside the compiled core in ``fingrav_native/lib/``: an application loads them through its vendor
runtime (``ROCP_TOOL_LIBRARIES``, ``CUDA_INJECTION64_PATH``). The stand-in vendor runtimes the
simulated application drives (``libfingrav_standin_rocprofiler.so``, ``libfingrav_standin_cupti.so``)
are in ``fingrav_native/sim/lib/``, never beside the tools. ``FINGRAV_NATIVE_LIB_DIR`` names a folder
searched first for both (a CMake build folder, during development).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

Vendor = Literal["rocm", "cuda"]

VENDORS: tuple[str, ...] = ("rocm", "cuda")

_TOOLS = {"rocm": "libfingrav_rocprofiler_tool.so", "cuda": "libfingrav_cupti_tool.so"}
_STANDINS = {"rocm": "libfingrav_standin_rocprofiler.so", "cuda": "libfingrav_standin_cupti.so"}
_BUILT_WHEN = {
    "rocm": "it is built with the package on Linux",
    "cuda": (
        "it is built only where the CUPTI headers are found at build time: install them "
        "(`pip install nvidia-cuda-cupti-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12`, "
        "or the test-full extra) and rebuild with `pip install --no-build-isolation .`, or pass "
        "`-C cmake.define.CUPTI_INCLUDE_DIR=<CUDA>/extras/CUPTI/include "
        "-C cmake.define.CUPTI_CUDA_INCLUDE_DIR=<CUDA>/include`"
    ),
}

_PACKAGE = Path(__file__).resolve().parent


def _vendor(vendor: str) -> str:
    if vendor not in VENDORS:
        raise ValueError(f"vendor={vendor!r}: expected one of {', '.join(map(repr, VENDORS))}")
    return vendor


def _find(name: str, installed: Path, vendor: str, what: str) -> str:
    tried = []
    override = os.environ.get("FINGRAV_NATIVE_LIB_DIR", "")
    for folder in ([Path(override)] if override else []) + [installed]:
        candidate = folder / name
        if candidate.is_file():
            return str(candidate)
        tried.append(str(candidate))
    raise FileNotFoundError(
        f"{what} for vendor={vendor!r} not found (tried {', '.join(tried)}): {_BUILT_WHEN[vendor]}; "
        "FINGRAV_NATIVE_LIB_DIR=<folder> names a folder holding it (a CMake build folder)"
    )


def tool_library(vendor: Vendor) -> str:
    """The path of the launch-capture tool library an application of ``vendor`` loads.

    ``"rocm"``: the rocprofiler-sdk tool (``rocprofiler_configure``, loaded through
    ``ROCP_TOOL_LIBRARIES``); ``"cuda"``: the CUPTI Activity consumer (``InitializeInjection``,
    loaded through ``CUDA_INJECTION64_PATH``; libcupti is dlopen'ed at run time, or the library
    ``FINGRAV_CUPTI_LIBRARY`` names). Method: issue 42's native launch capture; the records feed
    in-situ attribution (paper Section IV, steps 5-8) beside the power logs.

    Parameters
    ----------
    vendor : {"rocm", "cuda"}
        The GPU vendor whose runtime loads the tool.

    Returns
    -------
    str
        The library's path: ``FINGRAV_NATIVE_LIB_DIR`` first, else the installed ``fingrav_native/lib/``.

    Raises
    ------
    ValueError
        ``vendor`` is not one of the two.
    FileNotFoundError
        The library was not built; the message says how to build it.
    """
    v = _vendor(vendor)
    return _find(_TOOLS[v], _PACKAGE / "lib", v, f"the launch-capture tool library {_TOOLS[v]}")


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
    v = _vendor(vendor)
    return _find(_STANDINS[v], _PACKAGE / "sim" / "lib", v, f"the stand-in vendor runtime {_STANDINS[v]}")
