"""Many GPUs: place every rank's host clock on rank 0's timeline, with an error bound.

One process per GPU, as ``torchrun`` starts them: each rank samples power,
syncs its GPU clock and logs its executions against its *own* host clock
(``CLOCK_MONOTONIC_RAW``). Ranks on one machine (and one boot) share that
clock; ranks on different nodes do not: their host clocks differ by an
arbitrary offset (each counts from its own boot) and a rate error of tens of
ppm (the raw clock is not NTP-disciplined). To merge per-rank profiles of a
collective (the paper's Section V-D all-gather and all-reduce) on one
timeline, this module measures each rank's host clock against the root's
with bracketed ping-pong exchanges over the ``torch.distributed`` process
group and fits the same clock map as the CPU-GPU sync of Section IV-A
(:func:`fingrav_native.clocks.fit_clock_map`), where the root's clock
plays the device's part.

Pieces
------
* :class:`HostClock` (``now_ns()``): :class:`MonotonicRawClock` (the real
  one) and :class:`SkewedClock` (a deliberately wrong one for tests, with
  its exact relation to the true clock for scoring).
* :func:`exchange_brackets`: the measurement, a collective call.
* :func:`fit_host_alignment` -> :class:`HostAlignment`: the fit (pure numpy,
  no torch), with ``to_root``/``from_root`` and ``error_bound_ns``.
* :func:`host_identity`, :func:`shares_host_clock_with_root`: whether a rank
  reads the very same clock as the root (then the alignment is exact).
* :func:`align_ranks`: all of it on every rank, before and optionally after
  a campaign; :func:`gather_to_root` brings the per-rank results to the root.

Only the measurement needs PyTorch (``pip install torch``, or the
``fingrav-native[distributed]`` extra); it is imported when first used.

Ranks and roots are ranks *within the group* passed (for the default group,
the global ranks). Every rank of the group must make the same collective
calls with the same ``root``, as for any ``torch.distributed`` collective.

Examples
--------
Fitting needs no process group: brackets of a rank whose clock runs 30 ppm
fast and 2 ms ahead of the root's, read with a 40 us round trip:

>>> import numpy as np
>>> from fingrav_native.clocks import fit_host_alignment
>>> root_ns = 10**12 + np.arange(64) * 200_000
>>> rank_mid = root_ns + 2_000_000 + (root_ns - 10**12) * 30 // 10**6
>>> brackets = np.stack([rank_mid - 20_000, root_ns, rank_mid + 20_000], axis=1)
>>> al = fit_host_alignment(brackets, rank=1)
>>> round(al.offset_ns / 1e6, 3), al.basis
(2.0, 'measured')
>>> bool(abs(al.to_root(int(rank_mid[10])) - root_ns[10]) <= al.error_bound_ns(int(rank_mid[10])))
True
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, fields, replace
from typing import Any, Optional, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from fingrav_native import _core
from fingrav_native._checks import flag, instance_of, integer_in, positive_number, real_number, relative_to
from fingrav_native.clocks._maps import MAX_SKEW_PPM, MIN_BRACKETS, ClockMap
from fingrav_native.clocks._twosided import fit_clock_map

#: Assumed bound on the rate difference of two hosts' raw clocks when the
#: exchanges span too short a time to fit it: crystals are specified to tens
#: of ppm each, and CLOCK_MONOTONIC_RAW is never corrected by NTP.
DEFAULT_PRIOR_SKEW_PPM = 100.0


#: Exchanges further apart than this belong to different bursts (e.g. before
#: and after a campaign). Within a burst, a loaded machine spaces round trips
#: by a few scheduler ticks (4 ms each at 250 Hz); the interpolation term of
#: the bound over a shorter interval is below 0.04 ns, so only longer gaps
#: are kept with an alignment.
_BURST_GAP_NS = 50_000_000


#: Exchanges per burst kept as anchors of the causal bound (the tightest):
#: the bound's cost is linear in the pairs of anchors.
_ANCHORS_PER_BURST = 8


#: Keep round trips within this factor of the best of their burst (Tracy keeps 1.5x).
_SELECT_FACTOR = 1.5


#: Sanity bound on the exchange count a rank announces to the root.
MAX_EXCHANGES = 10_000_000


_FORMAT = "fingrav-host-alignment"


_FORMAT_VERSION = 1


@runtime_checkable
class HostClock(Protocol):
    """A host clock: ``now_ns()`` returns integer nanoseconds, monotonic."""

    def now_ns(self) -> int:
        """The clock now, integer ns."""
        ...


class MonotonicRawClock:
    """The host clock every result is placed on: ``CLOCK_MONOTONIC_RAW``, ns (``_core.host_time_ns``).

    ``now_ns`` is the C++ function itself (no Python frame in between), so a
    bracket around a message is as tight as the clock allows.
    """

    now_ns = staticmethod(_core.host_time_ns)

    def __repr__(self) -> str:
        return "MonotonicRawClock()"


class SkewedClock:
    """A deliberately wrong host clock: ``local = base * (1 + skew_ppm * 1e-6) + offset_ns``.

    Tests give each rank its own offset and skew, as nodes with separate
    crystals and boots would have, and score the alignment against the exact
    relation to the base clock (:meth:`true_from_local`, :meth:`local_from_true`).

    Parameters
    ----------
    offset_ns : int
        Added to every reading, ns.
    skew_ppm : float
        Rate error, ppm (positive: the clock runs fast). Must be finite and
        within +-1e5 ppm (a clock must still advance).
    base : HostClock, optional
        The true clock (default :class:`MonotonicRawClock`).

    Notes
    -----
    The skew scales the base clock's *absolute* value (time since boot), so
    at 1 day of uptime 50 ppm adds 4.3 s on top of ``offset_ns``: the
    effective offset is larger than the nominal one, as between real nodes.
    """

    def __init__(self, offset_ns: int, skew_ppm: float, base: Optional[HostClock] = None) -> None:
        integer_in(offset_ns, "offset_ns", -(2**63))
        real_number(skew_ppm, "skew_ppm", low=-1e5, high=1e5)
        self.offset_ns = int(offset_ns)
        self.skew_ppm = float(skew_ppm)
        self.base: HostClock = check_host_clock(base, "base")
        self._rate_minus_1 = self.skew_ppm * 1e-6

    def now_ns(self) -> int:
        """The skewed clock now, integer ns (``round(local_from_true(base.now_ns()))``)."""
        b = self.base.now_ns()
        return b + self.offset_ns + round(b * self._rate_minus_1)

    def local_from_true(self, true_ns: npt.ArrayLike) -> Any:
        """This clock's reading (float ns) when the base clock reads ``true_ns``.

        The large integer part is added exactly before the small float
        correction, so results are exact to float64 resolution.
        """
        t = np.asarray(true_ns)
        out = (t + self.offset_ns if np.issubdtype(t.dtype, np.integer) else t.astype(np.float64) + self.offset_ns)
        out = out.astype(np.float64) + t.astype(np.float64) * self._rate_minus_1
        return float(out) if out.ndim == 0 else out

    def true_from_local(self, local_ns: npt.ArrayLike) -> Any:
        """The base clock's reading (float ns) when this clock reads ``local_ns``: the exact inverse."""
        loc = np.asarray(local_ns)
        d = (loc - self.offset_ns if np.issubdtype(loc.dtype, np.integer) else loc.astype(np.float64) - self.offset_ns)
        d = d.astype(np.float64)
        # d / (1 + s) = d - d * s / (1 + s): the large part stays exact.
        out = d - d * (self._rate_minus_1 / (1.0 + self._rate_minus_1))
        return float(out) if out.ndim == 0 else out

    def __repr__(self) -> str:
        return f"SkewedClock(offset_ns={self.offset_ns}, skew_ppm={self.skew_ppm:g}, base={self.base!r})"


