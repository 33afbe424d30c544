"""The energy closure's arithmetic: the profile's side over a span, fitted to the power logs, and the counter's.

:func:`energy_closure` (the figures, :class:`~fingrav_native.insitu.EnergyClosure`) and the glue
:func:`~fingrav_native.profile_trace` calls (:func:`counter_of`, :func:`closure_from`). What is
compared and why is in :mod:`fingrav_native.insitu._closure`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from fingrav_native._threads import numeric_threads
from fingrav_native.clocks._maps import ClockMapLike, host_relative
from fingrav_native.insitu._closure import Z95, EnergyClosure, EnergyClosureWarning
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.method._joint import GAP_EDGES_NS
from fingrav_native.sensors._energy_counter import EnergyCounter
from fingrav_native.sensors._model import SensorModel

#: A level is fitted only from at least this many logs' worth of its class (sum of the logs' shares in it).
_MIN_INFO = 3.0


# ---------------------------------------------------------------------------------------------- the timeline


def _merge(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[a, b]`` as disjoint sorted intervals."""
    if not len(a):
        return a.astype(np.float64), b.astype(np.float64)
    order = np.argsort(a, kind="stable")
    a, b = a[order].astype(np.float64), b[order].astype(np.float64)
    reach = np.maximum.accumulate(b)
    new = np.concatenate([[True], a[1:] > reach[:-1]])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(a) - 1)
    return a[first], reach[last]


@dataclass(frozen=True)
class _Cumulative:
    """The integral over ``(-inf, t]`` of a slope held on disjoint sorted intervals (piecewise linear)."""

    x: np.ndarray
    y: np.ndarray
    a: np.ndarray
    b: np.ndarray
    slope: np.ndarray

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, slope: Any = 1.0) -> _Cumulative:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        s = np.broadcast_to(np.asarray(slope, dtype=np.float64), a.shape).copy()
        inc = s * (b - a)
        before = np.concatenate([[0.0], np.cumsum(inc)[:-1]]) if len(a) else np.zeros(0)
        x = np.column_stack([a, b]).ravel()
        y = np.column_stack([before, before + inc]).ravel()
        return cls(x, y, a, b, s)

    def at(self, t: Any) -> np.ndarray:
        if not len(self.x):
            return np.zeros(np.shape(t))
        return np.asarray(np.interp(t, self.x, self.y), dtype=np.float64)

    def over(self, lo: Any, hi: Any) -> np.ndarray:
        """The integral over ``[lo, hi]``."""
        return np.asarray(self.at(hi) - self.at(lo), dtype=np.float64)

    def slope_at(self, t: np.ndarray) -> np.ndarray:
        """The slope at instants ``t`` (0 outside every interval; intervals closed on the left)."""
        if not len(self.a):
            return np.zeros(t.shape)
        k = np.searchsorted(self.a, t, side="right") - 1
        kk = np.clip(k, 0, None)
        return np.where((k >= 0) & (t < self.b[kk]), self.slope[kk], 0.0)


@dataclass(frozen=True)
class _Timeline:
    """The device's timeline in classes: the table's kernels (known power), other kernels, gaps by age."""

    kernels: _Cumulative            # W ns of the table's kernels
    classes: list[_Cumulative]      # measure (ns) of: other kernels, then each gap step
    names: list[str]
    ex_start: np.ndarray            # the table's executions, for the interval of their energies
    ex_end: np.ndarray
    ex_row: np.ndarray
    first_ns: float
    last_ns: float


def _warm_mask(tp: TraceProfile, on_device: np.ndarray, conc: np.ndarray) -> np.ndarray:
    """Executions before their signature's steady state (the first ``warmup`` of each, alone on the device)."""
    ex = tp.trace.executions
    warm = np.zeros(len(ex), dtype=bool)
    for row, sid in enumerate(tp.signature_rows):
        w = int(tp.kernels["warmup"][row])
        if w <= 0:
            continue
        mine = np.flatnonzero((ex["kernel_id"] == sid) & on_device & ~conc)
        mine = mine[np.argsort(ex["start_ns"][mine], kind="stable")]
        warm[mine[:w]] = True
    return warm


