"""The TraceProfile assembled: the kernel table by energy share, the energy per iteration and over the kernel span,
the concurrency counts and the warnings that say what the logs cannot resolve.

Per-iteration energy is a ratio estimator (the logs' mean power over the
steady iterations x their mean duration) with a bootstrap interval over
iterations (Efron and Tibshirani 1993); windows longer than an iteration
count every iteration they overlap instead (length-biased sampling, Cox 1962).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np
from scipy import stats

from fingrav_native.insitu._align import LogAlignment
from fingrav_native.insitu._concurrent import ConcurrentEnergy, Spans, concurrent_energy
from fingrav_native.insitu._instant_attribution import Overlap
from fingrav_native.insitu._overlap import communication_split
from fingrav_native.insitu._placement import ShiftedMap
from fingrav_native.insitu._results import (
    ITERATION_DTYPE,
    TRACE_LOG_DTYPE,
    IterationSummary,
    SpanEnergy,
    TraceProfile,
    kernel_table_dtype,
)
from fingrav_native.insitu._signatures import Signatures, signature_label
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._components import with_rest
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.sensors._model import SensorModel


def trace_profile(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, model: Optional[SensorModel],
                   found: Signatures, conc: np.ndarray, alignment: Optional[LogAlignment],
                   lmap: ShiftedMap, it_of: np.ndarray) -> TraceProfile:
    """The TraceProfile: the kernel table by energy share, per-iteration energy, and the logs on the timeline."""
    table = np.array(found.rows, dtype=kernel_table_dtype(max((len(r.name) for r in found.rows), default=0)))
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


def _log_windows(samples: np.ndarray, sensor: Optional[SensorModel]) -> Optional[np.ndarray]:
    """Each log's boxcar window (ns) where the sensor averages over one (a window, a counter's interval); else None."""
    if sensor is None or not sensor.averages or sensor.shape == "first_order":
        return None
    w = np.asarray(samples["window_ns"], dtype=np.float64) if "window_ns" in (samples.dtype.names or ()) \
        else np.zeros(len(samples))
    w = np.where(w > 0, w, sensor.window_ns)
    return w if len(w) and np.all(w > 0) else None


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
    own = sig_rows >= 0  # the joint row [g] has no signature: its members count as without an energy of their own
    e_sig[sig_rows[own]] = table["energy_j"][own]
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


def _between_kernels(summary: Optional[IterationSummary], notes: list[str]) -> Optional[IterationSummary]:
    """The energy between kernels, never negative: kernels that add up to more than the iteration are a warning."""
    if summary is None or not summary.between_kernels_j < -summary.energy_half_width_j:
        return summary
    notes.append(f"the kernels' energies add up to {1e3 * summary.kernel_energy_j:.3f} mJ per iteration, more than "
                 f"the iteration's {1e3 * summary.energy_j:.3f} +- {1e3 * summary.energy_half_width_j:.3f} mJ: the "
                 "sensor model does not fit these logs (a window declared on instantaneous logs, a wrong delay?); "
                 "the energy between kernels is not reported")
    return dataclasses.replace(summary, between_kernels_j=math.nan, between_share=math.nan)


def _with_rest(ep: ExecutionProfile) -> ExecutionProfile:
    """``ep`` with the ``"rest"`` curve (total minus memory) where the device reports memory power alone."""
    stitched, energy = with_rest(ep.stitched, ep.energy)
    return ep if stitched is ep.stitched else dataclasses.replace(ep, stitched=stitched, energy=energy)


def span_energy(kt: KernelTrace, on_device: np.ndarray, samples: np.ndarray, t_logs: np.ndarray,
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


def with_span(tp: TraceProfile, span: SpanEnergy) -> TraceProfile:
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


def concurrency_of(tp: TraceProfile, kt: KernelTrace, on_device: np.ndarray, overlap: Overlap, spans: Spans,
                 found: Signatures) -> ConcurrentEnergy:
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


def elsewhere(found: Signatures, kt: KernelTrace, on_device: np.ndarray) -> None:
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
        found.skipped[signature_label(kt.signatures[sid])] = (
            f"no execution on the power logs' device (it ran on device(s) {devices[sid]})" if sid in devices else
            "every execution has zero recorded duration (below the trace's resolution): none is left to attribute")


def nothing_or_undetermined(found: Signatures, iterations: bool) -> None:
    """The warnings for signatures without a coarse row (no log determines their level) and for a trace with no
    stitched row."""
    if found.undetermined:
        found.notes.append(f"{found.undetermined} signature(s) without a stitched curve (in skipped) have no log in or "
                           "across their executions, or one: their level (their power while they run) is not "
                           "determined, so they have no coarse row")
    if len(found.rows) == found.coarse:
        _nothing_profiled(found, iterations)


def _nothing_profiled(found: Signatures, iterations: bool) -> None:
    """No signature could be profiled: each one's shortfall noted, and what is reported instead.

    A short trace (a few ProfilerStep#N, or a few kernels and none) is not refused whole: the table is
    empty and the energy per iteration, or over the trace's kernel span, is what the logs can say.
    """
    shown = "; ".join(f"{k[:80]}: {v[:120]}" for k, v in list(found.skipped.items())[:10])
    why = (f"no kernel signature could be profiled ({len(found.skipped)} skipped: "
           f"{shown}{'; ...' if len(found.skipped) > 10 else ''})")
    found.notes.append(why + ("; only the energy per iteration is reported, and the energy over the kernel span where "
                              "the iterations are too few for an interval of their own" if iterations else
                              "; the trace marks no iteration (ProfilerStep#N), so only the energy over its kernel "
                              "span, from the logs, is reported"))


def power_limit_notes(found: Signatures, max_power_w: Optional[float]) -> None:
    """A kernel whose mean or curve exceeds what the board can draw: said, not printed as a result."""
    if max_power_w is None:
        return
    for row, ep in zip(found.rows, found.profiles):
        peak = max((float(np.nanmax(c.mean)) for c in ep.stitched.channels if c.name == "total"
                    and np.isfinite(c.mean).any()), default=math.nan)
        if (math.isfinite(row.power_w) and row.power_w > max_power_w) or (
                math.isfinite(peak) and peak > 1.05 * max_power_w):
            found.notes.append(f"{row.name}: {row.power_w:.0f} W mean, {peak:.0f} W peak, above the board's "
                               f"{max_power_w:.0f} W: the sensor model is wrong for these logs, or the logs do not "
                               "separate this kernel from its neighbours; do not read its power")


def trace_wide(tp: TraceProfile, found: Signatures, kt: KernelTrace, on_device: np.ndarray, overlap: Overlap,
               spans: Optional[Spans], it_of: np.ndarray, samples: np.ndarray, t_logs: np.ndarray,
               model: Optional[SensorModel]) -> TraceProfile:
    """The result's trace-wide parts: what ran on several compute streams (:func:`concurrency_of`), the
    communication's share of each iteration, and, where no signature has a stitched row and no energy per
    iteration has an interval (the trace marks no iteration, or too few for one), the energy over the device's
    kernel span (:func:`span_energy`): the one figure with an interval such a trace still gives."""
    if spans is not None:
        tp = dataclasses.replace(tp, concurrency=concurrency_of(tp, kt, on_device, overlap, spans, found))
    if overlap.comm.any() and tp.summary is not None:
        tp = dataclasses.replace(tp, summary=dataclasses.replace(tp.summary, **communication_split(
            tp.summary.note, kt, it_of, tp.iterations, overlap.comm, on_device & ~overlap.comm, tp.kernels,
            tp.signature_rows)))
    if len(found.rows) == found.coarse and (tp.summary is None or not math.isfinite(tp.summary.energy_half_width_j)):
        tp = with_span(tp, span_energy(kt, on_device, samples, t_logs, model))
    return tp