def check_host_clock(clock: Any, name: str = "clock") -> HostClock:
    if clock is None:
        return MonotonicRawClock()
    if not callable(getattr(clock, "now_ns", None)):
        raise ValueError(f"{name}={clock!r}: must have a now_ns() method returning integer ns (a HostClock)")
    return clock  # type: ignore[no-any-return]


def is_system_clock(clock: Any) -> bool:
    """Whether ``clock`` reads CLOCK_MONOTONIC_RAW unchanged (only then can sharing be assumed)."""
    return clock is None or type(clock) is MonotonicRawClock


def _identity_map() -> ClockMap:
    """root ns == rank ns, with a zero bound everywhere."""
    return ClockMap(
        method="identity",
        device_ref=0,
        host_ref=0,
        offset_ns=0.0,
        ns_per_tick=1.0,
        tick_ns=1.0,
        host_begin_ns=0,
        host_end_ns=0,
        host_center_ns=0,
        n_used=0,
        n_total=0,
        best_rtt_ns=0.0,
        asymmetry_ns=0.0,
        residual_ns=0.0,
        skew_bound_ppm=0.0,
        wander_ppm_per_s=0.0,
        coverage=0.0,
    )


def _map_from_dict(d: Any, name: str) -> ClockMap:
    if not isinstance(d, dict):
        raise ValueError(f"{name}: expected a dict of ClockMap fields, got {type(d).__name__}")
    names = [f.name for f in fields(ClockMap)]
    missing = [k for k in names if k not in d]
    if missing:
        raise ValueError(f"{name}: missing ClockMap fields {missing}")
    kw: dict[str, Any] = {}
    for f in fields(ClockMap):
        v = d[f.name]
        if f.name == "method":
            kw[f.name] = str(v)
        elif f.name in ("device_ref", "host_ref", "host_begin_ns", "host_end_ns", "host_center_ns", "n_used", "n_total"):
            kw[f.name] = int(v)
        else:
            kw[f.name] = float(v)
    return ClockMap(**kw)