def _timeline(tp: TraceProfile, on_device: np.ndarray) -> _Timeline:
    """Split the device's timeline: the table's executions, the other executions, and gaps by time since a kernel."""
    kt = tp.trace
    ex = kt.executions
    conc = kt.concurrent()
    row_of = np.full(len(kt.signatures), -1, dtype=np.int64)
    sig_rows = np.asarray(tp.signature_rows, dtype=np.int64)
    own = sig_rows >= 0  # the joint row [g] has no signature: its members' executions count as others
    row_of[sig_rows[own]] = np.flatnonzero(own)
    row = row_of[ex["kernel_id"]]
    energy = np.where(row >= 0, tp.kernels["energy_j"][np.clip(row, 0, None)], np.nan) if len(tp.kernels) else \
        np.full(len(ex), np.nan)
    s, e = ex["start_ns"].astype(np.float64), ex["end_ns"].astype(np.float64)
    known = on_device & ~conc & (row >= 0) & np.isfinite(energy) & (e > s) & ~_warm_mask(tp, on_device, conc)
    order = np.flatnonzero(known)
    order = order[np.argsort(s[order], kind="stable")]
    # The table's energy per execution, spread over each execution's own duration: a whole execution counts
    # its signature's energy (the table's count x energy_j), a slow one no more than a golden one.
    kernels = _Cumulative.of(s[order], e[order], energy[order] * 1e9 / (e[order] - s[order]))
    other = on_device & ~known
    oa, ob = _merge(s[other], e[other])
    ba, bb = _merge(s[on_device], e[on_device])
    classes, names = [_Cumulative.of(oa, ob)], ["other kernels"]
    # Gaps between busy blocks, cut into steps of time since the block ended.
    ge, gs = bb[:-1], ba[1:]
    for m in range(len(GAP_EDGES_NS) - 1):
        lo = np.minimum(ge + GAP_EDGES_NS[m], gs)
        hi = np.minimum(ge + GAP_EDGES_NS[m + 1], gs)
        keep = hi > lo
        classes.append(_Cumulative.of(lo[keep], hi[keep]))
        names.append(f"gaps {_span(m)} after a kernel")
    return _Timeline(kernels, classes, names, s[order], e[order], row[order], float(ba[0]), float(bb[-1]))


def _span(m: int) -> str:
    a, b = GAP_EDGES_NS[m] / 1e3, GAP_EDGES_NS[m + 1] / 1e3
    return f"{a:g} us on" if math.isinf(b) else f"{a:g}-{b:g} us"


# ---------------------------------------------------------------------------------------------- the levels


@dataclass(frozen=True)
class _Levels:
    """Fitted power (W) of each class and their covariance; which classes the logs did not see enough of."""

    level: np.ndarray
    cov: np.ndarray
    fitted: np.ndarray


