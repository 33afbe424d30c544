"""Instant attribution in situ: each log is the power at its instant (paper Section IV-B step 6).

What the per-signature stitch leaves to the trace as a whole: a
communication kernel's additive level taken off the logs of the compute
kernels it overlaps (and its own row from that level), the coarse rows of
signatures the stitch cannot profile, and each row's interval widened by what
the logs' placement error can move its energy. Also the rows the joint fit
shares: a communication signature drawn as a level (:func:`level_row`) and a
coarse row (:func:`coarse_added`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
from scipy import stats

from fingrav_native.insitu._align import MISMATCH_SLACK_NS
from fingrav_native.insitu._concurrent import Spans, instant_span_power
from fingrav_native.insitu._overlap import (
    CommunicationLevel,
    beside_compute,
    communication_overlap,
    keep_overlapped_compute,
    running,
)
from fingrav_native.insitu._placement import ShiftedMap
from fingrav_native.insitu._rare import (
    MIN_JOINT_CLUSTERS,
    PHASE_LOCK_P,
    coarse_profile,
    coarse_row,
    group_level,
    inside_index,
    instant_level,
    logs_inside,
    phase_lock_p,
)
from fingrav_native.insitu._results import COARSE_NOTE, IN_JOINT_ROW, JOINT_GROUP_NOTE
from fingrav_native.insitu._signatures import KernelRow, Signatures, signature_label
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile


@dataclasses.dataclass(frozen=True)
class Overlap:
    """Per execution: a communication kernel of the device, compute overlapped by communication alone, and
    compute overlapped by other compute (insitu._overlap.communication_overlap); the communication kernels
    drawn as an additive level (their signature runs beside compute, insitu._overlap.beside_compute), and the
    instantaneous logs' fitted level (None in the joint fit, which fits its own)."""

    comm: np.ndarray
    over: np.ndarray
    compute_conc: np.ndarray
    overlay: np.ndarray
    level: Optional[CommunicationLevel] = None


def overlapped(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, on_device: np.ndarray, conc: np.ndarray,
                joint: bool, notes: list[str]) -> tuple[np.ndarray, np.ndarray, Overlap]:
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
    overlap = Overlap(comm, over, compute_conc, overlay)
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


def level_rows(found: Signatures, kt: KernelTrace, overlap: Overlap) -> np.ndarray:
    """Per row of ``found``, whether its signature is a communication kernel drawn as an additive level."""
    ids = np.unique(kt.executions["kernel_id"][overlap.overlay])
    return np.isin(np.asarray(found.sig_ids, dtype=np.int64), ids)


#: How a communication kernel beside compute is attributed, in the row's profile and the printout.
LEVEL_NOTE = ("joint attribution: a communication kernel beside compute kernels, its energy the additive level it "
              "draws over whatever runs beside it x its own duration (the compute kernels' draw is in their rows; "
              "one level is shared by every communication signature beside compute)")


def level_row(row: KernelRow, ep: ExecutionProfile, levels: dict[str, tuple[float, float, float]],
              confidence: float, n_logs: int) -> tuple[KernelRow, ExecutionProfile]:
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
    energy_j, half_j = (e.energy_j, e.uncertainty_j) if e is not None else (math.nan, math.nan)
    row = row._replace(power_w=levels["total"][0] if "total" in levels else math.nan, energy_j=energy_j,
                       energy_half_width_j=half_j, joint=True)
    return row, dataclasses.replace(ep, stitched=stitched, energy=energy, deconvolution=None)


def instant_levels(found: Signatures, kt: KernelTrace, overlap: Overlap) -> None:
    """Instantaneous logs: each communication signature beside compute gets its row from the fitted level
    (``overlap.level``, a normal interval on its standard error), or is skipped where none was
    fitted."""
    levels = level_rows(found, kt, overlap)
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
        found.rows[c], found.profiles[c] = level_row(
            found.rows[c], found.profiles[c],
            {"total": (lvl.level_w, lvl.level_w - z * lvl.se_w, lvl.level_w + z * lvl.se_w)}, 0.95, lvl.logs_during)
    if not keep.all():
        for name in ("rows", "profiles", "sig_ids", "kept_ids"):
            setattr(found, name, [x for x, k in zip(getattr(found, name), keep.tolist()) if k])


