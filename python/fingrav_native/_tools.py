"""Where the native launch-capture libraries are: the vendor tool libraries (and the lookup the stand-ins share).

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
STANDINS = {"rocm": "libfingrav_standin_rocprofiler.so", "cuda": "libfingrav_standin_cupti.so"}
BUILT_WHEN = {
    "rocm": "it is built with the package on Linux",
    "cuda": (
        "it is built only where the CUPTI headers are found at build time: install them "
        "(`pip install nvidia-cuda-cupti-cu12 nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12`, "
        "or the test-full extra) and rebuild with `pip install --no-build-isolation .`, or pass "
        "`-C cmake.define.CUPTI_INCLUDE_DIR=<CUDA>/extras/CUPTI/include "
        "-C cmake.define.CUPTI_CUDA_INCLUDE_DIR=<CUDA>/include`"
    ),
}

PACKAGE_DIR = Path(__file__).resolve().parent


def check_vendor(vendor: str) -> str:
    """``vendor`` when it is one of ``VENDORS``, else ValueError naming the argument."""
    if vendor not in VENDORS:
        raise ValueError(f"vendor={vendor!r}: expected one of {', '.join(map(repr, VENDORS))}")
    return vendor


def find_library(name: str, installed: Path, vendor: str, what: str) -> str:
    """``FINGRAV_NATIVE_LIB_DIR``/name, else installed/name; FileNotFoundError saying how to build it."""
    tried = []
    override = os.environ.get("FINGRAV_NATIVE_LIB_DIR", "")
    for folder in ([Path(override)] if override else []) + [installed]:
        candidate = folder / name
        if candidate.is_file():
            return str(candidate)
        tried.append(str(candidate))
    raise FileNotFoundError(
        f"{what} for vendor={vendor!r} not found (tried {', '.join(tried)}): {BUILT_WHEN[vendor]}; "
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
    v = check_vendor(vendor)
    return find_library(_TOOLS[v], PACKAGE_DIR / "lib", v, f"the launch-capture tool library {_TOOLS[v]}")
