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
* **Fabric** (:class:`FabricParams`): an alpha-beta ring model. A
  collective of ``S`` bytes on ``n`` devices takes ``setup + steps x
  link_latency + volume(n) x S / B``; all-reduce moves ``2(n-1)/n`` of the
  buffer per device in ``2(n-1)`` steps, all-gather and reduce-scatter
  ``(n-1)/n`` in ``n-1`` steps; ``B`` is ``min(links, n-1)`` peer links
  used at once (one ring per link, as RCCL does on a fully connected
  node) x per-link bandwidth x an efficiency.
* **Collective executions**: a rank *arrives* at a collective when its
  previous work is done (plus a launch gap and a per-rank arrival jitter;
  the first execution of a run after its host's launch, itself skewed
  between ranks). The data exchange starts for everybody a handshake after
  the last rank arrives, and ends on every device at the same true time.
  Ranks that arrive early busy-wait *inside* the kernel (a low-power but
  non-idle spin), so each rank sees a different execution time for the
  same collective, as real ranks do.
* **Power shape**: IO-die and HBM heavy ring steps when bandwidth-bound,
  handshake-dominated (low compute, modest IO) when latency-bound, as the
  preset collectives of the single device (``csrc/fingrav/sim/kernels.cpp``).
* **Host clocks**: rank ``r`` reads ``host_r(true) = true (1 + skew_r 1e-6)
  + offset_r``, with deliberately different offsets (milliseconds to
  seconds) and skews (tens of ppm); each device also has its own clock
  offset and skew. :meth:`SimNode.exchange_brackets` simulates the
  host-to-host ping-pong a real torch.distributed clock exchange performs,
  with latency, jitter, asymmetry and outliers.
* **Backends**: :meth:`SimNode.backend` gives a
  :class:`~fingrav_native.backends.Backend` per rank, whose records are
  stamped with that rank's host clock, so
  :func:`fingrav_native.method.profile.profile` runs on any rank unchanged.

How the lockstep is kept
------------------------
Every public operation leaves all devices at the same true time. A
collective execution on device ``r`` is two kernels launched at exact
times: a *spin* of ``W_r`` ns from its arrival, then the *transfer* of
``D`` ns, identical on every device; the devices' launch path is therefore
made exact (``launch_latency_ns=1``, ``launch_jitter_ns=0`` on each
device) and the node models the host launch latency itself. Kernel
durations are exact only as integer ns, so ``W_r`` is quantised (10 ns
below 10 us, three significant digits above) by moving the arrival a
little later, and ``D`` per run factor (steps of 0.1%): the spin and
transfer kernels registered on each device stay bounded in number
(cached per device). The two records are merged into one execution per
rank, with the collective's own kernel id.

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
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in
from fingrav_native.backends._base import KernelSpec, execution_plan, wait_for_idle
from fingrav_native.backends._sim import sim_markers
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sim._device import RunResult, SimGPU, kernel_presets, parameters

#: Collectives the fabric model knows (ring algorithm).
COLLECTIVE_KINDS: tuple[str, ...] = ("allreduce", "allgather", "reducescatter")


#: One row per (collective execution, rank): where it really started and ended.
COLLECTIVE_TRUTH_DTYPE = np.dtype([
    ("run", "<i4"),
    ("index", "<i4"),            # execution index within the run
    ("kernel_id", "<i4"),        # node kernel id of the collective
    ("rank", "<i4"),
    ("start_true_ns", "<i8"),    # the rank arrived: its execution began (spin)
    ("transfer_true_ns", "<i8"), # the data exchange began, on every rank
    ("end_true_ns", "<i8"),      # the execution ended (same on every rank, within a few ns)
    ("start_host_ns", "<i8"),    # start, in this rank's host clock
    ("end_host_ns", "<i8"),      # end, in this rank's host clock
])


# Busy-wait of a rank that arrived early: a few workgroups poll a flag
# in peer-visible memory: compute barely busy, some IO-die traffic.
_SPIN_SHAPE = ((1.0, 0.03, 0.10, 0.04),)


