"""Joint attribution in situ: an averaging sensor's logs deconvolved over the application's whole timeline.

A window in a loop covers several kernels, so no signature's curve can be
found alone: one fit (:func:`~fingrav_native.method.fit_timeline`) draws
every signature's curve, the gaps' power, the communication's additive level
and the spans of concurrent compute kernels at once, and replaces the
per-signature stitch's rows and profiles with its own (the stitch gives only
the golden executions, the warm-up and the placement). The deconvolution of
the paper's windowed logs (Section IV-B step 8), across kernels instead of
across golden runs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional, Sequence

import numpy as np

from fingrav_native.insitu._concurrent import Spans, span_power_from_class
from fingrav_native.insitu._instant_attribution import Overlap, coarse_added, level_row, level_rows
from fingrav_native.insitu._overlap import is_communication
from fingrav_native.insitu._signatures import Signatures
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._deconvolved import Deconvolution, DeconvolvedChannel, as_stitched
from fingrav_native.method._joint import GAP_EDGES_NS, TimelineFit, fit_timeline
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.sensors._model import SensorModel

#: What the in-situ deconvolution assumes (listed in each profile's deconvolution).
TIMELINE_ASSUMPTIONS = (
    "executions of one signature past the warm-up share one curve over execution progress",
    "after a kernel the power falls from its end to a launch-gap level of its own, at once, within microseconds "
    "or not at all (whichever the data prefer); "
    "between kernels the power depends only on the kernel before and the time since it ended",
    "the sensor model (window, shape, delay, gain, offset) is right",
)


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


def joint_attribution(samples: np.ndarray, t: np.ndarray, kt: KernelTrace, model: SensorModel, on_device: np.ndarray,
           found: Signatures, bins: int, overlap: Overlap,
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
    levels = level_rows(found, kt, overlap)
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
    _joint_notes(fit, [rows[c].name for c in fitted] + [str(kt.signatures["name"][sid]) for sid, _ in rare]
                 + ["the spans of concurrent compute kernels"] * len(span_d), notes)
    _span_class(fit, len(kept_ids) if with_spans else None, found)
    _overlap_note(fit, kt, on_device, overlap, found)
    for c in np.flatnonzero(levels).tolist():
        rows[c], out[c] = level_row(rows[c], profiles[c], {
            ch: (fit.overlay_w.get(ch, math.nan), fit.overlay_low_w.get(ch, math.nan),
                 fit.overlay_high_w.get(ch, math.nan)) for ch in channels}, fit.confidence, fit.n_logs)
    for j, c in enumerate(fitted):
        out[c] = _joint_class_profile(fit, j, profiles[c], channels, gap_after, kept_ids[j], kt, bins, model)
        e = out[c].energy["total"]
        d = profiles[c].duration_ns
        rows[c] = rows[c]._replace(power_w=float(e.energy_j / (d * 1e-9)) if d > 0 else math.nan,
                                   energy_j=float(e.energy_j), energy_half_width_j=float(e.uncertainty_j))
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


def _joint_rare(found: Signatures, kt: KernelTrace, fit: TimelineFit, rare: list[tuple[int, np.ndarray]],
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
        coarse_added(found, kt, sid, keep, levels, n, fit.confidence,
                      f"one bin of the averaging sensor's joint fit over every kernel of the timeline, from the {n} "
                      "logs whose windows reach its executions, with the engine's bootstrap interval")


def _span_class(fit: TimelineFit, c: Optional[int], found: Signatures) -> None:
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


def _overlap_note(fit: TimelineFit, kt: KernelTrace, on_device: np.ndarray, overlap: Overlap,
                  found: Signatures) -> None:
    """What the joint fit used of the compute executions, what it left out and why, and the communication's level."""
    if not overlap.overlay.any():
        return
    compute = on_device & ~overlap.comm
    mine = ~is_communication(kt.signatures["name"])[np.asarray(found.sig_ids, dtype=np.int64)]
    n, used = int(compute.sum()), int(sum(len(k) for k, m in zip(found.kept_ids, mine) if m))
    warm = int(sum(int(r.warmup) for r, m in zip(found.rows, mine) if m))
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
    # Gap levels above the board (kernels' are named by power_limit_notes).
    notes.extend(w for w in fit.warnings if w.startswith("a gap level of"))


def _span(m: int) -> str:
    """Step ``m`` of :data:`GAP_EDGES_NS` in words ("10-40 us after it ended")."""
    a, b = GAP_EDGES_NS[m] / 1e3, GAP_EDGES_NS[m + 1] / 1e3
    return f"{a:g} us on" if math.isinf(b) else f"{a:g}-{b:g} us"
