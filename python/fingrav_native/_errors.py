"""The package's error root: every error it raises is a :class:`FingravError`, every warning a :class:`FingravWarning`.

One ``except fingrav_native.FingravError`` catches whatever the package raised on purpose and nothing
else (as zeus's ``ZeusBaseError`` and pyvisa's ``Error`` do), and one
``warnings.filterwarnings("ignore", category=fingrav_native.FingravWarning)`` silences the package's
warnings only. Each class also keeps its standard base (``class TraceFormatError(ValueError,
FingravError)``), so code that catches ``ValueError`` or ``RuntimeError`` goes on catching it.

The compiled core's errors (``SamplerError``, ``LibraryNotFoundError``, ``SymbolNotFoundError``,
``DeviceUnavailableError``, ``GpuMetricsFormatError``) are created with two bases, their standard one
and :class:`FingravError`, which the core imports from this module when it initialises; so this module
must import nothing compiled.
"""

from __future__ import annotations

__all__ = ["FingravError", "FingravWarning"]


class FingravError(Exception):
    """The root of every error fingrav-native raises; each also keeps its standard base (``ValueError``, ...)."""


class FingravWarning(UserWarning):
    """The root of every warning fingrav-native issues: filter this class to act on all of them at once."""