@dataclass(frozen=True)
class HostAlignment:
    """One rank's host clock placed on the root's: ``root_ns = to_root(rank_ns)``, with a bound.

    Made by :func:`fit_host_alignment` (or :func:`align_ranks`, which measures
    first); frozen, plain values, saved with a profile via :meth:`as_dict`.

    Attributes
    ----------
    rank, root : int
        This rank and the root, as ranks within the process group used.
    map : ClockMap
        The map in use, from root ns (its "device" side) to this rank's ns
        (its "host" side), fitted with ``tick_ns=1``; an exact identity
        (``method="identity"``, zero bound) for the root itself and for a
        trusted shared clock.
    shares_host_clock : bool
        Whether this rank reads the very same clock as the root (same host,
        same boot, same time namespace, the real clock): a fact about the
        ranks, recorded whatever map is in use.
    measured : ClockMap or None
        The map fitted on the exchanges (None when none were made, e.g. on
        the root). When a shared clock is trusted, ``map`` is the identity
        and this is the self-check (see :attr:`shared_clock_consistent`).
    skew_fitted : bool
        Whether ``map``'s skew was fitted (bursts far enough apart) or fixed
        at zero with an assumed prior bound.
    anchors : tuple of (int, int, int)
        The tightest exchanges of each burst, rows ``(t1, t2, t3)``: the hard
        (causal) part of the bound is computed from them.
    gaps_ns : tuple of (int, int)
        Intervals of this rank's clock between bursts of exchanges (more
        than 50 ms apart, e.g. before and after a campaign), for the
        interpolation term of the bound.
    hostname : str
        This rank's host name, for the profile.
    """

    rank: int
    root: int
    map: ClockMap
    shares_host_clock: bool
    measured: Optional[ClockMap] = None
    skew_fitted: bool = False
    anchors: tuple[tuple[int, int, int], ...] = ()
    gaps_ns: tuple[tuple[int, int], ...] = ()
    hostname: str = ""

    # ------------------------------------------------------------------ construction
    @classmethod
    def identity(
        cls,
        rank: int,
        root: int = 0,
        *,
        shares_host_clock: bool = True,
        measured: Optional[ClockMap] = None,
        hostname: str = "",
    ) -> HostAlignment:
        """The exact alignment of the root to itself, or of a rank that shares its clock (bound 0)."""
        integer_in(rank, "rank", 0)
        integer_in(root, "root", 0)
        return cls(rank=int(rank), root=int(root), map=_identity_map(), shares_host_clock=bool(shares_host_clock),
                   measured=measured, hostname=str(hostname))

    # ------------------------------------------------------------------ summary
    @property
    def basis(self) -> str:
        """``"root"`` (this is the root), ``"shared-clock"`` (identity, trusted) or ``"measured"``."""
        if self.map.method != "identity":
            return "measured"
        return "root" if self.rank == self.root else "shared-clock"

    @property
    def offset_ns(self) -> float:
        """This rank's clock minus the root's at the centre of the exchanges, ns (0 for an identity)."""
        if self.map.method == "identity":
            return 0.0
        hc = self.map.host_center_ns
        # Relative to the integer reference exactly, so no 1e18-ns float enters.
        m = self.map
        root_rel = (float(hc - m.host_ref) - m.offset_ns) / m.ns_per_tick
        return float(hc - m.device_ref) - root_rel

    @property
    def skew_ppm(self) -> float:
        """Rate of this rank's clock against the root's, ppm (positive: this rank's runs fast)."""
        return (self.map.ns_per_tick - 1.0) * 1e6

    @property
    def shared_clock_consistent(self) -> Optional[bool]:
        """Self-check of a shared clock: does the measured map contain the identity within its bound?

        ``None`` when the clock is not shared or nothing was measured. A
        ``False`` means the detection was fooled (or the exchange is broken):
        do not trust the identity.
        """
        if not self.shares_host_clock or self.measured is None:
            return None
        m = self.measured
        hc = m.host_center_ns
        return bool(abs(m.to_device(hc) - hc) <= m.error_bound_at(hc))

    # ------------------------------------------------------------------ maps
    def to_root(self, host_ns: npt.ArrayLike) -> Any:
        """Root-clock time (float ns) of this rank's host time ``host_ns`` (float for scalars, else array)."""
        return self.map.to_device(host_ns)

    def to_root_ns(self, host_ns: npt.ArrayLike) -> Any:
        """Like :meth:`to_root`, rounded to int64 ns with the large part added exactly."""
        m = self.map
        h, scalar = relative_to(host_ns, m.host_ref, "host_ns")
        rel = np.rint((h - m.offset_ns) / m.ns_per_tick).astype(np.int64)
        out = rel + np.int64(m.device_ref)
        return int(out) if scalar else out

    def from_root(self, root_ns: npt.ArrayLike) -> Any:
        """This rank's host time (float ns) of root-clock time ``root_ns``: the inverse of :meth:`to_root`."""
        return self.map.to_host(root_ns)

    def error_bound_ns(self, host_ns: npt.ArrayLike) -> Any:
        """Bound on ``|to_root(host_ns) - truth|`` at this rank's host time ``host_ns``, ns.

        Zero for an identity. Otherwise the sum of a *causal* term and the
        skew's wander:

        * causal: every exchange's root read happened inside its bracket, so
          the true line passes inside every anchor's ``[t1, t3]``; the error
          line (truth minus fit) is then bounded at any time by the
          tightest of the bounds each pair of anchors implies (interpolating
          between them, extrapolating beyond). About half the best round
          trip at the exchanges, growing by the uncertainty of the slope
          away from them; no statistical assumption.
        * wander: beyond the exchanges ``0.5 * wander * d**2``; inside a gap
          ``(a, b)`` between bursts ``0.5 * wander * (t - a) * (b - t)``
          (the skew may have moved where nothing was measured).

        When the skew was not fitted (one burst), the map's own bound
        (:meth:`ClockMap.error_bound_at`: half the best round trip, fit
        residual, the assumed ``prior_skew_ppm`` times the distance) is used
        where it is smaller. The bound is in this rank's ns; in root ns it
        differs by the skew (parts per million of itself).
        """
        m = self.map
        if m.method == "identity":
            return m.error_bound_at(host_ns)
        h, scalar = relative_to(host_ns, m.host_ref, "host_ns")
        w = m.wander_ppm_per_s * 1e-15  # ppm/s -> 1/ns
        wander = np.zeros_like(h)
        for a, b in self.gaps_ns:
            lo, hi = float(a - m.host_ref), float(b - m.host_ref)
            wander = np.where((h > lo) & (h < hi), 0.5 * w * (h - lo) * (hi - h), wander)
        begin, end = float(m.host_begin_ns - m.host_ref), float(m.host_end_ns - m.host_ref)
        outside = np.maximum(0.0, np.maximum(begin - h, h - end))
        out = self._causal_bound(h) + wander + 0.5 * w * outside * outside
        if not self.skew_fitted:
            out = np.minimum(out, np.asarray(m.error_bound_at(host_ns)) + wander)
        return float(out) if scalar else out

    def _causal_bound(self, h: np.ndarray) -> np.ndarray:
        """max |truth - fit| over the lines through every anchor's bracket, at rank times ``h`` (rel. host_ref)."""
        m = self.map
        if len(self.anchors) < 2:
            return np.full_like(h, np.inf)
        a = np.asarray(self.anchors, dtype=np.int64)
        # Root time of each anchor and of each query, relative to the map's device reference.
        x = (a[:, 1] - m.device_ref).astype(np.float64)
        fit = m.offset_ns + m.ns_per_tick * x  # fitted rank time of each anchor, rel. host_ref
        # The error line e = truth - fit satisfies lo_i <= e(x_i) <= hi_i
        # (one ns of slack for the clocks' rounding).
        lo = (a[:, 0] - m.host_ref).astype(np.float64) - fit - 1.0
        hi = (a[:, 2] - m.host_ref).astype(np.float64) - fit + 1.0
        i, j = np.triu_indices(x.size, k=1)
        keep = x[i] != x[j]
        i, j = i[keep], j[keep]
        swap = x[i] > x[j]
        i, j = np.where(swap, j, i), np.where(swap, i, j)  # x_i < x_j
        xq = ((np.ravel(h) - m.offset_ns) / m.ns_per_tick)  # query root times
        wgt = (x[j][:, None] - xq[None, :]) / (x[j] - x[i])[:, None]  # xq = w x_i + (1 - w) x_j
        li, hi_i, lj, hj = lo[i][:, None], hi[i][:, None], lo[j][:, None], hi[j][:, None]
        between = (wgt >= 0) & (wgt <= 1)
        before = wgt > 1  # xq < x_i: (1 - w) < 0 flips the bound taken at x_j
        upper = np.where(between, wgt * hi_i + (1 - wgt) * hj,
                         np.where(before, wgt * hi_i + (1 - wgt) * lj, wgt * li + (1 - wgt) * hj))
        lower = np.where(between, wgt * li + (1 - wgt) * lj,
                         np.where(before, wgt * li + (1 - wgt) * hj, wgt * hi_i + (1 - wgt) * lj))
        up: npt.NDArray[np.float64] = upper.min(axis=0)
        down: npt.NDArray[np.float64] = lower.max(axis=0)
        return np.maximum(np.maximum(up, -down), 0.0).reshape(np.shape(h))

    # ------------------------------------------------------------------ files
    def as_dict(self) -> dict[str, Any]:
        """Plain JSON values (ints, floats, str, lists) for the profile file; derived values included."""
        return {
            "format": _FORMAT,
            "version": _FORMAT_VERSION,
            "rank": self.rank,
            "root": self.root,
            "basis": self.basis,
            "shares_host_clock": self.shares_host_clock,
            "shared_clock_consistent": self.shared_clock_consistent,
            "hostname": self.hostname,
            "offset_ns": self.offset_ns,
            "skew_ppm": self.skew_ppm,
            "map": self.map.as_dict(),
            "measured": None if self.measured is None else self.measured.as_dict(),
            "skew_fitted": self.skew_fitted,
            "anchors": [[int(v) for v in row] for row in self.anchors],
            "gaps_ns": [[int(a), int(b)] for a, b in self.gaps_ns],
        }

    @classmethod
    def from_dict(cls, d: Any) -> HostAlignment:
        """Rebuild from :meth:`as_dict` output (e.g. after ``json.loads``); derived keys are ignored."""
        if not isinstance(d, dict):
            raise ValueError(f"d: expected a dict from HostAlignment.as_dict(), got {type(d).__name__}")
        if d.get("format") != _FORMAT:
            raise ValueError(f"d: format is {d.get('format')!r}, expected {_FORMAT!r}")
        if d.get("version") != _FORMAT_VERSION:
            raise ValueError(f"d: version {d.get('version')!r} is not supported (this is version {_FORMAT_VERSION})")
        for key in ("rank", "root", "map", "shares_host_clock"):
            if key not in d:
                raise ValueError(f"d: missing key {key!r}")
        gaps = d.get("gaps_ns", [])
        if not (isinstance(gaps, list) and all(isinstance(g, (list, tuple)) and len(g) == 2 for g in gaps)):
            raise ValueError("d['gaps_ns']: expected a list of [begin, end] pairs")
        anchors = d.get("anchors", [])
        if not (isinstance(anchors, list) and all(isinstance(r, (list, tuple)) and len(r) == 3 for r in anchors)):
            raise ValueError("d['anchors']: expected a list of [t1, t2, t3] rows")
        measured = d.get("measured")
        return cls(
            rank=integer_in(d["rank"], "d['rank']", 0),
            root=integer_in(d["root"], "d['root']", 0),
            map=_map_from_dict(d["map"], "d['map']"),
            shares_host_clock=bool(d["shares_host_clock"]),
            measured=None if measured is None else _map_from_dict(measured, "d['measured']"),
            skew_fitted=bool(d.get("skew_fitted", False)),
            anchors=tuple((int(r[0]), int(r[1]), int(r[2])) for r in anchors),
            gaps_ns=tuple((int(a), int(b)) for a, b in gaps),
            hostname=str(d.get("hostname", "")),
        )


