"""Clock maps: device and logger timestamps onto host time, with error bounds.

The FinGraV paper (Singhania et al., ISPASS 2025, Section IV-A
"High-resolution CPU-GPU sync") reads a GPU timestamp from the CPU,
benchmarks the read delay separately, and uses one synced pair (T0, Tc) to
place power logs on the kernels' host timeline. It names clock drift as
future work. The maps here go beyond it in three ways:

* **drift**: every map fits a skew as well as an offset, and long campaigns
  are refitted piecewise as the skew wanders
  (:func:`~fingrav_native.clocks.fit_piecewise_clock_map`);
* **error bounds**: every map reports how far its answer can be from the
  truth, at any host time, including extrapolation beyond its reads;
* **one-sided clocks**: a power logger's own firmware clock, seen only
  through the host time at which each log was read, is fitted from the lower
  envelope of those observations
  (:func:`~fingrav_native.clocks.fit_one_sided_clock_map`).

This module holds the map types (:class:`ClockMap`, :class:`PiecewiseClockMap`,
the :class:`ClockMapLike` protocol) and the exact host-time helpers; each fit
lives in a module of its own beside it (two-sided, piecewise, one-sided), as
does the read-latency summary.

Every fit is a pure function of plain integer arrays, so it works on
the simulator's virtual reads, on ``fingrav_native.measure_brackets`` and
``ClockSyncRecorder`` output, and on triples a user brings from elsewhere.
A *bracket* is one read of a device clock between two host-clock reads:
a row ``(host_before_ns, device_ticks, host_after_ns)`` of an ``(n, 3)``
integer array.

Conventions
-----------
* Host time is nanoseconds (``CLOCK_MONOTONIC_RAW`` on the live path).
* A device counter reading ``N`` means the counter had counted ``N`` ticks:
  the instant lies in ``[host(N), host(N + resolution))``. ``to_host(N)``
  returns ``host(N)``, the start of that interval, which is also what the
  simulator's ground truth ``SimGPU.host_at_device_ticks`` returns.
* Float arithmetic is always done relative to an integer reference read
  (the large int64 values are subtracted first, exactly), so host times of
  1e18 ns never enter a fit.

Examples
--------
>>> import numpy as np
>>> from fingrav_native import clocks
>>> rng = np.random.default_rng(0)
>>> host = 10**15 + np.arange(200) * 5_000_000            # a read every 5 ms
>>> ticks = 4_000_000_000_000 + ((host - 10**15) * 1.000002 / 10).astype(np.int64)
>>> brackets = np.stack([host - 1000, ticks, host + 1000], axis=1)
>>> m = clocks.fit_clock_map(brackets, tick_ns=10.0)
>>> round(m.skew_ppm, 1)
2.0
>>> bool(abs(m.to_host(ticks[100]) - host[100]) < 20)
True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import FLOAT_EXACT_NS, float_ns_to_int, instance_of, integer_in, numbers, relative_to
from fingrav_native._checks import clock_map as check_map

#: Fewest brackets a map is fitted from: a robust line needs a handful of
#: points beyond the two that define it.
MIN_BRACKETS = 8


#: Fewest one-sided observations (logs) a map is fitted from.
MIN_ONE_SIDED = 16


#: Default sanity bound on a fitted skew. Crystals are off by tens of ppm; a
#: fit beyond 1000 ppm means a wrong nominal tick or a broken source.
MAX_SKEW_PPM = 1000.0


ArrayLike = Union[npt.ArrayLike, int, float]


@runtime_checkable
class ClockMapLike(Protocol):
    """What every analysis needs of a clock map: a device's (or logger's) ticks onto host ns, and the error there.

    :class:`ClockMap`, :class:`PiecewiseClockMap`, the epoch map of a capture
    and a user's own map all qualify. A map may also offer
    ``to_host_relative(ticks, origin_ns)`` or ``to_host_ns(ticks)`` to keep
    epoch-scale times exact (:func:`host_relative` uses them when present).
    """

    def to_host(self, device_ticks: Any) -> Any:
        """Host-clock ns (float) of the given ticks."""

    def error_bound_at(self, host_ns: Any) -> Any:
        """The map's error bound (ns) at the given host times."""



def _int_ns(rel: Any) -> np.ndarray:
    """Host ns relative to an anchor, rounded to int64; refused where they are not finite or beyond int64."""
    r = np.rint(np.asarray(rel, dtype=np.float64))
    if r.size and not (np.all(np.isfinite(r)) and np.abs(r).max() < 2.0**62):
        raise ValueError("device_ticks: map to host times that are not finite or beyond int64 (ticks far outside "
                         "what the map was fitted on)")
    return r.astype(np.int64)