# Collective activity levels at the two extremes of the bandwidth share u
# (latency-bound u~0, bandwidth-bound u~1), from the single-device presets
# (kernels.cpp): all-reduce also reduces, so its compute is higher.
_ACTIVITY = {
    "allreduce": ((0.07, 0.24, 0.10), (0.16, 0.84, 0.76)),
    "allgather": ((0.05, 0.22, 0.08), (0.07, 0.86, 0.71)),
    "reducescatter": ((0.07, 0.23, 0.09), (0.16, 0.82, 0.73)),
}


# Sub-execution time resolution: a kernel lasts an integer number of ns.
_MIN_KERNEL_NS = 1000  # the device's shortest kernel (validate_kernel)


@dataclass(frozen=True)
class FabricParams:
    """The node's fabric, collective variation and host-to-host messages.

    Figures are plausible for an 8-GPU MI300X node, not measured: AMD's
    public MI300X data sheet gives 7 Infinity Fabric (xGMI) peer links per
    GPU at 128 GB/s bidirectional (64 GB/s each way); RCCL reaches roughly
    80% of that on large messages; per-step and setup latencies are chosen
    so the 8-GPU durations land on the single-device presets (Section V-D:
    64 KB all-reduce ~38 us, 512 MB ~2.5 ms).

    Attributes
    ----------
    links : int
        Peer links per device.
    link_bandwidth_gbs : float
        Per-link bandwidth, GB/s each direction.
    link_efficiency : float
        Achievable share of the peak on large messages, in (0, 1].
    link_latency_ns : float
        Latency of one ring step (hop plus step synchronisation), ns.
    setup_latency_ns : float
        Fixed cost of one collective (kernel setup, proxy handshakes), ns.
    algorithm : str
        ``"ring"`` (the only one modelled).
    handshake_ns : float
        Barrier after the last rank arrives, before data moves, ns (>= 1 us:
        every rank spins at least this long).
    gap_ns : float
        Device gap between back-to-back kernels, ns (jittered +-20%).
    arrival_jitter_ns : float
        Mean exponential extra delay of each rank's arrival at each
        execution (per-execution skew between ranks), ns.
    launch_skew_ns : float
        Mean exponential delay of each rank's host launch of a run (the
        ranks' processes do not launch together), ns.
    exec_cv : float
        Execution-to-execution variation of a collective, as a share of its
        duration (spent in the handshake, on every rank).
    run_cv, slow_mode_prob, slow_mode_min, slow_mode_max : float
        Run-to-run variation of the transfer (buffer placement), as for the
        single-device kernels.
    outlier_prob, outlier_factor : float
        Rare slow executions (a straggling handshake), at most this factor.
    cold_factor : float
        First execution of a run from idle is this much slower.
    msg_latency_ns : float
        One-way host-to-host message latency of a clock exchange, ns
        (a torch.distributed-style exchange between processes).
    msg_jitter_ns : float
        Mean exponential excess per leg, ns.
    msg_asymmetry : float
        Share of the minimum round trip spent on the way out (0.5 =
        symmetric); invisible to any bracket fit, it sets the error floor.
    msg_outlier_prob, msg_outlier_ns : float
        Rare delayed messages (scheduling) and their mean extra delay, ns.
    """

    links: int = 7
    link_bandwidth_gbs: float = 64.0
    link_efficiency: float = 0.8
    link_latency_ns: float = 2000.0
    setup_latency_ns: float = 10_000.0
    algorithm: str = "ring"
    handshake_ns: float = 1500.0
    gap_ns: float = 4000.0
    arrival_jitter_ns: float = 1500.0
    launch_skew_ns: float = 20_000.0
    exec_cv: float = 0.003
    run_cv: float = 0.004
    slow_mode_prob: float = 0.2
    slow_mode_min: float = 1.03
    slow_mode_max: float = 1.09
    outlier_prob: float = 0.004
    outlier_factor: float = 1.3
    cold_factor: float = 0.10
    msg_latency_ns: float = 10_000.0
    msg_jitter_ns: float = 2000.0
    msg_asymmetry: float = 0.55
    msg_outlier_prob: float = 0.01
    msg_outlier_ns: float = 200_000.0

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)!r}: {what}")

        need(isinstance(self.links, (int, np.integer)) and not isinstance(self.links, bool) and self.links >= 1,
             "links", "must be an integer >= 1")
        need(self.algorithm == "ring", "algorithm", "only 'ring' is modelled")
        for name in ("link_bandwidth_gbs",):
            need(math.isfinite(getattr(self, name)) and getattr(self, name) > 0, name, "must be > 0")
        need(0 < self.link_efficiency <= 1, "link_efficiency", "must be in (0, 1]")
        for name in ("link_latency_ns", "setup_latency_ns", "gap_ns", "arrival_jitter_ns", "launch_skew_ns",
                     "msg_jitter_ns", "msg_outlier_ns"):
            v = getattr(self, name)
            need(math.isfinite(v) and v >= 0, name, "must be a finite number >= 0")
        need(math.isfinite(self.handshake_ns) and self.handshake_ns >= _MIN_KERNEL_NS, "handshake_ns",
             f"must be >= {_MIN_KERNEL_NS} (the device's shortest kernel)")
        need(math.isfinite(self.msg_latency_ns) and self.msg_latency_ns > 0, "msg_latency_ns", "must be > 0")
        need(self.setup_latency_ns >= _MIN_KERNEL_NS, "setup_latency_ns",
             f"must be >= {_MIN_KERNEL_NS}: a collective is at least one kernel")
        for name in ("exec_cv", "run_cv"):
            need(0 <= getattr(self, name) < 0.5, name, "must be in [0, 0.5)")
        for name in ("slow_mode_prob", "outlier_prob", "msg_outlier_prob"):
            need(0 <= getattr(self, name) <= 1, name, "must be in [0, 1]")
        need(1 <= self.slow_mode_min <= self.slow_mode_max <= 3, "slow_mode_min",
             "need 1 <= slow_mode_min <= slow_mode_max <= 3")
        need(1 <= self.outlier_factor <= 10, "outlier_factor", "must be in [1, 10]")
        need(0 <= self.cold_factor <= 10, "cold_factor", "must be in [0, 10]")
        need(0 <= self.msg_asymmetry <= 1, "msg_asymmetry", "must be in [0, 1]")


