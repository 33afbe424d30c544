"""A simulated multi-GPU node in virtual time: collectives over a fabric, one host clock per rank.

The FinGraV paper profiles all-gather and all-reduce on an 8-GPU MI300X node
(Singhania et al., ISPASS 2025, Section V-D): latency-bound small sizes sit
near idle, bandwidth-bound large sizes drive the IO die (xGMI) and HBM, and
for collectives the SSE and SSP executions coincide. :class:`SimNode` gives
every rank of such a node its own :class:`~fingrav_native.sim.SimGPU` on one
virtual true timeline, so distributed profiling (many ranks, many host
clocks, merged afterwards) can be developed and scored without a GPU.

What it models
--------------
* **Fabric** (:class:`~fingrav_native.sim.FabricParams`): an alpha-beta
  ring model (:func:`~fingrav_native.sim.collective_time`).
* **Collective executions**: a rank *arrives* at a collective when its
  previous work is done (plus a launch gap and a per-rank arrival jitter;
  the first execution of a run after its host's launch, itself skewed
  between ranks). The data exchange starts for everybody a handshake after
  the last rank arrives, and ends on every device at the same true time.
  Ranks that arrive early busy-wait *inside* the kernel (a low-power but
  non-idle spin), so each rank sees a different execution time for the
  same collective, as real ranks do.
* **Power shape**: IO-die and HBM heavy ring steps when bandwidth-bound,
  handshake-dominated when latency-bound.
* **Host clocks**: rank ``r`` reads ``host_r(true) = true (1 + skew_r 1e-6)
  + offset_r``, with deliberately different offsets (milliseconds to
  seconds) and skews (tens of ppm); each device also has its own clock
  offset and skew. :meth:`SimNode.exchange_brackets` simulates the
  host-to-host ping-pong a real torch.distributed clock exchange performs,
  with latency, jitter, asymmetry and outliers.
* **Backends**: :meth:`SimNode.backend` gives a
  :class:`~fingrav_native.backends.Backend` per rank, whose records are
  stamped with that rank's host clock, so
  :func:`fingrav_native.app.profile` runs on any rank unchanged.

How the lockstep is kept
------------------------
Every public operation leaves all devices at the same true time. A
collective execution on device ``r`` is a spin from its arrival, then a
transfer identical on every device, both launched at exact times; the two
records are merged into one execution per rank, with the collective's own
kernel id (the run engine beside this module says how).

Replicated simulation
---------------------
The node is deterministic for a given seed and call sequence. In one
process, :meth:`SimNode.backend` returns per-rank backends sharing the node:
the first rank to ask for a run drives every device through it and the
other ranks' records are kept until they ask for the same run id (all ranks
must run the same runs, as collectives require: a rank asking for a run id
already simulated with a different kernel gets a ValueError, the
simulated counterpart of a collective mismatch). Several processes may
equally each build the same ``SimNode`` and keep only their own rank's
backend: they simulate identical nodes, provided every process makes the
same calls in the same order (decisions a profile takes from a rank's own
records, such as top-up runs, must then be taken once and shared, as a real
distributed campaign would).

Cost
----
Measured on one core of the development machine (virtual time, no GPU),
per run of 4 back-to-back all-reduce executions, 10 ms of idle before each:

=========  ===========  ============
devices    64 KB        512 MB
=========  ===========  ============
2          0.9 ms       1.7 ms
8          2.2 ms       5.0 ms
16         3.8 ms       9.8 ms
64         14 ms        25 ms
=========  ===========  ============

Through a rank backend (node-wide ``wait_idle``, bracketed reads on every
device, two logger periods after the run) a run costs about 3-5 ms at 8
devices and 20-35 ms at 64. The cost is linear in devices x simulated
time (the devices' own physics); Python work per execution is O(devices):
arrivals are drawn as vectors and each device gets one advance and two
launches.

Examples
--------
>>> from fingrav_native.sim import SimNode
>>> node = SimNode(devices=4, seed=1)
>>> name = node.collective("allreduce", 1 << 20)
>>> results = node.run(name, executions=3)
>>> len(results), len(results[0].executions)
(4, 3)
>>> ends = [r.executions["end_ns"][-1] for r in results]
>>> int(max(ends) - min(ends)) <= 10
True
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import finite_array, flag, fraction, integer_in, positive_number
from fingrav_native.records._kernels import KernelSpec, execution_plan, wait_for_idle
from fingrav_native.records._recording import RunRecord
from fingrav_native.sim._device import RunResult, SimGPU, kernel_presets, parameters, sim_markers
from fingrav_native.sim._fabric import (
    COLLECTIVE_TRUTH_DTYPE,
    MIN_KERNEL_NS,
    SPIN_SHAPE,
    Collective,
    CollectiveKind,
    CollectiveTime,
    FabricParams,
    collective_time,
    size_label,
    transfer_shape,
)
from fingrav_native.sim._lockstep import EXACT, LockstepRun, NodeRun, merge_records
from fingrav_native.sim._rank import SimRankBackend


def _node_gpus(n: int, seed: int, params: dict[str, Any], clock_rng: np.random.Generator) -> list[SimGPU]:
    """The node's ``n`` simulated GPUs, each with its own device and logger clocks (drawn from ``clock_rng``)."""
    gpus = []
    for r in range(n):
        p: dict[str, Any] = dict(params)
        # Each device its own clock, as real GPUs in one node have.
        p.setdefault("device_offset_ticks", float(int(clock_rng.integers(1 << 40, 1 << 52))))
        p.setdefault("device_skew_ppm", float(clock_rng.uniform(-40, 40)))
        p.setdefault("device_wander_phase", float(clock_rng.uniform(0, 2 * np.pi)))
        p.setdefault("logger_offset_ticks", float(int(clock_rng.integers(1 << 40, 1 << 52))))
        p.setdefault("logger_skew_ppm", float(clock_rng.uniform(-40, 40)))
        p.setdefault("logger_wander_phase", float(clock_rng.uniform(0, 2 * np.pi)))
        dev_seed = int(np.random.SeedSequence([seed, r]).generate_state(1, dtype=np.uint32)[0])
        p.update(launch_latency_ns=1.0, launch_jitter_ns=0.0)
        gpus.append(SimGPU(seed=dev_seed, realtime=False, **p))
    return gpus


