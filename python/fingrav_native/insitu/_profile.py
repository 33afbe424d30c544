"""Per-kernel power and energy inside a running application: FinGraV over its profiler trace.

A training or inference loop is FinGraV's protocol for free (paper Section
IV-A): every execution of a kernel is a run, at a random phase against the
free-running power logger, thousands of times. :func:`profile_trace` groups
the executions of an application's trace by signature (name, grid, block),
keeps the golden executions of each (execution-time binning, Section IV-B
step 5), leaves out the warm-up (the SSP idea applied to a loop: the first
iterations, while power still climbs), and stitches each signature's logs of
interest into a profile with its energy per execution.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import warnings
from typing import Any, Literal, Mapping, Optional, Sequence, Union

import numpy as np
from scipy import stats

from fingrav_native._checks import choice, fraction, integer_in, positive_number, short_repr
from fingrav_native._threads import numeric_threads
from fingrav_native._version import __version__
from fingrav_native.clocks._maps import ClockMapLike, host_relative
from fingrav_native.insitu._align import (
    FINE_SEARCH_NS,
    FINE_SEARCH_STEP_NS,
    MISMATCH_SLACK_NS,
    ClockMismatchWarning,
    LogAlignment,
    align_logs_to_trace,
    offset_disagreement,
)
from fingrav_native.insitu._align_windows import measure_window_offset
from fingrav_native.insitu._closure_fit import closure_from, counter_of
from fingrav_native.insitu._concurrent import (
    ConcurrentEnergy,
    Spans,
    concurrent_energy,
    concurrent_spans,
    instant_span_power,
    span_power_from_class,
    steady_spans,
)
from fingrav_native.insitu._overlap import (
    CommunicationLevel,
    beside_compute,
    communication_overlap,
    communication_split,
    is_communication,
    keep_overlapped_compute,
)
from fingrav_native.insitu._rare import coarse_profile, coarse_row, instant_level
from fingrav_native.insitu._results import (
    ITERATION_DTYPE,
    TRACE_LOG_DTYPE,
    IterationSummary,
    SpanEnergy,
    TraceProfile,
    kernel_table_dtype,
)
from fingrav_native.insitu._trace import GPU_ORDINAL, TRACE_CLOCKS, KernelTrace
from fingrav_native.method._align import place_logs, place_logs_of_kernels
from fingrav_native.method._components import with_rest
from fingrav_native.method._deconvolve import declared_windows, logs_with_windows, needs_deconvolution
from fingrav_native.method._deconvolved import Deconvolution, DeconvolvedChannel, as_stitched
from fingrav_native.method._joint import GAP_EDGES_NS, TimelineFit, fit_timeline
from fingrav_native.method._pipeline import ATTRIBUTIONS, Attribution, stitch_logs, stitch_placed_logs
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile
from fingrav_native.records._layouts import validate_executions, validate_samples
from fingrav_native.sensors._energy_counter import EnergyCounter
from fingrav_native.sensors._model import SensorModel, as_sensor

_log = logging.getLogger(__name__)



class _Shifted:
    """A clock map onto the trace's clock, shifted to the trace's origin (keeps float64 times small).

    The shift is taken exactly (:func:`~fingrav_native.clocks.host_relative`),
    so no epoch time passes through a float64 (256 ns steps at 1.8e18 ns).
    """

    def __init__(self, inner: ClockMapLike, origin_ns: int) -> None:
        self.inner, self.origin = inner, int(origin_ns)
        self.shift_ns, self.shift_err_ns = 0.0, 0.0  # the logs' measured offset (insitu.align)

    def to_host(self, ticks: Any) -> np.ndarray:
        return host_relative(self.inner, ticks, self.origin, "logger_map") + self.shift_ns

    def error_bound_at(self, host_ns: Any) -> np.ndarray:
        h = np.asarray(host_ns, dtype=np.float64) - self.shift_ns + float(self.origin)
        return np.asarray(self.inner.error_bound_at(h), dtype=np.float64) + self.shift_err_ns


#: Logs that reach back more than half of this (a window, a filter) are deconvolved: the table's
#: kernels last tens of microseconds, and a point placement smears them by the log's reach.
_RESOLUTION_NS = 10_000.0

#: Offsets tried across a map's bound where it is wider than the fine search (each step at least 1 us; a
#: parabola refines the minimum between steps): a 100 ms bound in 500 us steps. At 100 steps two of the tool
#: logs' closed-form tests (tests/files/test_power_logs.py) missed their 1.5 %.
WIDE_SEARCH_STEPS = 200


def _one_sided(logger_map: ClockMapLike) -> bool:
    """Whether a clock map was fitted one-sidedly (a logger's own clock, seen only when published)."""
    inner = getattr(logger_map, "logger", None)
    return "one-sided" in (getattr(logger_map, "method", None), getattr(inner, "method", None))


def _warmup(samples: np.ndarray, ex: np.ndarray, logger_map: ClockMapLike, tolerance: float,
            lois: Optional[np.ndarray] = None) -> int:
    """Executions (in start order) before power is steady across iterations.

    The larger of two truncations of the signature's logs of interest, taken
    in execution start order (paper Section IV-A's steady-state power, found
    here along the loop instead of by a search):

    * MSER-5 (White, Simulation 69(6), 1997; Franklin & White, WSC 2008):
      the truncation, at most half the logs, that minimises the standard error
      of the mean of what is left, over batch means of five logs. It finds a
      warm-up however short: a transient over the first 1 % of a loop
      lowers the mean of a tenth of it by too little to notice, yet biases
      a joint fit whose drift term is too slow to follow it.
    * In ten chunks of consecutive executions, the first chunk whose mean
      power is within ``tolerance`` (or three standard errors) of the mean of
      the last half of the executions.

    MSER's cut stands only where the part it cuts differs from the rest by
    three standard errors: on stationary power its minimum lands past zero
    by chance about a third of the time (12 of 158 signatures of
    a real trace marked warm-up).

    ``lois``: the logs already placed in ``ex`` (:func:`_placed_by_signature`), or None to place them here.
    """
    if lois is None:
        try:
            lois = place_logs(samples, ex, logger_map)
        except ValueError as exc:
            _log.debug("warm-up not measured, none assumed: %s", exc)
            return 0
    if len(lois) < 20:
        return 0
    # Each log of interest's execution, by its rank in start order (no per-log Python loop).
    by_run = np.argsort(ex["run"], kind="stable")
    rank_in_start = np.empty(len(ex), dtype=np.int64)
    rank_in_start[np.argsort(ex["start_ns"], kind="stable")] = np.arange(len(ex))
    pos = rank_in_start[by_run[np.searchsorted(ex["run"][by_run], lois["run"])]]
    values = np.asarray(lois["total"], dtype=np.float64)
    late = values[pos >= len(ex) // 2]
    if len(late) < 5:
        return 0
    return max(_mser_truncation(pos, values), _tolerance_truncation(pos, values, len(ex), late, tolerance))


def _mser_truncation(pos: np.ndarray, values: np.ndarray, batch: int = 5) -> int:
    """MSER-``batch``: executions before the truncation that minimises the mean's standard error."""
    order = np.argsort(pos, kind="stable")
    nb = len(values) // batch
    if nb < 10:
        return 0
    means = values[order][:nb * batch].reshape(nb, batch).mean(axis=1)
    # Sum of squared deviations of means[d:] for every d, from suffix sums (one pass, no loop).
    s1 = np.cumsum(means[::-1])[::-1]
    s2 = np.cumsum((means * means)[::-1])[::-1]
    left = np.arange(nb, 0, -1, dtype=np.float64)
    mser = (s2 - s1 * s1 / left) / (left * left)
    d = int(np.argmin(mser[:nb // 2 + 1]))
    if d == 0:
        return 0
    # On stationary power the minimum falls past 0 by chance about a third of the time (White's rule has
    # no test): the truncation stands only where what it cuts differs from the rest by three standard
    # errors of the difference of their batch means.
    before, after = means[:d], means[d:]
    se = float(np.std(after, ddof=1)) * math.sqrt(1.0 / d + 1.0 / len(after))
    if not abs(float(np.mean(before)) - float(np.mean(after))) > 3.0 * se:
        return 0
    return int(pos[order][d * batch])


def _tolerance_truncation(pos: np.ndarray, values: np.ndarray, n_ex: int, late: np.ndarray,
                          tolerance: float) -> int:
    """The start of the first tenth of the executions whose mean power is within ``tolerance`` of ``late``'s."""
    ref, se_ref = float(np.mean(late)), float(np.std(late, ddof=1) / math.sqrt(len(late)))
    edges = np.linspace(0, n_ex, 11).astype(int)
    for c in range(10):
        sel = (pos >= edges[c]) & (pos < edges[c + 1])
        if sel.sum() < 3:
            continue
        m = float(np.mean(values[sel]))
        se = float(np.std(values[sel], ddof=1) / math.sqrt(sel.sum()))
        # Three standard errors: ten chunks tested, and a steady loop must pass its first one.
        if abs(m - ref) <= max(tolerance * abs(ref), 3 * math.hypot(se, se_ref)):
            return int(edges[c])
    return 0


def _log_times(samples: np.ndarray, t: np.ndarray, sensor: Optional[SensorModel]) -> np.ndarray:
    """Each log's time ``t`` on the trace's timeline moved to the middle of what it measures (window, delay)."""
    if sensor is None:
        return t
    if sensor.shape == "first_order":
        back: Any = sensor.delay_ns + sensor.tau_ns  # the filter's mean age
    else:
        # A counter's or sampler's own per-log window where it gives one, else the model's.
        w = np.asarray(samples["window_ns"], dtype=np.float64) if "window_ns" in (samples.dtype.names or ()) \
            else np.zeros(len(samples))
        back = sensor.delay_ns + 0.5 * np.where(w > 0, w, sensor.window_ns)
    return np.asarray(t - back, dtype=np.float64)


def _iteration_rows(kt: KernelTrace, it: np.ndarray, table: np.ndarray, sig_rows: np.ndarray, first_steady: int,
                    t_logs: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per iteration that launched kernels: its row, its logs' power sum, and each one's unattributed busy time.

    ``it`` is :meth:`KernelTrace.iteration` (computed once by the caller).
    """
    steps, ex = kt.steps, kt.executions
    n = len(steps)
    start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last_end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    mine = it >= 0
    np.minimum.at(start, it[mine], ex["start_ns"][mine].astype(np.int64))
    np.maximum.at(last_end, it[mine], ex["end_ns"][mine].astype(np.int64))
    idx = np.flatnonzero(start != np.iinfo(np.int64).max)
    rows = np.zeros(len(idx), dtype=ITERATION_DTYPE)
    rows["step"] = steps["step"][idx]
    rows["start_ns"] = start[idx]
    # An iteration lasts until the next one's first kernel: its gaps and pauses are its own.
    rows["end_ns"] = np.append(start[idx][1:], last_end[idx][-1])
    pos = np.full(n, -1, dtype=np.int64)
    pos[idx] = np.arange(len(idx))
    r = pos[it[mine]]
    busy = (ex["end_ns"] - ex["start_ns"])[mine].astype(np.float64)
    rows["kernels"] = np.bincount(r, minlength=len(rows))
    rows["busy_ns"] = np.bincount(r, weights=busy, minlength=len(rows)).astype(np.int64)
    e_sig = np.full(len(kt.signatures), np.nan)
    e_sig[sig_rows] = table["energy_j"]
    e_ex = e_sig[ex["kernel_id"][mine]]
    # Kernels of signatures without an energy (skipped, not resolved) count between kernels, and say so.
    rows["kernel_energy_j"] = np.bincount(r, weights=np.nan_to_num(e_ex, nan=0.0), minlength=len(rows))
    unattributed = np.bincount(r, weights=np.where(np.isfinite(e_ex), 0.0, busy), minlength=len(rows))
    rows["steady"] = rows["step"] >= first_steady
    # Logs into iterations by the middle of what they measure.
    k = np.searchsorted(rows["start_ns"], t_logs, side="right") - 1
    ok = (k >= 0) & (t_logs < rows["end_ns"][np.clip(k, 0, None)])
    rows["logs"] = np.bincount(k[ok], minlength=len(rows))
    tot = np.bincount(k[ok], weights=power[ok], minlength=len(rows))
    dur = (rows["end_ns"] - rows["start_ns"]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rows["energy_j"] = np.where(rows["logs"] > 0, tot / np.maximum(rows["logs"], 1) * dur * 1e-9, np.nan)
    return rows, tot, dur, unattributed


def _log_windows(samples: np.ndarray, sensor: Optional[SensorModel]) -> Optional[np.ndarray]:
    """Each log's boxcar window (ns) where the sensor averages over one (a window, a counter's interval); else None."""
    if sensor is None or not sensor.averages or sensor.shape == "first_order":
        return None
    w = np.asarray(samples["window_ns"], dtype=np.float64) if "window_ns" in (samples.dtype.names or ()) \
        else np.zeros(len(samples))
    w = np.where(w > 0, w, sensor.window_ns)
    return w if len(w) and np.all(w > 0) else None


def _windowed_energy(rows: np.ndarray, steady: np.ndarray, mid: np.ndarray, w: np.ndarray, power: np.ndarray
                     ) -> Optional[tuple[float, float, np.ndarray, str]]:
    """Energy per iteration from windows that each span many iterations: their energy over the iterations they
    overlap (counted by the share of each one's duration they cover), from disjoint windows inside the steady
    iterations; with its 95 % interval (Student's t over the windows' ratios; none from one window), the
    iterations spanned, a note.

    Placing a long window by its midpoint picks the iteration that holds it with a probability in proportion
    to its length (length-biased sampling, Cox 1962, *Renewal Theory*, Section 5.4), and leaves the rest of
    the span unused; a ratio of energy to overlap counts every iteration the windows cover, each once.
    """
    first = int(np.argmax(steady)) if steady.any() else 0
    lo, hi = float(rows["start_ns"][first]), float(rows["end_ns"][-1])
    a, b = mid - 0.5 * w, mid + 0.5 * w
    order = np.argsort(a, kind="stable")
    picked: list[int] = []
    for i in order[(a[order] >= lo) & (b[order] <= hi)].tolist():
        if not picked or a[i] >= b[picked[-1]]:
            picked.append(i)
    if not picked:
        return None
    k = np.asarray(picked)
    # Iterations completed by time x: k at the start of iteration k, rising linearly over it.
    edges = np.append(rows["start_ns"].astype(np.float64), float(rows["end_ns"][-1]))
    done = np.interp(np.stack([a[k], b[k]]), edges, np.arange(len(edges), dtype=np.float64))
    count = done[1] - done[0]
    energy = power[k] * w[k] * 1e-9
    e = float(np.sum(energy) / np.sum(count))
    n = len(k)
    half = math.nan
    if n > 1:
        se = math.sqrt(float(np.sum((energy - e * count) ** 2)) / (n * (n - 1))) / float(np.mean(count))
        half = float(stats.t.ppf(0.975, n - 1)) * se
    spanned = np.zeros(len(rows), dtype=bool)
    for x0, x1 in zip(np.floor(done[0]).astype(np.int64), np.ceil(done[1]).astype(np.int64)):
        spanned[x0:x1] = True
    note = (f"energy per iteration from {n} disjoint {np.median(w[k]) / 1e6:.3g} ms windows over "
            f"{float(np.sum(count)):.0f} steady iterations (each window's energy over the iterations it overlaps)"
            + ("; one window: no interval" if n == 1 else ""))
    return e, half, spanned & steady, note


def _iterations(kt: KernelTrace, it: np.ndarray, table: np.ndarray, sig_rows: np.ndarray, first_steady: int,
                t_logs: np.ndarray, power: np.ndarray, seed: int,
                windows_ns: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[IterationSummary]]:
    """Per-iteration rows and the summary (energy per iteration, the part between kernels).

    The summary uses the steady iterations the capture covers whole (an iteration outside the logs'
    span would be counted from the logs of others); with fewer than 10 it has no interval, and with no
    steady one it uses every covered one; each said in its ``note``. Logs whose windows (``windows_ns``,
    centred on ``t_logs``) are longer than the iterations give it from their energy over every iteration
    they overlap instead (:func:`_windowed_energy`).
    """
    if len(kt.steps) == 0 or not np.any(it >= 0):
        return np.zeros(0, dtype=ITERATION_DTYPE), None
    rows, tot, dur, unattributed = _iteration_rows(kt, it, table, sig_rows, first_steady, t_logs, power)
    if windows_ns is not None and float(np.median(windows_ns)) > float(np.median(dur)):
        got = _windowed_energy(rows, rows["steady"], t_logs, windows_ns, power)
        if got is not None:
            e, half, use, note = got
            ke = float(np.mean(rows["kernel_energy_j"][use]))
            busy = float(np.sum(rows["busy_ns"][use]))
            return rows, IterationSummary(
                iterations=int(use.sum()), duration_ns=float(np.mean(dur[use])), energy_j=e, energy_half_width_j=half,
                kernel_energy_j=ke, between_kernels_j=e - ke, between_share=(e - ke) / e if e > 0 else math.nan,
                unattributed_busy_share=float(np.sum(unattributed[use])) / busy if busy > 0 else 0.0, note=note)
    cnt = rows["logs"]
    covered = cnt > 0
    if len(t_logs):
        covered &= (rows["start_ns"] >= np.min(t_logs)) & (rows["end_ns"] <= np.max(t_logs))
    notes = []
    if not covered.all():  # every row launched kernels
        notes.append(f"{int((~covered).sum())} of {len(rows)} iterations outside the capture's logs left out")
    use = rows["steady"] & covered
    if not use.any():
        if not covered.any():
            return rows, None
        use = covered
        notes.append("no iteration past every signature's warm-up: all covered ones used")
    s_, c_, d_ = tot[use], cnt[use].astype(np.float64), dur[use]

    def per_iteration(s: np.ndarray, c: np.ndarray, d: np.ndarray, axis: int = -1) -> np.ndarray:
        # The ratio estimator: mean power of all logs (a time average) x mean duration.
        return np.asarray(np.sum(s, axis=axis) / np.sum(c, axis=axis) * np.mean(d, axis=axis) * 1e-9)

    e = float(per_iteration(s_, c_, d_))
    half = math.nan
    if use.sum() >= 10:
        # In batches of about 2^19 resampled values: the same resamples (one generator, drawn in order), a
        # quarter of the time of one 999 x n draw at 10^4 iterations (cache-sized arrays, no page faults).
        boot = stats.bootstrap((s_, c_, d_), per_iteration, paired=True, vectorized=True, n_resamples=999,
                               batch=max(1, (1 << 19) // len(s_)), confidence_level=0.95, method="percentile",
                               random_state=np.random.default_rng(seed))
        half = 0.5 * float(boot.confidence_interval.high - boot.confidence_interval.low)
    else:
        notes.append(f"{int(use.sum())} iterations: too few for an interval (10 needed)")
    ke = float(np.mean(rows["kernel_energy_j"][use]))
    busy = float(np.sum(rows["busy_ns"][use]))
    return rows, IterationSummary(iterations=int(use.sum()), duration_ns=float(np.mean(d_)), energy_j=e,
                                  energy_half_width_j=half, kernel_energy_j=ke, between_kernels_j=e - ke,
                                  between_share=(e - ke) / e if e > 0 else math.nan,
                                  unattributed_busy_share=float(np.sum(unattributed[use])) / busy if busy > 0 else 0.0,
                                  note="; ".join(notes))


@dataclasses.dataclass(frozen=True)
class _Overlap:
    """Per execution: a communication kernel of the device, compute overlapped by communication alone, and
    compute overlapped by other compute (insitu._overlap.communication_overlap); the communication kernels
    drawn as an additive level (their signature runs beside compute, insitu._overlap.beside_compute), and the
    instantaneous logs' fitted level (None in the joint fit, which fits its own)."""

    comm: np.ndarray
    over: np.ndarray
    compute_conc: np.ndarray
    overlay: np.ndarray
    level: Optional[CommunicationLevel] = None


def _timeline(kt: KernelTrace, on_device: np.ndarray, kept_ids: list[np.ndarray], comm: np.ndarray,
              spans: Optional[Spans] = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Optional[tuple[np.ndarray, np.ndarray]]]:
    """The joint fit's executions (start order, disjoint: kernels that overlap one another merged into one
    excluded span; a span of ``spans``, compute kernels on several streams, is the class after the
    signatures' instead), their classes, and the intervals of the communication kernels ``comm`` drawn as an
    overlay level (those beside compute; one that runs alone is an execution like any other)."""
    ex = kt.executions
    dev = np.flatnonzero(on_device & ~comm)
    dev = dev[np.argsort(ex["start_ns"][dev], kind="stable")]
    cls = np.full(len(ex), -1, dtype=np.int64)
    for c, keep in enumerate(kept_ids):
        cls[keep] = c
    s, e, k = (ex["start_ns"][dev].astype(np.float64), ex["end_ns"][dev].astype(np.float64), cls[dev])
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] >= reach[:-1]
    first = np.flatnonzero(new)
    size = np.diff(np.append(first, len(s)))
    s, e, k = s[first], reach[np.append(first[1:], len(s)) - 1], np.where(size == 1, k[first], -1)
    if spans is not None and len(spans.start):
        j = np.clip(np.searchsorted(spans.start, s), 0, len(spans.start) - 1)
        k = np.where((size > 1) & (spans.start[j] == s) & (spans.end[j] == e), len(kept_ids), k)
    overlay = (ex["start_ns"][comm].astype(np.float64), ex["end_ns"][comm].astype(np.float64)) if comm.any() else None
    return s, e, k, overlay


def _joint(samples: np.ndarray, t: np.ndarray, kt: KernelTrace, model: SensorModel, on_device: np.ndarray,
           found: _Signatures, bins: int, overlap: _Overlap,
           max_power_w: Optional[float] = None, spans: Optional[Spans] = None) -> list[ExecutionProfile]:
    """Windowed logs over the loop's timeline: every signature's curve and energy at once (fit_timeline).

    Rewrites ``found.rows`` (power, energy, interval) in place, adds what
    the fit cannot resolve to ``found.notes`` (signatures by name), and
    returns the profiles with the fitted curves. Communication kernels draw
    an additive level of their own over whatever runs beside them, so the
    compute executions they overlap stay in the fit. Compute kernels on several streams: their
    ``spans`` are one more class, a curve over each span's progress (:func:`_span_class`): a flat level
    puts the shape it misses into the kernels the same windows cover (a 25 us kernel 27 % off on a simulated
    loop with a second stream).
    """
    profiles, rows, notes = found.profiles, found.rows, found.notes
    levels = _level_rows(found, kt, overlap)
    # The signatures drawn as an additive level are the overlay's, not classes of the timeline.
    fitted = [c for c in range(len(rows)) if not levels[c]]
    # Signatures the stitch could not profile: one level each (a class of one bin), fitted with the rest
    # (a communication kernel is the overlay's, not a class of the timeline).
    comm_sig = is_communication(kt.signatures["name"])
    rare = [(sid, keep) for sid, keep in found.rare if len(keep) and not comm_sig[sid]]
    kept_ids = [found.kept_ids[c] for c in fitted] + [keep for _, keep in rare]
    starts, ends, classes, overlay = _timeline(kt, on_device, kept_ids, overlap.overlay, spans)
    with_spans = spans is not None and bool(np.any(classes == len(kept_ids)))
    present = [c for c in ("total", "compute", "io", "memory") if c in (samples.dtype.names or ())]
    channels = [c for c in present if np.all(np.isfinite(samples[c]))]
    for name in present:
        bad = int(np.sum(~np.isfinite(samples[name])))
        # A channel the device does not report is NaN throughout (nothing to say); one with gaps is fitted on
        # one timeline with the others, so it is left out, and said so.
        if 0 < bad < len(samples):
            notes.append(f"channel {name!r}: {bad} of {len(samples)} logs are not a number (a read that failed); "
                         "the channel is left out of the averaging sensor's joint fit, so its curves are not "
                         "reported (the other channels' are)")
    wins = samples["window_ns"] if "window_ns" in (samples.dtype.names or ()) else None
    span_d = [float(np.mean(ends[classes == len(kept_ids)] - starts[classes == len(kept_ids)]))] if with_spans else []
    rare_d = [float(np.mean(kt.executions["end_ns"][k] - kt.executions["start_ns"][k])) for _, k in rare]
    fit = fit_timeline(model, t, {c: samples[c] for c in channels}, starts, ends, classes,
                       [bins] * len(fitted) + [1] * len(rare) + [bins] * len(span_d), windows_ns=wins,
                       durations_ns=[profiles[c].duration_ns for c in fitted] + rare_d + span_d,
                       max_power_w=max_power_w, overlay_ns=overlay)
    out = list(profiles)
    gap_after: dict[str, list[float]] = {
        ch: [float(g[np.isfinite(g)][-1]) if np.isfinite(g).any() else math.nan for g in fit.gap_w[ch]]
        for ch in channels}
    _joint_notes(fit, [str(rows[c][0]) for c in fitted] + [str(kt.signatures["name"][sid]) for sid, _ in rare]
                 + ["the spans of concurrent compute kernels"] * len(span_d), notes)
    _span_class(fit, len(kept_ids) if with_spans else None, found)
    _overlap_note(fit, kt, on_device, overlap, found)
    for c in np.flatnonzero(levels).tolist():
        rows[c], out[c] = _level_row(rows[c], profiles[c], {
            ch: (fit.overlay_w.get(ch, math.nan), fit.overlay_low_w.get(ch, math.nan),
                 fit.overlay_high_w.get(ch, math.nan)) for ch in channels}, fit.confidence, fit.n_logs)
    for j, c in enumerate(fitted):
        out[c] = _joint_class_profile(fit, j, profiles[c], channels, gap_after, kept_ids[j], kt, bins, model)
        e = out[c].energy["total"]
        r = list(rows[c])
        r[7] = float(e.energy_j / (profiles[c].duration_ns * 1e-9)) if profiles[c].duration_ns > 0 else math.nan
        r[8], r[9] = float(e.energy_j), float(e.uncertainty_j)
        rows[c] = tuple(r)
    found.profiles = out
    _joint_rare(found, kt, fit, rare, len(fitted), channels)
    return found.profiles


def _joint_class_profile(fit: TimelineFit, j: int, ep: ExecutionProfile, channels: Sequence[str],
                         gap_after: Mapping[str, Sequence[float]], kept: np.ndarray, kt: KernelTrace, bins: int,
                         model: SensorModel) -> ExecutionProfile:
    """Class ``j`` of the joint fit as the signature's profile: its curves, energy and bands (the engine's)."""
    chans = tuple(DeconvolvedChannel(
        # The engine's band (its energy's too): Student's t for few blocks, the smoothing's span.
        name=ch, curve=fit.curves[ch][j], low=fit.curve_low_w[ch][j], high=fit.curve_high_w[ch][j],
        sd=fit.sd[ch][j], lam=fit.lam, edf=math.nan,
        residual_w=fit.residual_w[ch], energy_j=float(fit.energy_j[ch][j]),
        energy_half_width_j=float(fit.energy_half_width_j[ch][j]),
        # The power long after this kernel (the last gap step it was seen in): the nearest to idle.
        idle_w=float(gap_after[ch][j]),
        levels_w={"launch gap (shared by all kernels)": fit.launch_gap_w[ch],
                  **{f"gap after it, {_span(i)}": float(v) for i, v in enumerate(fit.gap_w[ch][j])}})
        for ch in channels)
    warnings_: list[str] = []
    k_c = int(fit.bins[j])
    if fit.edge_logs[j] < 20 * k_c:
        warnings_.append(f"{int(fit.edge_logs[j])} logs have a window edge inside this kernel's executions; "
                         f"its {k_c}-bin shape rests on the smoothing (its energy does not)")
    if not fit.identifiable[j]:
        warnings_.append("the logs do not determine this kernel's energy: every window covers it in about the "
                         "same mix with other kernels (see the trace profile's warnings)")
    dec = Deconvolution(
        bin_edges=np.linspace(0.0, 1.0, k_c + 1), duration_ns=float(ep.duration_ns), channels=chans,
        resolution_ns=math.nan,
        resolution_ns_per_bin=np.full(k_c, math.nan), n_logs=fit.n_logs, logs_per_bin=fit.logs_per_bin[j],
        n_runs=int(len(kept)), run_ids=np.asarray(kt.executions["run"][kept]),
        edge_logs=int(fit.edge_logs[j]), dropped_logs=fit.dropped_logs, confidence=fit.confidence,
        confidence_note=(f"bootstrap over blocks of the record, {fit.n_boot} resamples, each choosing the model "
                         "and smoothing again; for the energy and each curve bin the percentile band joined "
                         "with Student's t on the bootstrap's deviation, widened over the smoothings "
                         "cross-validation cannot tell apart (no band for a kernel the logs do not determine)"),
        assumptions=TIMELINE_ASSUMPTIONS + (fit.model,), warnings=tuple(warnings_), sensor=model,
        model=fit.model, check=fit.check, bins_asked=bins, info_share=float(fit.info_share[j]))
    stitched, energy = as_stitched(dec, uncert_ns_median=ep.stitched.uncert_ns_median,
                                   uncert_ns_max=ep.stitched.uncert_ns_max)
    return dataclasses.replace(ep, stitched=stitched, energy=energy, deconvolution=dec)


def _joint_rare(found: _Signatures, kt: KernelTrace, fit: TimelineFit, rare: list[tuple[int, np.ndarray]],
                first: int, channels: Sequence[str]) -> None:
    """The coarse rows of the joint fit's one-bin classes ``first``.. (``rare``'s signatures): each one's level
    is its fitted energy over the duration it was taken over, with the engine's interval."""
    for j, (sid, keep) in enumerate(rare, start=first):
        d = float(fit.durations_ns[j]) * 1e-9
        levels = {}
        for ch in channels:
            e, h = float(fit.energy_j[ch][j]), float(fit.energy_half_width_j[ch][j])
            ok = bool(fit.identifiable[j]) and math.isfinite(h) and d > 0
            levels[ch] = (e / d, (e - h) / d, (e + h) / d) if ok else (math.nan, math.nan, math.nan)
        n = int(np.sum(fit.logs_per_bin[j]))
        _coarse_added(found, kt, sid, keep, levels, n, fit.confidence,
                      f"one bin of the averaging sensor's joint fit over every kernel of the timeline, from the {n} "
                      "logs whose windows reach its executions, with the engine's bootstrap interval")


def _with_rest(ep: ExecutionProfile) -> ExecutionProfile:
    """``ep`` with the ``"rest"`` curve (total minus memory) where the device reports memory power alone."""
    stitched, energy = with_rest(ep.stitched, ep.energy)
    return ep if stitched is ep.stitched else dataclasses.replace(ep, stitched=stitched, energy=energy)


def _span_class(fit: TimelineFit, c: Optional[int], found: _Signatures) -> None:
    """The spans' mean power from the joint fit's class of spans, into ``found.span_fit``."""
    if c is None:
        found.span_note = "no span of concurrent compute kernels is a whole span of the joint fit's timeline"
        return
    p, h = span_power_from_class(float(fit.energy_j["total"][c]), float(fit.energy_half_width_j["total"][c]),
                                 float(fit.durations_ns[c]))
    found.span_fit = (p, h, int(np.sum(fit.logs_per_bin[c])))
    found.span_how = "one more class of the averaging sensor's joint fit, a curve over each span's progress"
    if not math.isfinite(p):
        found.span_note = "the logs do not determine it: every window covers the spans in about the same mix"


def _level_rows(found: _Signatures, kt: KernelTrace, overlap: _Overlap) -> np.ndarray:
    """Per row of ``found``, whether its signature is a communication kernel drawn as an additive level."""
    ids = np.unique(kt.executions["kernel_id"][overlap.overlay])
    return np.isin(np.asarray(found.sig_ids, dtype=np.int64), ids)


#: How a communication kernel beside compute is attributed, in the row's profile and the printout.
LEVEL_NOTE = ("joint attribution: a communication kernel beside compute kernels, its energy the additive level it "
              "draws over whatever runs beside it x its own duration (the compute kernels' draw is in their rows; "
              "one level is shared by every communication signature beside compute)")


def _level_row(row: tuple[Any, ...], ep: ExecutionProfile, levels: dict[str, tuple[float, float, float]],
               confidence: float, n_logs: int) -> tuple[tuple[Any, ...], ExecutionProfile]:
    """A communication signature's row and profile from its additive level: a flat curve at the level, and
    level x its duration as its energy, with the level's interval (CompPow's accounting of concurrent
    execution: the communication's share is what it adds; the compute kernels' draw is theirs).

    ``levels`` maps each channel to the level, the low and the high end of its interval (W).
    """
    d = float(ep.duration_ns)
    edges = np.array([0.0, d])
    chans, energy = [], {}
    for ch, (lvl, lo, hi) in levels.items():
        half = max(lvl - lo, hi - lvl) if math.isfinite(lo) and math.isfinite(hi) else math.nan
        chans.append(StitchedChannel(
            name=ch, x="time", bin_edges=edges, bin_centres=np.array([0.5 * d]), count=np.array([n_logs]),
            mean=np.array([lvl]), sd=np.array([half / 1.96]), ci_low=np.array([lo]), ci_high=np.array([hi]),
            confidence=confidence, fit_kind=None, fit_x=np.zeros(0), fit_y=np.zeros(0), n_lois=n_logs))
        energy[ch] = EnergyEstimate(
            energy_j=lvl * d * 1e-9, uncertainty_j=half * d * 1e-9, duration_ns=d, channel=ch, confidence=confidence,
            interpolated_share=0.0, pooled_share=0.0, note=LEVEL_NOTE)
    stitched = StitchedProfile(
        x="time", x_unit="ns", bin_width=d, channels=tuple(chans), n_lois=n_logs, runs=ep.stitched.runs,
        duration_ns=d, smoother=None, span=math.nan, weighted=False,
        uncert_ns_median=ep.stitched.uncert_ns_median, uncert_ns_max=ep.stitched.uncert_ns_max)
    e = energy.get("total")
    r = list(row)
    r[7] = levels["total"][0] if "total" in levels else math.nan
    r[8], r[9] = (e.energy_j, e.uncertainty_j) if e is not None else (math.nan, math.nan)
    r[11] = True
    return tuple(r), dataclasses.replace(ep, stitched=stitched, energy=energy, deconvolution=None)


def _placement_half_width(lmap: _Shifted, starts: np.ndarray, kt: KernelTrace, rows: np.ndarray) -> float:
    """How far the logs may sit from where they are placed against these executions (ns, a half-width).

    With an offset measured against the kernels and applied, its interval and the measurement's stated
    resolution (:data:`MISMATCH_SLACK_NS`: the lag and quarter model bias it by a few us); else the clock
    map's bound at the executions. The trace's own placement error of each start adds (paper Section IV-A's
    sync error: the records' clock against the logs').
    """
    placed = float(np.median(kt.executions["start_err_ns"][rows]))
    if lmap.shift_ns != 0.0:
        return lmap.shift_err_ns + MISMATCH_SLACK_NS + placed
    try:
        with np.errstate(invalid="ignore"):
            b = np.asarray(lmap.error_bound_at(starts), dtype=np.float64)
    except (AttributeError, TypeError, ValueError):  # a user's map without a bound
        return placed
    return (float(np.median(b)) if b.size and np.all(np.isfinite(b)) else 0.0) + placed


def _edge_powers(t: np.ndarray, power: np.ndarray, starts: np.ndarray, ends: np.ndarray, width: float
                 ) -> Optional[tuple[float, float, float, float]]:
    """Mean power of the logs just before the starts, just after them, just before the ends and just after the
    ends (windows of ``width`` ns, widened to hold a log each, up to the execution's duration); None where a
    window holds none."""
    dur = float(np.median(ends - starts))
    w = max(width, 1000.0)
    while True:
        sums = []
        for a, b in ((starts - w, starts), (starts, np.minimum(starts + w, ends)),
                     (np.maximum(ends - w, starts), ends), (ends, ends + w)):
            lo = np.searchsorted(t, a, side="left")
            hi = np.searchsorted(t, b, side="left")
            cnt = int(np.sum(np.clip(hi - lo, 0, None)))
            csum = np.concatenate([[0.0], np.cumsum(power)])
            sums.append((float(np.sum(csum[hi] - csum[lo])), cnt))
        if all(c > 0 for _, c in sums):
            return tuple(v / c for v, c in sums)  # type: ignore[return-value]
        if w >= dur:
            return None
        w = min(2.0 * w, dur)


def _placement_terms(found: _Signatures, kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray,
                     lmap: _Shifted) -> None:
    """Each instantaneous row's interval widened by what the logs' placement error can move its energy.

    Logs placed ``e`` later than they were taken select the power of ``[s - e, t_end - e]`` as the
    execution's: to first order the energy moves by ``e (P(s-) - P(t_end-))`` (``-e (P(t_end+) - P(s+))``
    for logs placed early), ``P(s-)`` the power just before the start and ``P(s+)`` just after it. The
    error is the same in every golden run, so its bound, ``half-width x`` the larger of those steps, adds
    to the statistical interval linearly (as the duration's marker error does, paper Section IV-B step 8).
    The steps are the mean power of the logs in windows of the half-width at the golden executions' edges
    (widened until each holds a log); a kernel whose edges no log falls near says so.
    """
    order = np.argsort(t_logs, kind="stable")
    t, power = np.asarray(t_logs, dtype=np.float64)[order], np.asarray(samples["total"], dtype=np.float64)[order]
    ex = kt.executions
    for c, ep in enumerate(found.profiles):
        est = ep.energy.get("total")
        if est is None or ep.golden.run_ids is None or not math.isfinite(est.uncertainty_j):
            continue
        rows = np.flatnonzero(np.isin(ex["run"], np.asarray(ep.golden.run_ids)))
        if not len(rows):
            continue
        starts, ends = ex["start_ns"][rows].astype(np.float64), ex["end_ns"][rows].astype(np.float64)
        half = _placement_half_width(lmap, starts, kt, rows)
        edges = _edge_powers(t, power, np.sort(starts), np.sort(ends), half)
        if half <= 0:
            continue
        if edges is None:
            note = (f"no log fell near its executions' edges: the +-{half / 1e3:.3g} us placement error of the logs "
                    "is not in the interval")
            bound = 0.0
        else:
            before, after_start, before_end, after = edges
            bound = half * max(abs(before - before_end), abs(after - after_start)) * 1e-9
            note = (f"the interval adds {bound * 1e3:.4g} mJ for the logs' placement error (+-{half / 1e3:.3g} us "
                    "against the kernels, times the power step at the executions' edges)")
        new = dataclasses.replace(est, uncertainty_j=est.uncertainty_j + bound,
                                  note="; ".join(n for n in (est.note, note) if n))
        found.profiles[c] = dataclasses.replace(ep, energy={**ep.energy, "total": new})
        r = list(found.rows[c])
        r[9] = float(new.uncertainty_j)
        found.rows[c] = tuple(r)


def _instant_levels(found: _Signatures, kt: KernelTrace, overlap: _Overlap) -> None:
    """Instantaneous logs: each communication signature beside compute gets its row from the fitted level
    (``overlap.level``, a normal interval on its standard error), or is skipped where none was
    fitted."""
    levels = _level_rows(found, kt, overlap)
    if not levels.any():
        return
    lvl = overlap.level
    keep = np.ones(len(found.rows), dtype=bool)
    for c in np.flatnonzero(levels).tolist():
        if lvl is None or not math.isfinite(lvl.level_w):
            found.skipped[str(found.profiles[c].label)] = (
                "a communication kernel beside compute kernels, and no log fell while one ran: its additive "
                "level, and so its energy, is not determined")
            keep[c] = False
            continue
        z = float(stats.norm.ppf(0.975))
        found.rows[c], found.profiles[c] = _level_row(
            found.rows[c], found.profiles[c],
            {"total": (lvl.level_w, lvl.level_w - z * lvl.se_w, lvl.level_w + z * lvl.se_w)}, 0.95, lvl.logs_during)
    if not keep.all():
        for name in ("rows", "profiles", "sig_ids", "kept_ids"):
            setattr(found, name, [x for x, k in zip(getattr(found, name), keep.tolist()) if k])


def _coarse_added(found: _Signatures, kt: KernelTrace, sid: int, keep: np.ndarray,
                  levels: dict[str, tuple[float, float, float]], n_logs: int, confidence: float, how: str) -> None:
    """A coarse row for signature ``sid`` (its executions ``keep``) into ``found``, out of ``skipped``; or, where the
    logs give its level no interval, its reason in ``skipped`` saying so."""
    sig, label = kt.signatures[sid], _label(kt.signatures[sid])
    ex = kt.executions[keep]
    lvl, lo, hi = levels.get("total", (math.nan, math.nan, math.nan))
    if not (math.isfinite(lvl) and math.isfinite(lo) and math.isfinite(hi)):
        # Its reason in skipped stays the stitch's; the count of such signatures is one warning (_undetermined).
        found.undetermined += 1
        return
    ep = coarse_profile(label, (ex["end_ns"] - ex["start_ns"]).astype(np.float64), ex["run"], levels, n_logs,
                        confidence, how)
    mine = int(np.count_nonzero(kt.executions["kernel_id"] == sid))
    found.rows.append(coarse_row(sig, mine, len(keep), ep))
    found.profiles.append(ep)
    found.sig_ids.append(sid)
    found.kept_ids.append(keep)
    found.coarse += 1
    found.skipped.pop(label, None)


def _instant_rare(found: _Signatures, kt: KernelTrace, t_logs: np.ndarray, power: np.ndarray) -> None:
    """Instantaneous logs: each signature the stitch could not profile gets a coarse row from the mean of the logs
    inside its executions alone (insitu._rare.instant_level), or its reason says no log determines it."""
    if not found.rare:
        return
    order = np.argsort(t_logs, kind="stable")  # once, for every signature's search
    t_logs, power = np.asarray(t_logs, dtype=np.float64)[order], power[order]
    for sid, keep in found.rare:
        if not len(keep):
            continue
        ex = kt.executions[keep]
        lvl, lo, hi, n = instant_level(t_logs, power, ex["start_ns"], ex["end_ns"])
        _coarse_added(found, kt, sid, keep, {"total": (lvl, lo, hi)}, n, 0.95,
                      f"the mean of the {n} instantaneous logs inside its {len(keep)} executions alone, with a "
                      "Student t interval")


def _overlap_note(fit: TimelineFit, kt: KernelTrace, on_device: np.ndarray, overlap: _Overlap,
                  found: _Signatures) -> None:
    """What the joint fit used of the compute executions, what it left out and why, and the communication's level."""
    if not overlap.overlay.any():
        return
    compute = on_device & ~overlap.comm
    mine = ~is_communication(kt.signatures["name"])[np.asarray(found.sig_ids, dtype=np.int64)]
    n, used = int(compute.sum()), int(sum(len(k) for k, m in zip(found.kept_ids, mine) if m))
    warm = int(sum(int(r[5]) for r, m in zip(found.rows, mine) if m))
    names = kt.signatures["name"][kt.executions["kernel_id"][overlap.comm]]
    kinds = sorted({str(x)[:40] for x in np.unique(names)})[:3]
    lvl, lo, hi = (fit.overlay_w.get("total", math.nan), fit.overlay_low_w.get("total", math.nan),
                   fit.overlay_high_w.get("total", math.nan))
    level = (f"{lvl:.1f} W (95 % {lo:.1f} to {hi:.1f})" if math.isfinite(lo) else f"{lvl:.1f} W (no interval)")
    found.notes.append(
        f"{int(overlap.over.sum())} of {n} compute executions overlapped a communication kernel ({', '.join(kinds)}"
        f"{', ...' if len(kinds) == 3 else ''}): kept in the joint fit, where the communication draws an additive "
        f"level of its own, {level}, over whatever runs beside it; {used} of the {n} compute executions "
        f"({100 * used / max(n, 1):.0f} %) are used, {warm} left out as warm-up, "
        f"{int(overlap.compute_conc.sum())} for overlapping another compute kernel (two compute kernels share the "
        f"device in proportions no log can tell: their spans are attributed jointly, TraceProfile.concurrency) "
        f"and {max(n - used - warm - int(overlap.compute_conc.sum()), 0)} of "
        "signatures not profiled")


def _joint_notes(fit: TimelineFit, names: list[str], notes: list[str]) -> None:
    """The joint fit's warnings with signatures by name: confounded kernels, coarse curves, failed assumptions."""
    for g in fit.confounded:
        notes.append("kernels " + ", ".join(names[i] for i in g) + " are confounded: every window covers them in "
                     "about the same mix, so the logs determine only the sum of their energies (energy per "
                     "iteration below), not each; a shorter window (a faster sensor) separates them")
    fewer = [i for i in range(len(names)) if fit.bins[i] < fit.bins_asked[i]]
    if fewer:
        notes.append("curves coarser than asked (too few window edges inside the executions): " + ", ".join(
            f"{names[i]} {int(fit.bins[i])} bins" for i in fewer[:6]))
    notes.extend(fit.check.failed)
    # Gap levels above the board (kernels' are named by _power_limit_notes).
    notes.extend(w for w in fit.warnings if w.startswith("a gap level of"))


def _span(m: int) -> str:
    """Step ``m`` of :data:`GAP_EDGES_NS` in words ("10-40 us after it ended")."""
    a, b = GAP_EDGES_NS[m] / 1e3, GAP_EDGES_NS[m + 1] / 1e3
    return f"{a:g} us on" if math.isinf(b) else f"{a:g}-{b:g} us"


#: What the in-situ deconvolution assumes (listed in each profile's deconvolution).
TIMELINE_ASSUMPTIONS = (
    "executions of one signature past the warm-up share one curve over execution progress",
    "after a kernel the power falls from its end to a launch-gap level of its own, at once, within microseconds "
    "or not at all (whichever the data prefer); "
    "between kernels the power depends only on the kernel before and the time since it ended",
    "the sensor model (window, shape, delay, gain, offset) is right",
)


@numeric_threads()
def profile_trace(
    trace: Union[str, os.PathLike[str], KernelTrace],
    samples: Any,
    logger_map: Optional[ClockMapLike] = None,
    *,
    margin: Optional[float] = None,
    min_executions: int = 20,
    warmup_tolerance: float = 0.02,
    sensor: Union[SensorModel, str, None] = None,
    attribution: Attribution = "auto",
    device: Optional[int] = None,
    bins: int = 32,
    align: Union[bool, Literal["auto"]] = "auto",
    max_power_w: Optional[float] = None,
    energy_counter: Optional[EnergyCounter] = None,
) -> TraceProfile:
    """Per-kernel power and energy of a running application, from its profiler trace and power logs.

    Parameters
    ----------
    trace : str, path or KernelTrace
        A torch.profiler (Kineto) Chrome trace (``.json`` or ``.json.gz``,
        :func:`~fingrav_native.files.read_kineto_trace`), what rocprofv3
        wrote (``kernel_trace.csv``, ``--output-format json`` or a rocpd
        database: :func:`~fingrav_native.files.read_rocprof_kernel_trace`),
        or the executions already read (an EXECUTION_DTYPE array with a
        name per execution: :meth:`KernelTrace.from_executions`).
    samples : numpy.ndarray or PowerCapture
        Power logs taken while the application ran (SAMPLE_DTYPE-compatible:
        ``source_ts`` in the logger's clock, one field per channel), or a
        :class:`~fingrav_native.files.PowerCapture` (its logs, its
        clock map onto the trace's clock and its sensor). The trace's
        clock picks which of the capture's bracketed host clocks the logs
        are mapped onto: CLOCK_REALTIME for Kineto, CLOCK_BOOTTIME for
        rocprofv3 and rocpd; a capture that does not bracket it (one
        recorded before format version 2, for a rocprofv3 trace) is refused.
    logger_map : clock map, optional
        ``to_host`` maps ``source_ts`` onto the trace's clock (Unix-epoch ns
        for Kineto, CLOCK_BOOTTIME ns for rocprofv3), ``error_bound_at`` its
        error there. Required with an
        array of samples; a capture brings its own. A map with
        ``to_host_relative`` keeps epoch times exact (int64); any other
        passes them through a float64 once (about 0.1 us of rounding, below
        the trace's microsecond timestamps).
    margin : float, optional
        Golden-execution bin margin in (0, 1); default: the paper's Table I
        for each signature's median duration (5 % below 200 us, 2 % above),
        the policy :func:`~fingrav_native.stitch_logs` and
        :func:`~fingrav_native.profile` share.
    min_executions : int
        Signatures with fewer executions are listed in ``skipped``.
    warmup_tolerance : float
        Relative power difference from the loop's steady state below which
        executions count as past the warm-up.
    sensor : SensorModel or str, optional
        What each log measures (a capture's own model by default; None:
        instantaneous logs).
    attribution : {"auto", "instant", "deconvolve"}
        ``"auto"``: logs that average over more than a few microseconds are
        deconvolved over the whole timeline
        (:func:`~fingrav_native.method.fit_timeline`: every
        signature's curve and the gaps' power at once, since a window in a
        loop covers several kernels); ``"instant"``: each log is placed at
        one instant (paper step 6).
    device : int, optional
        The trace's device the power logs belong to; needed when the trace
        holds kernels of several devices.
    bins : int
        Curve bins asked per signature when deconvolving: the most a curve
        gets; each gets fewer where its executions hold fewer than ten window
        edges per bin. Coarse bins misfit a kernel whose power changes
        within one (a GEMM's first microseconds as work fills the GPU), and
        averaging windows hand that misfit to the short kernels beside it:
        on a simulated loop under a 1 ms average, 8 bins left a 40 us
        kernel 1.6 % low with no noise at all, 16 left 0.7 %.
    align : {"auto", True, False}
        Measure the logs' offset against the trace's kernels
        (:func:`~fingrav_native.insitu.align_logs_to_trace`,
        instantaneous logs; reported in ``TraceProfile.alignment``) and
        correct it: ``"auto"`` when the logger's clock map is one-sided (it
        lands on each log's publication, tens of microseconds late), True
        always, False never (not even measured). The power's own lag
        behind activity is fitted beside the offset (a first-order response,
        profiled out), so it is not taken for one; a map from bracketed
        reads is trusted and ``"auto"`` only reports the offset there, with
        a warning where it lies beyond the map's own error bound (the
        trace and the capture disagree on the clock). A map whose bound is
        wider than the fine search (+-100 us: a tool's millisecond stamps, a
        start and period given by hand) has offsets across its whole bound
        searched, and ``"auto"`` applies one found inside it (the map's own
        error, measured; an averaging sensor's too, whose trade with
        ``delay_ns`` is microseconds against such a bound) and warns of one
        beyond it. An averaging sensor's
        logs (a window, a filter, a counter's intervals) are checked through
        its forward model instead (``insitu._align_windows``: each log's
        power regressed on each signature group's busy share of its
        response, offsets of up to 250 ms searched coarse to fine): the
        offset is reported and never applied (it trades with the model's
        ``delay_ns``), with a :class:`ClockMismatchWarning` where its
        interval lies beyond the map's bound, the trace's placement error and
        the measurement's resolution (5 % of the window, at least 50 us),
        and a note "offset unchecked" where the logs cannot determine it. The
        measurement costs about what the rest of the attribution does,
        whatever the trace's length: its regression has a bounded number of
        columns (the eight busiest signatures, the rest pooled; fewer where
        the logs are few, ``LogAlignment.pooled``).
    max_power_w : float, optional
        What the board can draw (its power limit, e.g. NVML's enforced limit
        or the device's TDP): a kernel whose power exceeds it is a warning
        (the sensor model is wrong, or the logs do not separate it).
    energy_counter : EnergyCounter, optional
        An energy counter's readings on the logs' clock (``logger_map``
        maps them): the kernels and gaps are checked against it over the
        trace (``TraceProfile.closure``; an
        :class:`~fingrav_native.insitu.EnergyClosureWarning` when they
        disagree). Default: the capture's counter, where it holds one.

    Returns
    -------
    TraceProfile
        The kernel table, a profile per signature, and per-iteration energy
        when the trace marks iterations (``prof.step()``). A row's
        ``duration_ns``, ``power_w`` and ``energy_j`` are those of an
        execution of the golden duration class (its ``golden`` executions:
        the fullest execution-time bin past the warm-up, step 5), not the
        mean over all ``count`` executions, which differs where a kernel's
        durations spread (throttling, clocks ramping); its interval covers
        the logs' placement error against the kernels too (instantaneous
        logs: the measured offset's interval and resolution, or the map's
        bound, times the power step at the executions' edges). A trace in which
        no signature has ``min_executions`` executions is not refused: its
        table is empty, a warning names each signature's shortfall, and the
        energy per iteration (``summary``) or, without iterations, over the
        trace's kernel span (``span``) is what the logs give.

    Raises
    ------
    ValueError
        Bad arguments (named); a trace without kernels
        (:class:`~fingrav_native.insitu.TraceFormatError`); logs that fall
        within none of the trace's kernels.

    Notes
    -----
    Paper Section IV-A/B on an application's own executions: each execution
    is a run of one (``execution_of_interest=0``); golden executions by
    execution-time binning (step 5), logs of interest through the clock map
    (step 6), stitching and energy (step 8). Executions that overlap another
    kernel on the same device are left out of their signature's fit and
    counted, not mis-attributed; compute kernels beside compute kernels
    (several streams) form spans whose logs measure the sum, attributed
    jointly and split by the signatures' fitted power
    (``TraceProfile.concurrency``, :mod:`fingrav_native.insitu._concurrent`).
    The energy per iteration is a ratio estimator (mean power of the logs
    over the steady iterations x their mean duration) with a bootstrap
    interval over iterations (Efron and Tibshirani 1993, via
    :func:`scipy.stats.bootstrap`).
    """
    _check_options(margin, min_executions, warmup_tolerance)
    if max_power_w is not None:
        max_power_w = positive_number(max_power_w, "max_power_w")
    model = as_sensor(sensor)
    if device is not None:
        device = integer_in(device, "device", 0)
    kt, trace_notes = _checked_trace(trace)
    zero = _zero_duration_on(trace, kt, device)
    capture = samples
    samples, logger_map, model = _from_capture(samples, logger_map, model, kt)
    # The energy closure's counter (insitu/_closure.py), on the trace's clock as the logs are.
    counted = counter_of(capture, energy_counter, logger_map, TRACE_CLOCKS.get(kt.clock) or "CLOCK_REALTIME")
    _check_logs(samples, logger_map, align, attribution, bins, max_power_w)
    assert logger_map is not None  # _check_logs refused a missing one
    if model is None:
        # Logs that declare their windows (window_ns) are windowed logs: the same engine as a SensorModel's.
        model = declared_windows(samples)
    # A window declared by the model is written onto the logs, so every step reads one description of it.
    samples = logs_with_windows(samples, model)
    on_device = kt.device == _device_of(kt, device)
    joint = model is not None and model.averages and attribution != "instant" and (
        attribution == "deconvolve" or needs_deconvolution(samples, model, 1.0, _RESOLUTION_NS))
    lmap = _Shifted(logger_map, kt.origin_ns)
    t_logs = lmap.to_host(samples["source_ts"])  # once: the profiles below map through lmap themselves
    _check_overlap(kt, on_device, t_logs, trace_notes)
    conc = kt.concurrent()
    alignment, t_logs = _placed(kt, samples, t_logs, model, on_device, conc, lmap,
                                "asked" if align is True else "one-sided" if _one_sided(logger_map) else "",
                                trace_notes)
    conc, attributed, overlap = _overlapped(kt, samples, t_logs, on_device, conc, joint, trace_notes)
    # A window in a loop covers other kernels: the joint fit below replaces the attribution.
    found, it_of = _Signatures(notes=trace_notes), kt.iteration()
    near = _NearLogs(attributed, t_logs) if model is None and "seq" in (samples.dtype.names or ()) else None
    _profile_signatures(found, kt, on_device, conc, attributed, near, lmap, it_of, margin=margin,
                        min_executions=min_executions, warmup_tolerance=warmup_tolerance,
                        sensor=None if joint else model, attribution="instant" if joint else attribution)
    spans = _spans(kt, on_device & ~overlap.comm, it_of, found, joint, min_executions)
    if (found.rows or found.rare) and joint:
        assert model is not None
        found.profiles = _joint(samples, t_logs, kt, model, on_device, found, bins, overlap, max_power_w, spans)
    elif found.rows:
        _placement_terms(found, kt, attributed, t_logs, lmap)
    if not joint:
        _instant_extras(found, kt, t_logs, np.asarray(attributed["total"], dtype=np.float64), spans)
        # After the coarse rows: a communication signature beside compute is its additive level, rare or not.
        _instant_levels(found, kt, overlap)
    _elsewhere(found, kt, on_device)
    _nothing_or_undetermined(found, bool(np.any(it_of[on_device] >= 0)))
    _power_limit_notes(found, max_power_w)
    tp = _trace_profile(kt, samples, t_logs, model, found, conc, alignment, lmap, it_of)
    if spans is not None:
        tp = dataclasses.replace(tp, concurrency=_concurrency(tp, kt, on_device, overlap, spans, found))
    if overlap.comm.any() and tp.summary is not None:
        tp = dataclasses.replace(tp, summary=dataclasses.replace(tp.summary, **communication_split(
            tp.summary.note, kt, it_of, tp.iterations, overlap.comm, on_device & ~overlap.comm, tp.kernels,
            tp.signature_rows)))
    if len(found.rows) == found.coarse and tp.summary is None:
        tp = _with_span(tp, _span_energy(kt, on_device, samples, t_logs, model))
    tp = dataclasses.replace(tp, device_executions=int(on_device.sum()), zero_duration=zero)
    return closure_from(tp, counted, samples, model, on_device)


def _instant_extras(found: _Signatures, kt: KernelTrace, t_logs: np.ndarray, total_w: np.ndarray,
                    spans: Optional[Spans]) -> None:
    """Instantaneous logs: the coarse rows of the signatures the stitch could not use, and the spans' power."""
    _instant_rare(found, kt, t_logs, total_w)
    if spans is not None:
        found.span_fit = instant_span_power(t_logs, total_w, spans.start, spans.end)
        found.span_how = "the mean of the instantaneous logs in the spans"


def _spans(kt: KernelTrace, compute: np.ndarray, it_of: np.ndarray, found: _Signatures, joint: bool,
           min_executions: int) -> Optional[Spans]:
    """Compute kernels on several streams: the spans past the warm-up where they overlap one another (None where
    none do), and what keeps the joint fit from attributing them, in ``found.span_note``."""
    ex = kt.executions
    step_of = np.where(it_of >= 0, kt.steps["step"][np.clip(it_of, 0, None)] if len(kt.steps) else -1, -1)
    spans = steady_spans(ex["start_ns"], ex["end_ns"], compute, step_of, found.first_steady)
    if not spans.overlapped.any():
        return None
    if joint and not found.rows:
        found.span_note = "no signature was profiled, so the averaging sensor's joint fit did not run"
    elif joint and len(spans.start) < min_executions:
        found.span_note = (f"{len(spans.start)} spans past the warm-up, fewer than min_executions={min_executions} "
                           "for the averaging sensor's joint fit to draw them as a class of their own")
        return spans.none()
    return spans


def _with_span(tp: TraceProfile, span: SpanEnergy) -> TraceProfile:
    """The result with its kernel span's energy; where that energy has an interval, it holds every execution of
    the device jointly, so the concurrency counts say each one is accounted for."""
    tp = dataclasses.replace(tp, span=span)
    c = tp.concurrency
    if c is None or not (math.isfinite(span.energy_j) and math.isfinite(span.energy_half_width_j)):
        return tp
    held = (f"every execution is in the energy over the trace's kernel span ({1e3 * span.energy_j:.3f} +- "
            f"{1e3 * span.energy_half_width_j:.3f} mJ), attributed jointly")
    return dataclasses.replace(tp, concurrency=dataclasses.replace(
        c, used=c.device_executions, note="; ".join(w for w in (c.note, held) if w)))


def _concurrency(tp: TraceProfile, kt: KernelTrace, on_device: np.ndarray, overlap: _Overlap, spans: Spans,
                 found: _Signatures) -> ConcurrentEnergy:
    """What ran on several compute streams: the spans' energy split by the rows' fitted power, and the counts."""
    ex = kt.executions
    used = np.zeros(len(ex), dtype=bool)
    for k in found.kept_ids:
        used[k] = True
    # A communication signature with a row accounts for its executions beside compute (its additive level).
    used |= overlap.overlay & np.isin(ex["kernel_id"], tp.signature_rows)
    live = tp.kernels["joint"] if len(tp.kernels) else np.zeros(0, dtype=bool)
    power = np.where(live, np.nan, tp.kernels["power_w"]) if len(tp.kernels) else np.zeros(0)
    if not len(spans.start):
        found.span_fit = (math.nan, math.nan, 0)
    return concurrent_energy(spans, ex["kernel_id"], ex["start_ns"], ex["end_ns"], found.span_fit, power,
                             tp.signature_rows, used, on_device, on_device & ~overlap.comm, found.span_how,
                             found.span_note)


def _overlapped(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, on_device: np.ndarray, conc: np.ndarray,
                joint: bool, notes: list[str]) -> tuple[np.ndarray, np.ndarray, _Overlap]:
    """Compute executions that only communication overlaps, kept: the executions still left out, the logs to
    attribute with, and who overlaps whom.

    Instantaneous logs: the communication's additive level subtracted from the logs taken while it ran
    (:func:`~fingrav_native.insitu._overlap.keep_overlapped_compute`). The joint fit: the communication is a
    level of its own in the timeline (its executions modelled, not left out), the logs unchanged.
    """
    ex = kt.executions
    comm, over, compute_conc = communication_overlap(ex["start_ns"], ex["end_ns"], kt.device, ex["kernel_id"],
                                                     kt.signatures["name"], on_device, conc)
    # A communication signature beside compute is profiled from its additive level over its executions; one
    # that runs alone is a kernel like any other (its executions beside compute are left out).
    overlay = beside_compute(ex["start_ns"], ex["end_ns"], ex["kernel_id"], comm, on_device & ~comm)
    overlap = _Overlap(comm, over, compute_conc, overlay)
    if joint:
        return conc & ~over & ~overlay, samples, overlap
    p_total = np.asarray(samples["total"], dtype=np.float64)
    conc, total, level = keep_overlapped_compute(ex["start_ns"], ex["end_ns"], kt.device, ex["kernel_id"],
                                                 kt.signatures["name"], on_device, conc, t_logs, p_total, notes)
    overlap = dataclasses.replace(overlap, level=level)
    conc = conc & ~overlay
    if total is p_total:
        return conc, samples, overlap
    attributed = samples.copy()
    attributed["total"] = total
    return conc, attributed, overlap


def _elsewhere(found: _Signatures, kt: KernelTrace, on_device: np.ndarray) -> None:
    """Signatures with no execution on the device to attribute, in ``skipped`` with why: every signature of the
    trace is in the table or there."""
    ids = kt.executions["kernel_id"]
    missing = np.bincount(ids[on_device], minlength=len(kt.signatures)) == 0
    if not missing.any():
        return
    off = missing[ids]
    devices: dict[int, list[int]] = {}
    for sid, dev in np.unique(np.stack([ids[off], kt.device[off]]), axis=1).T.tolist():
        devices.setdefault(int(sid), []).append(int(dev))
    for sid in np.flatnonzero(missing).tolist():
        found.skipped[_label(kt.signatures[sid])] = (
            f"no execution on the power logs' device (it ran on device(s) {devices[sid]})" if sid in devices else
            "every execution has zero recorded duration (below the trace's resolution): none is left to attribute")


def _nothing_or_undetermined(found: _Signatures, iterations: bool) -> None:
    """The warnings for signatures without a coarse row (no log determines their level) and for a trace with no
    stitched row."""
    if found.undetermined:
        found.notes.append(f"{found.undetermined} signature(s) without a stitched curve (in skipped) have no log in or "
                           "across their executions, or one: their level (their power while they run) is not "
                           "determined, so they have no coarse row")
    if len(found.rows) == found.coarse:
        _nothing_profiled(found, iterations)


def _nothing_profiled(found: _Signatures, iterations: bool) -> None:
    """No signature could be profiled: each one's shortfall noted, and what is reported instead.

    A short trace (a few ProfilerStep#N, or a few kernels and none) is not refused whole: the table is
    empty and the energy per iteration, or over the trace's kernel span, is what the logs can say.
    """
    shown = "; ".join(f"{k[:80]}: {v[:120]}" for k, v in list(found.skipped.items())[:10])
    why = (f"no kernel signature could be profiled ({len(found.skipped)} skipped: "
           f"{shown}{'; ...' if len(found.skipped) > 10 else ''})")
    found.notes.append(why + ("; only the energy per iteration is reported" if iterations else
                              "; the trace marks no iteration (ProfilerStep#N), so only the energy over its kernel "
                              "span, from the logs, is reported"))


def _span_energy(kt: KernelTrace, on_device: np.ndarray, samples: np.ndarray, t_logs: np.ndarray,
                 model: Optional[SensorModel]) -> SpanEnergy:
    """The energy over the device's kernel span from the logs that measure inside it (an instant, a whole window).

    Their mean power (the sensor's gain and offset undone) times the span's duration, with a Student t
    interval over the logs; a response longer than the span measures other time too and is not used.
    """
    ex = kt.executions[on_device]
    a, b = float(ex["start_ns"].min()), float(ex["end_ns"].max())
    t = np.asarray(t_logs, dtype=np.float64)
    lo = hi = t
    if model is not None and model.averages:
        w = np.asarray(samples["window_ns"], dtype=np.float64) if "window_ns" in (samples.dtype.names or ()) else \
            np.zeros(len(t))
        hi = t - model.delay_ns
        lo = hi - np.asarray(model.memory_ns(np.where(w > 0, w, model.window_ns)), dtype=np.float64)
    inside = (lo >= a) & (hi <= b)
    y = np.asarray(samples["total"], dtype=np.float64)[inside]
    if model is not None:
        y = (y - model.offset_w) / model.gain
    n, dur = len(y), b - a
    if n == 0:
        reach = float(np.median(hi - lo)) if len(t) else 0.0
        why = (f"the logs' {reach / 1e6:.3g} ms responses are longer than the span: none measures inside it"
               if reach > 0 else "no power log falls within it")
        return SpanEnergy(a, b, 0, math.nan, math.nan, math.nan, why)
    mean = float(np.mean(y))
    half = (float(stats.t.ppf(0.975, n - 1)) * float(np.std(y, ddof=1)) / math.sqrt(n) * dur * 1e-9 if n >= 2
            else math.nan)
    note = "one log inside: no interval" if n == 1 else ""
    return SpanEnergy(a, b, n, mean, mean * dur * 1e-9, half, note)


def _power_limit_notes(found: _Signatures, max_power_w: Optional[float]) -> None:
    """A kernel whose mean or curve exceeds what the board can draw: said, not printed as a result."""
    if max_power_w is None:
        return
    for row, ep in zip(found.rows, found.profiles):
        peak = max((float(np.nanmax(c.mean)) for c in ep.stitched.channels if c.name == "total"
                    and np.isfinite(c.mean).any()), default=math.nan)
        if (math.isfinite(row[7]) and row[7] > max_power_w) or (math.isfinite(peak) and peak > 1.05 * max_power_w):
            found.notes.append(f"{row[0]}: {row[7]:.0f} W mean, {peak:.0f} W peak, above the board's "
                               f"{max_power_w:.0f} W: the sensor model is wrong for these logs, or the logs do not "
                               "separate this kernel from its neighbours; do not read its power")


def _check_options(margin: Optional[float], min_executions: int, warmup_tolerance: float) -> None:
    """:func:`profile_trace`'s numbers, each named when it is wrong."""
    if margin is not None:
        fraction(margin, "margin")
    integer_in(min_executions, "min_executions", 2)
    fraction(warmup_tolerance, "warmup_tolerance")


def _from_capture(samples: Any, logger_map: Optional[ClockMapLike], sensor: Optional[SensorModel],
                  kt: KernelTrace) -> tuple[Any, Optional[ClockMapLike], Optional[SensorModel]]:
    """A PowerCapture's logs, clock map onto the trace's clock (unless given) and sensor (unless given).

    The trace's clock picks the capture's brackets: CLOCK_REALTIME for
    Kineto, CLOCK_BOOTTIME for rocprofv3 and rocpd (:data:`TRACE_CLOCKS`).
    A capture without brackets of that clock (format version 1 brackets
    only CLOCK_REALTIME) is refused, saying what to record again. Plain
    samples pass through.
    """
    if isinstance(samples, np.ndarray) or not (hasattr(samples, "logger_map") and hasattr(samples, "samples")):
        return samples, logger_map, sensor
    capture = samples
    if logger_map is None:
        clock = TRACE_CLOCKS.get(kt.clock)
        if clock is None:
            raise ValueError(f"trace: its kernels are on the {kt.clock} clock ({kt.source}), which a capture does "
                             "not bracket; pass logger_map= mapping the logs onto that clock")
        clocks = tuple(getattr(capture, "clocks", ("CLOCK_REALTIME",)))
        if clock not in clocks:
            made_by = capture.meta.get("fingrav_native_version", "an older version")
            raise ValueError(f"samples: the trace's kernels are stamped on {clock} ({kt.source}), and this capture "
                             f"brackets only {', '.join(clocks)} (recorded by fingrav_native {made_by}), so its logs "
                             f"cannot be placed on the trace. Record the power again with fingrav_native "
                             f"{__version__} (PowerRecorder, fingrav_native.record), whose captures bracket "
                             "CLOCK_REALTIME, CLOCK_BOOTTIME and CLOCK_MONOTONIC; or pass logger_map= mapping the "
                             f"logs onto {clock}")
        logger_map = capture.logger_map(clock=clock)
    return capture.samples, logger_map, as_sensor(capture.sensor, "samples.sensor") if sensor is None else sensor


def _check_logs(samples: Any, logger_map: Optional[ClockMapLike], align: object, attribution: str,
                bins: int, max_power_w: Optional[float]) -> None:
    """The logs, their clock map and how they are to be attributed, each named when it is wrong."""
    if not isinstance(samples, np.ndarray) or samples.dtype.names is None or "source_ts" not in samples.dtype.names:
        raise ValueError("samples: expected a structured array with source_ts and power fields, or a PowerCapture")
    # Every log, before any is attributed: one absurd value (a flipped exponent) would poison every kernel
    # whose window it falls in, and the per-signature checks see only the logs inside their kernels.
    validate_samples(samples, require_total=True, max_power_w=max_power_w)
    if logger_map is None:
        raise ValueError("logger_map: required with an array of samples (a PowerCapture brings its own)")
    if not callable(getattr(logger_map, "to_host", None)):
        raise ValueError(f"logger_map={short_repr(logger_map)}: must be a clock map (to_host, error_bound_at), "
                         f"not a {type(logger_map).__name__}")
    if align not in ("auto", True, False):
        raise ValueError(f"align={align!r}: must be 'auto', True or False")
    choice(attribution, "attribution", ATTRIBUTIONS)
    if not isinstance(bins, int) or not 2 <= bins <= 64:
        raise ValueError(f"bins={bins!r}: must be an integer in [2, 64]")


def _checked_trace(trace: object) -> tuple[KernelTrace, list[str]]:
    """``trace`` as a KernelTrace whose executions are valid, and what was left out.

    Executions of zero recorded duration (3-7 % of the kernels of older Kineto traces, whose durations
    are whole microseconds) are below the trace's resolution: they are left out of the attribution and
    counted in a note, not refused with the whole trace; their energy falls between kernels.
    """
    if not isinstance(trace, KernelTrace):
        raise ValueError(f"trace: must be a KernelTrace here, not {type(trace).__name__}; read a file with "
                         "fingrav_native.files.read_trace, or call fingrav_native.profile_trace, which reads paths")
    notes: list[str] = []
    ex = trace.executions
    zero = np.asarray(ex["end_ns"] == ex["start_ns"]) if len(ex) else np.zeros(0, dtype=bool)
    if zero.any():
        if zero.all():
            raise ValueError(f"trace: all {len(ex)} kernel executions have zero recorded duration ({trace.source}); "
                             "nothing can be attributed (a trace whose clock ticks coarser than its kernels)")
        names = np.unique(trace.signatures["name"][ex["kernel_id"][zero]])
        notes.append(f"{int(zero.sum())} of {len(ex)} kernel executions have zero recorded duration (below the "
                     f"trace's resolution; {len(names)} kernel name(s), e.g. {str(names[0])[:60]!r}): a trace artefact, "
                     "with no energy to attribute, counted apart (neither used nor left out); what ran then is "
                     "counted between kernels")
        trace = trace.without(zero)
    unshaped = np.any(trace.signatures["grid"] < 0, axis=1) | np.any(trace.signatures["block"] < 0, axis=1)
    if unshaped.any():
        # A trace without launch shapes (ROCm's Kineto traces give none) keys a kernel by its name alone:
        # launches of one kernel with different grids, which draw different power, share one row.
        notes.append(f"{int(unshaped.sum())} of {len(unshaped)} kernel signature(s) have no grid or block in the "
                     f"trace (e.g. {str(trace.signatures['name'][unshaped][0])[:60]!r}): each is keyed by its name "
                     "alone, so launches of one kernel with different shapes share its row")
    validate_executions(trace.executions, "trace", exclusive=False)
    return trace, notes


def _zero_duration_on(trace: object, kept: KernelTrace, device: Optional[int]) -> int:
    """Executions of zero recorded duration on the logs' device, which ``_checked_trace`` took out of ``kept``."""
    if not isinstance(trace, KernelTrace) or len(trace.executions) == len(kept.executions):
        return 0
    ex = trace.executions
    zero = ex["end_ns"] == ex["start_ns"]
    dev = _device_of(trace, device)
    return int(np.count_nonzero(zero & (trace.device == dev)))


def _check_overlap(kt: KernelTrace, on_device: np.ndarray, t_logs: np.ndarray, notes: list[str]) -> None:
    """Refuse logs that cover none of the device's kernels, and say how much of the trace the rest cover.

    No overlap is a clock mismatch or the wrong files (a trace from another host, an NTP step, a wrong
    ``baseTimeNanoseconds``), not too few runs: said with both spans, so it is never fitted silently.
    """
    ex = kt.executions[on_device]
    t = np.asarray(t_logs, dtype=np.float64)
    t = t[np.isfinite(t)]
    a, b = float(ex["start_ns"].min()), float(ex["end_ns"].max())
    if not len(t) or t.max() < a or t.min() > b:
        lo, hi = (float(t.min()), float(t.max())) if len(t) else (math.nan, math.nan)
        raise ValueError(f"samples: no power log falls within the trace's kernels: the kernels span "
                         f"[{a / 1e9:.6f}, {b / 1e9:.6f}] s and the logs [{lo / 1e9:.6f}, {hi / 1e9:.6f}] s after "
                         f"the trace's origin ({kt.clock} clock); a clock mismatch (a trace recorded on another "
                         "host, an NTP step, a wrong baseTimeNanoseconds) or a capture of another run")
    covered = (min(b, float(t.max())) - max(a, float(t.min()))) / max(b - a, 1.0)
    if covered < 0.9:
        notes.append(f"the logs cover {100 * covered:.0f} % of the trace's kernel span on this device: kernels "
                     "outside it are not attributed (a capture started late or stopped early, or clocks that "
                     "disagree)")



def _placement_bound(lmap: _Shifted, t_logs: np.ndarray, kt: KernelTrace) -> float:
    """How far off the clock map may put the logs against the kernels: its error bound over the logs plus the
    trace's own placement error (inf where the map states no bound)."""
    try:
        with np.errstate(invalid="ignore"):
            b = np.asarray(lmap.error_bound_at(t_logs), dtype=np.float64)
        bound = float(np.max(b)) if b.size and np.all(np.isfinite(b)) else math.inf
    except (AttributeError, TypeError, ValueError):  # a user's map without a bound: only the edge tests apply
        bound = math.inf
    placed = float(np.median(kt.executions["start_err_ns"])) if len(kt.executions) else 0.0
    return bound + placed


def _mismatch_note(alignment: LogAlignment, lmap: _Shifted, t_logs: np.ndarray, kt: KernelTrace,
                   notes: list[str]) -> None:
    """A warning where the logs' measured offset disagrees with the clock map (a clock mismatch).

    A map fitted on bracketed reads bounds its error (tens of ns to a few
    us). Logs that the kernels place further off than that bound plus the
    trace's own placement error, at the offset's 95 % interval, or best at
    the search's edge, are on another clock than the map says (the trace's
    clock picked wrong, a trace from another host, a clock stepped outside
    the brackets): :func:`~fingrav_native.insitu._align.offset_disagreement`
    says which, issued as :class:`ClockMismatchWarning` and noted in the
    table. An offset the logs cannot determine is noted as unchecked.
    """
    text = offset_disagreement(alignment, _placement_bound(lmap, t_logs, kt))
    if text:
        notes.append("clock mismatch: " + text)
        warnings.warn("profile_trace: clock mismatch: " + text, ClockMismatchWarning, stacklevel=3)
    elif alignment.at_edge:
        # Not measured: a mismatch beyond the search range (or one the F test cannot tell from noise) can
        # look like this, so the placement is unchecked, and said so.
        notes.append(f"the logs' offset against the kernels is not determined (best {alignment.offset_ns / 1e3:+.1f} "
                     "us, at the edge of the shifts searched or explaining no more of the logs than noise): the "
                     f"clock map onto the trace's {kt.clock} clock could not be checked against the kernels, and a "
                     "trace and capture that disagree on the clock (another host, another clock, a step) would give "
                     "this table too")


def _placed(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, model: Optional[SensorModel],
            on_device: np.ndarray, conc: np.ndarray, lmap: _Shifted, apply: str,
            notes: list[str]) -> tuple[Optional[LogAlignment], np.ndarray]:
    """The logs' offset against the kernels, measured, and applied where ``apply`` says why ("asked", or a
    "one-sided" map); an offset beyond the fine search (``LogAlignment.far``) only where asked: a one-sided
    map errs by microseconds, so milliseconds are a mismatch to warn of, not a lag to correct.

    Instantaneous logs against the device's kernels that ran alone or beside communication only (its level
    taken off the logs); an averaging sensor's through its windows against every kernel of the device,
    reported (warned beyond the map's bound) and never applied: a window's offset trades with the model's
    delay_ns. A map whose bound exceeds the fine search (:data:`FINE_SEARCH_NS`) has its whole bound searched
    and the offset found inside it applied. Returns the alignment and the logs' times (moved where it was
    applied).
    """
    bound = _placement_bound(lmap, t_logs, kt)
    # A map coarser than the fine search (a tool's millisecond stamps, a start and period given by hand) puts
    # the logs anywhere within its bound: the search covered it, and an offset found there is the map's own
    # error, measured; one beyond it is far, a mismatch warned of. Against such a bound the trade between a
    # window's offset and its delay_ns (microseconds) does not count: an averaging sensor's offset is applied too.
    coarse = bound > FINE_SEARCH_NS
    if model is not None and model.averages:
        alignment = _window_offset(kt, samples, t_logs, model, on_device, lmap, notes, coarse)
        if coarse and alignment is not None and not alignment.at_edge and not alignment.far:
            lmap.shift_ns, lmap.shift_err_ns = alignment.offset_ns, alignment.half_width_ns
            return alignment, t_logs + lmap.shift_ns
        return alignment, t_logs
    alignment = _measured_offset(kt, samples, t_logs, on_device, conc, bound)
    if alignment is not None and not alignment.at_edge and (
            apply == "asked" or (bool(apply) or coarse) and not alignment.far):
        lmap.shift_ns, lmap.shift_err_ns = alignment.offset_ns, alignment.half_width_ns
        return alignment, t_logs + lmap.shift_ns
    if alignment is not None:
        _mismatch_note(alignment, lmap, t_logs, kt, notes)
    return alignment, t_logs


def _window_offset(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, model: SensorModel,
                   on_device: np.ndarray, lmap: _Shifted, notes: list[str], coarse: bool) -> Optional[LogAlignment]:
    """An averaging sensor's logs checked against the device's kernels (insitu._align_windows), warned or noted.

    Every kernel of the device counts (concurrent ones too: a window over compute and communication
    measures both). The offset is reported, and applied only against a ``coarse`` map (by the caller: an
    offset determined within the near search, which covers such a map's bound); where the logs cannot
    determine it, that is noted as "offset unchecked".
    """
    ex = kt.executions[on_device]
    names = samples.dtype.names or ()
    w = np.asarray(samples["window_ns"], dtype=np.float64) if "window_ns" in names else np.zeros(len(samples))
    w = np.where(w > 0, w, model.window_ns)
    alignment, why = measure_window_offset(t_logs, np.asarray(samples["total"], dtype=np.float64), w, model,
                                           ex["start_ns"].astype(np.float64), ex["end_ns"].astype(np.float64),
                                           ex["kernel_id"])
    if why:
        notes.append(f"offset unchecked: the averaging sensor's logs cannot determine their offset against the "
                     f"kernels ({why}): the clock map onto the trace's {kt.clock} clock could not be checked, and a "
                     "trace and capture that disagree on the clock (another host, an NTP step, a wrong "
                     "baseTimeNanoseconds) would give this table too")
        return alignment
    assert alignment is not None
    if not (coarse and not alignment.at_edge and not alignment.far):
        _mismatch_note(alignment, lmap, t_logs, kt, notes)
    return alignment


def _device_of(kt: KernelTrace, device: Optional[int]) -> int:
    """The trace's device the power logs belong to: ``device``, or the trace's only one."""
    devices = np.unique(kt.device)
    what = "devices" if kt.device_numbering == GPU_ORDINAL else kt.device_numbering
    if device is None:
        if len(devices) > 1:
            raise ValueError(f"device: the trace holds kernels of {what} {devices.tolist()}; say which one the "
                             "power logs belong to (device=N, fingrav trace --device N; one capture per GPU)")
        return int(devices[0])
    if int(device) not in devices.tolist():
        raise ValueError(f"device={device!r}: the trace holds kernels of {what} {devices.tolist()}")
    return int(device)


def _measured_offset(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, on_device: np.ndarray,
                     conc: np.ndarray, bound_ns: float) -> Optional[LogAlignment]:
    """The logs' offset against the device's kernels that ran alone or beside communication only, the
    communication beside them an additive level (``overlay_ns``); None where too few logs fall on them.

    Offsets within :data:`FINE_SEARCH_NS` of the map are searched, or within its bound ``bound_ns`` plus the
    measurement's resolution where that is wider (in :data:`WIDE_SEARCH_STEPS` steps, at least 1 us each):
    a start given by hand to the second's fraction, off by 50 ms under a 100 ms period's bound, read a GEMM
    36 % low with the offset searched over +-100 us only.

    Compute kernels on several streams: each group that overlaps is one execution of a class of its own
    (its logs measure the group's sum), so the logs in it are modelled, not read as a gap between kernels:
    read as a gap, a GEMM and a second stream's kernel beside it every other iteration put the logs 711 us
    off on a simulated loop. Communication beside compute is a level of its own: read as a gap, an
    all-reduce beside five of a loop's seven kernels put exact logs one GEMM (409 us) off.
    """
    ex = kt.executions
    comm, over, _ = communication_overlap(ex["start_ns"], ex["end_ns"], kt.device, ex["kernel_id"],
                                          kt.signatures["name"], on_device, conc)
    a, b, _ = concurrent_spans(ex["start_ns"], ex["end_ns"], on_device & ~comm)
    dev = np.flatnonzero(on_device & (~conc | over))
    s = np.concatenate([ex["start_ns"][dev], a.astype(np.int64)])
    e = np.concatenate([ex["end_ns"][dev], b.astype(np.int64)])
    k = np.concatenate([ex["kernel_id"][dev], np.full(len(a), len(kt.signatures), dtype=ex["kernel_id"].dtype)])
    order = np.argsort(s, kind="stable")
    beside = comm & conc
    search_ns, step_ns = FINE_SEARCH_NS, FINE_SEARCH_STEP_NS
    if math.isfinite(bound_ns) and bound_ns > FINE_SEARCH_NS:
        search_ns = bound_ns + MISMATCH_SLACK_NS
        step_ns = max(FINE_SEARCH_STEP_NS, search_ns / WIDE_SEARCH_STEPS)
    try:
        return align_logs_to_trace(t_logs, samples["total"], s[order], e[order], k[order], search_ns=search_ns,
                                   step_ns=step_ns,
                                   overlay_ns=(ex["start_ns"][beside], ex["end_ns"][beside]) if beside.any() else None)
    except ValueError as exc:
        # The profiles below say so themselves where it matters.
        _log.debug("log offset not measured: %s", exc)
        return None


@dataclasses.dataclass
class _Signatures:
    """The kernel signatures profiled so far (a table row, a profile, the executions kept) and those skipped."""

    rows: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    profiles: list[ExecutionProfile] = dataclasses.field(default_factory=list)
    sig_ids: list[int] = dataclasses.field(default_factory=list)
    kept_ids: list[np.ndarray] = dataclasses.field(default_factory=list)
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)
    #: What the logs cannot resolve, and the assumptions that fail (the TraceProfile's warnings).
    notes: list[str] = dataclasses.field(default_factory=list)
    #: The first step past every signature's warm-up.
    first_steady: int = np.iinfo(np.int64).min
    #: Compute kernels on several streams: their spans' mean power, its half-width and the logs behind it.
    span_fit: tuple[float, float, int] = (math.nan, math.nan, 0)
    span_how: str = ""
    span_note: str = ""
    #: Signatures the stitch cannot profile (too few executions, no log inside their golden executions): their
    #: id and executions alone on the device, in start order, for a coarse row (insitu._rare).
    rare: list[tuple[int, np.ndarray]] = dataclasses.field(default_factory=list)
    #: Coarse rows among ``rows`` (a trace with no stitched row still reports its span's or iterations' energy).
    coarse: int = 0
    #: Signatures without a stitched curve whose level no log determines (no coarse row).
    undetermined: int = 0


def _rows_by_signature(kt: KernelTrace, on_device: np.ndarray) -> list[np.ndarray]:
    """Per signature (by id), its executions on the device, in the trace's order (one sort, not a pass each)."""
    rows = np.flatnonzero(on_device)
    order = np.argsort(kt.executions["kernel_id"][rows], kind="stable")
    rows = rows[order]
    bounds = np.searchsorted(kt.executions["kernel_id"][rows], np.arange(len(kt.signatures) + 1), side="left")
    return [rows[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


class _NearLogs:
    """Instantaneous logs by time, to hand each signature only those near its executions.

    A log lands in an execution only if it falls between its start and end
    (no window), so the logs within a microsecond of a signature's
    executions are every log its placement can pair: the per-signature
    steps then cost what its executions and their logs do, not what the
    whole capture does (40 signatures of a 10^6-kernel loop each paid for
    all 210 000 logs).
    """

    def __init__(self, samples: np.ndarray, t_logs: np.ndarray) -> None:
        # Checked whole, once, as each signature's placement checked them before (a NaN anywhere is refused).
        self.samples = validate_samples(samples, require_total=True)
        self.order = np.argsort(t_logs, kind="stable")
        self.t = np.asarray(t_logs, dtype=np.float64)[self.order]

    def around(self, ex: np.ndarray) -> np.ndarray:
        """The logs within 1 us of any of ``ex``, in their original order (all of them where none is)."""
        lo = np.searchsorted(self.t, ex["start_ns"] - 1000.0, side="left")
        hi = np.searchsorted(self.t, ex["end_ns"] + 1000.0, side="right")
        cnt = np.clip(hi - lo, 0, None)
        if not cnt.any():
            return self.samples  # placement says there is nothing, in its own words
        pos = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt - lo, cnt)
        sub: np.ndarray = self.samples[np.unique(self.order[pos])]
        return sub


def _label(sig: Any) -> str:
    """A signature in words: its name, grid and block."""
    return f"{sig['name']} grid={tuple(int(g) for g in sig['grid'])} block={tuple(int(b) for b in sig['block'])}"


def _kept(kt: KernelTrace, mine: np.ndarray, conc: np.ndarray) -> np.ndarray:
    """A signature's executions (rows ``mine``) without a concurrent kernel, in start order."""
    keep = mine[~conc[mine]]
    out: np.ndarray = keep[np.argsort(kt.executions["start_ns"][keep], kind="stable")]
    return out


def _placed_by_signature(kt: KernelTrace, samples: np.ndarray, lmap: _Shifted,
                         kept: list[np.ndarray]) -> dict[int, np.ndarray]:
    """Per signature id, the logs placed in its kept executions (``kept``, by id), all signatures in one pass.

    Each signature's LOIs are what :func:`~fingrav_native.method.place_logs` gives its executions alone
    (:func:`~fingrav_native.method._align.place_logs_of_kernels`), found with one search over the merged
    timeline instead of one per signature, so the cost grows with kernels + logs, not signatures x logs.
    Signatures whose executions place_logs would refuse on their own (one of no duration, two that overlap)
    are left out: they are placed, and refused, one at a time as before.
    """
    ex = kt.executions
    ok = [k for k in kept if len(k) and np.all(ex["end_ns"][k] > ex["start_ns"][k])
          and np.all(ex["start_ns"][k][1:] >= ex["end_ns"][k][:-1])]
    if not ok:
        return {}
    try:
        lois = place_logs_of_kernels(samples, ex[np.concatenate(ok)], lmap)
    except ValueError as exc:  # a map or logs every signature's placement would refuse: each says so itself
        _log.debug("logs not placed for all signatures at once: %s", exc)
        return {}
    order = np.argsort(lois["kernel_id"], kind="stable")
    ids = lois["kernel_id"][order]
    out: dict[int, np.ndarray] = {}
    for k in ok:
        sid = int(ex["kernel_id"][k[0]])
        a, b = np.searchsorted(ids, [sid, sid + 1])
        out[sid] = lois[order[a:b]]
    return out


def _profile_signatures(found: _Signatures, kt: KernelTrace, on_device: np.ndarray, conc: np.ndarray,
                        samples: np.ndarray, near: Optional[_NearLogs], lmap: _Shifted, it_of: np.ndarray, *,
                        margin: Optional[float], min_executions: int, warmup_tolerance: float,
                        sensor: Optional[SensorModel], attribution: str) -> None:
    """Every signature of the device profiled into ``found``, the logs placed once for all of them."""
    by_sig = _rows_by_signature(kt, on_device)
    kept = [_kept(kt, rows, conc) for rows in by_sig]
    placed = _placed_by_signature(kt, samples, lmap, [k if len(k) >= min_executions else k[:0] for k in kept])
    for sig, rows, keep in zip(kt.signatures, by_sig, kept):
        _profile_signature(found, kt, sig, rows, keep, samples, near, lmap, it_of, placed.get(int(sig["id"])),
                           margin=margin, min_executions=min_executions, warmup_tolerance=warmup_tolerance,
                           sensor=sensor, attribution=attribution)


def _profile_signature(found: _Signatures, kt: KernelTrace, sig: Any, mine: np.ndarray, keep: np.ndarray,
                       samples: np.ndarray, near: Optional[_NearLogs], lmap: _Shifted, it_of: np.ndarray,
                       placed: Optional[np.ndarray], *, margin: Optional[float], min_executions: int,
                       warmup_tolerance: float, sensor: Optional[SensorModel], attribution: str) -> None:
    """Profile one signature's executions (rows ``mine``; ``keep`` those without a concurrent kernel, in start
    order) past the warm-up into ``found`` (or say why not); ``placed``: their logs placed already, or None."""
    label = _label(sig)
    if not len(mine):
        return
    ex = kt.executions[keep]
    if len(ex) < min_executions:
        found.skipped[label] = f"{len(ex)} executions (of {len(mine)}) without a concurrent kernel, " \
                               f"fewer than min_executions={min_executions}"
        found.rare.append((int(sig["id"]), keep))
        return
    if near is not None:
        samples = near.around(ex)
    warm = _warmup(samples, ex, lmap, warmup_tolerance, placed)
    try:
        if placed is None:
            ep = stitch_logs(samples, ex[warm:], lmap, execution_of_interest=0, margin=margin, label=label,
                             sensor=sensor, attribution=attribution)
        else:
            # The warm-up's runs left out (run = row in the trace: each execution is a run of its own).
            ep = stitch_placed_logs(samples, ex[warm:], lmap, placed[np.isin(placed["run"], ex["run"][warm:])],
                                    margin=margin, label=label, sensor=sensor, attribution=attribution)
    except ValueError as exc:
        found.skipped[label] = str(exc)
        found.rare.append((int(sig["id"]), keep))
        return
    if warm and len(kt.steps):
        found.first_steady = max(found.first_steady, int(kt.steps["step"][max(int(it_of[keep[warm]]), 0)]))
    e = ep.energy["total"]
    found.rows.append((str(sig["name"]), sig["grid"], sig["block"], len(mine), int(ep.golden.count), warm,
                       float(ep.duration_ns), float(e.energy_j / (ep.duration_ns * 1e-9)) if ep.duration_ns > 0
                       else math.nan, float(e.energy_j), float(e.uncertainty_j), 0.0, False))
    found.profiles.append(ep)
    found.sig_ids.append(int(sig["id"]))
    found.kept_ids.append(keep[warm:])


def _trace_profile(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, model: Optional[SensorModel],
                   found: _Signatures, conc: np.ndarray, alignment: Optional[LogAlignment],
                   lmap: _Shifted, it_of: np.ndarray) -> TraceProfile:
    """The TraceProfile: the kernel table by energy share, per-iteration energy, and the logs on the timeline."""
    table = np.array(found.rows, dtype=kernel_table_dtype(max((len(r[0]) for r in found.rows), default=0)))
    total = table["count"] * table["energy_j"]
    known = float(np.nansum(total))
    table["share"] = total / known if known > 0 else np.nan
    # Unresolved kernels (NaN energy) last, the rest by total energy.
    order = np.lexsort((-np.nan_to_num(total, nan=-np.inf), ~np.isfinite(total)))
    sig_rows = np.array(found.sig_ids, dtype=np.int64)
    t_logs = _log_times(samples, t_logs, model)
    iters, summary = _iterations(kt, it_of, table, sig_rows, found.first_steady, t_logs,
                                 np.asarray(samples["total"], dtype=np.float64), seed=len(samples),
                                 windows_ns=_log_windows(samples, model))
    summary = _between_kernels(summary, found.notes)
    logs = np.zeros(len(samples), dtype=TRACE_LOG_DTYPE)
    logs["t_ns"] = t_logs
    for ch in ("total", "compute", "io", "memory"):
        logs[ch] = samples[ch] if ch in (samples.dtype.names or ()) else np.nan
    return TraceProfile(kernels=table[order], profiles=tuple(_with_rest(found.profiles[i]) for i in order), trace=kt,
                        concurrent=int(conc.sum()), skipped=found.skipped, iterations=iters, summary=summary,
                        signature_rows=sig_rows[order], logs=logs, alignment=alignment,
                        alignment_applied=lmap.shift_ns != 0.0,
                        sensor=model.name if model is not None else "instantaneous logs (no sensor model given)",
                        warnings=tuple(found.notes))


def _between_kernels(summary: Optional[IterationSummary], notes: list[str]) -> Optional[IterationSummary]:
    """The energy between kernels, never negative: kernels that add up to more than the iteration are a warning."""
    if summary is None or not summary.between_kernels_j < -summary.energy_half_width_j:
        return summary
    notes.append(f"the kernels' energies add up to {1e3 * summary.kernel_energy_j:.3f} mJ per iteration, more than "
                 f"the iteration's {1e3 * summary.energy_j:.3f} +- {1e3 * summary.energy_half_width_j:.3f} mJ: the "
                 "sensor model does not fit these logs (a window declared on instantaneous logs, a wrong delay?); "
                 "the energy between kernels is not reported")
    return dataclasses.replace(summary, between_kernels_j=math.nan, between_share=math.nan)
