"""Coarse rows: a level and its energy for signatures the stitch cannot profile.

FinGraV stitches one kernel's curve from the logs of many of its executions
(paper Section IV-B, steps 5-8): a signature that runs a few times in an
excerpt of a trace, or whose golden executions hold no log, has no curve.
Its power while it runs is still measured by every log that falls in (an
instantaneous log) or across (an averaging sensor's window) its executions,
so it gets a *coarse* row: one level over its executions, fitted jointly
with every other kernel of the timeline (the averaging sensor's joint fit,
:func:`~fingrav_native.method.fit_timeline`, with one bin for it; for
instantaneous logs the joint fit separates into one mean per kernel, since
such a log measures only what runs at its instant), with that fit's
interval, and an energy of the level x its own durations, as a
communication kernel's additive level gets (CompPow's accounting).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy import stats

from fingrav_native.insitu._results import COARSE_NOTE
from fingrav_native.method._golden import GoldenSelection
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile
from fingrav_native.records._layouts import LOI_DTYPE


def logs_inside(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per execution, the first of the sorted logs ``t`` strictly inside it and how many are.

    Strictly inside: a log on an edge measures the kernel before or after it as much as this one (the trace's
    stamps are rounded to its tick), and one on the edge two executions share would be counted twice. The logs
    of execution ``k`` are ``t[first[k]:first[k] + count[k]]``.
    """
    first = np.searchsorted(t, np.asarray(starts, dtype=np.float64), side="right")
    last = np.searchsorted(t, np.asarray(ends, dtype=np.float64), side="left")
    return first, np.clip(last - first, 0, None)


