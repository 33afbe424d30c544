"""The stand-in vendor runtimes (rocprofiler-sdk, libcupti) the simulated application drives through the tools."""

from __future__ import annotations

from fingrav_native._tools import standin_library

__all__ = ["standin_library"]