class SimNode:
    """Several simulated GPUs sharing a fabric, on one virtual true timeline.

    Parameters
    ----------
    devices : int
        Number of devices (ranks), >= 1.
    seed : int
        Seed of everything: each device gets its own derived seed (and so
        different clock offsets and skews, logger phases, jitter).
    fabric : FabricParams
        Fabric and collective model.
    host_offsets_ns : sequence of float, optional
        Each rank's host-clock offset from true time, ns. Default: drawn
        from the seed, magnitudes from milliseconds to seconds, random signs.
    host_skews_ppm : sequence of float, optional
        Each rank's host-clock rate error, ppm. Default: drawn in +-50 ppm.
    shared_host_clock : bool
        True: every rank reads rank 0's host clock (one host, one process).
    **sim_params : float
        Simulator parameters for every device
        (:func:`fingrav_native.sim.parameters`). ``launch_latency_ns``,
        ``launch_jitter_ns``, ``sync_latency_ns`` and ``sync_jitter_ns``
        are modelled by the node (the devices' own launch path is made exact
        so collectives can be placed); device and logger clock offsets and
        skews are drawn per device unless given here.

    Raises
    ------
    ValueError
        Naming the argument: ``devices < 1``, a bad seed, offsets or skews of
        the wrong length, or an invalid simulator parameter.

    Notes
    -----
    Paper Section V-D: collectives on an 8-GPU node. See the module
    docstring for the model, the lockstep and replicated simulation.
    """

    def __init__(
        self,
        devices: int = 8,
        *,
        seed: int = 0,
        fabric: FabricParams | None = None,
        host_offsets_ns: Optional[Sequence[float]] = None,
        host_skews_ppm: Optional[Sequence[float]] = None,
        shared_host_clock: bool = False,
        **sim_params: float,
    ) -> None:
        n = integer_in(devices, "devices", 1, 1024)
        integer_in(seed, "seed", 0)
        shared_host_clock = flag(shared_host_clock, "shared_host_clock")
        if fabric is None:
            fabric = FabricParams()
        if not isinstance(fabric, FabricParams):
            raise ValueError(f"fabric={fabric!r}: must be a FabricParams")
        if "seed" in sim_params or "realtime" in sim_params:
            key = "seed" if "seed" in sim_params else "realtime"
            raise ValueError(f"{key}: a node is seeded by seed= and runs in virtual time only")
        self.devices = n
        self.seed = int(seed)
        self.fabric = fabric
        defaults = {p.name: p.default for p in parameters()}
        params = dict(sim_params)
        # The node owns the host launch/sync path (see the module docstring).
        self._launch_latency, self._launch_jitter, self._sync_latency, self._sync_jitter = (
            positive_number(params.pop(name, defaults[name]), name, allow_zero=True)
            for name in ("launch_latency_ns", "launch_jitter_ns", "sync_latency_ns", "sync_jitter_ns"))
        ss = np.random.SeedSequence([int(seed), 0x51A0DE])
        self._rng = np.random.default_rng(ss.spawn(1)[0])
        clock_rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC10C]))
        self.gpus: list[SimGPU] = _node_gpus(n, int(seed), params, clock_rng)
        self._offsets, self._skews = self._host_clocks(n, clock_rng, host_offsets_ns, host_skews_ppm,
                                                       bool(shared_host_clock))
        self.shared_host_clock = bool(shared_host_clock)
        # Node kernel table: names, nominal durations; ids shared by all ranks.
        self._names: list[str] = []
        self._nominal: list[float] = []
        self._name_to_id: dict[str, int] = {}
        self._dev_to_node: list[list[int]] = [[] for _ in range(n)]
        self._dev_id: list[dict[int, int]] = [{} for _ in range(n)]  # node id -> device id
        # Presets have the same ids on every device (registered at construction).
        for k in kernel_presets():
            node_id = len(self._names)
            self._names.append(k["name"])
            self._nominal.append(float(k["duration_ns"]))
            self._name_to_id[k["name"]] = node_id
            for r in range(n):
                self._set_dev_map(r, node_id, node_id)
        self._collectives: dict[str, Collective] = {}
        self._spin: list[dict[int, int]] = [{} for _ in range(n)]
        self._xfer: list[dict[tuple[int, int], int]] = [{} for _ in range(n)]
        self._next_run = 0
        self._used_runs: set[int] = set()
        self._truth: list[np.ndarray] = []
        # Backends (replicated simulation within one process).
        self._backends: dict[int, SimRankBackend] = {}
        self._pending: dict[int, dict[int, tuple[Any, RunRecord]]] = {}
        self._backend_ids: list[int] = []  # run ids handed to rank backends, in order
        self._baseline_w: Optional[np.ndarray] = None
        self._check_lockstep()

    # ------------------------------------------------------------------ setup helpers
    @staticmethod
    def _host_clocks(n: int, rng: np.random.Generator, offsets: Optional[Sequence[float]],
                     skews: Optional[Sequence[float]], shared: bool) -> tuple[np.ndarray, np.ndarray]:
        if offsets is None:
            # Deliberately different: milliseconds to seconds, either sign.
            mag = 10 ** rng.uniform(6, 9.5, size=n)
            o = np.rint(mag * rng.choice([-1.0, 1.0], size=n))
        else:
            o = finite_array(offsets, "host_offsets_ns").ravel()
            if o.shape != (n,) or not np.all(np.isfinite(o)):
                raise ValueError(f"host_offsets_ns: need {n} finite values, one per rank, got {len(o)}")
        if skews is None:
            s = rng.uniform(-50, 50, size=n)
        else:
            s = finite_array(skews, "host_skews_ppm").ravel()
            if s.shape != (n,) or not np.all(np.isfinite(s)) or np.any(np.abs(s) >= 1000):
                raise ValueError(f"host_skews_ppm: need {n} finite values in (-1000, 1000) ppm, one per rank")
        if shared:
            o = np.full(n, o[0])
            s = np.full(n, s[0])
        return o.astype(np.float64), s.astype(np.float64)

    def _set_dev_map(self, r: int, dev_id: int, node_id: int) -> None:
        m = self._dev_to_node[r]
        if len(m) <= dev_id:
            m.extend([-1] * (dev_id + 1 - len(m)))
        m[dev_id] = node_id
        if node_id >= 0:
            self._dev_id[r][node_id] = dev_id

    def _check_lockstep(self) -> int:
        t = [g.now() for g in self.gpus]
        if min(t) != max(t):  # pragma: no cover - an internal invariant
            raise RuntimeError(f"devices out of lockstep: {min(t)}..{max(t)}")
        return t[0]

    def _align(self) -> int:
        """Advance every device to the latest one's time (after per-device work)."""
        t = [g.now() for g in self.gpus]
        top = max(t)
        for g, ti in zip(self.gpus, t):
            if ti < top:
                g.device.advance(top - ti)
        return top

    def _rank(self, rank: Any, name: str = "rank") -> int:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < self.devices:
            raise ValueError(f"{name}={rank!r}: must be an integer in [0, {self.devices - 1}]")
        return int(rank)

    # ------------------------------------------------------------------ clocks
    def now(self) -> int:
        """The true time, ns (every device's timeline)."""
        return self._check_lockstep()

    def host_from_true(self, rank: int, t: Any) -> Any:
        """Rank ``rank``'s host clock at true time(s) ``t``: ``t (1 + skew 1e-6) + offset`` (float ns).

        Raises
        ------
        ValueError
            ``rank`` out of range.
        """
        r = self._rank(rank)
        out = np.asarray(t, dtype=np.float64) * (1.0 + self._skews[r] * 1e-6) + self._offsets[r]
        return float(out) if out.ndim == 0 else out

    def true_from_host(self, rank: int, h: Any) -> Any:
        """True time (float ns) at which rank ``rank``'s host clock reads ``h``: the exact inverse."""
        r = self._rank(rank)
        out = (np.asarray(h, dtype=np.float64) - self._offsets[r]) / (1.0 + self._skews[r] * 1e-6)
        return float(out) if out.ndim == 0 else out

    def _stamp(self, r: int, t: Any) -> np.ndarray:
        """Integer host-clock stamps of rank r at true times (what a clock read returns)."""
        out: np.ndarray = np.rint(np.asarray(t, dtype=np.float64) * (1.0 + self._skews[r] * 1e-6)
                       + self._offsets[r]).astype(np.int64)
        return out

    def host_now(self, rank: int) -> int:
        """Rank ``rank``'s host clock now, ns."""
        return int(self._stamp(self._rank(rank), self.now()))

    @property
    def host_offsets_ns(self) -> np.ndarray:
        """Each rank's host-clock offset from true time, ns (truth)."""
        return self._offsets.copy()

    @property
    def host_skews_ppm(self) -> np.ndarray:
        """Each rank's host-clock skew against true time, ppm (truth)."""
        return self._skews.copy()

    def idle(self, ns: float) -> None:
        """Let ``ns`` of true time pass on every device."""
        if not (isinstance(ns, (int, float, np.integer, np.floating)) and math.isfinite(ns) and ns >= 0):
            raise ValueError(f"ns={ns!r}: must be a finite number >= 0")
        for g in self.gpus:
            g.device.advance(int(ns))

    def exchange_brackets(self, rank: int, n: int, peer: int = 0, *, spacing_ns: float = 100_000) -> np.ndarray:
        """``n`` simulated ping-pong clock exchanges between ``rank`` and ``peer``, in virtual time.

        Each exchange: ``rank`` reads its host clock (t1) and sends a
        message; ``peer`` reads *its* host clock on arrival (t2) and
        replies; ``rank`` reads its clock when the reply arrives (t3).
        Legs take ``msg_latency_ns`` (split by ``msg_asymmetry``) plus an
        exponential jitter, and rarely an outlier delay. The node's time
        moves past the exchanges.

        Parameters
        ----------
        rank, peer : int
            The two ranks (distinct).
        n : int
            Exchanges, >= 1.
        spacing_ns : float
            True time from one exchange's end to the next one's start (a
            span long enough to fit the relative skew).

        Returns
        -------
        numpy.ndarray
            ``(n, 3)`` int64 rows ``(t1, t2, t3)``: the bracket rows
            :func:`~fingrav_native.clocks.fit_clock_map` takes with
            ``tick_ns=1.0``; its map then sends ``peer``-clock ns to
            ``rank``-clock ns (``to_host``) and back (``to_device``).

        Raises
        ------
        ValueError
            A rank out of range, ``peer == rank``, ``n < 1`` or a negative spacing.

        Notes
        -----
        The virtual-time counterpart of the host-clock exchange that lets a
        distributed profile merge ranks' timelines (paper Section IV-A syncs
        one CPU-GPU pair; here host clocks of ranks are aligned the same way).
        """
        r = self._rank(rank)
        p = self._rank(peer, "peer")
        if p == r:
            raise ValueError(f"peer={peer}: must differ from rank={rank}")
        n = integer_in(n, "n", 1)
        if not (math.isfinite(spacing_ns) and spacing_ns >= 0):
            raise ValueError(f"spacing_ns={spacing_ns!r}: must be a finite number >= 0")
        f = self.fabric
        legs = self._rng.exponential(f.msg_jitter_ns, size=(n, 2)) if f.msg_jitter_ns > 0 else np.zeros((n, 2))
        late = self._rng.random(size=(n, 2)) < f.msg_outlier_prob
        legs = legs + late * self._rng.exponential(max(f.msg_outlier_ns, 1e-9), size=(n, 2))
        legs[:, 0] += 2 * f.msg_latency_ns * f.msg_asymmetry
        legs[:, 1] += 2 * f.msg_latency_ns * (1 - f.msg_asymmetry)
        legs = np.ceil(legs)
        rtt = legs.sum(axis=1)
        t0 = float(self.now())
        starts = t0 + np.concatenate([[0.0], np.cumsum(rtt[:-1] + spacing_ns)])
        out = np.empty((n, 3), dtype=np.int64)
        out[:, 0] = self._stamp(r, starts)
        out[:, 1] = self._stamp(p, starts + legs[:, 0])
        out[:, 2] = self._stamp(r, starts + rtt)
        self.idle(int(starts[-1] + rtt[-1] - t0))
        return out

    # ------------------------------------------------------------------ kernels
    def kernel_names(self) -> list[str]:
        """Node kernel names, by node kernel id (the same on every rank)."""
        return list(self._names)

    def kernel_id(self, kernel: str | int) -> int:
        """Resolve a kernel name (or node id) to its node id.

        Raises
        ------
        ValueError
            Unknown kernel, naming it and the known ones.
        """
        if isinstance(kernel, (int, np.integer)) and not isinstance(kernel, bool):
            if not 0 <= int(kernel) < len(self._names):
                raise ValueError(f"kernel={kernel}: no such node kernel id (0..{len(self._names) - 1})")
            return int(kernel)
        if not isinstance(kernel, str) or kernel not in self._name_to_id:
            raise ValueError(f"kernel={kernel!r}: unknown kernel; known: {', '.join(self._names)}")
        return self._name_to_id[kernel]

    def add_kernel(self, name: str, *, duration_ns: float, **spec: Any) -> int:
        """Register an ordinary (per-device) kernel on every device; see :meth:`SimGPU.add_kernel`.

        Returns
        -------
        int
            Its node kernel id.
        """
        if not isinstance(name, str) or not name or name in self._name_to_id or name.startswith("~"):
            raise ValueError(f"name={name!r}: must be a new, non-empty kernel name not starting with '~'")
        for r, g in enumerate(self.gpus):
            did = g.add_kernel(name, duration_ns=duration_ns, **spec)
            if r == 0:
                node_id = len(self._names)
                self._names.append(name)
                self._nominal.append(float(duration_ns))
                self._name_to_id[name] = node_id
            self._set_dev_map(r, did, node_id)
        return node_id

    def collective(self, kind: CollectiveKind, nbytes: int) -> str:
        """Register (once) a collective of ``kind`` on ``nbytes`` across all devices; return its kernel name.

        Parameters
        ----------
        kind : {"allreduce", "allgather", "reducescatter"}
            The collective (ring algorithm).
        nbytes : int
            Buffer size, bytes (>= 0).

        Returns
        -------
        str
            The kernel name, e.g. ``"allreduce-512m-x8"``, for :meth:`run`
            and the rank backends.

        Raises
        ------
        ValueError
            Unknown ``kind`` or negative ``nbytes``.

        Notes
        -----
        Paper Section V-D. The duration follows :func:`collective_time`;
        the activity shape is IO-die and HBM heavy ring steps when
        bandwidth-bound, a low handshake-dominated shape when latency-bound.
        """
        t = collective_time(kind, nbytes, self.devices, self.fabric)
        name = f"{kind}-{size_label(int(nbytes))}-x{self.devices}"
        if name in self._collectives:
            return name
        shape = tuple(transfer_shape(kind, t))
        f = self.fabric
        # The collective itself as a device kernel (with the fabric's
        # variation), so a single SimGPU can also run it; the node never
        # launches it directly but reports its executions under its id.
        node_id = len(self._names)
        for r, g in enumerate(self.gpus):
            did = g.add_kernel(name, duration_ns=max(float(MIN_KERNEL_NS), t.total_ns), freq_sensitivity=0.0,
                               shape=shape, exec_cv=f.exec_cv, run_cv=f.run_cv, outlier_prob=f.outlier_prob,
                               outlier_factor=f.outlier_factor, cold_factor=f.cold_factor,
                               launch_gap_ns=f.gap_ns, slow_mode_prob=f.slow_mode_prob,
                               slow_mode_min=f.slow_mode_min, slow_mode_max=f.slow_mode_max)
            self._set_dev_map(r, did, node_id)
        self._names.append(name)
        self._nominal.append(t.total_ns)
        self._name_to_id[name] = node_id
        self._collectives[name] = Collective(name, kind, int(nbytes), node_id, t, shape)
        return name

    def collective_info(self, kernel: str) -> CollectiveTime:
        """The fabric model's time for a registered collective kernel."""
        if kernel not in self._collectives:
            raise ValueError(f"kernel={kernel!r}: not a collective registered on this node")
        return self._collectives[kernel].time

    def _spin_kernel(self, r: int, w: int) -> int:
        kid = self._spin[r].get(w)
        if kid is None:
            kid = self.gpus[r].add_kernel(f"~spin-{w}", duration_ns=float(w), freq_sensitivity=0.0,
                                          shape=SPIN_SHAPE, **EXACT)
            self._spin[r][w] = kid
            self._set_dev_map(r, kid, -1)
        return kid

    def _transfer_kernel(self, r: int, c: Collective, d: int) -> int:
        key = (c.node_id, d)
        kid = self._xfer[r].get(key)
        if kid is None:
            kid = self.gpus[r].add_kernel(f"~{c.name}-{d}", duration_ns=float(d), freq_sensitivity=0.0,
                                          shape=c.shape, **EXACT)
            self._xfer[r][key] = kid
            self._set_dev_map(r, kid, -1)
        return kid

    # ------------------------------------------------------------------ running
    def run(self, kernel_or_plan: KernelSpec, executions: int, run: Optional[int] = None) -> list[RunResult]:
        """One run on every device: a kernel (or a sequence) executed back to back, in true time.

        Parameters
        ----------
        kernel_or_plan : str or sequence of (str, int)
            A kernel name (a collective from :meth:`collective`, or an
            ordinary kernel run independently on every device), or a
            sequence of (name, count) run back to back as one run.
        executions : int
            Executions in the run (the sequence's total count).
        run : int, optional
            Run id (default: the next unused one); ids are never reused.

        Returns
        -------
        list of RunResult
            One per device, in true ns: the run's executions (a collective
            execution spans the rank's arrival to the common end; kernel ids
            are node ids), and the logs a sampler saw between that rank's
            launch and its host seeing completion.

        Raises
        ------
        ValueError
            Bad ``executions``, an unknown kernel, or a used ``run`` id.

        Notes
        -----
        Paper Section IV-B step 4 (one run), with Section V-D's collectives
        synchronising the devices.
        """
        nr = self._simulate(kernel_or_plan, executions, run)
        out = []
        for r, g in enumerate(self.gpus):
            begin, end = int(nr.launch_ns[r]), int(nr.sync_ns[r])
            s = g.device.observed_samples(begin - int(g.params["poll_period_ns"]))
            s = s[(s["host_ns"] >= begin) & (s["host_ns"] <= end)]
            out.append(RunResult(nr.run, begin, end, nr.executions[r], s))
        return out

    def _resolve_plan(self, kernel_or_plan: KernelSpec, executions: int) -> list[tuple[int, int]]:
        if isinstance(kernel_or_plan, (int, np.integer)) and not isinstance(kernel_or_plan, bool):
            raise ValueError(f"kernel={kernel_or_plan!r}: give a node a kernel name or a node kernel id via "
                             "kernel_names(); device ids differ between devices")
        plan = execution_plan(kernel_or_plan, executions, limit=_core.SIM_MAX_PENDING_EXECUTIONS,
                              device="a simulated device")
        return [(self.kernel_id(k), c) for k, c in plan]

    def _simulate(self, kernel_or_plan: KernelSpec, executions: int, run: Optional[int]) -> NodeRun:
        plan = self._resolve_plan(kernel_or_plan, executions)
        run = self._claim_run(run)
        n = self.devices
        rng = self._rng
        t0 = self.now()
        # Each rank's host launches the run at its own moment; the launch
        # call then takes the (node-modelled) launch latency to reach the GPU.
        skew = np.ceil(rng.exponential(self.fabric.launch_skew_ns, size=n)) if self.fabric.launch_skew_ns > 0 \
            else np.zeros(n)
        launch = t0 + skew.astype(np.int64)
        lat = self._launch_latency + (rng.exponential(self._launch_jitter, size=n) if self._launch_jitter > 0
                                      else np.zeros(n))
        ready = (launch + np.ceil(lat)).astype(np.int64)  # earliest start of the next item per device
        step = LockstepRun(self.gpus, self.fabric, rng, run, t0, ready, self._spin_kernel, self._transfer_kernel)
        for node_id, count in plan:
            coll = self._collectives.get(self._names[node_id])
            if coll is None:
                step.ordinary([self._dev_id[r][node_id] for r in range(n)], node_id, count)
            else:
                step.collective(coll, count)
        # Let every device finish; each rank's host sees completion a sync latency later.
        per_dev = step.finish()
        ends = np.array([ex["end_ns"][-1] for ex in per_dev], dtype=np.int64)
        sync_lat = self._sync_latency + (rng.exponential(self._sync_jitter, size=n) if self._sync_jitter > 0
                                         else np.zeros(n))
        sync = ends + np.ceil(sync_lat).astype(np.int64)
        top = int(max(sync.max(), step.dev_t.max()))
        for r in range(n):
            self.gpus[r].device.advance(top - self.gpus[r].now())
        merged = [merge_records(per_dev[r], step.layout, self._nominal, run, int(launch[r]), int(sync[r]))
                  for r in range(n)]
        if step.truth_rows:
            self._keep_truth(np.concatenate(step.truth_rows), step.layout, merged)
        return NodeRun(run, plan, merged, launch, sync)

    def _claim_run(self, run: Optional[int]) -> int:
        """The run id (default: the next unused one), checked unused and marked used."""
        if run is None:
            run = self._next_run
        run = integer_in(run, "run", 0)
        if run in self._used_runs:
            raise ValueError(f"run={run}: already used on this node")
        if run > np.iinfo(np.int32).max:
            raise ValueError(f"run={run}: must fit in int32")
        self._used_runs.add(run)
        self._next_run = max(self._next_run, run + 1)
        return run

    def _keep_truth(self, rows: np.ndarray, layout: list[tuple[str, int, int]], merged: list[np.ndarray]) -> None:
        """Store a run's collective truth rows, each rank's end and host stamps filled in."""
        # The rank's execution really ends when its transfer record ends.
        coll_mask = np.concatenate([np.full(c, k == "collective") for k, _, c in layout])
        for r in range(self.devices):
            sel = rows["rank"] == r
            rows["end_true_ns"][sel] = merged[r]["end_ns"][coll_mask]
            rows["start_host_ns"][sel] = self._stamp(r, rows["start_true_ns"][sel])
            rows["end_host_ns"][sel] = self._stamp(r, rows["end_true_ns"][sel])
        self._truth.append(rows)

    # ------------------------------------------------------------------ truth
    def truth_power(self, rank: int, host_ns: Any) -> np.ndarray:
        """Exact power of rank ``rank``'s device at times in *its host clock*: (n, 4) total, compute, io, memory W.

        NaN outside the recorded trace.
        """
        r = self._rank(rank)
        t = np.rint(self.true_from_host(r, np.asarray(host_ns, dtype=np.float64).ravel())).astype(np.int64)
        return self.gpus[r].truth_power(np.atleast_1d(t))

    def collective_truth(self, run: Optional[int] = None) -> np.ndarray:
        """COLLECTIVE_TRUTH_DTYPE rows of every collective execution on every rank (optionally one run)."""
        if not self._truth:
            return np.zeros(0, dtype=COLLECTIVE_TRUTH_DTYPE)
        rows = np.concatenate(self._truth)
        return rows if run is None else rows[rows["run"] == run]

    # ------------------------------------------------------------------ backends
    def backend(self, rank: int, *, brackets_per_run: int = 16, idle_tolerance: float = 0.01,
                max_idle_ns: int = 2_000_000_000) -> "SimRankBackend":
        """The Backend of rank ``rank`` (created once; later calls return the same one).

        Records are stamped in that rank's host clock. Make every rank's
        backend (:meth:`node_backends`) before the first run if several
        ranks will read the same runs.

        Raises
        ------
        ValueError
            ``rank`` out of range or bad options.
        """
        r = self._rank(rank)
        if r not in self._backends:
            if isinstance(brackets_per_run, bool) or not isinstance(brackets_per_run, int) or brackets_per_run < 2:
                raise ValueError(f"brackets_per_run={brackets_per_run!r}: must be an integer >= 2")
            fraction(idle_tolerance, "idle_tolerance")
            if self._baseline_w is None:
                self._baseline_w = self._idle_levels(50_000_000)
            self._backends[r] = SimRankBackend(self, r, brackets_per_run, idle_tolerance, int(max_idle_ns))
            self._pending[r] = {}
        return self._backends[r]

    def node_backends(self, **options: Any) -> list["SimRankBackend"]:
        """Every rank's backend, by rank."""
        return [self.backend(r, **options) for r in range(self.devices)]

    def _next_backend_run_id(self, k: int) -> int:
        """The run id of every rank's ``k``-th ``new_run_id``: allocated from the node's counter on first ask."""
        ids = self._backend_ids
        if k == len(ids):
            ids.append(self._next_run)
            self._next_run += 1
        return ids[k]

    def _replaying(self, rank: int) -> bool:
        """Whether runs other ranks already drove wait for this rank's backend."""
        return bool(self._pending[rank])

    def _idle_levels(self, ns: int) -> np.ndarray:
        """Mean logged total power of every device over ``ns`` of idle (NaN where no log arrived)."""
        start = self.now()
        self.idle(ns)
        out = np.full(self.devices, np.nan)
        for r, g in enumerate(self.gpus):
            s = g.device.observed_samples(start)
            s = s[s["host_ns"] >= start]
            if len(s):
                out[r] = float(np.mean(s["total"]))
        return out

    def _wait_idle_all(self, tolerance: float, max_idle_ns: int) -> int:
        """Idle until every device's logged power is back near its baseline, then a random logger phase."""
        assert self._baseline_w is not None
        period = float(self.gpus[0].params["logger_period_ns"])
        base = self._baseline_w

        def level(ns: int) -> float:
            # The worst device relative to its own baseline, as a level on device 0's scale.
            lv = self._idle_levels(ns)
            if np.isnan(lv).any():
                return float("nan")
            return float(base[0] * np.max(lv / base))

        waited = wait_for_idle(level, float(base[0]), tolerance, period, max_idle_ns)
        extra = int(self._rng.integers(0, int(period)))
        self.idle(extra)
        return waited + extra

    def _read_all(self, n: int) -> list[np.ndarray]:
        """``n`` bracketed device-clock reads on every device at once (true ns), then lockstep again."""
        out = [g.read_clocks(n) for g in self.gpus]
        self._align()
        return out

    def _backend_run(self, rank: int, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        b = self._backends[rank]
        key = (_plan_key(kernel), int(executions))
        if run in self._pending[rank]:
            want, rec = self._pending[rank].pop(run)
            if want != key:
                raise ValueError(f"run={run}: rank {rank} asked for {key}, but this run was simulated for "
                                 f"{want}: every rank must run the same runs (a collective mismatch)")
            return rec
        if run in self._used_runs:
            raise ValueError(f"run={run}: already simulated before rank {rank}'s backend existed or read it; "
                             "make every rank's backend (node_backends()) before the first run")
        half = b._brackets_per_run // 2
        before = self._read_all(half)
        begin = self.now()
        nr = self._simulate(kernel, executions, run)
        # Logs published a little after the end still belong to the run.
        self.idle(int(2 * b._logger_period))
        after = self._read_all(b._brackets_per_run - half)
        end = self.now()
        mine: Optional[RunRecord] = None
        for r, other in self._backends.items():
            rec = self._rank_record(r, nr, before[r], after[r], begin, end)
            if r == rank:
                mine = rec
            else:
                self._pending[r][run] = (key, rec)
        assert mine is not None
        return mine

    def _rank_record(self, r: int, nr: NodeRun, before: np.ndarray, after: np.ndarray, begin: int,
                     end: int) -> RunRecord:
        """The run as rank r's process saw it: host columns in its clock, device ticks untouched."""
        g = self.gpus[r]
        s = g.device.observed_samples(begin - int(g.params["poll_period_ns"]))
        s = s[(s["host_ns"] >= begin) & (s["host_ns"] <= end)].copy()
        s["host_ns"] = self._stamp(r, s["host_ns"])
        s["host_poll_begin_ns"] = self._stamp(r, s["host_poll_begin_ns"])
        br = np.concatenate([before, after]).astype(np.int64)
        br[:, 0] = self._stamp(r, br[:, 0])
        br[:, 2] = self._stamp(r, br[:, 2])
        ex = nr.executions[r]
        markers = sim_markers(ex)
        markers["host_launch_ns"] = self._stamp(r, ex["host_launch_ns"])
        sync = ex["host_sync_ns"] >= 0
        markers["host_sync_ns"][sync] = self._stamp(r, ex["host_sync_ns"][sync])
        return RunRecord(
            run=nr.run, executions=len(ex), samples=s, markers=markers, brackets=br,
            meta={
                "rank": r,
                "truth_start_ns": self._stamp(r, ex["start_ns"]),
                "truth_end_ns": self._stamp(r, ex["end_ns"]),
                "truth_start_true_ns": ex["start_ns"].copy(),
                "truth_end_true_ns": ex["end_ns"].copy(),
                "truth_energy_j": ex["energy_j"].copy(),
                "host_offset_ns": float(self._offsets[r]),
                "host_skew_ppm": float(self._skews[r]),
            },
        )

def _plan_key(kernel: KernelSpec) -> Any:
    """A run's kernel (or plan) as a comparable key: every rank must ask for the same run."""
    if isinstance(kernel, (str, int, np.integer)):
        return kernel if isinstance(kernel, str) else int(kernel)
    return tuple((k if isinstance(k, str) else int(k), int(c)) for k, c in kernel)