def inside_index(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The indices of the logs :func:`logs_inside` found, execution after execution."""
    return np.asarray(np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count - first, count))


def instant_level(t_logs: np.ndarray, power: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                  confidence: float = 0.95) -> tuple[float, float, float, int]:
    """A kernel's level from the instantaneous logs inside its executions: mean, interval ends, logs used.

    Parameters
    ----------
    t_logs, power : numpy.ndarray
        The logs' instants on the trace's timeline (ns, sorted or not) and their power (W).
    starts, ends : numpy.ndarray
        The executions (ns), not overlapping one another.
    confidence : float
        Of the interval.

    Returns
    -------
    tuple
        The mean power of the logs strictly inside the executions (NaN with none; a log on an edge is not
        counted), the low and high ends of its Student t interval (:func:`scipy.stats.ttest_1samp`; NaN with
        fewer than two logs), and the logs used.

    Notes
    -----
    An instantaneous log measures what runs at its instant (paper Section IV-B step 6), and a log lands at a
    phase of the execution independent of the kernel: the mean of the logs inside its executions estimates
    the time average of its power over them, which x their durations is their energy.
    """
    t_logs = np.asarray(t_logs, dtype=np.float64)
    # Sorted logs (as the caller's loop over signatures passes them) are searched as they are.
    order = np.arange(len(t_logs)) if bool(np.all(t_logs[1:] >= t_logs[:-1])) else np.argsort(t_logs, kind="stable")
    lo, cnt = logs_inside(t_logs[order], starts, ends)
    n = int(cnt.sum())
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    y = np.asarray(power, dtype=np.float64)[order][inside_index(lo, cnt)]
    mean = float(np.mean(y))
    if n < 2:
        return mean, math.nan, math.nan, n
    if float(np.ptp(y)) == 0.0:  # identical logs: the t interval is a point (scipy warns of a zero spread)
        return mean, mean, mean, n
    ci = stats.ttest_1samp(y, 0.0).confidence_interval(confidence)
    return mean, float(ci.low), float(ci.high), n


def coarse_profile(label: str, durations_ns: np.ndarray, runs: np.ndarray, levels: dict[str, tuple[float, float, float]],
                   n_logs: int, confidence: float, how: str, note: str = COARSE_NOTE) -> ExecutionProfile:
    """A signature's profile from one level: a flat curve at it, and level x its mean duration as its energy.

    Parameters
    ----------
    label : str
        The signature in words.
    durations_ns : numpy.ndarray
        Its executions' durations: the energy per execution is the level x their mean, so the row's
        count x energy is the level x their sum.
    runs : numpy.ndarray
        The executions' run ids (rows of the trace).
    levels : dict
        Per channel, the level, and the low and high ends of its interval (W).
    n_logs : int
        Logs the level rests on.
    confidence : float
        Of the interval.
    how : str
        How the level was fitted, in words (the energy's note, after ``note``).
    note : str
        What kind of row it is, the start of its energy's note (:data:`COARSE_NOTE`, or a joint row's words
        after it).

    Returns
    -------
    ExecutionProfile
        No stitched curve: one bin over the execution, every execution counted golden, no logs of interest.
    """
    d = float(np.mean(durations_ns))
    edges = np.array([0.0, d])
    chans, energy = [], {}
    for ch, (lvl, lo, hi) in levels.items():
        half = max(lvl - lo, hi - lvl) if math.isfinite(lo) and math.isfinite(hi) else math.nan
        z = float(stats.norm.ppf(0.5 + 0.5 * confidence))
        chans.append(StitchedChannel(
            name=ch, x="time", bin_edges=edges, bin_centres=np.array([0.5 * d]), count=np.array([n_logs]),
            mean=np.array([lvl]), sd=np.array([half / z]), ci_low=np.array([lo]), ci_high=np.array([hi]),
            confidence=confidence, fit_kind=None, fit_x=np.zeros(0), fit_y=np.zeros(0), n_lois=n_logs))
        energy[ch] = EnergyEstimate(
            energy_j=lvl * d * 1e-9, uncertainty_j=half * d * 1e-9, duration_ns=d, channel=ch, confidence=confidence,
            interpolated_share=0.0, pooled_share=0.0, note=f"{note}; {how}")
    runs = np.asarray(runs, dtype=np.int64)
    stitched = StitchedProfile(
        x="time", x_unit="ns", bin_width=d, channels=tuple(chans), n_lois=n_logs, runs=runs,
        duration_ns=d, smoother=None, span=math.nan, weighted=False, uncert_ns_median=math.nan,
        uncert_ns_max=math.nan)
    dur = np.asarray(durations_ns, dtype=np.float64)
    golden = GoldenSelection(low_ns=float(dur.min()), high_ns=float(dur.max()), margin=math.nan,
                             mask=np.ones(len(dur), dtype=bool), count=len(dur), total=len(dur), run_ids=runs,
                             tied_windows=1)
    return ExecutionProfile(label=label, execution_index=0, executions_per_run=1, golden=golden,
                            lois=np.zeros(0, dtype=LOI_DTYPE), stitched=stitched, duration_ns=d, energy=energy,
                            loi_target=0, top_up_runs=0)


def coarse_row(sig: np.void, count: int, kept: int, profile: ExecutionProfile) -> tuple[object, ...]:
    """The kernel table's row (KERNEL_TABLE_DTYPE's fields in order) of a coarse profile, marked joint."""
    e: Optional[EnergyEstimate] = profile.energy.get("total")
    lvl = float(profile.stitched.channels[0].mean[0]) if profile.stitched.channels else math.nan
    return (str(sig["name"]), sig["grid"], sig["block"], int(count), int(kept), 0, float(profile.duration_ns), lvl,
            e.energy_j if e is not None else math.nan, e.uncertainty_j if e is not None else math.nan, 0.0, True)


#: Executions holding logs below which a joint level gets no interval: with fewer clusters a cluster-robust
#: variance, even with Student t on clusters - 1 degrees of freedom, over-rejects (Cameron and Miller 2015,
#: J. Human Resources 50(2), Section VI: "few clusters" starts at about ten to twenty).
MIN_JOINT_CLUSTERS = 10

#: p-value below which the kernels' phases against the logger are taken as locked to it (pooled Rayleigh test,
#: :func:`phase_lock_p`): a logger period that divides the loop's lands its logs at the same instants of the loop
#: every iteration, so they sample a few fixed executions, not the executions' durations.
PHASE_LOCK_P = 1e-3


def group_level(t: np.ndarray, power: np.ndarray, starts: np.ndarray, ends: np.ndarray, confidence: float = 0.95,
                min_clusters: int = MIN_JOINT_CLUSTERS) -> tuple[float, float, float, int, int]:
    """The duration-weighted mean power of a group of executions from the instantaneous logs inside them.

    Parameters
    ----------
    t, power : numpy.ndarray
        The logs' instants on the trace's timeline (ns, sorted) and their power (W).
    starts, ends : numpy.ndarray
        The group's executions (ns), not overlapping one another.
    confidence : float
        Of the interval.
    min_clusters : int
        Executions holding logs below which the interval is not given (:data:`MIN_JOINT_CLUSTERS`).

    Returns
    -------
    tuple
        The mean of the logs strictly inside the executions (NaN with none), the low and high ends of its
        interval (NaN with fewer than ``min_clusters`` executions holding logs), the logs used and the
        executions holding them.

    Notes
    -----
    An instantaneous log at a phase independent of the kernels lands in an execution with probability
    proportional to its duration (paper Section IV-A: the runs' phase against the free-running logger is
    random), so the mean of the logs inside the group estimates its power averaged over its durations, whatever
    each member draws; x their summed duration it is the group's energy (CompPow's accounting of a joint draw:
    one figure for what ran together, none per member). The logs inside one execution measure one power curve,
    so the interval is the ratio estimator's (sum of logs' power over count of logs) cluster-robust one, each
    execution a cluster (the CR1 sandwich, Student t on clusters - 1 degrees of freedom; Cameron and Miller
    2015), never a t over the logs as if independent.
    """
    lo, cnt = logs_inside(t, starts, ends)
    n = int(cnt.sum())
    if n == 0:
        return math.nan, math.nan, math.nan, 0, 0
    csum = np.concatenate([[0.0], np.cumsum(np.asarray(power, dtype=np.float64))])
    held = cnt > 0
    y, m = (csum[lo + cnt] - csum[lo])[held], cnt[held].astype(np.float64)
    mean, c = float(y.sum() / n), int(held.sum())
    if c < min_clusters:
        return mean, math.nan, math.nan, n, c
    resid = y - mean * m
    se = math.sqrt(c / (c - 1) * float(np.sum(resid * resid))) / n
    half = float(stats.t.ppf(0.5 + 0.5 * confidence, c - 1)) * se
    return mean, mean - half, mean + half, n, c


def phase_lock_p(t: np.ndarray, starts: np.ndarray, groups: np.ndarray) -> float:
    """How plausible it is that executions start at phases of the logger not locked to it (a p-value).

    Parameters
    ----------
    t : numpy.ndarray
        The logs' instants (ns, sorted).
    starts : numpy.ndarray
        The executions' starts (ns).
    groups : numpy.ndarray
        Per execution, its signature: locking shows as one signature starting at one phase every time.

    Returns
    -------
    float
        The pooled Rayleigh test's p-value (Mardia and Jupp 2000, Section 6.3.1): per signature, its
        executions' phases (where each starts between the logs before and after it, once per gap between logs)
        give ``2 |sum exp(2 pi i phase)|^2 / n``, chi-squared with 2 degrees of freedom when the phases are
        uniform; their sum over the signatures has 2 per signature. 1.0 where no signature has two phases.
    """
    k = np.searchsorted(t, np.asarray(starts, dtype=np.float64), side="right")
    ok = (k > 0) & (k < len(t))
    k, s, g = k[ok], np.asarray(starts, dtype=np.float64)[ok], np.asarray(groups)[ok]
    if not len(k):
        return 1.0
    phase = (s - t[k - 1]) / (t[k] - t[k - 1])
    # Once per signature and gap: two executions in one gap cannot both hold its log, so they are not locked.
    _, first = np.unique(np.stack([g, k]), axis=1, return_index=True)
    g, z = g[first], np.exp(2j * np.pi * phase[first])
    ids, inv, n = np.unique(g, return_inverse=True, return_counts=True)
    keep = n >= 2
    if not keep.any():
        return 1.0
    r = np.abs(np.bincount(inv, weights=z.real, minlength=len(ids)) + 1j * np.bincount(inv, weights=z.imag,
                                                                                       minlength=len(ids)))
    stat = float(np.sum(2.0 * r[keep] ** 2 / n[keep]))
    return float(stats.chi2.sf(stat, 2 * int(keep.sum())))
