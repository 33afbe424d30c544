"""Decisions taken once for several ranks profiling one collective (paper Section V-D).

A collective runs on every rank at once: if one rank ran one more run, or a
run of other length, than the others, they would wait for it in the
collective forever. FinGraV's campaign decisions (the guidance row from the
measured duration, each probe of the SSP search, the top-up runs) depend on
each rank's own measurements, so the ranks must agree on them:
:func:`~fingrav_native.profile` passes every such number through an
:class:`Agreement`, which returns the same value on every rank.

* :class:`LocalAgreement`: one rank, nothing to agree (the default).
* :class:`ThreadAgreement`: ranks as threads of one process (one process
  driving several local GPUs).
* ``TorchAgreement`` (:mod:`fingrav_native.app._distributed`): ranks as processes of
  a ``torch.distributed`` job (torchrun, mpirun).
"""

from __future__ import annotations

import abc
import math
import threading
from typing import Literal, Optional

from fingrav_native.method._steady import PowerMeasurement

# What a collective reduction does with the ranks' values.
_Op = Literal["max", "sum"]


class Agreement(abc.ABC):
    """Combine one number per rank into one value every rank gets.

    Subclasses implement :meth:`_reduce`; every rank must call the same
    methods in the same order (they are collective calls).
    """

    #: Number of ranks taking part.
    size: int = 1

    @abc.abstractmethod
    def _reduce(self, value: float, op: _Op) -> float:
        """``op`` ("max" or "sum") of every rank's ``value``, the same on every rank."""

    def max(self, value: float) -> float:
        """The largest of the ranks' values."""
        return self._reduce(float(value), "max")

    def mean(self, value: float) -> float:
        """The mean of the ranks' values."""
        return self._reduce(float(value), "sum") / self.size

    def measurement(self, m: PowerMeasurement) -> PowerMeasurement:
        """The node-average of a power measurement (an SSP-search probe, Section IV-B step 3).

        The mean power is the ranks' average; its standard error is that of
        an average of independent estimates, ``sqrt(sum se_i^2) / n``; the
        LOI count is the total.
        """
        if self.size == 1:
            return m
        mean = self.mean(m.mean_w)
        var = self.mean(m.stderr_w ** 2 if math.isfinite(m.stderr_w) else math.inf)
        count = self.mean(m.count) * self.size
        return PowerMeasurement(mean, math.sqrt(var / self.size), int(round(count)))


class LocalAgreement(Agreement):
    """One rank: every value is already agreed."""

    size = 1

    def _reduce(self, value: float, op: _Op) -> float:
        return value


class _ThreadGroup:
    def __init__(self, size: int, timeout_s: Optional[float]) -> None:
        self.size = size
        self.values = [0.0] * size
        self.barrier = threading.Barrier(size, timeout=timeout_s)


class ThreadAgreement(Agreement):
    """One rank of a group of threads in one process (see :meth:`group`).

    Parameters
    ----------
    shared : _ThreadGroup
        The group's state (made by :meth:`group`).
    rank : int
        This thread's rank.
    """

    def __init__(self, shared: _ThreadGroup, rank: int) -> None:
        self._g = shared
        self.rank = rank
        self.size = shared.size

    @classmethod
    def group(cls, size: int, *, timeout_s: Optional[float] = 600.0) -> list["ThreadAgreement"]:
        """One agreement per rank for ``size`` threads.

        Parameters
        ----------
        size : int
            Number of ranks (>= 1).
        timeout_s : float or None
            How long a rank waits for the others at each decision before
            the whole group fails with ``threading.BrokenBarrierError``
            (a rank that died would otherwise hang the rest).

        Returns
        -------
        list of ThreadAgreement
        """
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size={size!r}: must be an integer >= 1")
        shared = _ThreadGroup(size, timeout_s)
        return [cls(shared, r) for r in range(size)]

    def abort(self) -> None:
        """Release the other ranks (they raise ``BrokenBarrierError``): call when this rank fails."""
        self._g.barrier.abort()

    def _reduce(self, value: float, op: _Op) -> float:
        g = self._g
        g.values[self.rank] = value
        g.barrier.wait()
        out = max(g.values) if op == "max" else math.fsum(g.values)
        # Nobody may overwrite a value before every rank has read them all.
        g.barrier.wait()
        return out