def _bursts(arr: np.ndarray) -> tuple[np.ndarray, tuple[tuple[int, int], ...]]:
    """Burst label of each bracket (sorted by t1) and the gaps between bursts (midpoints, rank ns)."""
    mid = arr[:, 0] + (arr[:, 2] - arr[:, 0]) // 2
    cut = np.diff(arr[:, 0]) > _BURST_GAP_NS
    label = np.concatenate([[0], np.cumsum(cut)])
    gaps = tuple((int(mid[i]), int(mid[i + 1])) for i in np.flatnonzero(cut))
    return label, gaps


def _select_per_burst(arr: np.ndarray, label: np.ndarray) -> np.ndarray:
    """The tight brackets of every burst: round trip within 1.5x of that burst's best.

    fit_clock_map selects against the best round trip overall; a burst made
    while the machine was busier (after a campaign, say) would lose all its
    reads to one made on an idle machine, and the skew, which only the span
    between bursts determines, with them.
    """
    rtt = arr[:, 2] - arr[:, 0]
    keep = np.zeros(arr.shape[0], dtype=bool)
    for b in np.unique(label):
        inb = label == b
        keep |= inb & (rtt <= _SELECT_FACTOR * rtt[inb].min())
    if int(keep.sum()) < MIN_BRACKETS:
        keep[np.argsort(rtt, kind="stable")[:MIN_BRACKETS]] = True
    return arr[keep]


