"""One run of a simulated node, with every device kept in lockstep on the true timeline.

A collective execution on device ``r`` is two kernels launched at exact times: a *spin* of
``W_r`` ns from its arrival, then the *transfer* of ``D`` ns, identical on every device; the
devices' launch path is therefore made exact (``launch_latency_ns=1``, ``launch_jitter_ns=0`` on
each device) and the node models the host launch latency itself. Kernel durations are exact
only as integer ns, so ``W_r`` is quantised (10 ns below 10 us, three significant digits above)
by moving the arrival a little later, and ``D`` per run factor (steps of 0.1%): the spin and
transfer kernels registered on each device stay bounded in number (cached per device). The two
records are merged into one execution per rank, with the collective's own kernel id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from fingrav_native.sim._device import SimGPU
from fingrav_native.sim._fabric import COLLECTIVE_TRUTH_DTYPE, MIN_KERNEL_NS, Collective, FabricParams, quantize_wait

# Kernels the node places exactly: no variation of their own, no launch gap.
EXACT = dict(exec_cv=0.0, run_cv=0.0, outlier_prob=0.0, cold_factor=0.0, launch_gap_ns=0.0, slow_mode_prob=0.0)


#: One item of a run as launched: ("ordinary" or "collective", node kernel id, executions).
LayoutItem = tuple[str, int, int]


@dataclass
class NodeRun:
    """What one node-level run produced (true time), before any rank's clock is applied."""

    run: int
    plan: list[tuple[int, int]]
    executions: list[np.ndarray]  # per device, merged EXEC_DTYPE records (node kernel ids)
    launch_ns: np.ndarray  # per device, host launch call (true ns)
    sync_ns: np.ndarray    # per device, host saw completion (true ns)


