"""Clock sync: map device and logger timestamps onto host time, with error bounds.

The FinGraV paper (Singhania et al., ISPASS 2025, Section IV-A
"High-resolution CPU-GPU sync") reads a GPU timestamp from the CPU,
benchmarks the read delay separately, and uses one synced pair (T0, Tc) to
place power logs on the kernels' host timeline. It names clock drift as
future work. This module goes beyond it in three ways:

* **drift**: every map fits a skew as well as an offset, and long campaigns
  are refitted piecewise as the skew wanders (:func:`fit_piecewise_clock_map`);
* **error bounds**: every map reports how far its answer can be from the
  truth, at any host time, including extrapolation beyond its reads;
* **one-sided clocks**: a power logger's own firmware clock, seen only
  through the host time at which each log was read, is fitted from the lower
  envelope of those observations (:func:`fit_one_sided_clock_map`).

Everything here is a pure function of plain integer arrays, so it works on
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

import math
from dataclasses import asdict, dataclass
from typing import Any, Protocol, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import FLOAT_EXACT_NS, float_ns_to_int, integer_in, positive_number, relative_to

#: Fewest brackets a map is fitted from: a robust line needs a handful of
#: points beyond the two that define it.
MIN_BRACKETS = 8


#: Fewest one-sided observations (logs) a map is fitted from.
MIN_ONE_SIDED = 16


#: Default sanity bound on a fitted skew. Crystals are off by tens of ppm; a
#: fit beyond 1000 ppm means a wrong nominal tick or a broken source.
MAX_SKEW_PPM = 1000.0


ArrayLike = Union[npt.ArrayLike, int, float]


# 1.4826 * MAD estimates a Gaussian sigma robustly.
_MAD_TO_SIGMA = 1.482602218505602


@dataclass(frozen=True)
class ReadLatency:
    """Round-trip statistics of bracketed reads (``host_after - host_before``).

    Attributes
    ----------
    n : int
        Number of reads.
    min_ns, p50_ns, p99_ns, max_ns, mean_ns : float
        Minimum, median, 99th percentile, maximum and mean round trip, ns.
        Half the minimum is the floor of any clock map made from these reads.
    """

    n: int
    min_ns: float
    p50_ns: float
    p99_ns: float
    max_ns: float
    mean_ns: float




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


@dataclass(frozen=True)
class ClockMap:
    """A linear map ``host = host_ref + offset_ns + ns_per_tick * (ticks - device_ref)``.

    Made by :func:`fit_clock_map` (bracketed reads) or
    :func:`fit_one_sided_clock_map` (logs seen by a poller); frozen, plain
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
        rel = np.rint(self.offset_ns + self.ns_per_tick * x).astype(np.int64)
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
        out = np.rint(self._to_host_rel(x)).astype(np.int64) + np.int64(p0.host_ref)
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


