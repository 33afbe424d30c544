"""What every clock fit shares: argument checks, the checks of bracketed reads, and the robust line.

Bracketed reads (``(n, 3)`` rows ``(host_before_ns, device_ticks, host_after_ns)``) are checked
once, here, for every fit that takes them (:func:`~fingrav_native.clocks.fit_clock_map`,
:func:`~fingrav_native.clocks.fit_piecewise_clock_map`, the read-latency summary); the
robust line (Tukey's resistant start, then trimmed least squares) is the two-sided fit's;
the median and linregress's line serve the phase steerer's sample-grid fit too.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import numbers, positive_number, tick_length

# 1.4826 * MAD estimates a Gaussian sigma robustly.
_MAD_TO_SIGMA = 1.482602218505602


def int_array(values: npt.ArrayLike, name: str) -> np.ndarray:
    arr = numbers(values, name)  # a ragged nest or text is named, not a numpy error
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name}: must be an integer array (int64 ns and ticks, exact); got dtype {arr.dtype}"
        )
    if np.issubdtype(arr.dtype, np.unsignedinteger) and arr.size and int(arr.max()) >= 2**63:
        raise ValueError(f"{name}: values must be below 2**63 (got {int(arr.max())})")
    return arr.astype(np.int64, copy=False)


def check_brackets(brackets: npt.ArrayLike, min_reads: int) -> np.ndarray:
    """Validate ``(n, 3)`` brackets and return them as int64, sorted by host_before."""
    arr = int_array(brackets, "brackets")
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


def check_common(
    tick_ns: float, coverage: float, wander_ppm_per_s: float, max_skew_ppm: float, resolution_ticks: float
) -> None:
    # Each check names the argument; a non-number is refused as such (not a TypeError from math).
    # A tick longer than a second is no device clock's (and the fits' products overflow).
    tick_length(tick_ns, "tick_ns")
    positive_number(coverage, "coverage")
    positive_number(wander_ppm_per_s, "wander_ppm_per_s", allow_zero=True)
    if isinstance(max_skew_ppm, (bool, np.bool_)) or not isinstance(max_skew_ppm, (int, float, np.integer,
                                                                                  np.floating)):
        raise ValueError(f"max_skew_ppm={max_skew_ppm!r}: must be a number > 0 (inf: no sanity bound)")
    if not (max_skew_ppm > 0):
        raise ValueError(f"max_skew_ppm={max_skew_ppm!r}: must be > 0")
    positive_number(resolution_ticks, "resolution_ticks")


def check_resolution(resolution_ticks: float, arr: np.ndarray) -> None:
    # A quantum as long as everything the reads saw leaves nothing to fit.
    seen = float(int(arr[:, 1].max()) - int(arr[:, 1].min()))  # in Python ints: int64 corners do not wrap
    if resolution_ticks >= seen:
        raise ValueError(f"resolution_ticks={resolution_ticks!r}: not below the {seen:.0f} ticks the brackets span; "
                         "it is the device clock's step (1 for a plain counter)")


def check_skew(ns_per_tick: float, tick_ns: float, max_skew_ppm: float, span_ns: float, what: str) -> None:
    skew = (tick_ns / ns_per_tick - 1.0) * 1e6 if ns_per_tick > 0 else math.inf
    if not (abs(skew) <= max_skew_ppm):
        raise ValueError(
            f"{what}: fitted skew {skew:.6g} ppm is beyond the +-{max_skew_ppm:g} ppm sanity bound "
            f"(max_skew_ppm): fitted tick {ns_per_tick:.9g} ns vs tick_ns={tick_ns:g}. Is tick_ns right? "
            f"Reads spanning {span_ns / 1e3:.4g} us may be too short to fit a skew: pass fit_skew=False."
        )


def median(values: np.ndarray) -> float:
    """The median of a 1-d float array: :func:`numpy.median`'s value, bit for bit, by one selection.

    The clock fits and the phase steerer take medians of a few dozen values hundreds of
    thousands of times a campaign; :func:`numpy.median`'s generic path (axes, its NaN check,
    :func:`numpy.mean` of the middle pair) costs several times the selection itself at that
    size. The middle order statistics come from one :func:`numpy.partition` (introselect:
    Press et al., Numerical Recipes, 3rd ed., Section 8.5), with the last element placed too,
    so a NaN is seen as :func:`numpy.median` sees it; the middle one or two are averaged with
    :func:`numpy.mean`'s arithmetic (a sum from +0.0, then a division).
    """
    n = values.size
    if n == 0:
        return float(np.median(values))  # NaN, with numpy's empty-slice warning
    h = n // 2
    part = values.copy()
    part.partition((h - 1, h, n - 1) if n > 1 else (0,))
    if math.isnan(part[-1]):
        return math.nan
    mid = part[h - 1 + n % 2:h + 1]  # the middle one (odd n) or two (even n)
    return float(np.add.reduce(mid) / mid.size)


def mad_sigma(r: np.ndarray) -> float:
    med = median(r)
    return _MAD_TO_SIGMA * median(np.abs(r - med))


def ls_line(x: np.ndarray, y: np.ndarray, slope: float | None) -> tuple[float, float, float, float]:
    """Least squares ``y = a + b x`` (b fixed if ``slope`` is given): a, b, mean x, Sxx.

    The sums are :func:`numpy.mean`'s and :func:`numpy.sum`'s (one pairwise ``add.reduce`` each),
    taken as array methods: the fits run this on a few dozen reads tens of thousands of
    times, where the functions' dispatch costs more than the sums.
    """
    xm = float(x.sum() / x.size)
    ym = float(y.sum() / y.size)
    dx = x - xm
    sxx = float((dx ** 2).sum())
    if slope is None:
        b = float((dx * (y - ym)).sum() / sxx)
    else:
        b = float(slope)
    return ym - b * xm, b, xm, sxx


def linregress_line(k: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """:func:`scipy.stats.linregress`'s slope and intercept, by its own arithmetic, without its statistics.

    The phase steerer refits its sample grid up to three times after every run;
    linregress's correlation, p-value (a Student t distribution) and standard
    errors, none of them used there, cost several times the fit. The same centred second
    moments (:func:`numpy.cov` with ``bias=True``, linregress's ``bias=1``)
    give the same slope and intercept bit for bit, and identical ``k`` are
    refused with linregress's own message.
    """
    if np.amax(k) == np.amin(k) and len(k) > 1:
        raise ValueError("Cannot calculate a linear regression if all x values are identical")
    kmean, tmean = np.mean(k, None), np.mean(t, None)
    skk, skt, _, _ = np.cov(k, t, bias=True).flat
    slope = skt / skk
    return float(slope), float(tmean - slope * kmean)


def robust_line(
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
        dx = median(x[hi]) - median(x[lo])
        b = (median(y[hi]) - median(y[lo])) / dx if dx > 0 else 0.0
    else:
        b = float(slope)
    a = median(y - b * x)
    keep = np.ones(n, dtype=bool)
    sigma = 0.0
    converged = False
    for i in range(max_iter):
        r = y - (a + b * x)
        sigma = mad_sigma(r[keep])
        # A floor so exact data (sigma = 0) does not trim float round-off.
        limit = trim * max(sigma, 1e-3)
        new_keep = np.abs(r) <= limit
        if new_keep.sum() < max(3, n // 2):
            # Never trim away the majority: keep the closest half.
            new_keep = np.abs(r) <= np.partition(np.abs(r), n // 2)[n // 2]
        if i > 0 and np.array_equal(new_keep, keep):
            # From the second pass on, (a, b) is already the least-squares line of the reads
            # kept: a refit on the same reads returns it unchanged, so r and sigma are final.
            converged = True
            break
        kx, ky = x[new_keep], y[new_keep]
        if slope is None and float(kx.max() - kx.min()) == 0.0:
            break
        a, b, _xm, _sxx = ls_line(kx, ky, slope)
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    if not converged:
        r = y - (a + b * x)
        sigma = mad_sigma(r[keep])
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
