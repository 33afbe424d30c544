"""The package's one thread policy for numerical work: how many BLAS threads its solves run on.

The method's numerical work is thousands of small dense solves (the aligners'
normal equations of at most a few dozen columns, the attribution engine's
systems of a few hundred unknowns, the smoothers' local fits). BLAS threads
cost more to wake and synchronise than such a solve takes, and on a host whose
cores are busy (a GPU host running a training job) every wake-up waits for a
core: the same ``profile_trace`` call took 312-339 s with OpenBLAS's default
threads beside other work and 18 s with one. As scikit-learn does, the policy
is set through threadpoolctl at coarse entry points and nowhere else.

Measured on the 2-core development machine (`bench/blas_crossover.py`; OpenBLAS 0.3.30/0.3.31, SkylakeX;
best of three, one thread / two threads, ``threadpool_limits(k, "blas")``):

==========================  ===================  =====================
work (size n)               host at load 1.2     host at load 12
==========================  ===================  =====================
batched Gram 20x1000x37     --                   4.9 ms / 1,618 ms
batched eigh 200x37x37      --                   64 ms / 652 ms
matmul n = 128              0.09 / 0.06 ms       0.09 / 50 ms
matmul n = 512              13.7 / 3.1 ms        13.9 / 33 ms
eigh n = 256                14.0 / 12.7 ms       19.1 / 38 ms
eigh n = 512                34 / 188 ms          85 / 366 ms
solve n = 768               --                   139 / 711 ms
lstsq 4096 x 1024           2.3 / 18.5 s         --
Cholesky solve n = 1024     35 / 614 ms          --
==========================  ===================  =====================

Two threads won only for plain matrix products of n >= 128 at load 1.2
(and eigh at n = 256, by 9 %); every other factorisation, and every work
at load 12, ran faster on one thread, up to n = 1024, the largest measured. So work whose largest dense dimension
is below :data:`LARGE_SIZE` runs on one BLAS thread, and larger work keeps
the thread count it inherits. The policy only ever lowers the count: a user's
own lower limit (``OPENBLAS_NUM_THREADS=1``, an enclosing
``threadpool_limits``) stands.

BLAS thread counts are process-wide, so while any thread of the process is
inside the policy, BLAS calls anywhere in the process run on one thread;
entries from several threads and nested entries restore, on the last exit,
the count in force before the first (each exit hands its saved count to the
entry still open after it).

Two names are public (``fingrav_native.threads_in_force``,
``fingrav_native.thread_policy``): what a benchmark reports beside its
timings, and the switch that times the package without its policy.
"""

from __future__ import annotations

import sys
import threading
from contextlib import ContextDecorator
from typing import Any, Optional

# threadpoolctl ships no type information; stubtest runs mypy without this project's configuration,
# so the ignore is here, not in pyproject.toml.
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped,unused-ignore]

from fingrav_native._checks import flag

__all__ = ["LARGE_SIZE", "threads_for", "numeric_threads", "threads_in_force", "thread_policy"]

#: Largest dense dimension (rows or columns of one factorisation or product) from which the
#: inherited BLAS thread count is kept; below it, one thread (the measurements above).
LARGE_SIZE = 2048

_lock = threading.Lock()
# One controller, rescanned only when a module was imported since (a new extension may have loaded
# another BLAS): building one walks every loaded library (about 10 ms), setting counts through it
# takes microseconds.
_controller: Optional[Any] = None
_modules_seen = -1


class _Entry:
    """One open entry: the BLAS thread counts to restore when it is the last one open."""

    __slots__ = ("saved",)

    def __init__(self, saved: list[tuple[Any, int]]) -> None:
        self.saved = saved


_open: list[_Entry] = []  # every entry open in the process, oldest first
# Every open ``thread_policy`` switch, oldest first: the newest decides (process-wide, as BLAS counts are).
_switches: list[thread_policy] = []
_local = threading.local()  # per thread, its own open entries (the ones its exits close)


def _blas() -> list[Any]:
    """The BLAS libraries loaded now (their threadpoolctl controllers). Call with the lock held."""
    global _controller, _modules_seen
    if _controller is None or len(sys.modules) != _modules_seen:
        import scipy.linalg  # noqa: F401  (scipy's own BLAS, loaded before it is scanned)

        _controller = ThreadpoolController()
        _modules_seen = len(sys.modules)
    return [lib for lib in _controller.lib_controllers if lib.user_api == "blas"]


def _set(lib: Any, n: int) -> None:
    """Set one library's thread count, from whichever thread holds the policy's lock.

    threadpoolctl (3.7 and later) lets only the first thread that sets an OpenBLAS count set it again
    (others silently do nothing) until its own ``threadpool_limits`` exits; the policy orders its
    entries under its own lock, so it sets the count directly, and takes no control that would
    silence a user's ``threadpool_limits`` in another thread.
    """
    getattr(lib, "_real_set_num_threads", lib.set_num_threads)(n)


