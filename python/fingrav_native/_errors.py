"""The package's error root: every error it raises is a :class:`FingravError`, every warning a :class:`FingravWarning`.

One ``except fingrav_native.FingravError`` catches whatever the package raised on purpose and nothing
else (as zeus's ``ZeusBaseError`` and pyvisa's ``Error`` do), and one
``warnings.filterwarnings("ignore", category=fingrav_native.FingravWarning)`` silences the package's
warnings only. Each class also keeps its standard base (``class TraceFormatError(ValueError,
FingravError)``), so code that catches ``ValueError`` or ``RuntimeError`` goes on catching it.

The compiled core's errors (``SamplerError``, ``LibraryNotFoundError``, ``SymbolNotFoundError``,
``DeviceUnavailableError``, ``GpuMetricsFormatError``) are made by pybind11 with one standard base
each; they are given the root here, when this module loads. That is before any code can hold
:class:`FingravError` to catch with or test against, so the relation holds wherever it can be observed.
"""

from __future__ import annotations

__all__ = ["FingravError", "FingravWarning"]


class FingravError(Exception):
    """The root of every error fingrav-native raises; each also keeps its standard base (``ValueError``, ...)."""


class FingravWarning(UserWarning):
    """The root of every warning fingrav-native issues: filter this class to act on all of them at once."""


def _root_the_core_errors() -> None:
    # pybind11's register_exception takes a single base, so the core's classes are made without the root;
    # they are ordinary heap types, whose bases may be extended while their layout (BaseException's) holds.
    from fingrav_native import _core

    for name in ("SamplerError", "LibraryNotFoundError", "SymbolNotFoundError", "DeviceUnavailableError",
                 "GpuMetricsFormatError"):
        cls = getattr(_core, name)
        if not issubclass(cls, FingravError):
            setattr(cls, "__bases__", (*cls.__bases__, FingravError))


_root_the_core_errors()