def arrival_gaps(fabric: FabricParams, rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-device delay from the end of one kernel to the arrival at the next collective."""
    f = fabric
    g = f.gap_ns * np.maximum(0.5, 1.0 + 0.2 * rng.standard_normal(n))
    if f.arrival_jitter_ns > 0:
        g = g + rng.exponential(f.arrival_jitter_ns, size=n)
    # At least 2 ns: the previous kernel may end a ns or two late (integer
    # rounding of its segments), and the next must not start before it.
    return np.maximum(2, np.ceil(g)).astype(np.int64)


class LockstepRun:
    """One node-level run in progress: each device's time, the work queued on it, and what it will record.

    Ordinary kernels run independently on every device; a collective waits for every rank to
    arrive (each spinning meanwhile), then transfers for the same time everywhere.
    ``spin(r, w)`` and ``transfer(r, collective, d)`` give device ``r``'s kernel id of a spin of
    ``w`` ns and of a transfer of ``d`` ns (registered on first use).
    """

    def __init__(self, gpus: Sequence[SimGPU], fabric: FabricParams, rng: np.random.Generator, run: int, t0: int,
                 ready: np.ndarray, spin: Callable[[int, int], int],
                 transfer: Callable[[int, Collective, int], int]) -> None:
        n = len(gpus)
        self.gpus = gpus
        self.fabric = fabric
        self.rng = rng
        self.run = run
        self.spin = spin
        self.transfer = transfer
        self.first_count = np.asarray([g.device.execution_count() for g in gpus])
        self.ready = ready                                  # earliest start of the next item per device
        self.dev_t = np.full(n, t0, dtype=np.int64)         # each device's current time
        self.pending = np.zeros(n, dtype=bool)              # ordinary work queued, end not known
        self.launched = np.zeros(n, dtype=np.int64)         # device records this run will produce
        self.last_end = np.full(n, -1, dtype=np.int64)      # known end of the last collective
        self.batch_first = self.first_count                 # first record of the pending ordinary batch
        self.layout: list[LayoutItem] = []                  # (kind, node id, count) in order
        self.truth_rows: list[np.ndarray] = []
        self.exec_base = 0

    def ordinary(self, dev_ids: Sequence[int], node_id: int, count: int) -> None:
        """Queue ``count`` executions of an ordinary kernel (device ``r``'s id ``dev_ids[r]``) on every device."""
        if not self.pending.any():
            self.batch_first = self.first_count + self.launched
        for r, gpu in enumerate(self.gpus):
            g = gpu.device
            if not self.pending[r] and self.last_end[r] < 0:
                # First work of the run on this device: start when its launch arrives.
                at = max(int(self.ready[r]) - 1, int(self.dev_t[r]))
                g.advance(at - int(self.dev_t[r]))
                self.dev_t[r] = at
            g.launch(dev_ids[r], count, self.run)
        self.pending[:] = True
        self.launched += count
        self.layout.append(("ordinary", node_id, count))
        self.exec_base += count

    def collective(self, c: Collective, count: int) -> None:
        """Run ``count`` executions of a collective on every device, once the work before it is done."""
        if self.pending.any():
            self.ready = self.finish_pending(gap=True)
            self.pending[:] = False
        elif (self.last_end >= 0).any():
            self.ready = self.last_end + arrival_gaps(self.fabric, self.rng, len(self.gpus))
        rows, end = self._collective_item(c, count)
        self.truth_rows.append(rows)
        self.last_end = np.full(len(self.gpus), end, dtype=np.int64)
        self.launched += 2 * count
        self.layout.append(("collective", c.node_id, count))
        self.exec_base += count

    def finish(self) -> list[np.ndarray]:
        """Let every device finish the run; each device's records of it (device kernel ids)."""
        if self.pending.any():
            self.finish_pending(gap=False)
        else:
            for r, gpu in enumerate(self.gpus):
                gpu.device.advance(max(0, int(self.last_end[r]) + 1 - int(self.dev_t[r])))
                self.dev_t[r] = max(int(self.dev_t[r]), int(self.last_end[r]) + 1)
        per_dev = []
        for r, gpu in enumerate(self.gpus):
            ex = gpu.device.executions(int(self.first_count[r]))
            ex = ex[ex["run"] == self.run]
            if len(ex) != self.launched[r]:  # pragma: no cover - an internal invariant
                raise RuntimeError(f"device {r}: {len(ex)} records for {self.launched[r]} launched executions")
            per_dev.append(ex)
        return per_dev

    def finish_pending(self, gap: bool) -> np.ndarray:
        """Advance devices with ordinary work queued until it is done; return when each may start next.

        The end of an ordinary kernel is known only once simulated. Step
        towards an estimate from the executions already finished (90% of
        the last one's duration per remaining execution: clocks only slow
        kernels down further), then in 1 us steps when a collective follows,
        so that it arrives close to when the device is really free.
        """
        n = len(self.gpus)
        gaps = arrival_gaps(self.fabric, self.rng, n) if gap else np.zeros(n, dtype=np.int64)
        want_count = self.first_count + self.launched
        dev_t = self.dev_t
        ready = np.zeros(n, dtype=np.int64)
        for r in range(n):
            g = self.gpus[r].device
            want = int(want_count[r])
            step = 1000
            while True:
                cnt = g.execution_count()
                if cnt >= want:
                    break
                target = int(dev_t[r]) + step
                if cnt > self.batch_first[r]:
                    last = g.executions(cnt - 1)[0]
                    est = int(last["end_ns"] + 0.9 * (want - cnt) * (last["end_ns"] - last["start_ns"]))
                    target = max(target, est)
                g.advance(target - int(dev_t[r]))
                dev_t[r] = target
                if not gap:
                    step = min(2 * step, 64_000)
            end = int(g.executions(want - 1)[0]["end_ns"])
            ready[r] = max(end + int(gaps[r]), int(dev_t[r]) + 1)
        return ready

    def _transfer_durations(self, c: Collective) -> tuple[int, int]:
        """This run's transfer time of the collective, cold (first execution) and warm, in whole ns."""
        f = self.fabric
        rng = self.rng
        # Run-to-run mode of the transfer (buffer placement), in steps of 0.1%
        # so the transfer kernels cached per device stay few.
        if rng.random() < f.slow_mode_prob:
            factor = rng.uniform(f.slow_mode_min, f.slow_mode_max)
        else:
            factor = max(0.5, 1.0 + rng.normal(0.0, f.run_cv)) if f.run_cv > 0 else 1.0
        factor = round(factor, 3)
        d_warm = max(MIN_KERNEL_NS, int(round(c.time.total_ns * factor)))
        d_cold = max(MIN_KERNEL_NS, int(round(c.time.total_ns * factor * (1.0 + f.cold_factor))))
        return d_cold, d_warm

    def _collective_item(self, c: Collective, count: int) -> tuple[np.ndarray, int]:
        """Launch ``count`` executions of a collective on every device; return truth rows and the last end."""
        n = len(self.gpus)
        f = self.fabric
        rng = self.rng
        d_cold, d_warm = self._transfer_durations(c)
        rows = np.zeros(count * n, dtype=COLLECTIVE_TRUTH_DTYPE)
        ranks = np.arange(n, dtype=np.int32)
        arrive_raw = self.ready.astype(np.int64)
        end = 0
        for i in range(count):
            # Handshake after the last arrival: its base, the execution-level
            # variation and rare stragglers, the same for every rank.
            h = f.handshake_ns * (1.0 + rng.exponential(0.3))
            if f.exec_cv > 0:
                h += d_warm * f.exec_cv * abs(rng.standard_normal())
            if rng.random() < f.outlier_prob:
                h += d_warm * rng.uniform(0.3 * (f.outlier_factor - 1.0), f.outlier_factor - 1.0)
            s = int(math.ceil(arrive_raw.max() + h))
            # Each rank spins from its arrival to s, in whole quantised ns (arriving a little later).
            w = quantize_wait(s - arrive_raw)
            arrive = s - w
            d = d_cold if i == 0 else d_warm
            self._launch_collective(c, arrive, w, d)
            end = s + d
            blk = rows[i * n:(i + 1) * n]
            blk["run"] = self.run
            blk["index"] = self.exec_base + i
            blk["kernel_id"] = c.node_id
            blk["rank"] = ranks
            blk["start_true_ns"] = arrive
            blk["transfer_true_ns"] = s
            blk["end_true_ns"] = end
            if i + 1 < count:
                arrive_raw = end + arrival_gaps(f, rng, n)
        # Rows by rank, then execution: what per-rank selection expects.
        order = np.lexsort((rows["index"], rows["rank"]))
        return rows[order], end

    def _launch_collective(self, c: Collective, arrive: np.ndarray, w: np.ndarray, d: int) -> None:
        """One execution on every device: a spin of ``w[r]`` ns from ``arrive[r]``, then the ``d`` ns transfer."""
        for r, gpu in enumerate(self.gpus):
            g = gpu.device
            at = int(arrive[r]) - 1
            if at < self.dev_t[r]:  # pragma: no cover - an internal invariant
                raise RuntimeError(f"device {r}: arrival {arrive[r]} before the device's time {self.dev_t[r]}")
            g.advance(at - int(self.dev_t[r]))
            self.dev_t[r] = at
            g.launch(self.spin(r, int(w[r])), 1, self.run)
            g.launch(self.transfer(r, c, d), 1, self.run)


def merge_records(ex: np.ndarray, layout: list[LayoutItem], nominal: Sequence[float], run: int, launch_ns: int,
                  sync_ns: int) -> np.ndarray:
    """One record per execution: a collective's spin and transfer merged, node kernel ids, host path."""
    total = sum(c for _, _, c in layout)
    out = np.zeros(total, dtype=ex.dtype)
    pos = 0
    src = 0
    for kind, node_id, count in layout:
        dst = slice(pos, pos + count)
        if kind == "ordinary":
            part = ex[src:src + count]
            out[dst] = part
            out["kernel_id"][dst] = node_id
            src += count
        else:
            spin = ex[src:src + 2 * count:2]
            xfer = ex[src + 1:src + 2 * count:2]
            src += 2 * count
            out[dst] = _merged_collective(spin, xfer, run, node_id, nominal[node_id])
        pos += count
    out["index"] = np.arange(total)
    # The host enqueues the whole run with one launch call and sees its end once.
    out["host_launch_ns"] = launch_ns
    out["host_sync_ns"] = -1
    if total:
        out["host_sync_ns"][-1] = sync_ns
    return out


def _merged_collective(spin: np.ndarray, xfer: np.ndarray, run: int, node_id: int, nominal_ns: float) -> np.ndarray:
    """The spin and transfer records of a collective's executions as one record each."""
    o = np.zeros(len(spin), dtype=spin.dtype)
    o["run"] = run
    o["kernel_id"] = node_id
    o["warm_index"] = np.arange(len(spin))
    o["start_ns"] = spin["start_ns"]
    o["end_ns"] = xfer["end_ns"]
    o["begin_marker_ticks"] = spin["begin_marker_ticks"]
    o["end_marker_ticks"] = xfer["end_marker_ticks"]
    o["energy_j"] = spin["energy_j"] + xfer["energy_j"]
    ds = (spin["end_ns"] - spin["start_ns"]).astype(np.float64)
    dx = (xfer["end_ns"] - xfer["start_ns"]).astype(np.float64)
    dt = (o["end_ns"] - o["start_ns"]).astype(np.float64)
    for ch in ("mean_total_w", "mean_compute_w", "mean_io_w", "mean_memory_w", "mean_freq"):
        # Time-weighted over both pieces (the gap between them is 0-1 ns).
        o[ch] = (spin[ch] * ds + xfer[ch] * dx) / np.maximum(dt, 1.0)
    o["duration_factor"] = dt / nominal_ns
    return o