def host_relative(clock_map: Any, ticks: ArrayLike, origin_ns: int, name: str = "clock_map") -> np.ndarray:
    """Host time of ``ticks`` minus an integer origin, float64 ns, without epoch-scale rounding.

    Parameters
    ----------
    clock_map : clock map
        Any object with ``to_host(ticks)``; ``to_host_relative(ticks,
        origin_ns)`` (an :class:`~fingrav_native.insitu.capture.EpochMap`)
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
    origin = int(origin_ns)
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


def host_ns_exact(clock_map: Any, ticks: ArrayLike, name: str = "clock_map") -> np.ndarray:
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
    exact = getattr(clock_map, "to_host_ns", None)
    if callable(exact):
        return np.asarray(exact(ticks), dtype=np.int64)
    host = np.asarray(clock_map.to_host(ticks))
    if host.dtype.kind in "iu":
        return host.astype(np.int64)
    return float_ns_to_int(host.astype(np.float64), f"{name}: to_host()",
                           "return int64 ns or give the map a to_host_ns(ticks) method")


def _int_array(values: npt.ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name}: must be an integer array (int64 ns and ticks, exact); got dtype {arr.dtype}"
        )
    if np.issubdtype(arr.dtype, np.unsignedinteger) and arr.size and int(arr.max()) >= 2**63:
        raise ValueError(f"{name}: values must be below 2**63 (got {int(arr.max())})")
    return arr.astype(np.int64, copy=False)


def _check_brackets(brackets: npt.ArrayLike, min_reads: int) -> np.ndarray:
    """Validate ``(n, 3)`` brackets and return them as int64, sorted by host_before."""
    arr = _int_array(brackets, "brackets")
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(
            f"brackets: expected shape (n, 3) of (host_before_ns, device_ticks, host_after_ns); got {arr.shape}"
        )
    n = arr.shape[0]
    if n < min_reads:
        raise ValueError(f"brackets: {n} reads given; at least min_reads={min_reads} are needed")
    rtt = arr[:, 2] - arr[:, 0]
    bad = np.flatnonzero(rtt < 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"brackets: host_after < host_before in row {i} ({int(arr[i, 2])} < {int(arr[i, 0])}); "
            "columns must be (host_before_ns, device_ticks, host_after_ns)"
        )
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    # Causality, not hb order: brackets may overlap (reads from two threads),
    # but a read that began after another ended cannot see an older value.
    by_end = np.argsort(arr[:, 2], kind="stable")
    ends = arr[by_end, 2]
    prefix_max = np.maximum.accumulate(arr[by_end, 1])
    done = np.searchsorted(ends, arr[:, 0], side="right")  # reads ended by each start
    has = done > 0
    seen = np.where(has, prefix_max[np.maximum(done - 1, 0)], np.iinfo(np.int64).min)
    bad = np.flatnonzero(arr[:, 1] < seen)
    if bad.size:
        j = int(bad[0])
        i = int(by_end[int(np.argmax(prefix_max[: done[j]] == seen[j]))])
        raise ValueError(
            f"brackets: device values are not monotonic in host time: the read starting at "
            f"{int(arr[j, 0])} saw {int(arr[j, 1])}, less than {int(arr[i, 1])} seen by a read that "
            f"ended at {int(arr[i, 2])}; a counter wrap or reset, or reads of two different clocks?"
        )
    if arr[-1, 1] == arr[0, 1]:
        raise ValueError(
            f"brackets: the device value never changes ({int(arr[0, 1])} in all {n} reads): "
            "the source is stuck or not a clock"
        )
    return arr


def _check_common(
    tick_ns: float, coverage: float, wander_ppm_per_s: float, max_skew_ppm: float, resolution_ticks: float
) -> None:
    # Each check names the argument; a non-number is refused as such (not a TypeError from math).
    positive_number(tick_ns, "tick_ns")
    positive_number(coverage, "coverage")
    positive_number(wander_ppm_per_s, "wander_ppm_per_s", allow_zero=True)
    if isinstance(max_skew_ppm, (bool, np.bool_)) or not isinstance(max_skew_ppm, (int, float, np.integer,
                                                                                  np.floating)):
        raise ValueError(f"max_skew_ppm={max_skew_ppm!r}: must be a number > 0 (inf: no sanity bound)")
    if not (max_skew_ppm > 0):
        raise ValueError(f"max_skew_ppm={max_skew_ppm!r}: must be > 0")
    positive_number(resolution_ticks, "resolution_ticks")


def _check_resolution(resolution_ticks: float, arr: np.ndarray) -> None:
    # A quantum as long as everything the reads saw leaves nothing to fit.
    seen = float(arr[:, 1].max() - arr[:, 1].min())
    if resolution_ticks >= seen:
        raise ValueError(f"resolution_ticks={resolution_ticks!r}: not below the {seen:.0f} ticks the brackets span; "
                         "it is the device clock's step (1 for a plain counter)")


def _check_skew(ns_per_tick: float, tick_ns: float, max_skew_ppm: float, span_ns: float, what: str) -> None:
    skew = (tick_ns / ns_per_tick - 1.0) * 1e6 if ns_per_tick > 0 else math.inf
    if not (abs(skew) <= max_skew_ppm):
        raise ValueError(
            f"{what}: fitted skew {skew:.6g} ppm is beyond the +-{max_skew_ppm:g} ppm sanity bound "
            f"(max_skew_ppm): fitted tick {ns_per_tick:.9g} ns vs tick_ns={tick_ns:g}. Is tick_ns right? "
            f"Reads spanning {span_ns / 1e3:.4g} us may be too short to fit a skew: pass fit_skew=False."
        )


def _mad_sigma(r: np.ndarray) -> float:
    med = float(np.median(r))
    return _MAD_TO_SIGMA * float(np.median(np.abs(r - med)))


def _ls_line(x: np.ndarray, y: np.ndarray, slope: float | None) -> tuple[float, float, float, float]:
    """Least squares ``y = a + b x`` (b fixed if ``slope`` is given): a, b, mean x, Sxx."""
    xm = float(np.mean(x))
    ym = float(np.mean(y))
    sxx = float(np.sum((x - xm) ** 2))
    if slope is None:
        b = float(np.sum((x - xm) * (y - ym)) / sxx)
    else:
        b = float(slope)
    return ym - b * xm, b, xm, sxx


def _robust_line(
    x: np.ndarray, y: np.ndarray, slope: float | None, trim: float, max_iter: int = 20
) -> tuple[float, float, np.ndarray, float, float]:
    """Iteratively trimmed least squares from a resistant start.

    Returns a, b, the kept mask, the robust sigma of the kept residuals, and
    the standard error of b (0 when the slope is fixed).
    """
    n = x.size
    if slope is None:
        # Tukey's resistant line: medians of the outer thirds, immune to a
        # minority of gross outliers, then trimmed least squares from there.
        order = np.argsort(x, kind="stable")
        t = max(1, n // 3)
        lo, hi = order[:t], order[-t:]
        dx = float(np.median(x[hi]) - np.median(x[lo]))
        b = float((np.median(y[hi]) - np.median(y[lo])) / dx) if dx > 0 else 0.0
    else:
        b = float(slope)
    a = float(np.median(y - b * x))
    keep = np.ones(n, dtype=bool)
    sigma = 0.0
    for _ in range(max_iter):
        r = y - (a + b * x)
        sigma = _mad_sigma(r[keep])
        # A floor so exact data (sigma = 0) does not trim float round-off.
        limit = trim * max(sigma, 1e-3)
        new_keep = np.abs(r) <= limit
        if new_keep.sum() < max(3, n // 2):
            # Never trim away the majority: keep the closest half.
            new_keep = np.abs(r) <= np.partition(np.abs(r), n // 2)[n // 2]
        kx, ky = x[new_keep], y[new_keep]
        if slope is None and float(np.ptp(kx)) == 0.0:
            break
        a, b, _xm, _sxx = _ls_line(kx, ky, slope)
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    r = y - (a + b * x)
    sigma = _mad_sigma(r[keep])
    se_b = 0.0
    if slope is None:
        kx = x[keep]
        m = int(keep.sum())
        sxx = float(np.sum((kx - kx.mean()) ** 2))
        s = float(np.sqrt(np.sum(r[keep] ** 2) / max(m - 2, 1)))
        # Use the larger of the classical and the robust scale: trimming
        # makes the classical one optimistic.
        se_b = max(s, sigma) / math.sqrt(sxx) if sxx > 0 else math.inf
    return a, b, keep, sigma, se_b


def fit_clock_map(
    brackets: npt.ArrayLike,
    *,
    tick_ns: float,
    select_factor: float = 1.5,
    offset: str = "band",
    fit_skew: bool = True,
    coverage: float = 3.0,
    wander_ppm_per_s: float = 0.1,
    prior_skew_ppm: float = 100.0,
    resolution_ticks: float = 1.0,
    max_skew_ppm: float = MAX_SKEW_PPM,
    min_reads: int = MIN_BRACKETS,
) -> ClockMap:
    """Fit ``host = a + b * device`` (offset and skew) to bracketed clock reads.

    Parameters
    ----------
    brackets : (n, 3) integer array_like
        Rows ``(host_before_ns, device_ticks, host_after_ns)``: a device
        clock read between two host-clock reads. Any order (sorted by
        ``host_before_ns`` here); at least ``min_reads`` rows.
    tick_ns : float
        Nominal device tick length, ns (10 for a 100 MHz counter, 1 for a
        nanosecond timer). The skew is reported against it and checked for
        sanity.
    select_factor : float
        Keep reads whose round trip is at most this times the best one
        (Tracy keeps 1.5x). If that leaves fewer than ``min_reads``, the
        ``min_reads`` tightest are kept.
    offset : {"band", "midpoint"}
        Where to put the fitted line: ``"band"`` (default) centres it in the
        band every kept bracket allows (a minimum filter: set by the
        tightest reads on either side, so it reaches the asymmetry floor
        however the jitter splits); ``"midpoint"`` keeps the least-squares
        offset through the bracket midpoints (an average over all kept reads).
    fit_skew : bool
        Fit the skew (default). False fixes the tick at ``tick_ns`` and fits
        only an offset; use it for reads spanning too short a time to fit a
        rate (a single burst), and see ``prior_skew_ppm``.
    coverage : float
        Coverage factor of the statistical bound terms, in sigmas.
    wander_ppm_per_s : float
        Assumed bound on how fast the skew changes (temperature), ppm per
        second; grows the bound quadratically beyond the fitted span.
    prior_skew_ppm : float
        With ``fit_skew=False``: the assumed bound on the unfitted skew,
        which grows the bound linearly away from the reads.
    resolution_ticks : float
        How many ticks the counter advances per update (1 for a counter that
        increments every tick; e.g. 32 for a ns timer updated every 32 ns).
    max_skew_ppm : float
        Sanity bound on the fitted skew.
    min_reads : int
        Fewest reads accepted (default :data:`MIN_BRACKETS`).

    Returns
    -------
    ClockMap

    Raises
    ------
    ValueError
        Naming the argument: not an ``(n, 3)`` integer array, fewer than
        ``min_reads`` rows, a row with ``host_after < host_before``, device
        values that decrease in host time, a device value that never changes,
        reads that all share one device value, a fitted skew beyond
        ``max_skew_ppm``, or an invalid option.

    Notes
    -----
    The paper (Section IV-A) reads one GPU timestamp from the CPU,
    benchmarks the read delay separately and syncs on a single pair
    (T0, Tc). Here many bracketed reads are combined and the clock's *drift*
    is fitted too, with a bound on the remaining error:

    1. Sort by ``host_before``; reject negative round trips, a stuck
       source, and device values that go backwards (a read that began after
       another ended saw a smaller value; overlapping brackets, as from two
       threads, may legitimately read out of order).
    2. Keep the tightest brackets: round trip ``<= select_factor`` x the
       best. Wide brackets (preempted or contended reads, the outliers) say
       little about when the device sampled.
    3. Take each kept read's bracket midpoint as its host time, and the
       device value plus half the counter resolution as its device time (a
       counter reading ``N`` was taken somewhere in ``[N, N + resolution)``).
       Subtract an integer reference read from both (exactly, in int64)
       before any float math.
    4. Fit host = a + b * device robustly: Tukey's resistant line (medians
       of the outer thirds) as a start, then least squares iterated with
       residuals beyond 4 robust sigmas (1.4826 x MAD) trimmed.
    5. Check the skew ``tick_ns / b - 1`` against ``max_skew_ppm``.
    6. The true line passes inside every kept bracket (each device read
       happened between its two host reads), so with the fitted slope its
       offset lies in the band ``[max(host_before - line),
       min(host_after - line)]`` (widened by half a counter step).
       With ``offset="band"``, shift the line to the band's centre (when the
       band is empty, i.e. the reads contradict a straight line, keep the
       least-squares offset).
    7. Bound the error at host time ``t`` by the sum of

       * the *asymmetry* term: the largest distance from the fitted offset
         to the band's ends. About half the best round trip: how the round
         trip splits is invisible, so no method can do better;
       * the *residual* term: ``coverage`` x the robust sigma of the
         residuals (jitter within the kept reads, any unmodelled wander);
       * the *skew* term: ``coverage`` x the slope's standard error times
         the distance from the reads' centroid;
       * the *drift* term beyond the fitted span: ``0.5 * wander * d**2``,
         ``d`` the distance from the span (the skew may have moved since).

    For long campaigns whose skew wanders, see
    :func:`fit_piecewise_clock_map`.

    Examples
    --------
    >>> import numpy as np
    >>> h = 10**12 + np.arange(64) * 1_000_000
    >>> d = 5 * 10**12 + (h - 10**12) // 10
    >>> m = fit_clock_map(np.stack([h - 500, d, h + 500], axis=1), tick_ns=10.0)
    >>> abs(m.skew_ppm) < 0.1, m.n_used
    (True, 64)
    """
    _check_common(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, resolution_ticks)
    integer_in(min_reads, "min_reads", 3)
    if not positive_number(select_factor, "select_factor") >= 1.0:
        raise ValueError(f"select_factor={select_factor!r}: must be >= 1")
    if offset not in ("band", "midpoint"):
        raise ValueError(f"offset={offset!r}: must be 'band' or 'midpoint'")
    positive_number(prior_skew_ppm, "prior_skew_ppm", allow_zero=True)
    arr = _check_brackets(brackets, int(min_reads))
    _check_resolution(resolution_ticks, arr)
    return _fit_sorted(
        arr,
        tick_ns=float(tick_ns),
        select_factor=float(select_factor),
        offset=offset,
        fit_skew=bool(fit_skew),
        coverage=float(coverage),
        wander_ppm_per_s=float(wander_ppm_per_s),
        prior_skew_ppm=float(prior_skew_ppm),
        resolution_ticks=float(resolution_ticks),
        max_skew_ppm=float(max_skew_ppm),
        min_reads=int(min_reads),
    )


def _fit_sorted(
    arr: np.ndarray,
    *,
    tick_ns: float,
    select_factor: float,
    offset: str,
    fit_skew: bool,
    coverage: float,
    wander_ppm_per_s: float,
    prior_skew_ppm: float,
    resolution_ticks: float,
    max_skew_ppm: float,
    min_reads: int,
) -> ClockMap:
    """fit_clock_map on validated brackets sorted by host_before."""
    n = arr.shape[0]
    hb, dv, ha = arr[:, 0], arr[:, 1], arr[:, 2]
    rtt = ha - hb
    best = int(rtt.min())

    # Step 2: the tightest brackets.
    sel = rtt <= select_factor * best
    if int(sel.sum()) < min_reads:
        sel = np.zeros(n, dtype=bool)
        sel[np.argsort(rtt, kind="stable")[:min_reads]] = True
    idx = np.flatnonzero(sel)
    if fit_skew and dv[idx[-1]] == dv[idx[0]]:
        raise ValueError(
            f"brackets: the {idx.size} tightest reads all have device value {int(dv[idx[0]])}: "
            "spread the reads over a longer time (or pass fit_skew=False)"
        )

    # Step 3: reference read, then exact integer offsets.
    ref = int(idx[idx.size // 2])
    device_ref = int(dv[ref])
    host_ref = int(hb[ref])
    half_step = 0.5 * resolution_ticks
    x = (dv[idx] - device_ref).astype(np.float64) + half_step
    y = (hb[idx] - host_ref).astype(np.float64) + 0.5 * rtt[idx].astype(np.float64)

    # Step 4: robust line.
    a, b, keep, sigma, se_b = _robust_line(x, y, None if fit_skew else tick_ns, trim=4.0)
    span = float(hb[idx[-1]] - hb[idx[0]])

    # Step 5: sanity.
    if fit_skew:
        _check_skew(b, tick_ns, max_skew_ppm, span, "brackets")

    # Steps 6-7: the causality band, then the bound terms.
    kidx = idx[keep]
    line_k = a + b * x[keep]
    q = half_step * b  # a counter step, in host ns, either way
    lo = float(np.max((hb[kidx] - host_ref).astype(np.float64) - line_k)) - q
    hi = float(np.min((ha[kidx] - host_ref).astype(np.float64) - line_k)) + q
    if offset == "band" and lo <= hi:
        # Step 6: centre the line in the causality band.
        shift = 0.5 * (lo + hi)
        a += shift
        line_k = line_k + shift
        lo -= shift
        hi -= shift
    asymmetry = max(abs(lo), abs(hi))
    # The offset is best known at the kept reads' centroid.
    center = host_ref + int(round(float(np.mean(line_k))))
    if fit_skew:
        skew_bound = coverage * (se_b / b) * 1e6
    else:
        skew_bound = prior_skew_ppm
    return ClockMap(
        method="bracketed",
        device_ref=device_ref,
        host_ref=host_ref,
        offset_ns=a,
        ns_per_tick=b,
        tick_ns=tick_ns,
        host_begin_ns=int(hb[0]),
        host_end_ns=int(ha.max()),
        host_center_ns=center,
        n_used=int(keep.sum()),
        n_total=n,
        best_rtt_ns=float(best),
        asymmetry_ns=asymmetry,
        residual_ns=coverage * sigma,
        skew_bound_ppm=float(skew_bound),
        wander_ppm_per_s=wander_ppm_per_s,
        coverage=coverage,
    )


def fit_piecewise_clock_map(
    brackets: npt.ArrayLike,
    *,
    tick_ns: float,
    segment_ns: float = 1e9,
    select_factor: float = 1.5,
    offset: str = "band",
    coverage: float = 3.0,
    wander_ppm_per_s: float = 0.1,
    resolution_ticks: float = 1.0,
    max_skew_ppm: float = MAX_SKEW_PPM,
    min_reads: int = MIN_BRACKETS,
) -> PiecewiseClockMap:
    """Fit a continuous clock map that follows a wandering skew over a long campaign.

    Parameters
    ----------
    brackets : (n, 3) integer array_like
        Rows ``(host_before_ns, device_ticks, host_after_ns)``, e.g. bursts
        recorded periodically through a campaign (``ClockSyncRecorder``).
    tick_ns : float
        Nominal device tick length, ns.
    segment_ns : float
        Knot spacing, host ns (default 1 s). Each piece is fitted on the
        reads within one spacing either side of its knot. Shorter follows a
        faster wander; longer averages more reads. The spacing used is the
        span divided into equal parts no longer than this.
    select_factor, offset, coverage, wander_ppm_per_s, resolution_ticks, max_skew_ppm, min_reads
        As for :func:`fit_clock_map`, applied to each piece (the tightest
        reads are chosen per piece, so a stretch of slow reads does not lose
        all its reads to a global threshold).

    Returns
    -------
    PiecewiseClockMap

    Raises
    ------
    ValueError
        As :func:`fit_clock_map`; also for a ``segment_ns`` that is not
        positive, and when no window holds ``min_reads`` reads.

    Notes
    -----
    Beyond the paper (Section IV-A syncs once, and names drift future work):

    1. Validate all reads as :func:`fit_clock_map` does.
    2. Place knots evenly from the first to the last read, at most
       ``segment_ns`` apart (one knot, i.e. a single fit, when the reads
       span less).
    3. For each knot, fit :func:`fit_clock_map` on the reads within one
       spacing of it (windows overlap by half). A window with fewer than
       ``min_reads`` reads, or whose reads span less than half a spacing
       (a gap in the recording, or a single burst: too short to fit a
       rate), drops its knot.
    4. Map device ticks by blending the two neighbouring pieces with weights
       falling linearly between their knots (positions in device ticks):
       continuous everywhere, each piece used only inside its own window,
       and the blend of two lines follows a skew that changes between them.
    5. Bound the error by the same blend of the two pieces' bounds.
    """
    _check_common(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, resolution_ticks)
    integer_in(min_reads, "min_reads", 3)
    if not positive_number(select_factor, "select_factor") >= 1.0:
        raise ValueError(f"select_factor={select_factor!r}: must be >= 1")
    if offset not in ("band", "midpoint"):
        raise ValueError(f"offset={offset!r}: must be 'band' or 'midpoint'")
    if not (isinstance(segment_ns, (int, float, np.integer, np.floating)) and math.isfinite(segment_ns) and segment_ns > 0):
        raise ValueError(f"segment_ns={segment_ns!r}: must be a finite number > 0")
    arr = _check_brackets(brackets, int(min_reads))
    _check_resolution(resolution_ticks, arr)
    opts = dict(
        tick_ns=float(tick_ns),
        select_factor=float(select_factor),
        offset=offset,
        fit_skew=True,
        coverage=float(coverage),
        wander_ppm_per_s=float(wander_ppm_per_s),
        prior_skew_ppm=0.0,
        resolution_ticks=float(resolution_ticks),
        max_skew_ppm=float(max_skew_ppm),
        min_reads=int(min_reads),
    )
    hb = arr[:, 0]  # sorted: windows are chosen on it
    t0, t1 = int(hb[0]), int(hb[-1])
    parts = max(1, math.ceil((t1 - t0) / float(segment_ns)))
    spacing = (t1 - t0) / parts
    if parts == 1:
        piece = _fit_sorted(arr, **opts)  # type: ignore[arg-type]
        knot_h = piece.host_center_ns
        return PiecewiseClockMap(
            pieces=(piece,),
            knots_host_ns=(knot_h,),
            knots_device=(float(piece.to_device(knot_h) - piece.device_ref),),
            segment_ns=float(t1 - t0),
            skipped_knots=0,
        )
    pieces: list[ClockMap] = []
    knots: list[int] = []
    skipped = 0
    for j in range(parts + 1):
        k = t0 + int(round(j * spacing))
        lo = np.searchsorted(hb, k - spacing, side="left")
        hi = np.searchsorted(hb, k + spacing, side="right")
        win = arr[lo:hi]
        # A skew needs reads spread over the window: one burst (tens of us)
        # would give a rate that is mostly noise.
        if win.shape[0] < min_reads or win[-1, 1] == win[0, 1] or win[-1, 0] - win[0, 0] < 0.5 * spacing:
            skipped += 1
            continue
        pieces.append(_fit_sorted(win, **opts))  # type: ignore[arg-type]
        knots.append(k)
    if not pieces:
        raise ValueError(
            f"brackets: no window of 2 x {spacing / 1e9:.3g} s holds {min_reads} reads (min_reads) "
            "spread over at least half that spacing; record more often or pass a longer segment_ns"
        )
    ref = pieces[0].device_ref
    knots_dev = tuple(float(p.to_device(k) - ref) for p, k in zip(pieces, knots))
    return PiecewiseClockMap(
        pieces=tuple(pieces),
        knots_host_ns=tuple(knots),
        knots_device=knots_dev,
        segment_ns=float(spacing),
        skipped_knots=skipped,
    )


def fit_one_sided_clock_map(
    read_host_ns: npt.ArrayLike,
    log_ticks: npt.ArrayLike,
    *,
    tick_ns: float,
    min_delay_ns: float = 0.0,
    fit_skew: bool = True,
    coverage: float = 3.0,
    wander_ppm_per_s: float = 0.1,
    prior_skew_ppm: float = 100.0,
    max_skew_ppm: float = MAX_SKEW_PPM,
    min_logs: int = MIN_ONE_SIDED,
) -> ClockMap:
    """Fit a logger clock from one-sided observations: logs known only to precede their read.

    Each power log carries a timestamp ``log_ticks`` in the logger's own
    clock (AMD ``gpu_metrics`` ``firmware_timestamp``: 10 ns ticks); the
    sampler saw it at host time ``read_host_ns``, so the log was produced
    *before* then. Over many logs, the lower envelope of the read times
    traces the logger clock.

    Parameters
    ----------
    read_host_ns : 1-D integer array_like
        Host time at which each log was seen (e.g. ``samples["host_ns"]``).
    log_ticks : 1-D integer array_like
        Each log's timestamp in the logger clock (``samples["source_ts"]``),
        same length. The same log seen more than once is fine.
    tick_ns : float
        Nominal logger tick length, ns.
    min_delay_ns : float
        A known minimum delay between a log's timestamp and the earliest
        host read that can see it (firmware publication, the read's own
        cost); subtracted from the fitted offset. See Notes.
    fit_skew : bool
        Fit the skew (default) or fix the nominal tick.
    coverage : float
        Coverage factor of the skew term of the bound.
    wander_ppm_per_s, prior_skew_ppm, max_skew_ppm
        As for :func:`fit_clock_map`.
    min_logs : int
        Fewest observations accepted (default :data:`MIN_ONE_SIDED`).

    Returns
    -------
    ClockMap
        With ``method="one-sided"``, ``asymmetry_ns = 0`` and
        ``best_rtt_ns = nan``.

    Raises
    ------
    ValueError
        Naming the argument: not 1-D integer arrays, different lengths,
        fewer than ``min_logs`` observations, log timestamps that decrease
        in read order, timestamps that never change, a negative
        ``min_delay_ns``, a skew beyond ``max_skew_ppm``.

    Notes
    -----
    The paper (Section IV-A) logs a GPU timestamp with every power log so
    logs can be placed on the CPU timeline; when the logger stamps logs
    with its *own* clock, that clock has to be synced too, and all there is
    to sync with is when each log was read:

    1. Validate; subtract an integer reference observation from both
       arrays (exactly), and the nominal mapping ``tick_ns * ticks`` from
       the read times, leaving ``z`` = read delay + offset + skew drift.
    2. Take the lower convex hull of the points ``(ticks, z)``.
    3. Choose the line below every point that minimises the mean gap above
       it (a linear program whose optimum is the hull edge spanning the mean
       tick; at a hull vertex, the mean of its two edges' slopes). With
       ``fit_skew=False`` the line is flat (nominal tick) through the lowest
       point.
    4. Check the skew; subtract ``min_delay_ns`` from the offset.
    5. Bound: split the observations into equal chunks along the ticks; in
       each, the gap between the line and the chunk's lowest observation
       is how far the line could sit below that chunk's envelope. The
       largest such gap is the residual term; skew uncertainty (that gap
       over half the span, times ``coverage``) and wander beyond the span
       are added as for bracketed maps.

    What no one-sided fit can see: the *minimum* delay between producing a
    log and a read seeing it (firmware publication, the read's cost) shifts
    every observation equally, so the envelope sits that much late. It is
    not in the bound. Pass it as ``min_delay_ns`` when known (e.g. measured
    once against a bracketed clock, or from the firmware's documentation).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> true_host = 10**12 + np.arange(2000) * 1_000_000     # 1 ms logs
    >>> ticks = 7 * 10**11 + (true_host - 10**12) // 10
    >>> seen = true_host + 20_000 + rng.integers(0, 100_000, true_host.size)
    >>> m = fit_one_sided_clock_map(seen, ticks, tick_ns=10.0, min_delay_ns=20_000)
    >>> bool(abs(m.to_host(ticks[1000]) - true_host[1000]) < 1_000)
    True
    """
    _check_common(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, 1.0)
    if not (isinstance(min_logs, (int, np.integer)) and min_logs >= 3):
        raise ValueError(f"min_logs={min_logs!r}: must be an integer >= 3")
    if not (math.isfinite(min_delay_ns) and min_delay_ns >= 0):
        raise ValueError(f"min_delay_ns={min_delay_ns!r}: must be >= 0")
    positive_number(prior_skew_ppm, "prior_skew_ppm", allow_zero=True)
    h = _int_array(read_host_ns, "read_host_ns")
    t = _int_array(log_ticks, "log_ticks")
    if h.ndim != 1:
        raise ValueError(f"read_host_ns: expected a 1-D array; got shape {h.shape}")
    if t.ndim != 1:
        raise ValueError(f"log_ticks: expected a 1-D array; got shape {t.shape}")
    if h.shape != t.shape:
        raise ValueError(f"log_ticks: shape {t.shape} differs from read_host_ns's {h.shape}")
    n = h.size
    if n < min_logs:
        raise ValueError(f"read_host_ns: {n} observations given; at least {min_logs} are needed")
    order = np.lexsort((t, h))
    h, t = h[order], t[order]
    bad = np.flatnonzero(np.diff(t) < 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"log_ticks: not monotonic in read order: {int(t[i + 1])} read after {int(t[i])} "
            f"(observations {i} and {i + 1} by read_host_ns); a clock wrap or reset?"
        )
    if t[-1] == t[0]:
        raise ValueError(f"log_ticks: the timestamp never changes ({int(t[0])} in all {n} observations)")

    # Step 1: exact offsets from a reference, then remove the nominal rate.
    ref = n // 2
    device_ref, host_ref = int(t[ref]), int(h[ref])
    x = (t - device_ref).astype(np.float64)
    z = (h - host_ref).astype(np.float64) - tick_ns * x
    # The same log seen twice: only its earliest read binds the envelope.
    ux, first = np.unique(x, return_index=True)
    uz = np.minimum.reduceat(z, first)

    # Steps 2-3: lower hull and the edge over the mean tick.
    xbar = float(np.mean(x))
    if fit_skew:
        hull = _lower_hull(ux, uz)
        hx, hz = ux[hull], uz[hull]
        # Edge k spans xbar: hx[k] <= xbar < hx[k + 1] (xbar lies inside the hull's x range).
        k = min(max(int(np.searchsorted(hx, xbar, side="right")) - 1, 0), hx.size - 2)
        s = float((hz[k + 1] - hz[k]) / (hx[k + 1] - hx[k]))
        if hx[k] == xbar and k > 0:
            # At a vertex every slope between its two edges is optimal: take the middle.
            s = 0.5 * (s + float((hz[k] - hz[k - 1]) / (hx[k] - hx[k - 1])))
        a = float(hz[k] - s * hx[k])
        # Float safety: the line must stay below every point.
        a += min(0.0, float(np.min(uz - (a + s * ux))))
    else:
        s = 0.0
        a = float(np.min(uz))
    b = tick_ns + s
    span = float(h[-1] - h[0])
    if fit_skew:
        _check_skew(b, tick_ns, max_skew_ppm, span, "log_ticks")

    # Step 5: envelope gap statistics per chunk.
    gaps = uz - (a + s * ux)
    chunks = int(min(32, max(4, ux.size // 64)))
    chunk_min = np.array([float(c.min()) for c in np.array_split(gaps, chunks) if c.size])
    residual = float(chunk_min.max())
    half_span_ticks = 0.5 * float(ux[-1] - ux[0])
    if fit_skew:
        skew_bound = coverage * (float(np.median(chunk_min)) / half_span_ticks) / b * 1e6 if half_span_ticks > 0 else math.inf
    else:
        skew_bound = prior_skew_ppm
    center = host_ref + int(round(a + tick_ns * xbar + s * xbar))
    return ClockMap(
        method="one-sided",
        device_ref=device_ref,
        host_ref=host_ref,
        offset_ns=a - float(min_delay_ns),
        ns_per_tick=b,
        tick_ns=float(tick_ns),
        host_begin_ns=int(h[0]),
        host_end_ns=int(h[-1]),
        host_center_ns=center,
        n_used=int(ux.size),
        n_total=n,
        best_rtt_ns=math.nan,
        asymmetry_ns=0.0,
        residual_ns=residual,
        skew_bound_ppm=float(skew_bound),
        wander_ppm_per_s=float(wander_ppm_per_s),
        coverage=float(coverage),
    )


def _lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of points sorted by strictly increasing x (monotone chain)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            o, p = hull[-2], hull[-1]
            # Drop p unless it lies strictly below the chord o -> i.
            cross = (x[p] - x[o]) * (y[i] - y[o]) - (y[p] - y[o]) * (x[i] - x[o])
            if cross <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    return np.asarray(hull, dtype=np.intp)


def summarize_read_latency(brackets: npt.ArrayLike) -> ReadLatency:
    """Round-trip statistics of bracketed reads: min, median, p99, max, mean.

    Parameters
    ----------
    brackets : (n, 3) integer array_like
        Rows ``(host_before_ns, device_ticks, host_after_ns)``; n >= 1.

    Returns
    -------
    ReadLatency

    Raises
    ------
    ValueError
        Not an ``(n, 3)`` integer array, empty, or a negative round trip.

    Notes
    -----
    The paper (Section IV-A) benchmarks the timestamp read delay separately
    from the sync; here it comes from the same reads. Half the minimum is
    the floor of any map made from them (see :class:`ClockMap`).
    """
    arr = _int_array(brackets, "brackets")
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(
            f"brackets: expected shape (n, 3) of (host_before_ns, device_ticks, host_after_ns); got {arr.shape}"
        )
    if arr.shape[0] < 1:
        raise ValueError("brackets: no reads given; at least 1 is needed")
    rtt = (arr[:, 2] - arr[:, 0]).astype(np.float64)
    if (rtt < 0).any():
        i = int(np.flatnonzero(rtt < 0)[0])
        raise ValueError(f"brackets: host_after < host_before in row {i}")
    p50, p99 = np.percentile(rtt, [50, 99])
    return ReadLatency(
        n=int(rtt.size),
        min_ns=float(rtt.min()),
        p50_ns=float(p50),
        p99_ns=float(p99),
        max_ns=float(rtt.max()),
        mean_ns=float(rtt.mean()),
    )
