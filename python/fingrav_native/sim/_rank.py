"""One rank of a simulated node as a backend: records in the rank's own host clock.

A rank backend asks its node for each run; the node drives every device through it the first
time any rank asks, and keeps the other ranks' records until they ask for the same run id
(replicated simulation, :class:`~fingrav_native.sim.SimNode`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in
from fingrav_native.records._kernels import KernelSpec
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sim._device import SimGPU


class RankedNode(Protocol):
    """What a rank backend needs of its node (:class:`~fingrav_native.sim.SimNode`)."""

    devices: int
    gpus: list[SimGPU]

    def kernel_names(self) -> list[str]:
        """Node kernel names, by node kernel id."""

    def kernel_id(self, kernel: str | int) -> int:
        """A kernel name (or node id) as its node id."""

    def _next_backend_run_id(self, k: int) -> int:
        """The run id of every rank's ``k``-th ``new_run_id`` call."""

    def _replaying(self, rank: int) -> bool:
        """Whether the rank has runs other ranks already drove waiting for it."""

    def _wait_idle_all(self, tolerance: float, max_idle_ns: int) -> int:
        """Idle until every device is back near its baseline; ns waited."""

    def _read_all(self, n: int) -> list[np.ndarray]:
        """``n`` bracketed device-clock reads on every device (true ns)."""

    def _stamp(self, r: int, t: Any) -> np.ndarray:
        """Rank ``r``'s integer host-clock stamps at true times."""

    def _backend_run(self, rank: int, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """The rank's record of a run, simulating it for every rank the first time one asks."""


class SimRankBackend:
    """One rank of a :class:`~fingrav_native.sim.SimNode` as a :class:`~fingrav_native.backends.Backend`.

    Records are stamped in the rank's host clock (samples' ``host_ns``,
    brackets' host columns, markers' host launch/sync), device-clock ticks
    untouched; ``meta`` carries the truth (execution start/end in this
    rank's host clock and in true ns, energy). Kernel ids are node ids (the
    same on every rank). Get one from :meth:`~fingrav_native.sim.SimNode.backend`.

    Notes
    -----
    ``execute_run`` drives the whole node through the run the first time
    any rank asks for it; the other ranks' records wait until they ask for
    the same run id (see the module docstring, "Replicated simulation").
    ``wait_idle`` waits for every device to be idle when this rank is the
    first to reach the next run, and returns 0 when replaying runs other
    ranks already drove.
    """

    def __init__(self, node: RankedNode, rank: int, brackets_per_run: int, idle_tolerance: float,
                 max_idle_ns: int) -> None:
        self.node = node
        self.rank = rank
        self.gpu = node.gpus[rank]
        self._brackets_per_run = brackets_per_run
        self._idle_tol = idle_tolerance
        self._max_idle_ns = max_idle_ns
        self._next_run_id = 0
        p = self.gpu.params
        self._logger_period = float(p["logger_period_ns"])
        own = bool(p["logger_own_clock"])
        self._caps = Capabilities(
            name="sim-node",
            device=f"simulated MI300X-class GPU, rank {rank} of {node.devices} (virtual time)",
            logger_period_ns=self._logger_period,
            logger_window_ns=float(p["logger_window_ns"]),
            logger_clock="sim-logger" if own else "device",
            device_tick_ns=float(p["device_tick_ns"]),
            gpu_markers=True,
            marker_err_ns=float(p["marker_offset_ns"]) + 3 * float(p["marker_jitter_ns"]),
            channels=tuple(_core.CHANNELS),
            virtual_time=True,
            logger_tick_ns=float(p["logger_tick_ns"]) if own else float(p["device_tick_ns"]),
            sensor_semantics="simulated logger: its parameters",
            provenance={"period": "documented", "window": "documented", "delay": "documented", "tick": "documented"},
        )

    @property
    def capabilities(self) -> Capabilities:
        """The rank's simulated logger, clocks and markers."""
        return self._caps

    def kernel_name(self, kernel: str | int) -> str:
        """The name of a kernel given by name or node id."""
        return self.node.kernel_names()[self.node.kernel_id(kernel)]

    def new_run_id(self) -> int:
        """The next run id of this rank: the k-th call on every rank returns the same id.

        The id is allocated from the node's run counter the first time any
        rank asks (so it never clashes with :meth:`~fingrav_native.sim.SimNode.run`'s ids), as
        separate processes of one campaign would agree on it.
        """
        k = self._next_run_id
        self._next_run_id += 1
        return self.node._next_backend_run_id(k)

    def wait_idle(self) -> int:
        """Let every device return to idle (see the class notes); ns waited."""
        if self.node._replaying(self.rank):
            return 0
        return self.node._wait_idle_all(self._idle_tol, self._max_idle_ns)

    def read_clocks(self, n: int) -> np.ndarray:
        """``n`` bracketed reads of this rank's device clock, host columns in the rank's clock."""
        n = integer_in(n, "n", 1)
        br = self.node._read_all(n)[self.rank].astype(np.int64)
        br[:, 0] = self.node._stamp(self.rank, br[:, 0])
        br[:, 2] = self.node._stamp(self.rank, br[:, 2])
        return br

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """One run (the same on every rank); this rank's raw record.

        Parameters
        ----------
        kernel : str or sequence of (str, int)
            A kernel name (e.g. from :meth:`~fingrav_native.sim.SimNode.collective`) or a sequence.
        executions : int
            Executions in the run.
        run : int
            Run id.

        Raises
        ------
        ValueError
            Bad arguments, or a run id already simulated for another kernel.
        """
        if isinstance(kernel, (int, np.integer)) and not isinstance(kernel, bool):
            kernel = self.kernel_name(kernel)
        return self.node._backend_run(self.rank, kernel, executions, integer_in(run, "run", 0))