@dataclass(frozen=True)
class CollectiveTime:
    """The fabric model's time for one collective (alpha-beta, ring).

    Attributes
    ----------
    kind : str
        ``allreduce``, ``allgather`` or ``reducescatter``.
    nbytes : int
        Buffer size (the full result for all-gather, the reduced buffer for
        all-reduce, the input for reduce-scatter).
    devices : int
        Ranks taking part.
    steps : int
        Ring steps.
    bytes_per_device : float
        Bytes each device sends (and receives).
    bandwidth_bytes_per_ns : float
        Effective per-device bandwidth (links used x link bandwidth x efficiency).
    latency_ns, bandwidth_ns, total_ns : float
        Latency term (setup + steps x link latency), bandwidth term, and their sum.
    """

    kind: str
    nbytes: int
    devices: int
    steps: int
    bytes_per_device: float
    bandwidth_bytes_per_ns: float
    latency_ns: float
    bandwidth_ns: float
    total_ns: float

    @property
    def bandwidth_share(self) -> float:
        """Share of the time spent moving bytes (0: latency-bound, 1: bandwidth-bound)."""
        return self.bandwidth_ns / self.total_ns


def collective_time(kind: str, nbytes: int, devices: int, fabric: FabricParams | None = None) -> CollectiveTime:
    """The duration of one collective on ``devices`` ranks under the fabric model.

    Parameters
    ----------
    kind : {"allreduce", "allgather", "reducescatter"}
        The collective.
    nbytes : int
        Buffer size, bytes (>= 0).
    devices : int
        Ranks (>= 1).
    fabric : FabricParams, optional
        The fabric; default :class:`FabricParams()`.

    Returns
    -------
    CollectiveTime

    Raises
    ------
    ValueError
        Unknown ``kind``, negative ``nbytes`` or ``devices < 1``.

    Notes
    -----
    Paper Section V-D profiles these collectives on an 8-GPU node; the
    model here (alpha-beta, ring) gives their plausible durations:

    1. Ring all-reduce is a reduce-scatter then an all-gather: ``2(n-1)``
       steps, each device sending ``2(n-1)/n`` of the buffer; all-gather
       and reduce-scatter: ``n-1`` steps and ``(n-1)/n``.
    2. Each device drives ``min(links, n-1)`` peer links at once (one ring
       per link), so the effective bandwidth is that many links x link
       bandwidth x efficiency. Beyond ``links + 1`` devices the per-device
       injection bandwidth stays that of ``links`` links (an idealised
       scale-out fabric, for virtual-time scaling studies).
    3. Time = setup + steps x link latency + bytes per device / bandwidth.

    Examples
    --------
    >>> t = collective_time("allreduce", 512 << 20, 8)
    >>> round(t.total_ns / 1e6, 2), t.bandwidth_share > 0.9
    (2.66, True)
    """
    fabric = fabric if fabric is not None else FabricParams()
    if kind not in COLLECTIVE_KINDS:
        raise ValueError(f"kind={kind!r}: unknown collective; known: {', '.join(COLLECTIVE_KINDS)}")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise ValueError(f"nbytes={nbytes!r}: must be an integer >= 0")
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 1:
        raise ValueError(f"devices={devices!r}: must be an integer >= 1")
    n = int(devices)
    if kind == "allreduce":
        steps, volume = 2 * (n - 1), 2.0 * (n - 1) / n
    else:
        steps, volume = n - 1, (n - 1) / n
    links_used = max(1, min(fabric.links, n - 1))
    bw = links_used * fabric.link_bandwidth_gbs * fabric.link_efficiency  # GB/s == bytes/ns
    per_device = volume * int(nbytes)
    lat = fabric.setup_latency_ns + steps * fabric.link_latency_ns
    bwt = per_device / bw
    return CollectiveTime(kind, int(nbytes), n, steps, per_device, bw, lat, bwt, lat + bwt)


