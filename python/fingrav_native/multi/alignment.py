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
(:func:`fingrav_native.clocks.maps.fit_clock_map`), where the root's clock
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
>>> from fingrav_native.multi.alignment import fit_host_alignment
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
import socket
import sys
import time
import warnings
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Optional, Protocol, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

from fingrav_native import _core
from fingrav_native._checks import integer_in, positive_number, relative_to
from fingrav_native.clocks.maps import MAX_SKEW_PPM, MIN_BRACKETS, ClockMap, fit_clock_map
from fingrav_native.method.agreement import Agreement

__all__ = [
    "DEFAULT_EXCHANGES",
    "DEFAULT_PRIOR_SKEW_PPM",
    "DEFAULT_WARMUP",
    "HostAlignment",
    "HostClock",
    "HostIdentity",
    "MonotonicRawClock",
    "SkewedClock",
    "TorchAgreement",
    "align_ranks",
    "exchange_brackets",
    "fit_host_alignment",
    "gather_to_root",
    "host_identity",
    "shares_host_clock_with_root",
]

#: Timed exchanges per non-root rank: enough tight round trips to reach the
#: asymmetry floor on a loaded machine; each costs one round trip (tens of us).
DEFAULT_EXCHANGES = 64
#: Untimed exchanges first: the first messages pay for connection set-up,
#: page faults and cold caches, and a rank may wait while the root serves others.
DEFAULT_WARMUP = 8
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
_MAX_EXCHANGES = 10_000_000
_FORMAT = "fingrav-host-alignment"
_FORMAT_VERSION = 1
_INSTALL_HINT = "pip install torch (or pip install 'fingrav-native[distributed]')"


# --------------------------------------------------------------------------- host clocks


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
        if isinstance(offset_ns, bool) or not isinstance(offset_ns, (int, np.integer)):
            raise ValueError(f"offset_ns={offset_ns!r}: must be an integer number of ns")
        if not (isinstance(skew_ppm, (int, float, np.integer, np.floating)) and math.isfinite(skew_ppm)
                and abs(skew_ppm) <= 1e5):
            raise ValueError(f"skew_ppm={skew_ppm!r}: must be a finite number within +-1e5 ppm")
        self.offset_ns = int(offset_ns)
        self.skew_ppm = float(skew_ppm)
        self.base: HostClock = _check_clock(base, "base")
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


def _check_clock(clock: Any, name: str = "clock") -> HostClock:
    if clock is None:
        return MonotonicRawClock()
    if not callable(getattr(clock, "now_ns", None)):
        raise ValueError(f"{name}={clock!r}: must have a now_ns() method returning integer ns (a HostClock)")
    return clock  # type: ignore[no-any-return]


def _is_system_clock(clock: Any) -> bool:
    """Whether ``clock`` reads CLOCK_MONOTONIC_RAW unchanged (only then can sharing be assumed)."""
    return clock is None or type(clock) is MonotonicRawClock


