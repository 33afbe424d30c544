"""The piecewise fit: overlapping local two-sided fits that follow a wandering skew over a long campaign."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import choice, integer_in, positive_number
from fingrav_native.clocks._fitting import check_brackets, check_common, check_resolution
from fingrav_native.clocks._maps import MAX_SKEW_PPM, MIN_BRACKETS, ClockMap, PiecewiseClockMap
from fingrav_native.clocks._twosided import OffsetMethod, fit_sorted


def _check_spacing(arr: np.ndarray, segment_ns: float) -> None:
    """Refuse a spacing that makes far more knots than there are reads (each knot needs ``min_reads``).

    A 1 ns spacing over seconds of reads (``segment_ns=True``) would loop over a billion empty windows.
    """
    span = int(arr[-1, 0]) - int(arr[0, 0])
    # A spacing of 1e-313 ns makes the quotient infinite: compared as a float, never converted.
    knots = span / segment_ns
    if knots > max(100_000, 10 * len(arr)):
        raise ValueError(f"segment_ns={segment_ns!r}: {knots:.4g} knots for {len(arr)} reads; give a spacing of at "
                         f"least {span / len(arr):.0f} ns")


def fit_piecewise_clock_map(
    brackets: npt.ArrayLike,
    *,
    tick_ns: float,
    segment_ns: float = 1e9,
    select_factor: float = 1.5,
    offset: OffsetMethod = "band",
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
        Nominal device tick length, ns (at most 1e9: a second).
    segment_ns : float
        Knot spacing, host ns (default 1 s). Each piece is fitted on the
        reads within one spacing either side of its knot. Shorter follows a
        faster wander; longer averages more reads. The spacing used is the
        span divided into equal parts no longer than this.
    select_factor, offset, coverage, wander_ppm_per_s, resolution_ticks, max_skew_ppm, min_reads
        As for :func:`~fingrav_native.clocks.fit_clock_map`, applied to each piece (the tightest
        reads are chosen per piece, so a stretch of slow reads does not lose
        all its reads to a global threshold).

    Returns
    -------
    PiecewiseClockMap

    Raises
    ------
    ValueError
        As :func:`~fingrav_native.clocks.fit_clock_map`; also for a ``segment_ns`` that is not
        positive, and when no window holds ``min_reads`` reads.

    Notes
    -----
    Beyond the paper (Section IV-A syncs once, and names drift future work):

    1. Validate all reads as :func:`~fingrav_native.clocks.fit_clock_map` does.
    2. Place knots evenly from the first to the last read, at most
       ``segment_ns`` apart (one knot, i.e. a single fit, when the reads
       span less).
    3. For each knot, fit :func:`~fingrav_native.clocks.fit_clock_map` on the reads within one
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
    check_common(tick_ns, coverage, wander_ppm_per_s, max_skew_ppm, resolution_ticks)
    integer_in(min_reads, "min_reads", 3)
    if not positive_number(select_factor, "select_factor") >= 1.0:
        raise ValueError(f"select_factor={select_factor!r}: must be >= 1")
    choice(offset, "offset", ("band", "midpoint"))
    positive_number(segment_ns, "segment_ns")
    arr = check_brackets(brackets, int(min_reads))
    _check_spacing(arr, float(segment_ns))
    check_resolution(resolution_ticks, arr)
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
        piece = fit_sorted(arr, **opts)  # type: ignore[arg-type]
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
    knots_all = [t0 + int(round(j * spacing)) for j in range(parts + 1)]
    # Every window's reads at once: one search for all the windows' starts, one for their ends.
    centres = np.array(knots_all, dtype=np.int64)
    los = np.searchsorted(hb, centres - spacing, side="left")
    his = np.searchsorted(hb, centres + spacing, side="right")
    for k, lo, hi in zip(knots_all, los.tolist(), his.tolist()):
        win = arr[lo:hi]
        # A skew needs reads spread over the window: one burst (tens of us)
        # would give a rate that is mostly noise.
        if win.shape[0] < min_reads or win[-1, 1] == win[0, 1] or win[-1, 0] - win[0, 0] < 0.5 * spacing:
            skipped += 1
            continue
        pieces.append(fit_sorted(win, **opts))  # type: ignore[arg-type]
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
