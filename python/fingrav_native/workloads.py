"""Deprecated path: moved to :mod:`fingrav_native.backends.workloads` (removed in 0.3; see :mod:`fingrav_native._compat`)."""

from fingrav_native._compat import forward

__getattr__, __dir__ = forward(__name__, "fingrav_native.backends.workloads")