# --------------------------------------------------------------------------- the alignment


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
        As for :func:`fingrav_native.clocks.maps.fit_clock_map`.
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
        :func:`~fingrav_native.clocks.maps.fit_clock_map` rejects (shape,
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
       :func:`~fingrav_native.clocks.maps.fit_clock_map` (``tick_ns=1``) on
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
    if fit_skew not in (None, True, False):
        raise ValueError(f"fit_skew={fit_skew!r}: must be True, False or None (decide from the data)")
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
    if shares_host_clock and trust_shared_clock:
        out = HostAlignment.identity(rank, root, shares_host_clock=True, measured=measured, hostname=hostname)
        if out.shared_clock_consistent is False:
            hc = measured.host_center_ns
            warnings.warn(
                f"rank {rank}: the host clock is detected as shared with root {root}, but the exchanges "
                f"measured an offset of {hc - measured.to_device(hc):.0f} ns beyond their bound "
                f"{measured.error_bound_at(hc):.0f} ns; the identity is used as asked "
                "(pass trust_shared_clock=False to use the measured map)",
                RuntimeWarning,
                stacklevel=2,
            )
        return out
    return HostAlignment(rank=rank, root=root, map=measured, shares_host_clock=bool(shares_host_clock),
                         measured=measured, skew_fitted=measured is not fixed, anchors=_anchors(arr),
                         gaps_ns=gaps, hostname=str(hostname))


# --------------------------------------------------------------------------- host identity


@dataclass(frozen=True)
class HostIdentity:
    """What decides whether two processes read the same CLOCK_MONOTONIC_RAW.

    Attributes
    ----------
    hostname : str
        ``socket.gethostname()``.
    boot_id : str
        ``/proc/sys/kernel/random/boot_id``: random per boot, and the raw
        clock counts from boot; empty where unavailable (then nothing is
        assumed shared).
    timens_offsets : str
        ``/proc/self/timens_offsets``: a Linux time namespace shifts the
        monotonic clocks (raw included) of the processes inside it; empty
        where the kernel has no time namespaces (no shift possible).
    """

    hostname: str
    boot_id: str
    timens_offsets: str

    def same_clock_as(self, other: HostIdentity) -> bool:
        """Whether a process with this identity reads the same raw clock as ``other``."""
        return bool(self.boot_id) and self == other


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return " ".join(f.read().split())
    except OSError:
        return ""


def host_identity() -> HostIdentity:
    """This process's :class:`HostIdentity` (host name, boot id, time-namespace offsets)."""
    return HostIdentity(
        hostname=socket.gethostname(),
        boot_id=_read_text("/proc/sys/kernel/random/boot_id"),
        timens_offsets=_read_text("/proc/self/timens_offsets"),
    )


# --------------------------------------------------------------------------- torch.distributed


def _torch_distributed() -> Any:
    """``torch.distributed``, initialised, or an error saying what to do."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError(f"fingrav_native.multi.alignment needs PyTorch for process groups: {_INSTALL_HINT}") from exc
    if not dist.is_available():
        raise ImportError(f"this PyTorch build has no torch.distributed; install one that has: {_INSTALL_HINT}")
    if not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialised: call torch.distributed.init_process_group first")
    return dist


# (id of the default group, global ranks) -> (default group, gloo group). The
# default group is held so its id cannot be reused by a later re-initialised one.
_GLOO_GROUPS: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}


def _sends_cpu_tensors(backend: str) -> bool:
    b = str(backend).lower()
    if b in ("gloo", "mpi"):
        return True
    # "cpu:gloo,cuda:nccl": CPU tensors go to the gloo part.
    parts = dict(p.split(":", 1) for p in b.split(",") if ":" in p)
    return parts.get("cpu") in ("gloo", "mpi")


def _exchange_group(dist: Any, group: Any) -> Any:
    """A group over the same ranks whose backend sends CPU tensors (gloo, created once and cached).

    NCCL moves only CUDA tensors, and a round trip through GPU memory would
    put a device copy and a stream synchronisation inside every bracket:
    the host clocks are exchanged as CPU tensors, over gloo.
    """
    pg = dist.group.WORLD if group is None else group
    if pg is None or pg == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"group={group!r}: this process is not a member of the group")
    if _sends_cpu_tensors(dist.get_backend(pg)):
        return pg
    ranks = tuple(dist.get_process_group_ranks(pg))
    world = dist.group.WORLD
    key = (id(world), ranks)
    if key not in _GLOO_GROUPS:
        # A subgroup's non-members never call in here, so only the members
        # synchronise the creation; the whole world calls for the world group.
        local = len(ranks) != dist.get_world_size()
        gloo = dist.new_group(ranks=list(ranks), backend="gloo", use_local_synchronization=local)
        _GLOO_GROUPS[key] = (world, gloo)
    return _GLOO_GROUPS[key][1]


def exchange_brackets(
    group: Any = None,
    clock: Optional[HostClock] = None,
    *,
    n: int = DEFAULT_EXCHANGES,
    root: int = 0,
    warmup: int = DEFAULT_WARMUP,
) -> Optional[np.ndarray]:
    """Bracketed ping-pong exchanges between every rank and the root (a collective call).

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        The group (default: the default group). Its backend must send CPU
        tensors (gloo); otherwise (NCCL) a gloo group over the same ranks is
        created once and cached: every rank of ``group`` must then make the
        first call together.
    clock : HostClock, optional
        This rank's host clock (default :class:`MonotonicRawClock`).
    n : int
        Timed exchanges per non-root rank (>= 8; default 64). The root
        serves whatever count each rank announces.
    root : int
        The rank whose clock is the reference (same on every rank).
    warmup : int
        Untimed exchanges before the timed ones (>= 0; default 8).

    Returns
    -------
    (n, 3) int64 ndarray or None
        On a non-root rank, rows ``(t1, t2, t3)``: this rank's clock before
        sending, the root's clock when it received, this rank's clock when
        the reply arrived. On the root, ``None``: it measured nothing
        itself, and ``None`` (not an empty array that would pass silently
        through a concatenation) makes the caller handle the root's
        alignment, the identity, explicitly.

    Raises
    ------
    ValueError
        Naming the argument: ``n < 8``, ``warmup < 0``, a root outside the
        group, a clock without ``now_ns``, a process outside the group.
    ImportError
        PyTorch (or its distributed package) is missing.
    RuntimeError
        The process group is not initialised.

    Notes
    -----
    The bracketed read of Section IV-A, with the root's clock as the
    "device": the paper reads the GPU timestamp from the CPU and benchmarks
    the read delay; here both delays are inside every bracket, and the
    smallest round trips bound the error (:func:`fit_host_alignment`).

    1. Non-root ranks take turns (ascending rank), so the root serves one
       rank at a time and no rank's round trips include another's.
    2. The rank announces its exchange count and waits for the root's
       acknowledgement (the root is now serving it), then makes ``warmup``
       exchanges and discards them (connection set-up, cold caches).
    3. Each timed exchange: read the clock (t1), send a one-element int64
       CPU tensor, the root reads its clock on receipt (t2) and sends it
       back, read the clock on arrival (t3). The tensors and the output
       array are allocated before the loop and written through numpy views,
       and both sides send with ``isend`` and wait for the send's
       completion outside the bracket, so the bracket holds the two
       messages, two clock reads and little else.
    """
    n = integer_in(n, "n", MIN_BRACKETS, _MAX_EXCHANGES)
    warmup = integer_in(warmup, "warmup", 0, _MAX_EXCHANGES)
    root = integer_in(root, "root", 0)
    clk = _check_clock(clock)
    dist = _torch_distributed()
    import torch

    g = _exchange_group(dist, group)
    size = dist.get_world_size(g)
    me = dist.get_rank(g)
    if root >= size:
        raise ValueError(f"root={root}: the group has ranks 0..{size - 1}")
    now = clk.now_ns
    send, isend, recv = dist.send, dist.isend, dist.recv
    ping = torch.zeros(1, dtype=torch.int64)
    pong = torch.zeros(1, dtype=torch.int64)
    ping_np, pong_np = ping.numpy(), pong.numpy()

    if me == root:
        for peer in range(size):
            if peer == root:
                continue
            peer_global = dist.get_global_rank(g, peer)
            recv(ping, peer_global, g)
            count = int(ping_np[0])
            if not (0 < count <= 2 * _MAX_EXCHANGES):  # warmup + n
                raise RuntimeError(f"rank {peer} announced {count} exchanges: mismatched calls?")
            send(pong, peer_global, g)
            work = None
            for _ in range(count):
                recv(ping, peer_global, g)
                t2 = now()
                # The previous reply has arrived (the rank sent this ping
                # after it), so its buffer is free; waiting is instant.
                if work is not None:
                    work.wait()
                pong_np[0] = t2
                work = isend(pong, peer_global, g)
            if work is not None:
                work.wait()
        return None

    root_global = dist.get_global_rank(g, root)
    total = warmup + n
    ping_np[0] = total
    send(ping, root_global, g)
    recv(pong, root_global, g)  # the root is serving this rank now
    out = np.empty((total, 3), dtype=np.int64)
    for i in range(total):
        t1 = now()
        # isend, and wait for its completion only after t3: a blocking send
        # returns when gloo's I/O thread signals that the bytes are written,
        # and on a busy machine that wake-up waits for a scheduler tick (4 ms
        # measured on 2 loaded cores), all inside the bracket.
        work = isend(ping, root_global, g)
        recv(pong, root_global, g)
        t3 = now()
        work.wait()
        out[i, 0] = t1
        out[i, 1] = pong_np[0]
        out[i, 2] = t3
    return out[warmup:].copy()


def shares_host_clock_with_root(group: Any = None, *, root: int = 0, clock: Optional[HostClock] = None) -> bool:
    """Whether this rank reads the very same host clock as the root (a collective call).

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        As for :func:`exchange_brackets`.
    root : int
        The reference rank.
    clock : HostClock, optional
        The clock this rank aligns. Anything but the default
        :class:`MonotonicRawClock` (e.g. a :class:`SkewedClock`) is never
        assumed shared, whatever the host.

    Returns
    -------
    bool
        True when both this rank and the root use the real clock and their
        :class:`HostIdentity` (host name, boot id, time-namespace offsets)
        agree; always True on the root itself.

    Notes
    -----
    Section V-D profiles collectives across GPUs; ranks on one node need no
    alignment at all (CLOCK_MONOTONIC_RAW is one counter per boot of a
    kernel). The check is conservative: two containers of one host have
    different host names and are treated as separate (their clocks are then
    measured, at a cost of a bound of tens of microseconds, not a wrong answer).
    """
    root = integer_in(root, "root", 0)
    if clock is not None:
        _check_clock(clock)
    dist = _torch_distributed()
    g = _exchange_group(dist, group)
    size = dist.get_world_size(g)
    if root >= size:
        raise ValueError(f"root={root}: the group has ranks 0..{size - 1}")
    mine = (host_identity(), _is_system_clock(clock))
    everyone: list[Any] = [None] * size
    dist.all_gather_object(everyone, mine, group=g)
    me = dist.get_rank(g)
    if me == root:
        return True
    root_id, root_real = everyone[root]
    return bool(mine[1] and root_real and mine[0].same_clock_as(root_id))


def align_ranks(
    group: Any = None,
    clock: Optional[HostClock] = None,
    *,
    n: int = DEFAULT_EXCHANGES,
    root: int = 0,
    warmup: int = DEFAULT_WARMUP,
    repeat_after: Union[None, float, Callable[[], Any]] = None,
    earlier_brackets: Optional[npt.ArrayLike] = None,
    trust_shared_clock: bool = True,
    fit_skew: Optional[bool] = None,
    prior_skew_ppm: float = DEFAULT_PRIOR_SKEW_PPM,
    wander_ppm_per_s: float = 0.1,
) -> HostAlignment:
    """Measure and fit this rank's host clock against the root's (a collective call on every rank).

    Parameters
    ----------
    group, clock, n, root, warmup
        As for :func:`exchange_brackets`.
    repeat_after : None, float or callable
        Exchange a second time, after the callable (e.g. the campaign
        itself, run on every rank) returns or after sleeping this many
        seconds, and fit both bursts together: the skew then comes from the
        span between them and the bound covers the whole campaign.
    earlier_brackets : (m, 3) integer array_like, optional
        This rank's brackets from an earlier :func:`exchange_brackets` call
        (e.g. before a campaign whose code cannot be one callable), fitted
        together with the new ones. ``None`` on the root.
    trust_shared_clock : bool
        When this rank shares the root's clock, use the exact identity with
        bound 0 (default; the measured map stays as a self-check), or the
        measured map and its bound (False).
    fit_skew, prior_skew_ppm, wander_ppm_per_s
        As for :func:`fit_host_alignment`.

    Returns
    -------
    HostAlignment
        This rank's; the identity on the root. Bring them to the root with
        :func:`gather_to_root` (``gather_to_root(al.as_dict())``).

    Raises
    ------
    ValueError, ImportError, RuntimeError
        As :func:`exchange_brackets` and :func:`fit_host_alignment`; a
        negative or non-finite ``repeat_after``.

    Notes
    -----
    Section IV-A's sync, applied between hosts for the multi-GPU runs of
    Section V-D:

    1. :func:`shares_host_clock_with_root` (the measurement is made anyway:
       a shared clock's map must come out as the identity, a self-check).
    2. :func:`exchange_brackets`; with ``repeat_after``, again after it.
    3. :func:`fit_host_alignment` on all the brackets (``earlier_brackets``
       included). Error bound semantics: half the best round trip (the
       invisible split of the round trip; causal, from the tightest
       exchanges) + fit residual (one burst) + the skew's uncertainty times
       the distance from the exchanges (one burst: the assumed prior, e.g.
       100 ppm is 100 us per second; two bursts: the causal slope range) +
       skew wander beyond and between the bursts. Exchanging before *and* after a campaign keeps every event
       inside the fitted span, where the bound is smallest.
    """
    n = integer_in(n, "n", MIN_BRACKETS, _MAX_EXCHANGES)
    warmup = integer_in(warmup, "warmup", 0, _MAX_EXCHANGES)
    root = integer_in(root, "root", 0)
    if repeat_after is not None and not callable(repeat_after):
        positive_number(repeat_after, "repeat_after", allow_zero=True)
    earlier = None
    if earlier_brackets is not None:
        earlier = np.asarray(earlier_brackets)
        if earlier.ndim != 2 or earlier.shape[1] != 3:
            raise ValueError(f"earlier_brackets: expected shape (m, 3); got {earlier.shape}")
    clk = _check_clock(clock)
    shared = shares_host_clock_with_root(group, root=root, clock=clock)
    brackets = exchange_brackets(group, clk, n=n, root=root, warmup=warmup)
    if repeat_after is not None:
        if callable(repeat_after):
            repeat_after()
        else:
            time.sleep(float(repeat_after))
        later = exchange_brackets(group, clk, n=n, root=root, warmup=warmup)
        if brackets is not None and later is not None:
            brackets = np.concatenate([brackets, later])
    if earlier is not None and earlier.size and brackets is not None:
        brackets = np.concatenate([earlier.astype(np.int64), brackets])
    elif earlier is not None and earlier.size and brackets is None:
        raise ValueError("earlier_brackets: the root makes no exchanges; pass None on the root")
    dist = sys.modules["torch.distributed"]
    me = dist.get_rank(_exchange_group(dist, group))
    return fit_host_alignment(
        brackets,
        rank=me,
        root=root,
        shares_host_clock=shared,
        trust_shared_clock=trust_shared_clock,
        fit_skew=fit_skew,
        prior_skew_ppm=prior_skew_ppm,
        wander_ppm_per_s=wander_ppm_per_s,
        hostname=socket.gethostname(),
    )


def gather_to_root(obj: Any, group: Any = None, root: int = 0) -> Optional[list[Any]]:
    """Every rank's ``obj`` on the root, in rank order (a collective call).

    Parameters
    ----------
    obj : picklable
        This rank's contribution (e.g. ``HostAlignment.as_dict()`` and its
        event log). Pickle is only the transport between processes of one
        job; files are written by :mod:`fingrav_native.files.profiles`, never pickled.
    group : torch.distributed.ProcessGroup, optional
        As for :func:`exchange_brackets` (a gloo group is used under NCCL,
        whose object collectives would stage through GPU memory).
    root : int
        The rank that receives.

    Returns
    -------
    list or None
        On the root, one entry per rank of the group (the root's own
        included); ``None`` elsewhere.

    Notes
    -----
    Section V-D: rank 0 merges every rank's logs into one multi-GPU profile.
    """
    root = integer_in(root, "root", 0)
    dist = _torch_distributed()
    g = _exchange_group(dist, group)
    size = dist.get_world_size(g)
    if root >= size:
        raise ValueError(f"root={root}: the group has ranks 0..{size - 1}")
    me = dist.get_rank(g)
    out: Optional[list[Any]] = [None] * size if me == root else None
    dist.gather_object(obj, out, dst=dist.get_global_rank(g, root), group=g)
    return out


class TorchAgreement(Agreement):
    """Decisions agreed over a ``torch.distributed`` process group (all-reduce on CPU tensors).

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        Default: the world. Under NCCL a gloo group over the same ranks is
        used (host numbers; see :mod:`fingrav_native.multi.alignment`).
    """

    def __init__(self, group: Any = None) -> None:
        self._dist = _torch_distributed()
        self._group = _exchange_group(self._dist, group)
        self.size = int(self._dist.get_world_size(self._group))

    def _reduce(self, value: float, op: str) -> float:
        import torch

        t = torch.tensor([value], dtype=torch.float64)
        red = self._dist.ReduceOp.MAX if op == "max" else self._dist.ReduceOp.SUM
        self._dist.all_reduce(t, op=red, group=self._group)
        return float(t.item())