def _size_label(nbytes: int) -> str:
    for unit, size in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return f"{nbytes}b"


def _transfer_shape(kind: str, t: CollectiveTime) -> list[tuple[float, float, float, float]]:
    """Activity shape of the data exchange, as kernels.cpp's collective_shape, blended by bandwidth share."""
    u = t.bandwidth_share
    lo, hi = _ACTIVITY[kind]
    c, io, m = (a + (b - a) * u for a, b in zip(lo, hi))
    if u < 0.5 or t.steps == 0:
        # Latency-bound: handshakes around a short transfer.
        return [(0.35, c * 0.6, io * 0.5, m * 0.4), (0.75, c, io, m), (1.0, c * 0.5, io * 0.4, m * 0.3)]
    # Bandwidth-bound: ring steps with a short synchronisation dip between
    # them; at most 16 drawn (a 64-rank ring's 126 dips would be finer than
    # any logger sees, and each segment costs the device an event).
    steps = min(t.steps, 16)
    shape = []
    for i in range(steps):
        a, b = i / steps, (i + 1) / steps
        shape.append((a + 0.93 * (b - a), c, io, m))
        shape.append((b, c * 0.4, io * 0.45, m * 0.5))
    shape[-1] = (1.0,) + shape[-1][1:]
    return shape


def _quantize_wait(w: np.ndarray) -> np.ndarray:
    """Round waits down to 10 ns below 10 us, three significant digits above (bounded kernel count)."""
    w = np.asarray(w, dtype=np.int64)
    digits = np.floor(np.log10(np.maximum(w, 1).astype(np.float64))).astype(np.int64)
    q = 10 ** np.maximum(1, digits - 2)
    out: np.ndarray = np.maximum(_MIN_KERNEL_NS, w - w % q)
    return out


@dataclass(frozen=True)
class _Collective:
    """A registered collective: its model time and, per device, its kernel ids."""

    name: str
    kind: str
    nbytes: int
    node_id: int
    time: CollectiveTime
    shape: tuple[tuple[float, float, float, float], ...]