@dataclass(frozen=True)
class ClockMap:
    """A linear map ``host = host_ref + offset_ns + ns_per_tick * (ticks - device_ref)``.

    Made by :func:`~fingrav_native.clocks.fit_clock_map` (bracketed reads) or
    :func:`~fingrav_native.clocks.fit_one_sided_clock_map` (logs seen by a poller); frozen, plain
    values only, so it can be saved with a profile (:meth:`as_dict`).

    Attributes
    ----------
    method : str
        ``"bracketed"`` or ``"one-sided"``.
    device_ref : int
        Device ticks of the reference read (exact integer).
    host_ref : int
        Host ns of the reference read (exact integer).
    offset_ns : float
        Host time of ``device_ref``, relative to ``host_ref``, ns.
    ns_per_tick : float
        Fitted tick length in host ns (offset and *skew*).
    tick_ns : float
        Nominal tick length the caller gave, ns.
    host_begin_ns, host_end_ns : int
        Host-time span of the observations the map was fitted on.
    host_center_ns : int
        Where the offset is best determined (the centroid of the reads
        used); skew uncertainty grows the bound away from it.
    n_used, n_total : int
        Observations the fit kept (tight and not trimmed), and given.
    best_rtt_ns : float
        Smallest round trip among the reads (NaN for one-sided maps).
    asymmetry_ns : float
        Bound term from causality: each device read happened inside its
        bracket, so the true line lies within a band around the fitted one;
        this is the largest distance to the band's edges. About half the best
        round trip: the asymmetric-delay floor no calibration can remove.
        Zero for one-sided maps (whose unseen bias is documented instead).
    residual_ns : float
        Bound term from the fit: ``coverage`` x the robust sigma of the
        residuals (bracketed), or the largest local gap between the lower
        envelope and the lowest log of any chunk (one-sided).
    skew_bound_ppm : float
        Bound on the error of the fitted skew (``coverage`` x its standard
        error), or the assumed ``prior_skew_ppm`` when no skew was fitted.
    wander_ppm_per_s : float
        Assumed rate at which the skew can change outside the fitted span.
    coverage : float
        The coverage factor used (sigmas).
    """

    method: str
    device_ref: int
    host_ref: int
    offset_ns: float
    ns_per_tick: float
    tick_ns: float
    host_begin_ns: int
    host_end_ns: int
    host_center_ns: int
    n_used: int
    n_total: int
    best_rtt_ns: float
    asymmetry_ns: float
    residual_ns: float
    skew_bound_ppm: float
    wander_ppm_per_s: float
    coverage: float

    # ------------------------------------------------------------------ summary
    @property
    def skew_ppm(self) -> float:
        """Fitted rate error of the device clock, ppm: positive = device ticks run fast."""
        return (self.tick_ns / self.ns_per_tick - 1.0) * 1e6

    @property
    def floor_ns(self) -> float:
        """Half the best round trip: the error no bracketed calibration can rule out."""
        return 0.5 * self.best_rtt_ns

    @property
    def span_ns(self) -> int:
        """Length of the fitted host-time span, ns."""
        return self.host_end_ns - self.host_begin_ns

    def as_dict(self) -> dict[str, Any]:
        """Plain values (for JSON files and profile metadata), derived ones included."""
        d = asdict(self)
        d["skew_ppm"] = self.skew_ppm
        d["floor_ns"] = self.floor_ns
        return d

    # ------------------------------------------------------------------ maps
    def to_host(self, device_ticks: ArrayLike) -> Any:
        """Host time (float ns) at which the device clock read ``device_ticks``.

        Integer input (int64, uint64 or Python ints) is offset from the
        reference exactly before any float math. Returns a float for scalar
        input, else a float64 array of the same shape. Absolute host times
        above 2**53 ns (104 days) lose sub-ns precision as floats; use
        :meth:`to_host_ns` to stay exact.
        """
        x, scalar = relative_to(device_ticks, self.device_ref, "device_ticks")
        rel = self.offset_ns + self.ns_per_tick * x
        out = rel + float(self.host_ref)
        return float(out) if scalar else out

    def to_host_ns(self, device_ticks: ArrayLike) -> Any:
        """Like :meth:`to_host`, rounded to integer ns exactly (int64)."""
        x, scalar = relative_to(device_ticks, self.device_ref, "device_ticks")
        rel = _int_ns(self.offset_ns + self.ns_per_tick * x)
        out = rel + np.int64(self.host_ref)
        return int(out) if scalar else out

    def to_device(self, host_ns: ArrayLike) -> Any:
        """Device ticks (float) the clock read at host time ``host_ns``."""
        h, scalar = relative_to(host_ns, self.host_ref, "host_ns")
        rel = (h - self.offset_ns) / self.ns_per_tick
        out = rel + float(self.device_ref)
        return float(out) if scalar else out

    def error_bound_at(self, host_ns: ArrayLike) -> Any:
        """Bound on ``|to_host - truth|`` at host time ``host_ns``, ns.

        ``asymmetry_ns + residual_ns`` everywhere, plus the skew error times
        the distance from ``host_center_ns``, plus ``0.5 * wander * d**2``
        where ``d`` is the distance outside the fitted span (the skew may
        have moved since the last read).
        """
        h, scalar = relative_to(host_ns, self.host_center_ns, "host_ns")
        out = _bound(
            h,
            float(self.host_begin_ns - self.host_center_ns),
            float(self.host_end_ns - self.host_center_ns),
            self.asymmetry_ns + self.residual_ns,
            self.skew_bound_ppm,
            self.wander_ppm_per_s,
        )
        return float(out) if scalar else out