def _design(tl: _Timeline, lo: np.ndarray, hi: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each log as a row: its interval's share in each class, and its power less the table's kernels' part."""
    width = hi - lo
    inst = width <= 0
    safe = np.where(inst, 1.0, width)
    X = np.empty((len(lo), len(tl.classes)))
    for c, cum in enumerate(tl.classes):
        X[:, c] = np.where(inst, cum.slope_at(lo), cum.over(lo, hi) / safe)
    known = np.where(inst, tl.kernels.slope_at(lo), tl.kernels.over(lo, hi) / safe)
    return X, p - known


def _groups(info: np.ndarray) -> np.ndarray:
    """The class whose level each class takes: its own where the logs see enough of it (-1: none fitted).

    A gap step too few logs see takes the nearest fitted step's level (power after a kernel falls with
    its age, so the neighbour is the best guess); other kernels get none here (see :func:`_fit_levels`).
    """
    n_c = len(info)
    group = np.full(n_c, -1)
    gap_fit = [c for c in range(1, n_c) if info[c] >= _MIN_INFO]
    for c in range(1, n_c):
        if gap_fit:
            group[c] = min(gap_fit, key=lambda f: (abs(f - c), f))
    if info[0] >= _MIN_INFO:
        group[0] = 0
    return group


def _fit_levels(tl: _Timeline, lo: np.ndarray, hi: np.ndarray, p: np.ndarray) -> _Levels:
    """Least-squares levels of the classes; kernels without a table energy the logs miss: the table's mean, +-50 %."""
    X, y = _design(tl, lo, hi, p)
    use = X.sum(axis=1) >= 0.1
    X, y = X[use], y[use]
    info = X.sum(axis=0)
    group = _groups(info)
    cols = sorted(set(int(g) for g in group if g >= 0))
    if not cols or len(y) < len(cols) + 2:
        raise ValueError(f"{len(y)} logs fall between kernels or on kernels without a table energy: too few to "
                         "fit the gaps' power")
    G = np.zeros((len(info), len(cols)))
    for c in np.flatnonzero(group >= 0):
        G[c, cols.index(int(group[c]))] = 1.0
    A = X @ G
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    s2 = float(resid @ resid) / max(len(y) - len(cols), 1)
    level, cov = G @ coef, G @ (s2 * np.linalg.pinv(A.T @ A)) @ G.T
    if group[0] < 0:
        busy = float(np.sum(tl.kernels.b - tl.kernels.a))
        mean_w = float(tl.kernels.y[-1]) / busy if busy > 0 else 0.0
        level[0], cov[0, 0] = mean_w, (0.5 * mean_w / Z95) ** 2
    return _Levels(level, cov, info >= _MIN_INFO)


def _levels_note(tl: _Timeline, lv: _Levels, measure: np.ndarray, span: float) -> str:
    """What the span (``measure``: each class's ns in it) holds that the logs did not see enough of, and its share."""
    notes = []
    if not lv.fitted[0] and measure[0] > 0:
        notes.append(f"kernels without a table energy ({100 * measure[0] / max(span, 1.0):.1f} % of the span) are "
                     "taken at the table's mean power, +-50 %: too few logs fall on them")
    unfit = [c for c in range(1, len(measure)) if not lv.fitted[c] and measure[c] > 0]
    if unfit:
        share = 100 * float(np.sum(measure[unfit])) / max(span, 1.0)
        notes.append(f"{', '.join(tl.names[c] for c in unfit)} ({share:.1f} % of the span): too few logs, the "
                     "nearest step's level")
    return "; ".join(notes)


# ---------------------------------------------------------------------------------------------- the closure


def _model_energy(tl: _Timeline, lv: _Levels, a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W ns of the table's kernels, of other kernels, and of gaps over ``[a, b]`` (vectorised over spans)."""
    measure = np.stack([np.atleast_1d(c.over(a, b)) for c in tl.classes])
    kern = np.atleast_1d(tl.kernels.over(a, b))
    parts = lv.level[:, None] * measure
    return kern, parts[0], parts[1:].sum(axis=0)


def _kernel_half_width(tp: TraceProfile, tl: _Timeline, spans: list[tuple[float, float]]) -> float:
    """95 % half-width (W ns) of the table's kernels over disjoint spans: one signature's executions share its error."""
    ov = np.zeros(len(tl.ex_start))
    for a, b in spans:
        ov += np.clip(np.minimum(b, tl.ex_end) - np.maximum(a, tl.ex_start), 0.0, None)
    hw = tp.kernels["energy_half_width_j"][tl.ex_row]
    share = ov / (tl.ex_end - tl.ex_start) * np.nan_to_num(hw) * 1e9
    per_row = np.bincount(tl.ex_row, weights=share, minlength=len(tp.kernels)) if len(share) else np.zeros(1)
    return float(np.sqrt(np.sum(per_row ** 2)))


def _span_reads(counter: EnergyCounter, t: np.ndarray, slack: np.ndarray, lo: float, hi: float) -> list[
        tuple[int, int]]:
    """Each segment's first and last readings inside ``[lo, hi]`` (with their slack), on one time base.

    A counter whose clock went back has readings on two time bases, and the clock map places one of them
    only: the base whose segments span the most of ``[lo, hi]`` is taken, the others left out (and said).
    """
    inside = (t - slack >= lo) & (t + slack <= hi)
    base = counter.time_base()
    spans: dict[int, list[tuple[int, int]]] = {}
    for seg in np.unique(counter.segment[inside]):
        idx = np.flatnonzero(inside & (counter.segment == seg))
        if len(idx) >= 2 and t[idx[-1]] > t[idx[0]]:
            spans.setdefault(int(base[idx[0]]), []).append((int(idx[0]), int(idx[-1])))
    if not spans:
        return []
    return max(spans.values(), key=lambda sp: sum(float(t[j] - t[i]) for i, j in sp))


def _breaks_note(counter: EnergyCounter, t: np.ndarray, spans: list[tuple[int, int]]) -> str:
    """Where the counter broke (on the trace's timeline) and what the closure did about it."""
    if not counter.breaks:
        return ""
    kept = counter.time_base()[spans[0][0]]
    said = []
    for k, kind, text in counter.breaks[:5]:
        where = f"{t[k - 1] / 1e9:.4f} s" if kind == "clock" else f"{t[k - 1] / 1e9:.4f}-{t[k] / 1e9:.4f} s"
        said.append(f"{text} at {where} of the trace")
    more = f" and {len(counter.breaks) - 5} more" if len(counter.breaks) > 5 else ""
    others = int(np.max(counter.time_base())) > 0
    return (f"the counter broke {len(counter.breaks)} time(s): {'; '.join(said)}{more}; closed over the "
            f"{len(spans)} segment(s) of its readings inside the span, no energy taken across a break"
            + (f" (readings on another time base than the kept one, base {kept}, left out: the clock map places "
               "one base only)" if others else "") + "; the difference is not a gain or an offset of the counter")


def _kinds_text(counter: EnergyCounter) -> str:
    """How many breaks of each kind, in words."""
    kinds = [b[1] for b in counter.breaks]
    return ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds))


