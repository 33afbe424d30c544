"""The launch-capture tool libraries installed beside the extension: where each is, or how to build it.

In the foundation layer so that the ``fingrav run`` command (the app layer)
finds them; :mod:`fingrav_native.native` exports :func:`tool_library` to users.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

__all__ = ["TOOL_LIBRARIES", "installed_file", "tool_library"]


def installed_file(*parts: str, executable: bool = False) -> tuple[Optional[str], list[str]]:
    """A file the build installs into the package (``fingrav_native/<parts>``), and every place looked in.

    Looked for beside this module first, then in each ``fingrav_native``
    folder on ``sys.path``: an editable install keeps the compiled files in
    site-packages while the Python sources stay in the checkout, so the
    package's own folder is not enough.
    """
    tried = [os.path.join(os.path.dirname(os.path.abspath(__file__)), *parts)]
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "fingrav_native")):
            candidate = os.path.join(os.path.abspath(entry), "fingrav_native", *parts)
            if candidate not in tried:
                tried.append(candidate)
    for candidate in tried:
        if os.path.isfile(candidate) and (not executable or os.access(candidate, os.X_OK)):
            return candidate, tried
    return None, tried


#: Each vendor's launch-capture tool library, as installed beside the extension in ``fingrav_native/lib``.
TOOL_LIBRARIES = {"rocm": "libfingrav_rocprofiler_tool.so", "cuda": "libfingrav_cupti_tool.so"}

#: How each library gets built, for the error that finds it missing.
_TOOL_BUILD = {
    "rocm": "it is built with the package (pip install .); in a source tree, build the CMake target "
            "fingrav_rocprofiler_tool and copy it into python/fingrav_native/lib/",
    # A plain `pip install .` puts the header wheels into its isolated build environment on Linux x86_64
    # (pyproject.toml's [build-system] requires); elsewhere the headers must be named.
    "cuda": "it is built only where the CUPTI headers are found at build time: on Linux x86_64 a plain pip "
            "install . brings them into its build environment (reinstall if this install was built without "
            "them, e.g. with --no-build-isolation in a Python lacking nvidia-cuda-cupti-cu12, "
            "nvidia-cuda-runtime-cu12 and nvidia-cuda-crt); elsewhere pass -C "
            "cmake.define.CUPTI_INCLUDE_DIR=<CUDA>/extras/CUPTI/include -C "
            "cmake.define.CUPTI_CUDA_INCLUDE_DIR=<CUDA>/include; in a source tree, build the CMake target "
            "fingrav_cupti_tool and copy it into python/fingrav_native/lib/",
}


def tool_library(vendor: str) -> str:
    """The installed path of a vendor's launch-capture tool library.

    The tool library is what a vendor runtime loads into an application to
    hand it every kernel execution:
    rocprofiler-sdk through ``ROCP_TOOL_LIBRARIES``, CUDA through
    ``CUDA_INJECTION64_PATH``. It writes a launch journal into
    ``FINGRAV_LAUNCH_DIR`` (read by :func:`fingrav_native.files.read_launches`).

    Parameters
    ----------
    vendor : {"rocm", "cuda"}

    Returns
    -------
    str
        Absolute path of the ``.so`` in ``fingrav_native/lib``.

    Raises
    ------
    ValueError
        ``vendor`` is not one of the two.
    FileNotFoundError
        The library is not installed: the message names the file and how to build it.
    """
    if not isinstance(vendor, str) or vendor not in TOOL_LIBRARIES:
        raise ValueError(f"vendor={vendor!r}: must be one of {sorted(TOOL_LIBRARIES)}")
    path, tried = installed_file("lib", TOOL_LIBRARIES[vendor])
    if path is None:
        raise FileNotFoundError(f"{' or '.join(tried)}: the {vendor} launch-capture tool library is not installed; "
                                f"{_TOOL_BUILD[vendor]}")
    return path
