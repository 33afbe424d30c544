"""Windowed logs over a timeline of many kernels: every kernel's curve and the gaps' power, fitted jointly.

:func:`~fingrav_native.method.deconvolve` recovers one kernel's
curve from runs that hold only that kernel (a controlled campaign). In a
running application a 1 ms window covers several kernels of different
signatures and the gaps between them, so a log is a mixture: attributing it
to one kernel is tens of percent off. Here each log is what the sensor
model says it is, a linear functional of the power over the timeline
(Yang et al., SC'24; equivalent-time sampling), and the timeline is tiled
into unknowns:

* each kernel class (a signature) draws one curve over execution progress,
  ``bins`` steps of power, shared by its executions;
* the gaps between kernels draw their own power: after a kernel the power
  falls from that kernel's end to a launch-gap level shared by all (compute
  units idle, clocks up: power falls within microseconds on real GPUs) with
  a time constant from :data:`FALL_NS` (at once, a few microseconds, or
  never: the gap held at the kernel's end), chosen by the data; longer gaps
  (host gaps, pauses, idle) a level per step of time since the last kernel
  ended, per kind of kernel before them (the power relaxes towards idle
  from that kernel's level).

The attribution engine (:mod:`fingrav_native.method._engine`, the same the
campaign's :func:`~fingrav_native.method.deconvolve` uses) solves it: power
bounded below, the smoothing and the model (how fast a launch gap falls to its own
level; a slow drift or none) chosen by cross-validation over blocks of
the record, intervals from a bootstrap over blocks that repeats that choice,
each curve's bins limited by the window edges that fall in its executions,
the energies the logs cannot separate named, and a model check.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import (
    check_power,
    finite_array,
    fraction,
    instance_of,
    integer_in,
    positive_number,
    real_number,
    short_repr,
    whole_numbers,
)
from fingrav_native._threads import numeric_threads
from fingrav_native.method._engine import IDENTIFIABLE_SHARE, attribute
from fingrav_native.method._engine_check import ModelCheck, check_model
from fingrav_native.method._engine_design import (
    TILE_EXECUTION,
    TILE_GAP,
    TILE_IDLE,
    Design,
    FitTooLargeError,
    Tiling,
    response_span,
    tile_rows,
)
from fingrav_native.method._engine_solution import Solution
from fingrav_native.method._joint_columns import GAP_EDGES_NS as GAP_EDGES_NS
from fingrav_native.method._joint_columns import Columns, column_maps, columns, penalties
from fingrav_native.sensors._model import SensorModel

#: Candidate time constants (ns) with which a gap's power falls from the end of the kernel before it
#: to the gap's own level: 0 at once, inf never (held). On GPUs it falls within microseconds once the
#: compute units go idle; over a gap of a few microseconds the fall is much of the gap's energy,
#: which a level shared by all gaps puts into the neighbouring kernels. Cross-validation chooses,
#: and the bootstrap repeats the choice.
FALL_NS = (0.0, 1_000.0, 2_000.0, 3_000.0, 5_000.0, 10_000.0, math.inf)

#: Window edges wanted per curve bin: a class gets at most its edges over this many bins (at least one).
EDGES_PER_BIN = 10


@dataclass(frozen=True)
class TimelineFit:
    """Every kernel class's curve and the gaps' power, from windowed logs over a mixed timeline.

    Attributes
    ----------
    bins : numpy.ndarray
        Curve bins per class: as asked, or fewer where the logs hold fewer
        than ten window edges per bin in its executions (one bin: the level
        alone).
    bins_asked : numpy.ndarray
        The bins asked for.
    curves, sd : dict of str to list of numpy.ndarray
        Per channel, per class: power per bin (W) and its bootstrap standard
        deviation.
    curve_low_w, curve_high_w : dict of str to list of numpy.ndarray
        Per channel, per class: each bin's interval at ``confidence``, the
        same band as the energy's (the bootstrap's percentiles joined with
        Student's t on its deviation for the blocks it had, widened over the
        smoothings cross-validation cannot tell apart, never below zero
        where no draw is); NaN without a bootstrap, and for a class the
        logs do not determine (``identifiable``), whose bins carry no band.
    energy_j, energy_half_width_j : dict of str to numpy.ndarray
        Per channel, per class: energy per execution (curve x the class's
        duration) and the half-width of the symmetric interval around it
        that holds its interval ``[energy_low_j, energy_high_j]`` at
        ``confidence`` (wider than that band where it is lopsided); NaN where
        the logs do not determine it (``identifiable``).
    energy_low_j, energy_high_j : dict of str to numpy.ndarray
        The interval's ends.
    gap_w : dict of str to numpy.ndarray
        Per channel, ``(classes + 1, steps)``: the power in gaps of
        :data:`GAP_EDGES_NS`'s first step or longer (host gaps, pauses, idle)
        after a kernel of each class (the last row: after an excluded one),
        per step of time since it ended (NaN where no log saw such a gap).
        A step whose gaps hold fewer than :data:`EDGES_PER_BIN` window edges
        shares one level per step with every other such step (the logs cannot
        tell them apart): its entry is that shared level.
    launch_gap_w : dict of str to float
        Per channel, the level shared by launch gaps (shorter than the first
        step), after the fall from the kernel before them; where the model
        holds launch gaps at the kernel's end, NaN.
    durations_ns : numpy.ndarray
        The duration each class's energy is taken over.
    n_logs : int
        Logs used.
    dropped_logs : int
        Logs left out: their response reaches outside the timeline or an
        excluded span (warm-up, concurrent kernels).
    logs_per_bin : list of numpy.ndarray
        Per class, the logs whose response reaches each bin.
    edge_logs : numpy.ndarray
        Per class, logs with a window edge inside one of its executions
        (where a curve's shape comes from).
    lam : float
        The smoothing chosen (relative to the data's scale).
    residual_w : dict of str to float
        RMS residual per channel.
    confidence : float
    model : str
        The model cross-validation chose, in words.
    info_share : numpy.ndarray
        Per class, the share of its energy's precision the logs supply.
    identifiable : numpy.ndarray
        Per class, whether the logs determine its energy (``info_share`` at
        least 0.1).
    confounded : list of list of int
        Groups of classes whose energies the logs cannot tell apart (every
        window covers them in the same mix).
    check : ModelCheck
        What the residuals say about the assumptions.
    warnings : tuple of str
        What the logs cannot resolve, and the assumptions the residuals reject.
    n_boot : int
        Bootstrap resamples behind the intervals (0: none, too few blocks).
    overlay_w, overlay_low_w, overlay_high_w : dict of str to float
        Per channel, the additive level drawn while an ``overlay_ns``
        interval runs (communication kernels) and its interval; empty
        without overlay intervals.
    """

    bins: np.ndarray
    curves: dict[str, list[np.ndarray]]
    sd: dict[str, list[np.ndarray]]
    energy_j: dict[str, np.ndarray]
    energy_half_width_j: dict[str, np.ndarray]
    gap_w: dict[str, np.ndarray]
    launch_gap_w: dict[str, float]
    durations_ns: np.ndarray
    n_logs: int
    dropped_logs: int
    logs_per_bin: list[np.ndarray]
    edge_logs: np.ndarray
    lam: float
    residual_w: dict[str, float]
    confidence: float
    energy_low_j: dict[str, np.ndarray]
    energy_high_j: dict[str, np.ndarray]
    bins_asked: np.ndarray
    model: str
    info_share: np.ndarray
    identifiable: np.ndarray
    confounded: list[list[int]]
    check: ModelCheck
    warnings: tuple[str, ...]
    n_boot: int
    curve_low_w: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)
    curve_high_w: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=dict)
    overlay_w: dict[str, float] = dataclasses.field(default_factory=dict)
    overlay_low_w: dict[str, float] = dataclasses.field(default_factory=dict)
    overlay_high_w: dict[str, float] = dataclasses.field(default_factory=dict)


def _check_timeline(t_ns: npt.ArrayLike, starts_ns: npt.ArrayLike, ends_ns: npt.ArrayLike, classes: npt.ArrayLike,
                    bins: Sequence[int], confidence: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The logs' stamps, the executions (start, end, class) and the bins per class, as arrays, checked."""
    t = finite_array(t_ns, "t_ns")
    s = finite_array(starts_ns, "starts_ns")
    e = finite_array(ends_ns, "ends_ns")
    cls = whole_numbers(classes, "classes", -1, 2**31 - 1)
    K = whole_numbers(bins, "bins", 1, 10_000)
    if t.ndim != 1:
        raise ValueError("t_ns: must be 1-D")
    if not (s.shape == e.shape == cls.shape) or s.ndim != 1 or len(s) < 1:
        raise ValueError("starts_ns, ends_ns, classes: must be 1-D of one length >= 1")
    if np.any(np.diff(s) < 0) or np.any(e < s) or np.any(s[1:] < e[:-1] - 1.0):
        raise ValueError("starts_ns, ends_ns: executions must be in start order and not overlap")
    if K.ndim != 1 or len(K) == 0 or np.any(K < 1):
        raise ValueError(f"bins={short_repr(bins)}: one count >= 1 per class")
    if np.any(cls >= len(K)) or np.any(cls < -1):
        raise ValueError(f"classes: must be -1 or in [0, {len(K)})")
    fraction(confidence, "confidence")
    return t, s, e, cls, K


def _calibrated(sensor: SensorModel, values: dict[str, npt.ArrayLike], t: np.ndarray) -> dict[str, np.ndarray]:
    """Each channel's logs with the sensor's calibration undone, so the unknowns are true watts."""
    if not isinstance(values, dict):
        raise ValueError(f"values={short_repr(values)}: must be a dict of channel name to the logs' power")
    ys = {}
    for ch, v in values.items():
        y = check_power(finite_array(v, f"values[{ch!r}]"), f"values[{ch!r}]")
        if y.shape != t.shape:
            raise ValueError(f"values[{ch!r}]: {y.shape} values for {t.shape[0]} logs")
        ys[ch] = (y - sensor.offset_w) / sensor.gain
    if "total" not in ys:
        raise ValueError("values: a 'total' channel is needed (the smoothing is chosen on it)")
    return ys


def _edge_logs(s: np.ndarray, e: np.ndarray, cls: np.ndarray, lo: np.ndarray, n_cls: int) -> np.ndarray:
    """Per class, the logs whose window edge falls inside one of its executions: the shape's information."""
    edge_ex = np.searchsorted(s, lo, side="right") - 1
    in_ex = (edge_ex >= 0) & (lo < e[np.clip(edge_ex, 0, None)])
    edge_cls = cls[np.clip(edge_ex, 0, None)][in_ex]
    return np.bincount(edge_cls[edge_cls >= 0], minlength=n_cls)



def _durations(cls: np.ndarray, s: np.ndarray, e: np.ndarray, n_cls: int,
               durations_ns: Optional[npt.ArrayLike]) -> np.ndarray:
    """Per class, the duration its energy is taken over: given, or the median of its executions."""
    durations = np.empty(n_cls)
    for c in range(n_cls):
        mine = cls == c
        durations[c] = float(np.median((e - s)[mine])) if mine.any() else math.nan
    if durations_ns is not None:
        d_in = np.asarray(durations_ns, dtype=np.float64)
        if d_in.shape != durations.shape:
            raise ValueError(f"durations_ns: one per class ({n_cls})")
        durations = d_in
    return durations



def merged_intervals(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[a, b)``, as sorted disjoint intervals (touching ones joined)."""
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    reach = np.maximum.accumulate(b)
    new = np.ones(len(a), dtype=bool)
    new[1:] = a[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return a[first], reach[np.append(first[1:], len(a)) - 1]


def _overlaid(a: np.ndarray, b: np.ndarray, col: np.ndarray, kind: np.ndarray, overlay: tuple[np.ndarray, np.ndarray],
              level: int) -> tuple[np.ndarray, ...]:
    """Tiles cut at the overlay intervals' ends; the pieces inside one draw ``level`` on top of their own column.

    A window over a compute kernel and a communication kernel beside it measures both: the kernel's curve
    bin plus the communication's additive level (excluded tiles stay excluded).
    """
    o_a, o_b = overlay
    cuts = np.concatenate([o_a, o_b])
    cuts.sort()
    lo = np.searchsorted(cuts, a, side="right")
    n_cut = np.maximum(np.searchsorted(cuts, b, side="left") - lo, 0)
    reps = np.repeat(np.arange(len(a)), n_cut + 1)
    k = np.arange(len(reps)) - np.repeat(np.cumsum(n_cut + 1) - (n_cut + 1), n_cut + 1)
    top = max(len(cuts) - 1, 0)
    start = np.where(k == 0, a[reps], cuts[np.clip(lo[reps] + k - 1, 0, top)])
    end = np.where(k == n_cut[reps], b[reps], cuts[np.clip(lo[reps] + k, 0, top)])
    keep = end > start
    reps, start, end = reps[keep], start[keep], end[keep]
    mid = 0.5 * (start + end)
    j = np.searchsorted(o_a, mid, side="right") - 1
    inside = (j >= 0) & (mid < o_b[np.clip(j, 0, None)]) & (col[reps] >= 0)
    return start, end, col[reps], np.where(inside, level, -1), kind[reps]


def _exec_tiles(s: np.ndarray, e: np.ndarray, cls: np.ndarray, cols: Columns) -> tuple[np.ndarray, ...]:
    """Executions cut into their class's curve bins (an excluded execution: one tile of column -1)."""
    K = np.where(cls >= 0, cols.K[np.maximum(cls, 0)], 1)
    reps = np.repeat(np.arange(len(s)), K)
    k = np.arange(int(K.sum())) - np.repeat(np.cumsum(K) - K, K)
    d = (e - s)[reps]
    a = s[reps] + d * k / K[reps]
    b = s[reps] + d * (k + 1) / K[reps]
    col = np.where(cls[reps] >= 0, cols.offsets[np.maximum(cls[reps], 0)] + k, -1)
    return a, b, col, np.full(len(a), TILE_EXECUTION)


def _gap_tiles(s: np.ndarray, e: np.ndarray, cls: np.ndarray, cols: Columns, hi: float,
               fall_ns: float) -> tuple[np.ndarray, ...]:
    """Gaps after each execution (to the next start, or ``hi`` after the last), stepped by time since it ended.

    ``fall_ns``: the power falls from the end of the kernel before with this
    time constant (0: at once; inf: never, the launch gap held at it). Its
    energy is exact as the kernel's last bin held for ``tau (1 - exp(-L /
    tau))`` of a gap of ``L``, then the gap's own steps: a window of
    milliseconds cannot tell where inside a few microseconds it falls.
    """
    n_cls = len(cols.K)
    g1 = np.append(np.maximum(s[1:], e[:-1]), max(hi, float(e[-1])))
    prev = np.where(cls >= 0, cls, n_cls)
    last_bin = np.where(cls >= 0, cols.offsets[np.maximum(cls, 0)] + cols.K[np.maximum(cls, 0)] - 1, -1)
    length = g1 - e
    if math.isinf(fall_ns):
        held = np.minimum(length, GAP_EDGES_NS[1])
    elif fall_ns > 0:
        held = fall_ns * -np.expm1(-length / fall_ns)
    else:
        held = np.zeros(len(e))
    g0 = e + held
    edges = np.asarray(GAP_EDGES_NS)
    out_a, out_b, out_c, out_k = [e[held > 0]], [g0[held > 0]], [last_bin[held > 0]], \
        [np.full(int(np.sum(held > 0)), TILE_GAP)]
    for m in range(cols.n_steps):
        # Steps by time since the kernel ended (the held part counts as time within the first).
        lo = np.maximum(g0, e + edges[m])
        up = np.minimum(g1, e + edges[m + 1])
        sel = up > lo
        c = cols.step(prev[sel], m)
        if m == 0:
            # The rest of a launch gap (the next kernel within the first step): its own level, shared by all
            # (compute units idle, clocks up). A longer gap (a host gap, a pause) starts on a level per kernel
            # before it: there clocks and voltage come down too, from that kernel's level, and a simulated
            # loop whose pauses relax over 50 us put +2.4 % into the kernel before them with the launch level.
            c = np.where(length[sel] < edges[1], cols.launch, c)
        out_a.append(lo[sel])
        out_b.append(up[sel])
        out_c.append(c)
        out_k.append(np.full(int(sel.sum()), TILE_IDLE if m == cols.n_steps - 1 else TILE_GAP))
    return tuple(np.concatenate(x) for x in (out_a, out_b, out_c, out_k))


def _tiling(s: np.ndarray, e: np.ndarray, cls: np.ndarray, cols: Columns, lo: float, hi: float,
            fall_ns: float, overlay: Optional[tuple[np.ndarray, np.ndarray]] = None) -> Tiling:
    """The timeline from ``lo`` to ``hi`` as contiguous tiles: idle before, executions, gaps (own or held),
    and the overlay's level on top where its intervals run."""
    n_cls = len(cols.K)
    parts = [_exec_tiles(s, e, cls, cols), _gap_tiles(s, e, cls, cols, hi, fall_ns)]
    if lo < s[0]:
        # Before the first kernel: the longest step after "none" (the idle level).
        parts.append((np.array([lo]), np.array([float(s[0])]), cols.step(np.array([n_cls]), cols.n_steps - 1),
                      np.array([TILE_IDLE])))
    a, b, col, kind = (np.concatenate([p[i] for p in parts]) for i in range(4))
    order = np.lexsort((b, a))
    a, b, col, kind = a[order], b[order], col[order].astype(np.int64), kind[order]
    col2 = np.full(len(a), -1, dtype=np.int64)
    if overlay is not None and len(overlay[0]):
        a, b, col, col2, kind = _overlaid(a, b, col, kind, overlay, cols.overlay)
    return Tiling(a, b, col, col2.astype(np.int64), kind)


def _drift_spacing(drift_ns: float, s: np.ndarray, e: np.ndarray) -> float:
    """The drift's knot spacing: as asked, but at least ten times the longest execution.

    A drift with knots closer than that can draw an execution's own level
    (a 6 s load under 100 ms knots): it would trade with the energies and
    leave them unidentified. Slow means slow against what is measured.
    """
    if drift_ns <= 0 or not len(s):
        return drift_ns
    return max(float(drift_ns), 10.0 * float(np.max(e - s)))


def _class_bins(asked: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bins per class: as asked, but no more than the window edges in its executions support (at least one)."""
    return np.asarray(np.maximum(1, np.minimum(asked, edges // EDGES_PER_BIN)), dtype=np.int64)


def _designs(s: np.ndarray, e: np.ndarray, cls: np.ndarray, K: np.ndarray, lo: float, hi: float,
             durations: np.ndarray, continuity: float, drift_ns: float, floor_w: float,
             overlay: Optional[tuple[np.ndarray, np.ndarray]] = None,
             shared: Optional[np.ndarray] = None, seen: Optional[np.ndarray] = None) -> list[Design]:
    """The candidate models: launch gaps at their own level, falling to it, or at the end of the kernel before.

    ``shared``, ``seen``: the gap steps that share one level per step, and those a log sees (:func:`_shared_gaps`).
    """
    cols = columns(K, overlay is not None, shared)
    R, F = penalties(cols, continuity, seen)
    counts = np.bincount(cls[cls >= 0], minlength=len(K))
    maps = column_maps(cols, counts, durations)
    names = [f"class_{c}_bin_{j}" for c in range(len(K)) for j in range(int(K[c]))] + ["launch_gap"]
    names += [""] * (cols.n_col - len(names))
    for (c, m), col in np.ndenumerate(cols.gap):
        names[int(col)] = f"gap_after_{c}_step_{m}" if shared is None or not shared[c, m] else f"gap_step_{m}_shared"
    if overlay is not None:
        names[cols.overlay] = "overlay_level"
    # The overlay draws power too (links and copy engines): bounded below like the rest.
    lower = np.full(cols.n_col, float(floor_w))
    out = []
    for fall in FALL_NS:
        what = ("launch gaps at their own level" if fall == 0 else
                "launch gaps at the power of the end of the kernel before them" if math.isinf(fall) else
                f"launch gaps falling from the end of the kernel before them to their own level "
                f"(time constant {fall / 1e3:g} us)")
        out.append(Design(what, _tiling(s, e, cls, cols, lo, hi, fall, overlay), names, lower, R, F, maps, "energy",
                          drift_ns, offset_maps=("overlay",)))
    return out


def _shared_gaps(sensor: SensorModel, t: np.ndarray, w: np.ndarray, ok: np.ndarray, lo_all: np.ndarray,
                 hi_all: np.ndarray, two: bool, s: np.ndarray, e: np.ndarray, cls: np.ndarray, K: np.ndarray,
                 lo: float, hi: float, overlay: Optional[tuple[np.ndarray, np.ndarray]]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Which gap steps get a level of their own, and which any log sees: ``(shared, seen)``, ``(classes + 1, steps)``.

    A level of its own for the gaps after one class needs window edges inside
    those gaps, as a curve's bins do inside its executions
    (:data:`EDGES_PER_BIN`, :func:`_class_bins`): a window that covers a gap
    whole sees it only in a sum with the kernels around it. A step with fewer
    edges than that shares one level per step with every other such step: the
    logs cannot tell them apart, and a column each for hundreds of signatures
    (a real trace's) would put thousands of unknowns that only the prior holds
    into every normal matrix of the fit (Section IV-B step 8's deconvolution,
    resolved as far as the windows' edges resolve it). ``seen``: a log's
    response reaches such a gap (where none does, the gap's level is not
    reported).
    """
    full = columns(K, overlay is not None)
    til = _tiling(s, e, cls, full, lo, hi, 0.0, overlay)
    pos = np.concatenate([hi_all, lo_all]) if two else hi_all
    pos = pos[np.isfinite(pos)]
    j = np.searchsorted(til.a, pos, side="right") - 1
    inside = (j >= 0) & (pos < til.b[np.clip(j, 0, None)])
    col = til.col[j[inside]]
    edges = np.bincount(col[col >= 0], minlength=full.n_col)
    _, tile, _, _ = tile_rows(sensor, t, w, til, ok)
    reached = til.col[tile]
    seen = np.bincount(reached[reached >= 0], minlength=full.n_col) > 0
    return edges[full.gap] < EDGES_PER_BIN, seen[full.gap]


def _edges_per_class(lo: np.ndarray, hi: np.ndarray, s: np.ndarray, e: np.ndarray, cls: np.ndarray, n_cls: int,
                     two: bool) -> np.ndarray:
    """Per class, the logs with a window edge inside one of its executions: the shape's information."""
    out = _edge_logs(s, e, cls, hi, n_cls)
    if two:
        out = out + _edge_logs(s, e, cls, lo, n_cls)
    return np.asarray(out)


def _per_class(values: np.ndarray, K: np.ndarray) -> list[np.ndarray]:
    """A map over all classes' bins cut into one array per class."""
    return np.split(values, np.cumsum(K)[:-1])


def _fit_warnings(K: np.ndarray, asked: np.ndarray, edges: np.ndarray, share: np.ndarray, groups: list[list[int]],
                  check: ModelCheck) -> list[str]:
    """What the logs cannot resolve (bins, energies) and the assumptions the residuals reject."""
    out = []
    fewer = np.flatnonzero(K < asked)
    if len(fewer):
        out.append("curves coarser than asked: the logs hold " + ", ".join(
            f"{int(edges[c])} window edges in class {c}'s executions ({int(K[c])} bins)" for c in fewer[:5])
            + f"; a bin needs about {EDGES_PER_BIN}")
    for g in groups:
        out.append(f"classes {g} are confounded: every window covers them in about the same mix, so the logs "
                   f"determine only a sum of their energies (the logs supply {100 * float(np.max(share[g])):.0f} % "
                   "of the precision at most); their energies are not reported; read the energy per iteration")
    return out + list(check.failed)


@numeric_threads()
def fit_timeline(
    sensor: SensorModel,
    t_ns: npt.ArrayLike,
    values: dict[str, npt.ArrayLike],
    starts_ns: npt.ArrayLike,
    ends_ns: npt.ArrayLike,
    classes: npt.ArrayLike,
    bins: Sequence[int],
    *,
    windows_ns: Optional[npt.ArrayLike] = None,
    durations_ns: Optional[npt.ArrayLike] = None,
    confidence: float = 0.95,
    drift_ns: float = 100_000_000.0,
    continuity: float = 1e-3,
    bootstrap: int = 100,
    seed: int = 0,
    floor_w: float = 0.0,
    max_power_w: Optional[float] = None,
    overlay_ns: Optional[tuple[npt.ArrayLike, npt.ArrayLike]] = None,
) -> TimelineFit:
    """Fit every kernel class's curve and the gaps' power to windowed logs over a mixed timeline.

    Parameters
    ----------
    sensor : SensorModel
        What each log measures (window or filter, delay, gain, offset).
    t_ns : array_like
        The logs' stamps on the timeline (ns, the executions' clock).
    values : dict of str to array_like
        Per channel, the logged power (W); a ``"total"`` channel is needed.
    starts_ns, ends_ns : array_like
        The executions on one device, in start order, not overlapping.
    classes : array_like of int
        Per execution, its class (0 .. len(bins)-1), or -1 for an execution
        whose power is not modelled (a warm-up, a concurrent kernel): logs
        that reach it are left out.
    bins : sequence of int
        Curve bins asked per class (>= 1); fewer where the logs hold fewer
        than :data:`EDGES_PER_BIN` window edges per bin in its executions.
    windows_ns : array_like, optional
        Per-log boxcar windows (a counter's intervals); default the model's.
    durations_ns : array_like, optional
        Per class, the duration its energy is taken over (default the
        median of its executions).
    confidence : float
        Of the intervals.
    drift_ns : float
        Knot spacing of a slow drift shared by every kernel and gap
        (piecewise linear; at least ten times the longest execution, so that
        it cannot draw one); cross-validation decides whether the record
        needs it; 0 leaves it out.
    continuity : float
        Weight (relative to the data's scale) of the prior that the power
        after a kernel relaxes step by step (fixed: the directions it
        steadies barely change the fit, so cross-validation cannot see them).
    bootstrap : int
        Resamples of blocks of the record for the intervals.
    seed : int
        Of the bootstrap.
    floor_w : float
        Lower bound of every power (W, after the sensor's calibration).
    max_power_w : float, optional
        What the board can draw (W; a :class:`~fingrav_native.Capabilities`
        field): a curve or a gap level above it (by 5 %) is a warning that
        names it, since no sensor can be right about power the board cannot
        draw.
    overlay_ns : (array_like, array_like), optional
        Starts and ends (ns) of intervals during which one more additive
        level draws on top of whatever the timeline draws: communication
        kernels (NCCL/RCCL) on their own streams beside the executions.
        They may overlap the executions and one another; the level is
        fitted with the rest (``TimelineFit.overlay_w``).

    Returns
    -------
    TimelineFit

    Raises
    ------
    ValueError
        Bad arguments (named), or fewer usable logs than unknowns.
    FitTooLargeError
        The normal matrices of the classes' columns would exceed the
        engine's memory budget (``fingrav_native.method._engine_design.MEMORY_BYTES``)
        even over its fewest blocks: a ``MemoryError`` naming the classes,
        their columns and the memory needed.

    Notes
    -----
    Section IV-B step 8 of the paper, for logs that are window averages
    (the forward model of averaging sensors, Yang et al. SC'24) over an
    application's mixed timeline instead of one kernel's runs; solved by
    the attribution engine (:mod:`fingrav_native.method._engine`).
    """
    instance_of(sensor, "sensor", SensorModel, "a SensorModel")
    t, s, e, cls, asked = _check_timeline(t_ns, starts_ns, ends_ns, classes, bins, confidence)
    ys = _calibrated(sensor, values, t)
    w = finite_array(sensor.window_ns if windows_ns is None else windows_ns, "windows_ns")
    try:
        w = np.broadcast_to(w, t.shape)
    except ValueError:
        raise ValueError(f"windows_ns: one per log or one for all, got shape {w.shape} for {t.shape}") from None
    w = np.where(w > 0, w, sensor.window_ns)
    real_number(floor_w, "floor_w")
    integer_in(bootstrap, "bootstrap", 0, 100_000)
    integer_in(seed, "seed", 0)
    positive_number(drift_ns, "drift_ns")
    positive_number(continuity, "continuity", allow_zero=True)
    if max_power_w is not None:
        positive_number(max_power_w, "max_power_w")
    n_cls = len(asked)
    lo_all, hi_all = response_span(sensor, t, w)
    two = sensor.shape == "boxcar" and sensor.kind != "instant"
    edges = _edges_per_class(lo_all, hi_all, s, e, cls, n_cls, two)
    K = _class_bins(asked, edges)
    durations = _durations(cls, s, e, n_cls, durations_ns)
    finite = np.isfinite(lo_all)
    t_lo, t_hi = float(np.min(lo_all[finite], initial=s[0])), float(np.max(hi_all[finite], initial=e[-1]))
    overlay = _checked_overlay(overlay_ns)
    chans = ["total"] + [c for c in ys if c != "total"]
    y = np.stack([ys[c] for c in chans], axis=1)
    shared, seen = _shared_gaps(sensor, t, w, np.all(np.isfinite(y), axis=1), lo_all, hi_all, two, s, e, cls, K,
                                t_lo, t_hi, overlay)
    designs = _designs(s, e, cls, K, t_lo, t_hi, durations, continuity, _drift_spacing(drift_ns, s, e), floor_w,
                       overlay, shared, seen)
    sol = _attribute_classes(designs, sensor, t, w, y, K, shared, bootstrap, seed)
    check = check_model(designs[sol.design], sensor, t, w, sol)
    out = _timeline_fit(sol, chans, K, asked, edges, durations, confidence, check, len(t),
                        np.bincount(cls[cls >= 0], minlength=n_cls), columns(K, overlay is not None, shared), seen)
    if "overlay" in sol.values:
        o_lo, o_hi, _ = sol.interval("overlay", confidence)
        out = dataclasses.replace(out, overlay_w={c: float(sol.values["overlay"][0, i]) for i, c in enumerate(chans)},
                                  overlay_low_w={c: float(o_lo[0, i]) for i, c in enumerate(chans)},
                                  overlay_high_w={c: float(o_hi[0, i]) for i, c in enumerate(chans)})
    extra = _above_board(out, max_power_w)
    return dataclasses.replace(out, warnings=out.warnings + tuple(extra)) if extra else out


def _attribute_classes(designs: list[Design], sensor: SensorModel, t: np.ndarray, w: np.ndarray, y: np.ndarray,
                       K: np.ndarray, shared: np.ndarray, bootstrap: int, seed: int) -> Solution:
    """The engine's solution; past its memory budget, an error that names the classes and their columns."""
    try:
        return attribute(designs, sensor, t, w, y, bootstrap=bootstrap, seed=seed)
    except FitTooLargeError as exc:
        raise FitTooLargeError(
            f"classes: {len(K)} kernel classes (signatures) x their columns ({int(K.sum())} curve bins, 1 launch gap, "
            f"{int(np.sum(~shared))} gap levels of their own, {int(np.any(shared, axis=0).sum())} shared): {exc}; "
            "fewer classes (signatures profiled jointly) or a record with fewer of them fits") from None


def _checked_overlay(overlay_ns: Optional[tuple[npt.ArrayLike, npt.ArrayLike]]
                     ) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The overlay intervals as their union (sorted, disjoint), checked; None for none."""
    if overlay_ns is None:
        return None
    if not isinstance(overlay_ns, (tuple, list)) or len(overlay_ns) != 2:
        raise ValueError(f"overlay_ns={short_repr(overlay_ns)}: must be (starts, ends) of the overlay's intervals")
    a = finite_array(overlay_ns[0], "overlay_ns")
    b = finite_array(overlay_ns[1], "overlay_ns")
    if a.shape != b.shape or a.ndim != 1 or np.any(b < a):
        raise ValueError("overlay_ns: starts and ends must be 1-D of one length, each end at or after its start")
    return merged_intervals(a, b) if len(a) else None


def _above_board(fit: TimelineFit, max_power_w: Optional[float]) -> list[str]:
    """Curves and gap levels of the total above what the board can draw (the misfit's loudest sign)."""
    if max_power_w is None:
        return []
    cap = 1.05 * max_power_w
    out = []
    for c, cv in enumerate(fit.curves["total"]):
        if fit.identifiable[c] and np.nanmax(cv, initial=-math.inf) > cap:
            out.append(f"class {c}'s curve reaches {float(np.nanmax(cv)):.0f} W, above the board's {max_power_w:.0f} W: "
                       "the sensor model (window, delay, gain) is wrong for these logs, or they do not separate "
                       "this class from its neighbours; do not read its power")
    gaps = np.concatenate([[fit.launch_gap_w["total"]], fit.gap_w["total"].ravel()])
    if np.nanmax(gaps, initial=-math.inf) > cap:
        out.append(f"a gap level of {float(np.nanmax(gaps)):.0f} W, above the board's {max_power_w:.0f} W: the logs "
                   "do not determine the power between kernels (too few windows end in gaps), or the sensor "
                   "model is wrong for these logs; read the energy per iteration, not the gaps'")
    return out


def _timeline_fit(sol: Solution, chans: list[str], K: np.ndarray, asked: np.ndarray, edges: np.ndarray,
                  durations: np.ndarray, confidence: float, check: ModelCheck, n_all: int,
                  counts: np.ndarray, cols: Columns, seen: np.ndarray) -> TimelineFit:
    """The engine's solution as a TimelineFit: per channel, per class (``seen``: the gap steps a log reaches)."""
    ident = (sol.info_share >= IDENTIFIABLE_SHARE) & (counts > 0)
    curves, sds, energy, half, low, high, gap, resid = {}, {}, {}, {}, {}, {}, {}, {}
    c_low: dict[str, list[np.ndarray]] = {}
    c_high: dict[str, list[np.ndarray]] = {}
    launch: dict[str, float] = {}
    e_lo, e_hi, _ = sol.interval("energy", confidence)
    c_lo, c_hi, c_sd = sol.interval("curves", confidence)
    reach = np.diff(sol.rows.A.tocsc().indptr)
    n_steps = len(GAP_EDGES_NS) - 1
    n_cls = len(K)
    for i, ch in enumerate(chans):
        curves[ch] = [cv if counts[c] else np.full(len(cv), np.nan)
                      for c, cv in enumerate(_per_class(sol.values["curves"][:, i], K))]
        sds[ch] = _per_class(c_sd[:, i], K)
        # A class the logs do not determine has a curve the bounds and the smoothing hold, not the data: a
        # band around it would read as a measured interval (a 50/50 ms wave under 100 ms windows: 0-1000 W).
        c_low[ch] = [cv if ident[c] else np.full(len(cv), np.nan) for c, cv in enumerate(_per_class(c_lo[:, i], K))]
        c_high[ch] = [cv if ident[c] else np.full(len(cv), np.nan) for c, cv in enumerate(_per_class(c_hi[:, i], K))]
        # The columns are bounded below; a level reported at the drift's mean can sit a rounding below zero.
        en = np.where(ident, np.maximum(sol.values["energy"][:, i], 0.0), np.nan)
        energy[ch] = en
        low[ch] = np.where(ident, e_lo[:, i], np.nan)
        high[ch] = np.where(ident, e_hi[:, i], np.nan)
        # "energy +- half" must hold the whole band: on a bound (an energy at 0 J) or with the smoothing's
        # span the band is lopsided, and its mean half-width would leave the far side out.
        half[ch] = np.maximum(en - low[ch], high[ch] - en)
        g = sol.values["gaps"][:, i].copy()
        g[(reach[cols.gap_cols] == 0) | ~np.concatenate([[True], seen.ravel()])] = np.nan
        launch[ch] = float(g[0])
        # Rows: after each class (and after an excluded one), the steps of a longer gap.
        gap[ch] = g[1:].reshape(n_cls + 1, n_steps)
        resid[ch] = float(np.sqrt(np.mean(sol.residual[:, i] ** 2)))
    offs = np.concatenate([[0], np.cumsum(K)[:-1]])
    warnings_ = _fit_warnings(K, asked, edges, sol.info_share, sol.confounded, check)
    if sol.memory_note:
        warnings_.append(sol.memory_note)
    if sol.n_boot == 0:
        warnings_.append(f"the record holds {sol.n_blocks} blocks of ten windows: too few for cross-validation and "
                         "an interval (smoothing chosen by GCV, no intervals); record longer")
    return TimelineFit(
        bins=K, curves=curves, sd=sds, curve_low_w=c_low, curve_high_w=c_high, energy_j=energy,
        energy_half_width_j=half, gap_w=gap, launch_gap_w=launch, durations_ns=durations,
        n_logs=len(sol.rows.used), dropped_logs=int(n_all - len(sol.rows.used)),
        logs_per_bin=[reach[offs[c]:offs[c] + K[c]] for c in range(n_cls)], edge_logs=edges, lam=sol.lam,
        residual_w=resid, confidence=confidence, energy_low_j=low, energy_high_j=high, bins_asked=asked,
        model=sol.model, info_share=sol.info_share, identifiable=ident, confounded=sol.confounded, check=check,
        warnings=tuple(warnings_), n_boot=sol.n_boot)
