"""The one-sided fit: a logger's own clock from logs known only to precede their read.

A power logger that stamps its logs with its own clock is seen only through the host time at
which each log was read; the lower envelope of those observations traces its clock.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import flag, integer_in, positive_number
from fingrav_native.clocks._fitting import check_common, check_skew, int_array
from fingrav_native.clocks._maps import MAX_SKEW_PPM, MIN_ONE_SIDED, ClockMap


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
        Nominal logger tick length, ns (at most 1e9: a second).
    min_delay_ns : float
        A known minimum delay between a log's timestamp and the earliest
        host read that can see it (firmware publication, the read's own
        cost); subtracted from the fitted offset. See Notes.
    fit_skew : bool
        Fit the skew (default) or fix the nominal tick.
    coverage : float
        Coverage factor of the skew term of the bound.
    wander_ppm_per_s, prior_skew_ppm, max_skew_ppm
        As for :func:`~fingrav_native.clocks.fit_clock_map`.
    min_logs : int
        Fewest observations accepted (default :data:`~fingrav_native.clocks.MIN_ONE_SIDED`).

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
        ``min_delay_ns``, a skew beyond ``max_skew_ppm`` by more than its
        own uncertainty (step 4).

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
    4. Check the skew. One beyond ``max_skew_ppm`` by more than its own
       uncertainty (``coverage`` x the median read delay above the line
       over half the span) is refused; one whose uncertainty reaches back
       inside the bound (a short recording whose reads ran late in one
       half) cannot be told from no skew, and the nominal tick is used,
       as with ``fit_skew=False``. Subtract ``min_delay_ns`` from the offset.
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
    min_delay_ns, fit_skew = _checked_args(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, min_logs, min_delay_ns,
                                           fit_skew, prior_skew_ppm)
    h, t = _observations(read_host_ns, log_ticks, min_logs)
    n = h.size

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
    a, s = _envelope_line(ux, uz, xbar) if fit_skew else (float(np.min(uz)), 0.0)
    b = tick_ns + s
    span = float(h[-1] - h[0])
    half_span_ticks = 0.5 * float(ux[-1] - ux[0])
    if fit_skew and _skew_unresolved(b, tick_ns, max_skew_ppm, coverage, uz - (a + s * ux), half_span_ticks):
        # Beyond the sanity bound, but not by more than the fit's own
        # uncertainty: a short recording on a loaded host (reads late by
        # hundreds of us in one half) tilts the envelope, and the data
        # cannot tell that tilt from a skew. The nominal tick with the
        # prior's bound is then what is known (as fit_skew=False).
        fit_skew = False
        a, s, b = float(np.min(uz)), 0.0, float(tick_ns)
    if fit_skew:
        check_skew(b, tick_ns, max_skew_ppm, span, "log_ticks")

    # Step 5: envelope gap statistics per chunk.
    residual, typical = _envelope_gaps(uz - (a + s * ux))
    if not fit_skew:
        skew_bound = prior_skew_ppm
    elif half_span_ticks > 0:
        skew_bound = coverage * (typical / half_span_ticks) / b * 1e6
    else:
        skew_bound = math.inf
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


def _checked_args(tick_ns: float, coverage: float, wander_ppm_per_s: float, max_skew_ppm: float, min_logs: int,
                  min_delay_ns: float, fit_skew: bool, prior_skew_ppm: float) -> tuple[float, bool]:
    """:func:`fit_one_sided_clock_map`'s settings checked by name; the delay and the skew flag as read."""
    check_common(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, 1.0)
    integer_in(min_logs, "min_logs", 3)
    min_delay_ns = positive_number(min_delay_ns, "min_delay_ns", allow_zero=True)
    fit_skew = flag(fit_skew, "fit_skew")
    positive_number(prior_skew_ppm, "prior_skew_ppm", allow_zero=True)
    return min_delay_ns, fit_skew


def _skew_unresolved(b: float, tick_ns: float, max_skew_ppm: float, coverage: float,
                     gaps: np.ndarray, half_span_ticks: float) -> bool:
    """Step 4's fallback: a fitted skew beyond ``max_skew_ppm`` whose own uncertainty reaches back inside it."""
    skew = (tick_ns / b - 1.0) * 1e6 if b > 0 else math.inf
    if abs(skew) <= max_skew_ppm or half_span_ticks <= 0:
        return False
    # The typical read delay above the line, not the chunks' minima: with
    # few logs, a whole half read late leaves chunk minima near the tilted
    # line, so only the delays' own spread says how far the tilt can go.
    uncertainty = coverage * (float(np.median(gaps)) / half_span_ticks) / tick_ns * 1e6
    return abs(skew) - uncertainty <= max_skew_ppm


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


def _observations(read_host_ns: npt.ArrayLike, log_ticks: npt.ArrayLike,
                  min_logs: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 1's input: the two arrays checked, as int64, sorted by read time (then tick)."""
    h = int_array(read_host_ns, "read_host_ns")
    t = int_array(log_ticks, "log_ticks")
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
    return h, t


def _envelope_line(ux: np.ndarray, uz: np.ndarray, xbar: float) -> tuple[float, float]:
    """Steps 2-3: intercept and slope of the line below every point with the least mean gap above it.

    The optimum of that linear program is the lower hull's edge spanning the mean tick ``xbar``;
    at a hull vertex, the mean of its two edges' slopes.
    """
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
    return a, s


def _envelope_gaps(gaps: np.ndarray) -> tuple[float, float]:
    """Step 5: the largest and the median of each chunk's smallest gap above the line.

    A chunk's smallest gap is how far the line could sit below that chunk's envelope.
    """
    chunks = int(min(32, max(4, gaps.size // 64)))
    chunk_min = np.array([float(c.min()) for c in np.array_split(gaps, chunks) if c.size])
    return float(chunk_min.max()), float(np.median(chunk_min))