@dataclass
class _NodeRun:
    """What one node-level run produced (true time), before any rank's clock is applied."""

    run: int
    plan: list[tuple[int, int]]
    executions: list[np.ndarray]  # per device, merged EXEC_DTYPE records (node kernel ids)
    launch_ns: np.ndarray  # per device, host launch call (true ns)
    sync_ns: np.ndarray    # per device, host saw completion (true ns)


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
        n = integer_in(devices, "devices", 1)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed={seed!r}: must be a non-negative integer")
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
        self._launch_latency = float(params.pop("launch_latency_ns", defaults["launch_latency_ns"]))
        self._launch_jitter = float(params.pop("launch_jitter_ns", defaults["launch_jitter_ns"]))
        self._sync_latency = float(params.pop("sync_latency_ns", defaults["sync_latency_ns"]))
        self._sync_jitter = float(params.pop("sync_jitter_ns", defaults["sync_jitter_ns"]))
        for name in ("launch_latency_ns", "launch_jitter_ns", "sync_latency_ns", "sync_jitter_ns"):
            v = getattr(self, "_" + name.replace("_ns", ""))
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name}={v!r}: must be a finite number >= 0")
        ss = np.random.SeedSequence([int(seed), 0x51A0DE])
        self._rng = np.random.default_rng(ss.spawn(1)[0])
        clock_rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC10C]))
        self.gpus: list[SimGPU] = []
        for r in range(n):
            p: dict[str, Any] = dict(params)
            # Each device its own clock, as real GPUs in one node have.
            p.setdefault("device_offset_ticks", float(int(clock_rng.integers(1 << 40, 1 << 52))))
            p.setdefault("device_skew_ppm", float(clock_rng.uniform(-40, 40)))
            p.setdefault("device_wander_phase", float(clock_rng.uniform(0, 2 * np.pi)))
            p.setdefault("logger_offset_ticks", float(int(clock_rng.integers(1 << 40, 1 << 52))))
            p.setdefault("logger_skew_ppm", float(clock_rng.uniform(-40, 40)))
            p.setdefault("logger_wander_phase", float(clock_rng.uniform(0, 2 * np.pi)))
            dev_seed = int(np.random.SeedSequence([int(seed), r]).generate_state(1, dtype=np.uint32)[0])
            p.update(launch_latency_ns=1.0, launch_jitter_ns=0.0)
            self.gpus.append(SimGPU(seed=dev_seed, realtime=False, **p))
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
        self._collectives: dict[str, _Collective] = {}
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
            o = np.asarray(offsets, dtype=np.float64).ravel()
            if o.shape != (n,) or not np.all(np.isfinite(o)):
                raise ValueError(f"host_offsets_ns: need {n} finite values, one per rank, got {len(o)}")
        if skews is None:
            s = rng.uniform(-50, 50, size=n)
        else:
            s = np.asarray(skews, dtype=np.float64).ravel()
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

    def collective(self, kind: str, nbytes: int) -> str:
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
        name = f"{kind}-{_size_label(int(nbytes))}-x{self.devices}"
        if name in self._collectives:
            return name
        shape = tuple(_transfer_shape(kind, t))
        f = self.fabric
        # The collective itself as a device kernel (with the fabric's
        # variation), so a single SimGPU can also run it; the node never
        # launches it directly but reports its executions under its id.
        node_id = len(self._names)
        for r, g in enumerate(self.gpus):
            did = g.add_kernel(name, duration_ns=max(float(_MIN_KERNEL_NS), t.total_ns), freq_sensitivity=0.0,
                               shape=shape, exec_cv=f.exec_cv, run_cv=f.run_cv, outlier_prob=f.outlier_prob,
                               outlier_factor=f.outlier_factor, cold_factor=f.cold_factor,
                               launch_gap_ns=f.gap_ns, slow_mode_prob=f.slow_mode_prob,
                               slow_mode_min=f.slow_mode_min, slow_mode_max=f.slow_mode_max)
            self._set_dev_map(r, did, node_id)
        self._names.append(name)
        self._nominal.append(t.total_ns)
        self._name_to_id[name] = node_id
        self._collectives[name] = _Collective(name, kind, int(nbytes), node_id, t, shape)
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
                                          shape=_SPIN_SHAPE, **_EXACT)
            self._spin[r][w] = kid
            self._set_dev_map(r, kid, -1)
        return kid

    def _transfer_kernel(self, r: int, c: _Collective, d: int) -> int:
        key = (c.node_id, d)
        kid = self._xfer[r].get(key)
        if kid is None:
            kid = self.gpus[r].add_kernel(f"~{c.name}-{d}", duration_ns=float(d), freq_sensitivity=0.0,
                                          shape=c.shape, **_EXACT)
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

    def _simulate(self, kernel_or_plan: KernelSpec, executions: int, run: Optional[int]) -> _NodeRun:
        plan = self._resolve_plan(kernel_or_plan, executions)
        if run is None:
            run = self._next_run
        run = integer_in(run, "run", 0)
        if run in self._used_runs:
            raise ValueError(f"run={run}: already used on this node")
        if run > np.iinfo(np.int32).max:
            raise ValueError(f"run={run}: must fit in int32")
        self._used_runs.add(run)
        self._next_run = max(self._next_run, run + 1)
        n = self.devices
        rng = self._rng
        t0 = self.now()
        first_count = [g.device.execution_count() for g in self.gpus]
        # Each rank's host launches the run at its own moment; the launch
        # call then takes the (node-modelled) launch latency to reach the GPU.
        skew = np.ceil(rng.exponential(self.fabric.launch_skew_ns, size=n)) if self.fabric.launch_skew_ns > 0 \
            else np.zeros(n)
        launch = t0 + skew.astype(np.int64)
        lat = self._launch_latency + (rng.exponential(self._launch_jitter, size=n) if self._launch_jitter > 0
                                      else np.zeros(n))
        ready = (launch + np.ceil(lat)).astype(np.int64)  # earliest start of the next item per device
        dev_t = np.full(n, t0, dtype=np.int64)             # each device's current time
        pending = np.zeros(n, dtype=bool)                   # ordinary work queued, end not known
        launched = np.zeros(n, dtype=np.int64)              # device records this run will produce
        last_end = np.full(n, -1, dtype=np.int64)           # known end of the last collective
        batch_first = np.asarray(first_count)              # first record of the pending ordinary batch
        layout: list[tuple[str, int, int]] = []             # (kind, node id, count) in order
        truth_rows: list[np.ndarray] = []
        exec_base = 0
        for node_id, count in plan:
            name = self._names[node_id]
            coll = self._collectives.get(name)
            if coll is None:
                if not pending.any():
                    batch_first = np.asarray(first_count) + launched
                for r in range(n):
                    g = self.gpus[r].device
                    if not pending[r] and last_end[r] < 0:
                        # First work of the run on this device: start when its launch arrives.
                        at = max(int(ready[r]) - 1, int(dev_t[r]))
                        g.advance(at - int(dev_t[r]))
                        dev_t[r] = at
                    g.launch(self._dev_id[r][node_id], count, run)
                pending[:] = True
                launched += count
                layout.append(("ordinary", node_id, count))
            else:
                if pending.any():
                    ready = self._finish_pending(pending, dev_t, np.asarray(first_count) + launched, batch_first,
                                                 gap=True)
                    pending[:] = False
                elif (last_end >= 0).any():
                    ready = last_end + self._gaps(n)
                rows, end = self._collective_item(coll, count, run, ready, dev_t, exec_base)
                truth_rows.append(rows)
                last_end = np.full(n, end, dtype=np.int64)
                launched += 2 * count
                layout.append(("collective", node_id, count))
            exec_base += count
        # Let every device finish; each rank's host sees completion a sync latency later.
        if pending.any():
            self._finish_pending(pending, dev_t, np.asarray(first_count) + launched, batch_first, gap=False)
        else:
            for r in range(n):
                g = self.gpus[r].device
                g.advance(max(0, int(last_end[r]) + 1 - int(dev_t[r])))
                dev_t[r] = max(int(dev_t[r]), int(last_end[r]) + 1)
        per_dev = []
        ends = np.zeros(n, dtype=np.int64)
        for r in range(n):
            ex = self.gpus[r].device.executions(first_count[r])
            ex = ex[ex["run"] == run]
            if len(ex) != launched[r]:  # pragma: no cover - an internal invariant
                raise RuntimeError(f"device {r}: {len(ex)} records for {launched[r]} launched executions")
            per_dev.append(ex)
            ends[r] = ex["end_ns"][-1]
        sync_lat = self._sync_latency + (rng.exponential(self._sync_jitter, size=n) if self._sync_jitter > 0
                                         else np.zeros(n))
        sync = ends + np.ceil(sync_lat).astype(np.int64)
        top = int(max(sync.max(), dev_t.max()))
        for r in range(n):
            self.gpus[r].device.advance(top - self.gpus[r].now())
        merged = [self._merge(per_dev[r], layout, r, run, int(launch[r]), int(sync[r])) for r in range(n)]
        if truth_rows:
            rows = np.concatenate(truth_rows)
            # The rank's execution really ends when its transfer record ends.
            coll_mask = np.concatenate([np.full(c, k == "collective") for k, _, c in layout])
            for r in range(n):
                sel = rows["rank"] == r
                rows["end_true_ns"][sel] = merged[r]["end_ns"][coll_mask]
                rows["start_host_ns"][sel] = self._stamp(r, rows["start_true_ns"][sel])
                rows["end_host_ns"][sel] = self._stamp(r, rows["end_true_ns"][sel])
            self._truth.append(rows)
        return _NodeRun(run, plan, merged, launch, sync)

    def _gaps(self, n: int) -> np.ndarray:
        """Per-device delay from the end of one kernel to the arrival at the next collective."""
        f = self.fabric
        g = f.gap_ns * np.maximum(0.5, 1.0 + 0.2 * self._rng.standard_normal(n))
        if f.arrival_jitter_ns > 0:
            g = g + self._rng.exponential(f.arrival_jitter_ns, size=n)
        # At least 2 ns: the previous kernel may end a ns or two late (integer
        # rounding of its segments), and the next must not start before it.
        return np.maximum(2, np.ceil(g)).astype(np.int64)

    def _finish_pending(self, pending: np.ndarray, dev_t: np.ndarray, want_count: np.ndarray,
                        batch_first: np.ndarray, gap: bool) -> np.ndarray:
        """Advance devices with ordinary work queued until it is done; return when each may start next.

        The end of an ordinary kernel is known only once simulated. Step
        towards an estimate from the executions already finished (90% of
        the last one's duration per remaining execution: clocks only slow
        kernels down further), then in 1 us steps when a collective follows,
        so that it arrives close to when the device is really free.
        """
        n = self.devices
        gaps = self._gaps(n) if gap else np.zeros(n, dtype=np.int64)
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
                if cnt > batch_first[r]:
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

    def _collective_item(self, c: _Collective, count: int, run: int, ready: np.ndarray, dev_t: np.ndarray,
                         exec_base: int) -> tuple[np.ndarray, int]:
        """Launch ``count`` executions of a collective on every device; return truth rows and the last end."""
        n = self.devices
        f = self.fabric
        rng = self._rng
        # Run-to-run mode of the transfer (buffer placement), in steps of 0.1%
        # so the transfer kernels cached per device stay few.
        if rng.random() < f.slow_mode_prob:
            factor = rng.uniform(f.slow_mode_min, f.slow_mode_max)
        else:
            factor = max(0.5, 1.0 + rng.normal(0.0, f.run_cv)) if f.run_cv > 0 else 1.0
        factor = round(factor, 3)
        d_warm = max(_MIN_KERNEL_NS, int(round(c.time.total_ns * factor)))
        d_cold = max(_MIN_KERNEL_NS, int(round(c.time.total_ns * factor * (1.0 + f.cold_factor))))
        rows = np.zeros(count * n, dtype=COLLECTIVE_TRUTH_DTYPE)
        ranks = np.arange(n, dtype=np.int32)
        arrive_raw = ready.astype(np.int64)
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
            w = _quantize_wait(s - arrive_raw)
            arrive = s - w
            d = d_cold if i == 0 else d_warm
            for r in range(n):
                g = self.gpus[r].device
                at = int(arrive[r]) - 1
                if at < dev_t[r]:  # pragma: no cover - an internal invariant
                    raise RuntimeError(f"device {r}: arrival {arrive[r]} before the device's time {dev_t[r]}")
                g.advance(at - int(dev_t[r]))
                dev_t[r] = at
                g.launch(self._spin_kernel(r, int(w[r])), 1, run)
                g.launch(self._transfer_kernel(r, c, d), 1, run)
            end = s + d
            blk = rows[i * n:(i + 1) * n]
            blk["run"] = run
            blk["index"] = exec_base + i
            blk["kernel_id"] = c.node_id
            blk["rank"] = ranks
            blk["start_true_ns"] = arrive
            blk["transfer_true_ns"] = s
            blk["end_true_ns"] = end
            if i + 1 < count:
                arrive_raw = end + self._gaps(n)
        # Rows by rank, then execution: what per-rank selection expects.
        order = np.lexsort((rows["index"], rows["rank"]))
        return rows[order], end

    def _merge(self, ex: np.ndarray, layout: list[tuple[str, int, int]], r: int, run: int, launch_ns: int, sync_ns: int) -> np.ndarray:
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
                o = out[dst]
                o["run"] = run
                o["kernel_id"] = node_id
                o["warm_index"] = np.arange(count)
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
                o["duration_factor"] = dt / self._nominal[node_id]
                out[dst] = o
            pos += count
        out["index"] = np.arange(total)
        # The host enqueues the whole run with one launch call and sees its end once.
        out["host_launch_ns"] = launch_ns
        out["host_sync_ns"] = -1
        if total:
            out["host_sync_ns"][-1] = sync_ns
        return out

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
            if not 0 < idle_tolerance < 1:
                raise ValueError(f"idle_tolerance={idle_tolerance!r}: must be in (0, 1)")
            if self._baseline_w is None:
                self._baseline_w = self._idle_levels(50_000_000)
            self._backends[r] = SimRankBackend(self, r, brackets_per_run, idle_tolerance, int(max_idle_ns))
            self._pending[r] = {}
        return self._backends[r]

    def node_backends(self, **options: Any) -> list["SimRankBackend"]:
        """Every rank's backend, by rank."""
        return [self.backend(r, **options) for r in range(self.devices)]

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

    def _rank_record(self, r: int, nr: _NodeRun, before: np.ndarray, after: np.ndarray, begin: int,
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


# Kernels the node places exactly: no variation of their own, no launch gap.
_EXACT = dict(exec_cv=0.0, run_cv=0.0, outlier_prob=0.0, cold_factor=0.0, launch_gap_ns=0.0, slow_mode_prob=0.0)


def _plan_key(kernel: KernelSpec) -> Any:
    if isinstance(kernel, (str, int, np.integer)):
        return kernel if isinstance(kernel, str) else int(kernel)
    return tuple((k if isinstance(k, str) else int(k), int(c)) for k, c in kernel)


class SimRankBackend:
    """One rank of a :class:`SimNode` as a :class:`~fingrav_native.backends.Backend`.

    Records are stamped in the rank's host clock (samples' ``host_ns``,
    brackets' host columns, markers' host launch/sync), device-clock ticks
    untouched; ``meta`` carries the truth (execution start/end in this
    rank's host clock and in true ns, energy). Kernel ids are node ids (the
    same on every rank). Get one from :meth:`SimNode.backend`.

    Notes
    -----
    ``execute_run`` drives the whole node through the run the first time
    any rank asks for it; the other ranks' records wait until they ask for
    the same run id (see the module docstring, "Replicated simulation").
    ``wait_idle`` waits for every device to be idle when this rank is the
    first to reach the next run, and returns 0 when replaying runs other
    ranks already drove.
    """

    def __init__(self, node: SimNode, rank: int, brackets_per_run: int, idle_tolerance: float,
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
        rank asks (so it never clashes with :meth:`SimNode.run`'s ids), as
        separate processes of one campaign would agree on it.
        """
        k = self._next_run_id
        self._next_run_id += 1
        ids = self.node._backend_ids
        if k == len(ids):
            ids.append(self.node._next_run)
            self.node._next_run += 1
        return ids[k]

    def wait_idle(self) -> int:
        """Let every device return to idle (see the class notes); ns waited."""
        if self.node._pending[self.rank]:
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
            A kernel name (e.g. from :meth:`SimNode.collective`) or a sequence.
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