def threads_in_force() -> dict[str, int]:
    """The BLAS thread count in force now, per BLAS library loaded in the process.

    What a timing ran under: the package lowers the count inside its entry
    points (:func:`thread_policy`), a user's ``OPENBLAS_NUM_THREADS`` or
    ``threadpool_limits`` lowers it everywhere.

    Returns
    -------
    dict of str to int
        ``{filepath: num_threads}`` for every BLAS library threadpoolctl
        finds (numpy's and scipy's may be two).

    Notes
    -----
    Read through threadpoolctl's ``ThreadpoolController``, the inspection
    scikit-learn's thread policy uses (``sklearn.utils.fixes.threadpool_info``).
    """
    with _lock:
        return {lib.filepath: int(lib.num_threads) for lib in _blas()}


def threads_for(size: int) -> Optional[int]:
    """The BLAS thread count that measured fastest for work of this size (module docstring).

    Parameters
    ----------
    size : int
        The largest dense dimension of the work's single BLAS calls (0: many small ones).

    Returns
    -------
    int or None
        1 below :data:`LARGE_SIZE`; None (keep the inherited count) from it.
    """
    return 1 if size < LARGE_SIZE else None


class numeric_threads(ContextDecorator):
    """Run the enclosed numerical work on the BLAS thread count fastest for its size.

    A context manager and a decorator, entered at the package's coarse entry
    points (``profile_trace``, the aligners, the attribution engine, the
    stitching and deconvolution, the energy closure). It never raises the
    count in force, is re-entrant (nested entries cost a lock and a few
    library calls) and thread-safe: the count before the first of several
    overlapping entries is restored when the last one exits.

    Parameters
    ----------
    size : int
        The largest dense dimension of the work's single BLAS calls; the
        default, 0, is the method's many small solves (one thread).

    Notes
    -----
    The thread policy of scikit-learn (``threadpoolctl``), with the crossover
    measured on this package's solves (module docstring). BLAS thread counts
    are process-wide: other threads' BLAS calls run on the same count while
    an entry is open.
    """

    def __init__(self, size: int = 0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size={size!r}: expected a whole number >= 0 (the work's largest dense dimension)")
        self.size = size

    def __enter__(self) -> numeric_threads:
        stack: list[Optional[_Entry]] = _local.__dict__.setdefault("stack", [])
        # At entry, not at decoration: the one place that decides (and where a switch in force is seen).
        limit = threads_for(self.size) if _policy_on() else None
        if limit is None:
            stack.append(None)
            return self
        with _lock:
            libs = _blas()
            saved = [(lib, int(lib.num_threads)) for lib in libs]
            for lib, n in saved:
                if n > limit:
                    _set(lib, limit)
            entry = _Entry(saved)
            _open.append(entry)
        stack.append(entry)
        return self

    def __exit__(self, *exc: object) -> None:
        entry = _local.stack.pop()
        if entry is None:
            return
        with _lock:
            at = next(i for i, e in enumerate(_open) if e is entry)
            del _open[at]
            if at < len(_open):
                # Another entry opened after this one is still open: what this one saved is what the
                # last of them restores (entries of several threads need not exit in order).
                later = _open[at]
                mine = {lib.filepath for lib, _ in entry.saved}
                later.saved = entry.saved + [(lib, n) for lib, n in later.saved if lib.filepath not in mine]
                return
            for lib, n in entry.saved:
                _set(lib, n)


def _policy_on() -> bool:
    """Whether the policy is in force: the newest open :class:`thread_policy` decides (on where none is)."""
    with _lock:
        return _switches[-1].enabled if _switches else True


class thread_policy(ContextDecorator):
    """Switch the package's BLAS thread policy on or off for the enclosed work.

    Inside ``with fingrav_native.thread_policy(False):`` the package's entry
    points (``profile_trace``, ``profile``, ``stitch_logs``, the aligners,
    the deconvolution) keep the BLAS thread count they inherit instead of
    running their small solves on one thread: what a benchmark needs to time
    the policy against its absence. ``thread_policy(True)`` restores it
    inside an enclosing switch. A context manager and a decorator.

    Parameters
    ----------
    enabled : bool
        True: the policy (one BLAS thread below :data:`LARGE_SIZE`); False:
        the inherited count.

    Raises
    ------
    ValueError
        ``enabled`` is not a bool.

    Notes
    -----
    The policy is scikit-learn's (threadpoolctl limits set at coarse entry
    points), with the crossover measured on this package's solves (the
    module docstring). Like BLAS thread counts, the switch is process-wide:
    an entry point that another thread enters while it is open sees it too.
    Switches nest, and each exit removes its own switch, whichever order
    several threads' switches close in. An entry point already running keeps
    the count it set at its entry.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = flag(enabled, "enabled")

    def __enter__(self) -> thread_policy:
        with _lock:
            _switches.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            # The newest occurrence of this switch: the same object entered twice (a decorated function
            # that recurses) closes its innermost entry first.
            at = len(_switches) - 1 - _switches[::-1].index(self)
            del _switches[at]