def coarse_added(found: Signatures, kt: KernelTrace, sid: int, keep: np.ndarray,
                  levels: dict[str, tuple[float, float, float]], n_logs: int, confidence: float, how: str) -> None:
    """A coarse row for signature ``sid`` (its executions ``keep``) into ``found``, out of ``skipped``; or, where the
    logs give its level no interval, its reason in ``skipped`` saying so."""
    sig, label = kt.signatures[sid], signature_label(kt.signatures[sid])
    ex = kt.executions[keep]
    lvl, lo, hi = levels.get("total", (math.nan, math.nan, math.nan))
    if not (math.isfinite(lvl) and math.isfinite(lo) and math.isfinite(hi)):
        # Its reason in skipped stays the stitch's; the count of such signatures is one warning (_undetermined).
        found.undetermined += 1
        return
    ep = coarse_profile(label, (ex["end_ns"] - ex["start_ns"]).astype(np.float64), ex["run"], levels, n_logs,
                        confidence, how)
    mine = int(np.count_nonzero(kt.executions["kernel_id"] == sid))
    found.rows.append(KernelRow._make(coarse_row(sig, mine, len(keep), ep)))
    found.profiles.append(ep)
    found.sig_ids.append(sid)
    found.kept_ids.append(keep)
    found.coarse += 1
    found.skipped.pop(label, None)


def _instant_rare(found: Signatures, kt: KernelTrace, t_logs: np.ndarray, power: np.ndarray) -> None:
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
        coarse_added(found, kt, sid, keep, {"total": (lvl, lo, hi)}, n, 0.95,
                      f"the mean of the {n} instantaneous logs inside its {len(keep)} executions alone, with a "
                      "Student t interval")


def _group_members(found: Signatures, kt: KernelTrace, overlap: Overlap, it_of: np.ndarray
                   ) -> list[tuple[int, np.ndarray]]:
    """The signatures no row holds (no stitch, no coarse interval), not communication, with their executions alone
    on the device past the warm-up (iterations before ``found.first_steady`` left out where the trace marks any)."""
    has_row = set(found.sig_ids)
    comm = set(np.unique(kt.executions["kernel_id"][overlap.comm]).tolist())
    steps = kt.steps["step"] if len(kt.steps) else np.zeros(0, dtype=np.int64)
    warm = found.first_steady > np.iinfo(np.int64).min and len(steps) > 0
    out = []
    for sid, keep in found.rare:
        if sid in has_row or sid in comm or not len(keep):
            continue
        if warm:
            it = it_of[keep]
            keep = keep[(it >= 0) & (steps[np.clip(it, 0, None)] >= found.first_steady)]
        if len(keep):
            out.append((sid, keep))
    return out


def _level_term_w(t: np.ndarray, ex: np.ndarray, kt: KernelTrace, overlap: Overlap) -> float:
    """What the communication level's error can move the mean of the logs inside ``ex`` (W, a half-width).

    The logs taken while a communication kernel ran have its fitted level taken off
    (insitu._overlap.keep_overlapped_compute); one error of that level moves every one of them alike, so it
    adds linearly: the share of the logs inside ``ex`` taken then x the level's 95 % half-width.
    """
    lvl = overlap.level
    if lvl is None or not math.isfinite(lvl.se_w) or not overlap.comm.any():
        return 0.0
    first, count = logs_inside(t, ex["start_ns"], ex["end_ns"])
    if not count.any():
        return 0.0
    cx = kt.executions[overlap.comm]
    # The logs group_level averages.
    during = running(t[inside_index(first, count)], cx["start_ns"].astype(np.float64), cx["end_ns"].astype(np.float64))
    return float(np.mean(during)) * float(stats.norm.ppf(0.975)) * lvl.se_w


