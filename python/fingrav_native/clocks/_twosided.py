"""The two-sided fit: a clock map from bracketed reads (offset, skew and an error bound).

Paper Section IV-A syncs once on one pair (T0, Tc); here many bracketed reads are combined,
the drift is fitted too, and the line is centred in the band that causality allows.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import choice, flag, integer_in, positive_number
from fingrav_native.clocks._fitting import check_brackets, check_common, check_resolution, check_skew, robust_line
from fingrav_native.clocks._maps import MAX_SKEW_PPM, MIN_BRACKETS, ClockMap

#: Where the fitted line is put: centred in the causality band, or through the bracket midpoints.
OffsetMethod = Literal["band", "midpoint"]


def fit_clock_map(
    brackets: npt.ArrayLike,
    *,
    tick_ns: float,
    select_factor: float = 1.5,
    offset: OffsetMethod = "band",
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
        nanosecond timer; at most 1e9, a second). The skew is reported
        against it and checked for sanity.
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
        Fewest reads accepted (default :data:`~fingrav_native.clocks.MIN_BRACKETS`).

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
    :func:`~fingrav_native.clocks.fit_piecewise_clock_map`.

    Examples
    --------
    >>> import numpy as np
    >>> h = 10**12 + np.arange(64) * 1_000_000
    >>> d = 5 * 10**12 + (h - 10**12) // 10
    >>> m = fit_clock_map(np.stack([h - 500, d, h + 500], axis=1), tick_ns=10.0)
    >>> abs(m.skew_ppm) < 0.1, m.n_used
    (True, 64)
    """
    check_common(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, resolution_ticks)
    integer_in(min_reads, "min_reads", 3)
    if not positive_number(select_factor, "select_factor") >= 1.0:
        raise ValueError(f"select_factor={select_factor!r}: must be >= 1")
    choice(offset, "offset", ("band", "midpoint"))
    fit_skew = flag(fit_skew, "fit_skew")
    positive_number(prior_skew_ppm, "prior_skew_ppm", allow_zero=True)
    arr = check_brackets(brackets, int(min_reads))
    check_resolution(resolution_ticks, arr)
    return fit_sorted(
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


def fit_sorted(
    arr: np.ndarray,
    *,
    tick_ns: float,
    select_factor: float,
    offset: OffsetMethod,
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
    idx = _tightest_spread(rtt, dv, select_factor * best, min_reads, fit_skew)

    # Step 3: reference read, then exact integer offsets.
    ref = int(idx[idx.size // 2])
    device_ref = int(dv[ref])
    host_ref = int(hb[ref])
    half_step = 0.5 * resolution_ticks
    x = (dv[idx] - device_ref).astype(np.float64) + half_step
    y = (hb[idx] - host_ref).astype(np.float64) + 0.5 * rtt[idx].astype(np.float64)

    # Step 4: robust line.
    a, b, keep, sigma, se_b = robust_line(x, y, None if fit_skew else tick_ns, trim=4.0)
    span = float(hb[idx[-1]] - hb[idx[0]])

    # Step 5: sanity.
    if fit_skew:
        check_skew(b, tick_ns, max_skew_ppm, span, "brackets")

    # Steps 6-7: the causality band, then the bound terms.
    kidx = idx[keep]
    a, asymmetry, mean_line = _band_offset(
        a, b, x[keep], (hb[kidx] - host_ref).astype(np.float64), (ha[kidx] - host_ref).astype(np.float64),
        half_step, centre=offset == "band")
    # The offset is best known at the kept reads' centroid.
    center = host_ref + int(round(mean_line))
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


def _tightest_spread(rtt: np.ndarray, dv: np.ndarray, limit: float, min_reads: int, fit_skew: bool) -> np.ndarray:
    """:func:`_tightest`, refused where a skew is to be fitted and those reads all show one device value."""
    idx = _tightest(rtt, limit, min_reads)
    if fit_skew and dv[idx[-1]] == dv[idx[0]]:
        raise ValueError(
            f"brackets: the {idx.size} tightest reads all have device value {int(dv[idx[0]])}: "
            "spread the reads over a longer time (or pass fit_skew=False)"
        )
    return idx


def _tightest(rtt: np.ndarray, limit: float, min_reads: int) -> np.ndarray:
    """Indices of the reads whose round trip is at most ``limit``, else of the ``min_reads`` tightest."""
    sel = rtt <= limit
    if int(sel.sum()) < min_reads:
        sel = np.zeros(rtt.size, dtype=bool)
        sel[np.argsort(rtt, kind="stable")[:min_reads]] = True
    return np.flatnonzero(sel)


def _band_offset(a: float, b: float, x: np.ndarray, before: np.ndarray, after: np.ndarray, half_step: float,
                 *, centre: bool) -> tuple[float, float, float]:
    """Steps 6-7 of :func:`fit_clock_map`: the offset, the asymmetry term, the line's mean at the kept reads.

    The true line passes inside every kept bracket (``before``, ``after``: host ns relative to
    the reference, at device positions ``x``), widened by half a counter step; with ``centre``
    the line moves to the middle of that band, when the band is not empty.
    """
    line_k = a + b * x
    q = half_step * b  # a counter step, in host ns, either way
    lo = float(np.max(before - line_k)) - q
    hi = float(np.min(after - line_k)) + q
    if centre and lo <= hi:
        # Step 6: centre the line in the causality band.
        shift = 0.5 * (lo + hi)
        a += shift
        line_k = line_k + shift
        lo -= shift
        hi -= shift
    return a, max(abs(lo), abs(hi)), float(np.mean(line_k))