@dataclass(frozen=True)
class PiecewiseClockMap:
    """Overlapping local :class:`ClockMap` fits blended into one continuous map.

    Piece ``j`` is fitted on the reads within one knot spacing of knot ``j``;
    between knots ``j`` and ``j + 1`` the answer is the linear blend of pieces
    ``j`` and ``j + 1`` (weights falling linearly from knot to knot), so the
    map is continuous, follows a wandering skew, and is exactly piece ``j`` at
    knot ``j``. Before the first knot and after the last, the end pieces
    extrapolate alone (their bound grows with the distance).

    Attributes
    ----------
    pieces : tuple of ClockMap
        The local fits, in knot order.
    knots_host_ns : tuple of int
        Host time of each piece's knot.
    knots_device : tuple of float
        Device ticks of each knot, relative to ``pieces[0].device_ref``
        (``pieces[j].to_device(knots_host_ns[j])`` minus that reference).
    segment_ns : float
        The knot spacing actually used (at most the requested one).
    skipped_knots : int
        Knots dropped because their window held too few reads (a gap in the
        recording); the neighbouring pieces cover them.
    """

    pieces: tuple[ClockMap, ...]
    knots_host_ns: tuple[int, ...]
    knots_device: tuple[float, ...]
    segment_ns: float
    skipped_knots: int

    @property
    def host_begin_ns(self) -> int:
        """Start of the host span the pieces were fitted on."""
        return min(p.host_begin_ns for p in self.pieces)

    @property
    def host_end_ns(self) -> int:
        """End of the host span the pieces were fitted on."""
        return max(p.host_end_ns for p in self.pieces)

    @property
    def skew_ppm(self) -> np.ndarray:
        """Each piece's fitted skew, ppm (how the skew wandered)."""
        return np.array([p.skew_ppm for p in self.pieces])

    @property
    def best_rtt_ns(self) -> float:
        """Smallest round trip over all pieces."""
        return min(p.best_rtt_ns for p in self.pieces)

    @property
    def floor_ns(self) -> float:
        """Half the best round trip: the error no bracketed calibration can rule out."""
        return 0.5 * self.best_rtt_ns

    def as_dict(self) -> dict[str, Any]:
        """Plain values (for JSON files and profile metadata)."""
        return {
            "pieces": [p.as_dict() for p in self.pieces],
            "knots_host_ns": list(self.knots_host_ns),
            "knots_device": list(self.knots_device),
            "segment_ns": self.segment_ns,
            "skipped_knots": self.skipped_knots,
        }

    # ------------------------------------------------------------------ helpers
    def _params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per piece: host of device_ref relative to piece 0's host_ref, tick length, device_ref rel."""
        p0 = self.pieces[0]
        base = np.array([(p.host_ref - p0.host_ref) + p.offset_ns for p in self.pieces], dtype=np.float64)
        slope = np.array([p.ns_per_tick for p in self.pieces], dtype=np.float64)
        dref = np.array([float(p.device_ref - p0.device_ref) for p in self.pieces], dtype=np.float64)
        return base, slope, dref

    def _blend(self, x: np.ndarray, knots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Left piece index and its weight for positions ``x`` among ``knots``."""
        m = len(knots)
        j = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, max(m - 2, 0))
        if m == 1:
            return j, np.ones_like(x)
        w = np.clip((knots[j + 1] - x) / (knots[j + 1] - knots[j]), 0.0, 1.0)
        return j, w

    def _to_host_rel(self, x: np.ndarray) -> np.ndarray:
        """Host ns relative to pieces[0].host_ref at device ticks relative to pieces[0].device_ref."""
        base, slope, dref = self._params()
        j, w = self._blend(x, np.asarray(self.knots_device, dtype=np.float64))
        k = np.minimum(j + 1, len(self.pieces) - 1)
        left = base[j] + slope[j] * (x - dref[j])
        right = base[k] + slope[k] * (x - dref[k])
        return np.asarray(w * left + (1.0 - w) * right, dtype=np.float64)

    # ------------------------------------------------------------------ maps
    def to_host(self, device_ticks: ArrayLike) -> Any:
        """Host time (float ns) at which the device clock read ``device_ticks``.

        Same contract as :meth:`ClockMap.to_host`.
        """
        p0 = self.pieces[0]
        x, scalar = relative_to(device_ticks, p0.device_ref, "device_ticks")
        out = self._to_host_rel(x) + float(p0.host_ref)
        return float(out) if scalar else out

    def to_host_ns(self, device_ticks: ArrayLike) -> Any:
        """Like :meth:`to_host`, rounded to integer ns exactly (int64)."""
        p0 = self.pieces[0]
        x, scalar = relative_to(device_ticks, p0.device_ref, "device_ticks")
        out = _int_ns(self._to_host_rel(x)) + np.int64(p0.host_ref)
        return int(out) if scalar else out

    def to_device(self, host_ns: ArrayLike) -> Any:
        """Device ticks (float) at host time ``host_ns``: the inverse of :meth:`to_host`.

        Starts from the blend of the pieces' inverses and refines with Newton
        steps on the (monotonic) forward map.
        """
        p0 = self.pieces[0]
        h, scalar = relative_to(host_ns, p0.host_ref, "host_ns")
        base, slope, dref = self._params()
        knots_h = np.array([float(k - p0.host_ref) for k in self.knots_host_ns])
        j, w = self._blend(h, knots_h)
        k = np.minimum(j + 1, len(self.pieces) - 1)
        x = w * (dref[j] + (h - base[j]) / slope[j]) + (1.0 - w) * (dref[k] + (h - base[k]) / slope[k])
        for _ in range(3):
            j2, _w = self._blend(x, np.asarray(self.knots_device, dtype=np.float64))
            x = x - (self._to_host_rel(x) - h) / slope[j2]
        out = x + float(p0.device_ref)
        return float(out) if scalar else out

    def error_bound_at(self, host_ns: ArrayLike) -> Any:
        """Bound on ``|to_host - truth|`` at host time ``host_ns``, ns.

        The blend of the two neighbouring pieces' bounds with the blend's
        weights (the error of a convex blend is at most the blend of errors).
        """
        p0 = self.pieces[0]
        h, scalar = relative_to(host_ns, p0.host_ref, "host_ns")
        knots_h = np.array([float(k - p0.host_ref) for k in self.knots_host_ns])
        j, w = self._blend(h, knots_h)
        k = np.minimum(j + 1, len(self.pieces) - 1)
        center = np.array([float(p.host_center_ns - p0.host_ref) for p in self.pieces])
        begin = np.array([float(p.host_begin_ns - p0.host_ref) for p in self.pieces])
        end = np.array([float(p.host_end_ns - p0.host_ref) for p in self.pieces])
        base = np.array([p.asymmetry_ns + p.residual_ns for p in self.pieces])
        skew = np.array([p.skew_bound_ppm for p in self.pieces])
        wander = np.array([p.wander_ppm_per_s for p in self.pieces])

        def piece_bound(i: np.ndarray) -> np.ndarray:
            c = center[i]
            return np.asarray(_bound(h - c, begin[i] - c, end[i] - c, base[i], skew[i], wander[i]))

        out = w * piece_bound(j) + (1.0 - w) * piece_bound(k)
        return float(out) if scalar else out


def _bound(h: Any, begin: Any, end: Any, base: Any, skew_ppm: Any, wander_ppm_per_s: Any) -> Any:
    """The bound formula, all host times relative to the map's centre (vectorised)."""
    outside = np.maximum(0.0, np.maximum(begin - h, h - end))
    return base + skew_ppm * 1e-6 * np.abs(h) + 0.5 * wander_ppm_per_s * 1e-15 * outside * outside


def _ticks(ticks: ArrayLike) -> np.ndarray:
    """Ticks as numbers: integers, or floats that are finite and within int64 (a host time must fit there)."""
    arr = numbers(ticks, "ticks")
    if arr.dtype.kind == "f" and arr.size and not (np.all(np.isfinite(arr)) and np.abs(arr).max() < 2.0**63):
        raise ValueError("ticks: must be finite and within int64 (+-2**63)")
    return arr


def host_relative(clock_map: ClockMapLike, ticks: ArrayLike, origin_ns: int, name: str = "clock_map") -> np.ndarray:
    """Host time of ``ticks`` minus an integer origin, float64 ns, without epoch-scale rounding.

    Parameters
    ----------
    clock_map : clock map
        Any object with ``to_host(ticks)``; ``to_host_relative(ticks,
        origin_ns)`` (an :class:`~fingrav_native.clocks.EpochMap`)
        or ``to_host_ns(ticks)`` (:class:`ClockMap`,
        :class:`PiecewiseClockMap`) are used when present.
    ticks : array_like
        Times in the map's source clock.
    origin_ns : int
        An exact host time (int), e.g. the first execution's start.
    name : str
        The map's argument name, for messages.

    Returns
    -------
    numpy.ndarray
        float64 ns relative to ``origin_ns``.

    Raises
    ------
    ValueError
        The map returns float host times beyond 2**53 ns and offers no
        exact method: such times are already rounded to up to 256 ns, more
        than the placement budget, so they are refused rather than used.

    Notes
    -----
    Paper Section IV-A places logs on the kernels' timeline through the
    clock map; at Unix-epoch magnitude (torch.profiler traces) that is only
    exact when the large numbers are subtracted as integers first.
    """
    origin = integer_in(origin_ns, "origin_ns", -(2**63))
    instance_of(name, "name", str, "the map's argument name, a str")
    check_map(clock_map, name)
    ticks = _ticks(ticks)
    rel = getattr(clock_map, "to_host_relative", None)
    if callable(rel):
        return np.asarray(rel(ticks, origin), dtype=np.float64)
    host = np.asarray(clock_map.to_host(ticks))
    if host.dtype.kind in "iu":
        return (host.astype(np.int64) - np.int64(origin)).astype(np.float64)
    host = host.astype(np.float64)
    finite = host[np.isfinite(host)]
    if finite.size == 0 or (np.abs(finite).max() < FLOAT_EXACT_NS and abs(origin) < FLOAT_EXACT_NS):
        return host - float(origin)
    exact = getattr(clock_map, "to_host_ns", None)
    if callable(exact):
        return (np.asarray(exact(ticks), dtype=np.int64) - np.int64(origin)).astype(np.float64)
    raise ValueError(
        f"{name}: to_host() returns float64 host times of magnitude {np.abs(finite).max():.3g} ns, beyond "
        "2**53 where a float has already lost up to 256 ns; return int64 ns from to_host(), or give the map a "
        "to_host_ns(ticks) or to_host_relative(ticks, origin_ns) method")


def host_ns_exact(clock_map: ClockMapLike, ticks: ArrayLike, name: str = "clock_map") -> np.ndarray:
    """Host time of ``ticks`` as int64 ns, rounded to the ns, never through an epoch-magnitude float.

    Parameters
    ----------
    clock_map, ticks, name
        As for :func:`host_relative`.

    Returns
    -------
    numpy.ndarray
        int64 ns.

    Raises
    ------
    ValueError
        As for :func:`host_relative`; also non-finite host times.

    Notes
    -----
    Paper Section IV-A (execution start and end on the host timeline).
    """
    instance_of(name, "name", str, "the map's argument name, a str")
    check_map(clock_map, name)
    ticks = _ticks(ticks)
    exact = getattr(clock_map, "to_host_ns", None)
    if callable(exact):
        return np.asarray(exact(ticks), dtype=np.int64)
    host = np.asarray(clock_map.to_host(ticks))
    if host.dtype.kind in "iu":
        return host.astype(np.int64)
    return float_ns_to_int(host.astype(np.float64), f"{name}: to_host()",
                           "return int64 ns or give the map a to_host_ns(ticks) method")