def joint_group(found: Signatures, kt: KernelTrace, t_logs: np.ndarray, total_w: np.ndarray, overlap: Overlap,
                it_of: np.ndarray) -> None:
    """Instantaneous logs: one joint row ``[g]`` for the signatures no row of their own holds, or a note why not.

    Their executions together are sampled by every log inside any of them: the logs' mean is the group's
    duration-weighted power and x their summed duration its energy (insitu._rare.group_level, with a
    cluster-robust interval over executions). No row where fewer than MIN_JOINT_CLUSTERS executions hold logs,
    or where the device's kernels start at phases locked to the logger (the logs then sample a few fixed instants
    of the loop, not the members' durations: insitu._rare.phase_lock_p). Each member stays in ``skipped``, its reason
    starting with IN_JOINT_ROW; no member gets an energy of its own.
    """
    members = _group_members(found, kt, overlap, it_of)
    if len(members) < 2:  # one signature alone is a coarse row's case, which its logs did not determine
        return
    rows = np.concatenate([keep for _, keep in members])
    rows = rows[np.argsort(kt.executions["start_ns"][rows], kind="stable")]
    ex = kt.executions[rows]
    order = np.argsort(t_logs, kind="stable")
    t, w = np.asarray(t_logs, dtype=np.float64)[order], np.asarray(total_w, dtype=np.float64)[order]
    lvl, lo, hi, n, c = group_level(t, w, ex["start_ns"], ex["end_ns"])
    what = f"{len(members)} signatures without a row of their own ({len(rows)} executions)"
    if not math.isfinite(hi):
        found.notes.append(f"{what}: the logs fall inside {c} of their executions, fewer than "
                           f"{MIN_JOINT_CLUSTERS} for a joint row's interval, so their energy is not given")
        return
    # Every signature of the device: a loop locked to the logger shows in its frequent kernels' phases even where
    # each member runs once (its instants of the loop then hold its logs every iteration).
    dev = kt.executions[kt.device == kt.device[rows[0]]]
    p = phase_lock_p(t, dev["start_ns"], dev["kernel_id"])
    if p < PHASE_LOCK_P:
        found.notes.append(f"{what}: the device's kernels start at the same phase of the logger every time (pooled "
                           f"Rayleigh test p = {p:.2g}; a logger period that divides the loop's): the logs sample a "
                           "few fixed instants of the loop, not their durations, so no joint row is given")
        return
    label = f"[joint] {len(members)} signatures without a row"  # fits the printed name column
    level = _level_term_w(t, ex, kt, overlap)
    ep = coarse_profile(label, (ex["end_ns"] - ex["start_ns"]).astype(np.float64), ex["run"],
                        {"total": (lvl, lo - level, hi + level)}, n, 0.95,
                        f"the mean of the {n} instantaneous logs inside {c} of their {len(rows)} executions, with a "
                        "cluster-robust interval over executions (Student t)"
                        + (f", widened by {level:.2g} W for the communication level taken off some of them"
                           if level > 0 else ""), note=f"{COARSE_NOTE}; {JOINT_GROUP_NOTE}")
    # A record of its own, as wide as its label (the trace's names may be narrower), no launch shape.
    sig = np.zeros(1, dtype=[("name", f"U{len(label)}"), ("grid", np.int64, (3,)), ("block", np.int64, (3,))])[0]
    sig["name"], sig["grid"], sig["block"] = label, -1, -1
    found.rows.append(KernelRow._make(coarse_row(sig, len(rows), len(rows), ep)))
    found.profiles.append(ep)
    found.sig_ids.append(-1)  # no signature of its own: every reader of signature_rows skips it
    found.kept_ids.append(rows)
    found.coarse += 1
    found.undetermined -= len(members)  # each was counted by coarse_added: the warning names those left out
    for sid, _ in members:
        lab = signature_label(kt.signatures[sid])
        found.skipped[lab] = f"{IN_JOINT_ROW} ({label}): no energy of its own; " + found.skipped.get(lab, "")


def instant_extras(found: Signatures, kt: KernelTrace, t_logs: np.ndarray, total_w: np.ndarray,
                    spans: Optional[Spans], overlap: Overlap, it_of: np.ndarray) -> None:
    """Instantaneous logs: the coarse rows of the signatures the stitch could not use, the joint row of those no row
    holds (``it_of``: :meth:`KernelTrace.iteration`, for their warm-up), and the spans' power."""
    _instant_rare(found, kt, t_logs, total_w)
    joint_group(found, kt, t_logs, total_w, overlap, it_of)
    if spans is not None:
        found.span_fit = instant_span_power(t_logs, total_w, spans.start, spans.end)
        found.span_how = "the mean of the instantaneous logs in the spans"


def _placement_half_width(lmap: ShiftedMap, starts: np.ndarray, kt: KernelTrace, rows: np.ndarray) -> float:
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


def placement_terms(found: Signatures, kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray,
                     lmap: ShiftedMap) -> None:
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
        found.rows[c] = found.rows[c]._replace(energy_half_width_j=float(new.uncertainty_j))
