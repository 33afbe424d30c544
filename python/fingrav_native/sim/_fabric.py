"""The node's fabric and collective model: how long a collective takes on a ring, and what it draws.

An alpha-beta ring model. A collective of ``S`` bytes on ``n`` devices takes ``setup + steps x
link_latency + volume(n) x S / B``; all-reduce moves ``2(n-1)/n`` of the buffer per device in
``2(n-1)`` steps, all-gather and reduce-scatter ``(n-1)/n`` in ``n-1`` steps; ``B`` is
``min(links, n-1)`` peer links used at once (one ring per link, as RCCL does on a fully connected
node) x per-link bandwidth x an efficiency. The power shape is IO-die and HBM heavy ring steps
when bandwidth-bound, handshake-dominated (low compute, modest IO) when latency-bound, as the
preset collectives of the single device (``csrc/fingrav/sim/kernels.cpp``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fingrav_native._checks import instance_of, integer_in, real_number
from fingrav_native.records._log_layouts import COLLECTIVE_TRUTH_DTYPE as COLLECTIVE_TRUTH_DTYPE  # re-exported

#: A collective the fabric model knows (ring algorithm).
CollectiveKind = Literal["allreduce", "allgather", "reducescatter"]

#: Collectives the fabric model knows (ring algorithm).
COLLECTIVE_KINDS: tuple[CollectiveKind, ...] = ("allreduce", "allgather", "reducescatter")




# Busy-wait of a rank that arrived early: a few workgroups poll a flag
# in peer-visible memory: compute barely busy, some IO-die traffic.
SPIN_SHAPE = ((1.0, 0.03, 0.10, 0.04),)


# Collective activity levels at the two extremes of the bandwidth share u
# (latency-bound u~0, bandwidth-bound u~1), from the single-device presets
# (kernels.cpp): all-reduce also reduces, so its compute is higher.
_ACTIVITY = {
    "allreduce": ((0.07, 0.24, 0.10), (0.16, 0.84, 0.76)),
    "allgather": ((0.05, 0.22, 0.08), (0.07, 0.86, 0.71)),
    "reducescatter": ((0.07, 0.23, 0.09), (0.16, 0.82, 0.73)),
}


# Sub-execution time resolution: a kernel lasts an integer number of ns.
MIN_KERNEL_NS = 1000  # the device's shortest kernel (validate_kernel)


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
    algorithm: Literal["ring"] = "ring"
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

        integer_in(self.links, "links", 1, 1 << 16)
        # Every other field is a number (a string or None would fail in a comparison below, or later).
        for f in dataclasses.fields(self):
            if f.name not in ("links", "algorithm"):
                real_number(getattr(self, f.name), f.name)
        need(self.algorithm == "ring", "algorithm", "only 'ring' is modelled")
        for name in ("link_bandwidth_gbs",):
            need(math.isfinite(getattr(self, name)) and getattr(self, name) > 0, name, "must be > 0")
        need(0 < self.link_efficiency <= 1, "link_efficiency", "must be in (0, 1]")
        for name in ("link_latency_ns", "setup_latency_ns", "gap_ns", "arrival_jitter_ns", "launch_skew_ns",
                     "msg_jitter_ns", "msg_outlier_ns"):
            v = getattr(self, name)
            need(math.isfinite(v) and v >= 0, name, "must be a finite number >= 0")
        need(math.isfinite(self.handshake_ns) and self.handshake_ns >= MIN_KERNEL_NS, "handshake_ns",
             f"must be >= {MIN_KERNEL_NS} (the device's shortest kernel)")
        need(math.isfinite(self.msg_latency_ns) and self.msg_latency_ns > 0, "msg_latency_ns", "must be > 0")
        need(self.setup_latency_ns >= MIN_KERNEL_NS, "setup_latency_ns",
             f"must be >= {MIN_KERNEL_NS}: a collective is at least one kernel")
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

    kind: CollectiveKind
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


def collective_time(kind: CollectiveKind, nbytes: int, devices: int,
                    fabric: FabricParams | None = None) -> CollectiveTime:
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
    fabric = instance_of(fabric, "fabric", (FabricParams, type(None)), "a FabricParams or None") or FabricParams()
    if not isinstance(kind, str) or kind not in COLLECTIVE_KINDS:
        raise ValueError(f"kind={kind!r}: unknown collective; known: {', '.join(COLLECTIVE_KINDS)}")
    integer_in(nbytes, "nbytes", 0)
    integer_in(devices, "devices", 1, 1 << 20)
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


def size_label(nbytes: int) -> str:
    """A buffer size as kernel names spell it: ``512m``, ``64k``, ``100b``."""
    for unit, size in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return f"{nbytes}b"


def transfer_shape(kind: CollectiveKind, t: CollectiveTime) -> list[tuple[float, float, float, float]]:
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


def quantize_wait(w: np.ndarray) -> np.ndarray:
    """Round waits down to 10 ns below 10 us, three significant digits above (bounded kernel count)."""
    w = np.asarray(w, dtype=np.int64)
    digits = np.floor(np.log10(np.maximum(w, 1).astype(np.float64))).astype(np.int64)
    q = 10 ** np.maximum(1, digits - 2)
    out: np.ndarray = np.maximum(MIN_KERNEL_NS, w - w % q)
    return out


@dataclass(frozen=True)
class Collective:
    """A collective registered on a node: its model time and activity shape, under one node kernel id."""

    name: str
    kind: CollectiveKind
    nbytes: int
    node_id: int
    time: CollectiveTime
    shape: tuple[tuple[float, float, float, float], ...]