def _glitch_warnings(counter: EnergyCounter, t: np.ndarray) -> tuple[str, ...]:
    """One warning per glitched reading of the counter: which counter, where on the trace, what and how much."""
    said = []
    glitches = [b for b in counter.breaks if b[1] == "glitch"]
    for k, _, text in glitches[:5]:
        said.append(f"energy counter ({counter.describe()}): {text}, at {t[k - 1] / 1e9:.4f}-{t[k] / 1e9:.4f} s of "
                    "the trace; left out, the closure is over the counter's readings either side (the power logs "
                    "are not concerned)")
    if len(glitches) > 5:
        said.append(f"energy counter ({counter.describe()}): {len(glitches) - 5} more glitched readings left out "
                    "(the closure's note counts every break)")
    return tuple(said)


def _gain_offset(counter: EnergyCounter, t: np.ndarray, slack: np.ndarray, spans: list[tuple[int, int]],
                 tl: _Timeline, lv: _Levels) -> tuple[float, float, float, float, int, str]:
    """Counter per interval on the profile's per interval: gain and offset with standard errors (NaN: confounded)."""
    # Readings about 1/200 of the spans apart (at least ten times their timing slack, which each interval's
    # energy carries at both ends): the first reading at or after each step; intervals within a segment only.
    total = sum(float(t[ib] - t[ia]) for ia, ib in spans)
    starts, ends = [], []
    for ia, ib in spans:
        step = max(10.0 * float(np.max(slack[ia:ib + 1])), total / 200.0)
        targets = t[ia] + step * np.arange(int((t[ib] - t[ia]) // step) + 1)
        keep = np.unique(ia + np.searchsorted(t[ia:ib + 1], targets, side="left"))
        keep = keep[keep <= ib]
        starts.append(keep[:-1])
        ends.append(keep[1:])
    i0, i1 = np.concatenate(starts), np.concatenate(ends)
    if len(i0) < 4:
        return math.nan, math.nan, math.nan, math.nan, len(i0), "too few counter intervals to tell a gain " \
                                                                "from an offset"
    dt = t[i1] - t[i0]
    dc = (counter.energy_j[i1] - counter.energy_j[i0]) * 1e9
    kern, other, gaps = _model_energy(tl, lv, t[i0], t[i1])
    xm, yc = (kern + other + gaps) / dt, dc / dt
    A = np.column_stack([xm, np.ones_like(xm)]) * np.sqrt(dt)[:, None]
    coef, *_ = np.linalg.lstsq(A, yc * np.sqrt(dt), rcond=None)
    resid = yc * np.sqrt(dt) - A @ coef
    cov = float(resid @ resid) / max(len(dt) - 2, 1) * np.linalg.pinv(A.T @ A)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    # The power must vary between readings for a gain and an offset to be told apart.
    spread = float(np.max(xm) - np.min(xm))
    if not (spread > 0.05 * abs(float(np.mean(xm))) and se[0] < 0.05):
        return math.nan, math.nan, math.nan, math.nan, len(dt), ""
    return float(coef[0]), float(se[0]), float(coef[1]), float(se[1]), len(dt), ""


@numeric_threads()
def energy_closure(tp: TraceProfile, counter: EnergyCounter, counter_t_ns: np.ndarray, counter_err_ns: np.ndarray,
                   log_lo_ns: np.ndarray, log_hi_ns: np.ndarray, log_power_w: np.ndarray,
                   on_device: np.ndarray) -> EnergyClosure:
    """The closure of a trace profile against an energy counter whose readings are on the trace's timeline.

    Parameters
    ----------
    tp : TraceProfile
        The profile (its table, trace and warm-up counts).
    counter : EnergyCounter
        The counter's readings.
    counter_t_ns, counter_err_ns : numpy.ndarray
        Each reading's time on the trace's timeline (ns from its origin) and
        the clock map's error bound there.
    log_lo_ns, log_hi_ns : numpy.ndarray
        What each power log measures on the trace's timeline: its window
        (equal ends for an instantaneous log).
    log_power_w : numpy.ndarray
        Each log's power, calibrated (the sensor model's gain and offset undone).
    on_device : numpy.ndarray
        The trace's executions on the device the logs and the counter belong to.

    Returns
    -------
    EnergyClosure

    Raises
    ------
    ValueError
        The counter has no two readings of one segment inside the trace's
        kernel span and the logs' coverage, or too few logs fall between
        kernels to fit the gaps' power (the message says which).

    Notes
    -----
    The profile's side over the span ``[a, b]`` is the table's kernels
    (each execution its signature's ``energy_j``, spread over its duration) plus, for
    every other class of time, a level times its duration; the levels are
    least squares over the logs inside the trace's kernel span, each log
    the mean of the power over its interval (the forward model of the
    paper's Section IV-B step 6; Yang et al., SC'24, for windows). Its
    uncertainty: one signature's executions share its 95 % interval (added
    linearly), signatures and the levels' covariance add in quadrature. The
    counter's side: the difference of two readings (exact up to its
    quantum), whose times are known to the readings' staleness and the
    clock map's bound; that timing is charged at the logs' 99th-percentile
    power. The interval-by-interval regression of the counter on the
    profile separates a gain from an offset where the power varies between
    readings.
    """
    tl = _timeline(tp, on_device)
    t = np.asarray(counter_t_ns, dtype=np.float64)
    slack = float(counter.stale_ns) + np.abs(np.asarray(counter_err_ns, dtype=np.float64))
    lo_logs, hi_logs = np.asarray(log_lo_ns, dtype=np.float64), np.asarray(log_hi_ns, dtype=np.float64)
    p = np.asarray(log_power_w, dtype=np.float64)
    ok = np.isfinite(lo_logs) & np.isfinite(hi_logs) & np.isfinite(p)
    inside = ok & (lo_logs >= tl.first_ns) & (hi_logs <= tl.last_ns)
    lo_s = max(tl.first_ns, float(np.min(lo_logs[ok])) if ok.any() else math.inf)
    hi_s = min(tl.last_ns, float(np.max(hi_logs[ok])) if ok.any() else -math.inf)
    spans = _span_reads(counter, t, slack, lo_s, hi_s)
    if not spans:
        broke = "" if not counter.breaks else (
            f"; it ({counter.describe()}) broke {len(counter.breaks)} time(s) ({_kinds_text(counter)}), e.g. "
            f"{counter.breaks[0][2]}: too little of the counter is left between its breaks")
        raise ValueError(f"the energy counter has no two readings (of one segment) inside the trace's kernel span "
                         f"([{lo_s / 1e9:.6f}, {hi_s / 1e9:.6f}] s after the trace's origin; its "
                         f"{len(t)} readings span [{np.min(t) / 1e9 if len(t) else math.nan:.6f}, "
                         f"{np.max(t) / 1e9 if len(t) else math.nan:.6f}] s){broke}")
    ia_s, ib_s = np.array([i for i, _ in spans]), np.array([j for _, j in spans])
    a, b = float(t[ia_s[0]]), float(t[ib_s[-1]])
    lv = _fit_levels(tl, lo_logs[inside], hi_logs[inside], p[inside])
    kern, other, gaps = (float(np.sum(v)) * 1e-9 for v in _model_energy(tl, lv, t[ia_s], t[ib_s]))
    model = kern + other + gaps
    measure = np.array([float(np.sum(c.over(t[ia_s], t[ib_s]))) for c in tl.classes])
    model_hw = math.hypot(_kernel_half_width(tp, tl, [(float(t[i]), float(t[j])) for i, j in spans]),
                          Z95 * math.sqrt(max(float(measure @ lv.cov @ measure), 0.0))) * 1e-9
    p99 = float(np.percentile(p[inside], 99)) if inside.any() else float(np.max(p[ok]))
    # Each segment's difference is off by its quantum and by its two ends' timing.
    counter_hw = math.sqrt(len(spans) * counter.quantum_j ** 2 + float(np.sum((p99 * slack[ia_s] * 1e-9) ** 2))
                           + float(np.sum((p99 * slack[ib_s] * 1e-9) ** 2)))
    counted = float(np.sum(counter.energy_j[ib_s] - counter.energy_j[ia_s]))
    hw = math.hypot(model_hw, counter_hw)
    diff = model - counted
    g, g_se, o, o_se, n_int, gnote = _gain_offset(counter, t, slack, spans, tl, lv)
    rel = diff / counted if counted > 0 else math.nan
    return EnergyClosure(counter=counter.describe(), start_ns=a, end_ns=b, counter_j=counted, kernels_j=kern,
                         other_kernels_j=other, gaps_j=gaps, model_j=model, difference_j=diff, relative=rel,
                         half_width_j=hw, relative_half_width=hw / counted if counted > 0 else math.nan,
                         model_half_width_j=model_hw, counter_half_width_j=counter_hw, gain=g, gain_se=g_se,
                         offset_w=o, offset_w_se=o_se, intervals=n_int, agrees=bool(abs(diff) <= hw),
                         note="; ".join(x for x in (_breaks_note(counter, t, spans),
                                                    _levels_note(tl, lv, measure, float(np.sum(t[ib_s] - t[ia_s]))),
                                                    gnote) if x))


@numeric_threads()
def with_closure(tp: TraceProfile, counter: EnergyCounter, counter_t_ns: np.ndarray, counter_err_ns: np.ndarray,
                 log_lo_ns: np.ndarray, log_hi_ns: np.ndarray, log_power_w: np.ndarray,
                 on_device: np.ndarray) -> TraceProfile:
    """``tp`` with its :attr:`closure` (:func:`energy_closure`); an :class:`EnergyClosureWarning` when it fails.

    A counter that cannot be compared (no two readings inside the trace) is
    said in the profile's warnings, not raised: the profile stands without it.
    """
    said = _glitch_warnings(counter, np.asarray(counter_t_ns, dtype=np.float64))
    try:
        closure = energy_closure(tp, counter, counter_t_ns, counter_err_ns, log_lo_ns, log_hi_ns, log_power_w,
                                 on_device)
    except ValueError as exc:
        return dataclasses.replace(tp, warnings=(*tp.warnings, *said, f"energy closure not checked: {exc}"))
    if not closure.agrees:
        warnings.warn(EnergyClosureWarning(closure.explain()), stacklevel=4)
    return dataclasses.replace(tp, closure=closure, warnings=(*tp.warnings, *said))


# ---------------------------------------------------------------------------------------------- from profile_trace


def log_intervals(samples: np.ndarray, t_mid_ns: np.ndarray, model: Optional[SensorModel]) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:
    """What each log measures on the trace's timeline, and its calibrated power.

    ``t_mid_ns`` is the middle of what each log measures (``TraceProfile.logs["t_ns"]``); a boxcar log spans
    its own ``window_ns`` (else the model's) around it; an instantaneous or first-order log is taken at that
    instant (a filter's mean age). The power has the model's gain and offset undone.
    """
    t = np.asarray(t_mid_ns, dtype=np.float64)
    w = np.zeros(len(t))
    if model is not None and model.shape != "first_order":
        own = np.asarray(samples["window_ns"], dtype=np.float64) if "window_ns" in (samples.dtype.names or ()) \
            else np.zeros(len(t))
        w = np.where(own > 0, own, model.window_ns)
    p = np.asarray(samples["total"], dtype=np.float64)
    if model is not None:
        p = (p - model.offset_w) / model.gain
    return t - 0.5 * w, t + 0.5 * w, p


@dataclass(frozen=True)
class MappedCounter:
    """An energy counter that brings its own clock map onto the trace's clock, or why it cannot be read.

    A capture's counter (:meth:`~fingrav_native.files.PowerCapture.energy_counter`) is mapped by the logs'
    map where it shares their clock domain, else by a map fitted from its own readings: it cannot ride on
    ``logger_map`` as a counter given beside arrays of logs does. Exactly one of ``counter`` (with
    ``clock_map``) and ``unreadable`` is set; an unreadable counter leaves the profile standing without
    its closure, the reason in its warnings (:mod:`fingrav_native.insitu._closure`).

    Attributes
    ----------
    counter : EnergyCounter, optional
        The counter's readings.
    clock_map : clock map, optional
        Its timestamps onto the trace's clock (``to_host``, ``error_bound_at``).
    unreadable : str
        Why the counter cannot be read ("" when it can).
    """

    counter: Optional[EnergyCounter] = None
    clock_map: Optional[ClockMapLike] = None
    unreadable: str = ""

    def __post_init__(self) -> None:
        if bool(self.unreadable) == (self.counter is not None) or (self.counter is None) != (self.clock_map is None):
            raise ValueError("MappedCounter: give a counter with its clock_map, or the reason it is unreadable")
        if self.counter is not None and not isinstance(self.counter, EnergyCounter):
            raise ValueError(f"counter: expected an EnergyCounter, got {type(self.counter).__name__}")


def counter_of(energy_counter: Union[EnergyCounter, MappedCounter, None], logger_map: Optional[ClockMapLike]
               ) -> Union[None, str, tuple[EnergyCounter, ClockMapLike]]:
    """The counter a profile closes against and the map of its timestamps; None: none; a str: why it cannot be
    read (the profile stands without the closure).

    An :class:`~fingrav_native.sensors.EnergyCounter` given with the logs is on the logs' clock (``logger_map``
    maps it); a :class:`MappedCounter` (a capture's counter, resolved by :func:`fingrav_native.profile_trace`)
    brings its own map or the reason it cannot be read.
    """
    if energy_counter is None:
        return None
    if isinstance(energy_counter, MappedCounter):
        if energy_counter.unreadable:
            return energy_counter.unreadable
        assert energy_counter.counter is not None and energy_counter.clock_map is not None  # __post_init__
        return energy_counter.counter, energy_counter.clock_map
    if not isinstance(energy_counter, EnergyCounter):
        raise ValueError(f"energy_counter: expected an EnergyCounter, got {type(energy_counter).__name__}")
    if logger_map is None:
        raise ValueError("energy_counter: its timestamps are mapped by logger_map, which is missing")
    return energy_counter, logger_map


def closure_from(tp: TraceProfile, counted: Union[None, str, tuple[EnergyCounter, ClockMapLike]],
                 samples: np.ndarray, model: Optional[SensorModel], on_device: np.ndarray) -> TraceProfile:
    """``tp`` closed against ``counted`` (:func:`counter_of`); ``tp`` as it is without a counter, and with the
    reason in its warnings where the counter cannot be read."""
    if counted is None:
        return tp
    if isinstance(counted, str):
        return dataclasses.replace(tp, warnings=(*tp.warnings, f"energy closure not checked: {counted}"))
    counter, cmap = counted
    origin = int(tp.trace.origin_ns)
    t = host_relative(cmap, counter.t, origin, "the energy counter's clock map")
    err = np.asarray(cmap.error_bound_at(t + float(origin)), dtype=np.float64) * np.ones(len(t))
    lo, hi, p = log_intervals(samples, tp.logs["t_ns"], model)
    return with_closure(tp, counter, t, err, lo, hi, p, on_device)