def _anchors(arr: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """The tightest exchanges of each burst (at most _ANCHORS_PER_BURST), for the causal bound."""
    label, _gaps = _bursts(arr)
    rtt = arr[:, 2] - arr[:, 0]
    rows: list[tuple[int, int, int]] = []
    for b in np.unique(label):
        idx = np.flatnonzero(label == b)
        for k in idx[np.argsort(rtt[idx], kind="stable")[:_ANCHORS_PER_BURST]]:
            rows.append((int(arr[k, 0]), int(arr[k, 1]), int(arr[k, 2])))
    return tuple(rows)


def _causal_slope_range(arr: np.ndarray) -> tuple[float, float]:
    """Range of slopes (rank ns per root ns) of the lines that pass inside every bracket.

    A line ``t = a + b * x`` is consistent with brackets ``(t1, x, t3)``
    when ``t1_i <= a + b x_i <= t3_i`` for all ``i``; such an ``a`` exists
    for slope ``b`` iff ``t1_i - t3_j <= b (x_i - x_j)`` for every pair,
    which bounds ``b`` from both sides (pairs in row blocks: kept reads are
    a few hundred, but a user may pass many bursts). ``(-inf, inf)`` when
    the reads share one root value.
    """
    x = (arr[:, 1] - arr[0, 1]).astype(np.float64)
    # One ns of slack each side: the clocks' own rounding.
    t1 = (arr[:, 0] - arr[0, 0]).astype(np.float64) - 1.0
    t3 = (arr[:, 2] - arr[0, 0]).astype(np.float64) + 1.0
    b_min, b_max = -math.inf, math.inf
    block = max(1, 4_000_000 // max(1, x.size))
    for s in range(0, x.size, block):
        dx = x[s : s + block, None] - x[None, :]  # x_i - x_j
        num = t1[s : s + block, None] - t3[None, :]  # t1_i - t3_j
        with np.errstate(divide="ignore", invalid="ignore"):
            q = num / dx
        later = dx > 0
        if later.any():
            b_min = max(b_min, float(q[later].max()))
        # Pairs the other way round: t1_j - t3_i <= b (x_j - x_i), x_j > x_i gives b <= ...
        num2 = t3[s : s + block, None] - t1[None, :]  # t3_i - t1_j
        with np.errstate(divide="ignore", invalid="ignore"):
            q2 = num2 / dx
        if later.any():
            b_max = min(b_max, float(q2[later].min()))
    return b_min, b_max


def fit_host_alignment(
    brackets: Optional[npt.ArrayLike],
    *,
    rank: int,
    root: int = 0,
    shares_host_clock: bool = False,
    trust_shared_clock: bool = True,
    fit_skew: Optional[bool] = None,
    prior_skew_ppm: float = DEFAULT_PRIOR_SKEW_PPM,
    wander_ppm_per_s: float = 0.1,
    coverage: float = 3.0,
    max_skew_ppm: float = MAX_SKEW_PPM,
    hostname: str = "",
) -> HostAlignment:
    """Fit a rank's host clock against the root's from bracketed exchanges.

    Parameters
    ----------
    brackets : (n, 3) integer array_like or None
        Rows ``(t1, t2, t3)``: this rank's clock before sending, the root's
        clock when it received, this rank's clock when the reply arrived
        (:func:`exchange_brackets`; one or several bursts concatenated). At
        least 8 rows. ``None`` (or empty) on the root, which gets the identity.
    rank, root : int
        This rank and the root (ranks within the group).
    shares_host_clock : bool
        Whether this rank reads the very same clock as the root
        (:func:`shares_host_clock_with_root`). Pass False for clocks that
        are deliberately different (tests with :class:`SkewedClock`).
    trust_shared_clock : bool
        With a shared clock: use the exact identity, bound 0 (default), and
        keep the fitted map only as a self-check; False uses the fitted map
        and its bound anyway (for users who want every number measured).
    fit_skew : bool or None
        Fit the rate difference (True), fix it at 0 with ``prior_skew_ppm``
        as its bound (False), or decide (None, default): fit it when the
        exchanges determine it more tightly than the prior (bursts far
        enough apart, e.g. before and after a campaign), else fix it.
    prior_skew_ppm : float
        Assumed bound on the rate difference of two hosts' raw clocks when
        it is not fitted (default 100 ppm).
    wander_ppm_per_s, coverage, max_skew_ppm
        As for :func:`fingrav_native.clocks.fit_clock_map`.
    hostname : str
        Recorded with the alignment.

    Returns
    -------
    HostAlignment

    Raises
    ------
    ValueError
        Naming the argument: a negative rank or root, brackets on the root,
        brackets missing on another rank, brackets that
        :func:`~fingrav_native.clocks.fit_clock_map` rejects (shape,
        fewer than 8 rows, ``t3 < t1``, a root clock going backwards), a
        fitted skew beyond ``max_skew_ppm``, or an invalid option.

    Warns
    -----
    RuntimeWarning
        When the clock is shared and trusted but the measured map does not
        contain the identity within its bound (the detection was fooled).

    Notes
    -----
    The paper (Section IV-A) syncs the CPU and GPU clocks from one
    timestamp pair and a separately benchmarked read delay; multi-GPU runs
    (Section V-D, collectives) need every rank's host clock on one timeline
    as well. The root's clock takes the device's place in the bracketed fit:

    1. On the root, or with a trusted shared clock, the alignment is the
       exact identity (the map fitted on any exchanges is kept as a
       self-check, warned about when it disagrees).
    2. Fit ``rank_ns = a + b * root_ns`` with
       :func:`~fingrav_native.clocks.fit_clock_map` (``tick_ns=1``) on
       the tight round trips, within 1.5x the best *of their burst* (bursts
       are more than 50 ms apart: one made on a busier machine keeps its
       reads), robust line through the midpoints, offset centred in the
       causality band. With
       ``fit_skew=None`` both fits are made and the skew kept only when its
       bound is below ``prior_skew_ppm``: one burst spans milliseconds,
       over which tens of ppm are invisible under microseconds of jitter.
    3. The skew's reported bound (``map.skew_bound_ppm``) is the larger of
       the regression's statistical error and the causal one (the slopes of
       every line that passes inside all the brackets): the statistical
       error alone misses how each burst's round trips split, a tilt of up
       to half their round trips over the span.
    4. The bound at rank time ``t`` (:meth:`HostAlignment.error_bound_ns`)
       is *causal*: the true line passes inside every anchor's bracket
       (the 8 tightest exchanges of each burst), which bounds the error
       line at ``t`` through every pair of anchors; about half the best
       round trip at the exchanges (how a round trip splits between the
       two directions is invisible), growing with the slope's freedom away
       from them. Added: the wander beyond the exchanges
       (``0.5 * wander * d**2``) and, inside a gap between bursts, the
       interpolation term ``0.5 * wander * (t - a) * (b - t)``. With one
       burst (skew not fitted), the map's own bound (half the best round
       trip + ``coverage`` robust sigmas of residual + the prior skew times
       the distance) is used where smaller. In tests the measured error
       stays within it, at 5-50% of it.
    """
    rank = integer_in(rank, "rank", 0)
    root = integer_in(root, "root", 0)
    positive_number(prior_skew_ppm, "prior_skew_ppm", allow_zero=True)
    positive_number(wander_ppm_per_s, "wander_ppm_per_s", allow_zero=True)
    positive_number(coverage, "coverage")
    positive_number(max_skew_ppm, "max_skew_ppm")
    if fit_skew is not None and not isinstance(fit_skew, (bool, np.bool_)):
        raise ValueError(f"fit_skew={fit_skew!r}: must be True, False or None (decide from the data)")
    shares_host_clock = flag(shares_host_clock, "shares_host_clock")
    trust_shared_clock = flag(trust_shared_clock, "trust_shared_clock")
    instance_of(hostname, "hostname", str, "the rank's host name, a str")
    empty = brackets is None or np.asarray(brackets).size == 0
    if rank == root:
        if not empty:
            raise ValueError(f"brackets: the root (rank {root}) makes no exchanges with itself; pass None")
        return HostAlignment.identity(rank, root, shares_host_clock=True, hostname=hostname)
    if empty:
        raise ValueError(f"brackets: rank {rank} needs the brackets of its exchanges with root {root}, got none")
    assert brackets is not None
    # Validate (shape, order, causality) on all the brackets, then select per burst.
    fit_clock_map(brackets, tick_ns=1.0, fit_skew=False, max_skew_ppm=max_skew_ppm)
    arr = np.asarray(brackets).astype(np.int64)
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    label, gaps = _bursts(arr)
    arr = _select_per_burst(arr, label)
    # The selection is made; the fitter keeps every read given (a huge factor).
    opts: dict[str, Any] = dict(tick_ns=1.0, coverage=coverage, wander_ppm_per_s=wander_ppm_per_s,
                                min_reads=MIN_BRACKETS, select_factor=1e12)
    measured, skew_fitted = _rank_map(arr, fit_skew, prior_skew_ppm, max_skew_ppm, opts)
    if shares_host_clock and trust_shared_clock:
        return _trusted_identity(rank, root, measured, hostname)
    return HostAlignment(rank=rank, root=root, map=measured, shares_host_clock=bool(shares_host_clock),
                         measured=measured, skew_fitted=skew_fitted, anchors=_anchors(arr),
                         gaps_ns=gaps, hostname=str(hostname))


def _rank_map(arr: np.ndarray, fit_skew: Optional[bool], prior_skew_ppm: float, max_skew_ppm: float,
              opts: dict[str, Any]) -> tuple[ClockMap, bool]:
    """Steps 2-3: the offset-only fit, or the skew's where asked or tighter than the prior; whether it is the skew's."""
    fixed = fit_clock_map(arr, fit_skew=False, prior_skew_ppm=prior_skew_ppm, max_skew_ppm=max_skew_ppm, **opts)
    measured = fixed
    if fit_skew is not False:
        # No sanity bound on the trial: a short burst may fit a wild skew
        # with a wide bound, which the comparison below rejects.
        free = fit_clock_map(arr, fit_skew=True, max_skew_ppm=math.inf, **opts)
        determined = math.isfinite(free.ns_per_tick) and free.ns_per_tick > 0
        if determined:
            # The regression's standard error sees the scatter of the reads,
            # not how each burst's round trips split: between two bursts,
            # that bias tilts the line by up to (rtt_a + rtt_b) / 2 / span.
            # Causality bounds the tilt: widen the skew bound to the slopes
            # of every line that still passes inside all the brackets.
            b_min, b_max = _causal_slope_range(arr)
            causal = max(free.ns_per_tick - b_min, b_max - free.ns_per_tick) * 1e6
            if math.isfinite(causal) and causal > free.skew_bound_ppm:
                free = replace(free, skew_bound_ppm=causal)
        if fit_skew or (determined and free.skew_bound_ppm < prior_skew_ppm):
            # Beyond the sanity bound even after its own uncertainty: a
            # noisy fit (bad round trips, forced fit_skew=True) only widens.
            if not (determined and abs((free.ns_per_tick - 1.0) * 1e6) - free.skew_bound_ppm <= max_skew_ppm):
                raise ValueError(
                    f"brackets: the fitted skew {(free.ns_per_tick - 1.0) * 1e6:.6g} ppm is beyond the "
                    f"+-{max_skew_ppm:g} ppm sanity bound (max_skew_ppm): are both columns host ns of "
                    "clocks that run at the same nominal rate?"
                )
            measured = free
    return measured, measured is not fixed


def _trusted_identity(rank: int, root: int, measured: ClockMap, hostname: str) -> HostAlignment:
    """Step 1 on a trusted shared clock: the identity, the measured map kept as a self-check (warned if it disagrees)."""
    out = HostAlignment.identity(rank, root, shares_host_clock=True, measured=measured, hostname=hostname)
    if out.shared_clock_consistent is False:
        hc = measured.host_center_ns
        # stacklevel 3: the warning names the caller of fit_host_alignment, not this helper.
        warnings.warn(
            f"rank {rank}: the host clock is detected as shared with root {root}, but the exchanges "
            f"measured an offset of {hc - measured.to_device(hc):.0f} ns beyond their bound "
            f"{measured.error_bound_at(hc):.0f} ns; the identity is used as asked "
            "(pass trust_shared_clock=False to use the measured map)",
            RuntimeWarning,
            stacklevel=3,
        )
    return out
