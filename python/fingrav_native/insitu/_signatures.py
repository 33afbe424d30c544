"""Per signature: the executions kept, the warm-up left out, and the logs stitched (paper Section IV-B steps 5-8).

An application's loop is FinGraV's protocol for free (Section IV-A): each
execution of a kernel signature (name, grid, block) is a run. This module
groups the device's executions by signature, keeps those no other kernel
overlaps, finds where power stops climbing along the loop (the SSP idea
applied to a loop: MSER-5 and a chunk test) and stitches each signature's
logs of interest into a row of the kernel table (:class:`KernelRow`) and
a profile, or says why not (``skipped``; the signatures a stitch cannot
profile are kept for a coarse row). The logs are placed once for every
signature at a time, so the cost grows with kernels + logs.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, NamedTuple, Optional

import numpy as np

from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.insitu._placement import ShiftedMap
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._align import place_logs, place_logs_of_kernels
from fingrav_native.method._pipeline import stitch_logs, stitch_placed_logs
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.method._stitched import Smoother
from fingrav_native.records._layouts import validate_samples
from fingrav_native.sensors._model import SensorModel

_log = logging.getLogger(__name__)


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


class KernelRow(NamedTuple):
    """One row of the kernel table as the attribution builds and amends it (``row._replace(energy_j=...)``).

    Its fields are :data:`~fingrav_native.insitu.KERNEL_TABLE_DTYPE`'s, in order, so a list of rows is the
    table's structured array (:func:`~fingrav_native.insitu._summary.trace_profile`); ``share`` is filled there.
    """

    name: str
    grid: Any
    block: Any
    # The table's column name, so it hides tuple.count on a row (never called on one).
    count: int  # type: ignore[assignment]
    golden: int
    warmup: int
    duration_ns: float
    power_w: float
    energy_j: float
    energy_half_width_j: float
    share: float
    joint: bool


@dataclasses.dataclass
class Signatures:
    """The kernel signatures profiled so far (a table row, a profile, the executions kept) and those skipped."""

    rows: list[KernelRow] = dataclasses.field(default_factory=list)
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


class NearLogs:
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


def signature_label(sig: Any) -> str:
    """A kernel signature in words: its name, grid and block, as a TraceProfile's ``skipped`` keys it.

    Parameters
    ----------
    sig : numpy.void
        One record of :attr:`KernelTrace.signatures <fingrav_native.insitu.KernelTrace>`
        (:data:`~fingrav_native.insitu.KERNEL_SIGNATURE_DTYPE`).

    Returns
    -------
    str
        ``"name grid=(x, y, z) block=(x, y, z)"``: the signature of the paper's in-situ
        grouping (Section IV-A's runs, one per execution of a kernel of that name and shape).
    """
    if not isinstance(sig, np.void) or not {"name", "grid", "block"} <= set(sig.dtype.names or ()):
        raise ValueError(f"sig: must be a record of KernelTrace.signatures (name, grid, block), not "
                         f"{type(sig).__name__}")
    return f"{sig['name']} grid={tuple(int(g) for g in sig['grid'])} block={tuple(int(b) for b in sig['block'])}"


def _kept(kt: KernelTrace, mine: np.ndarray, conc: np.ndarray) -> np.ndarray:
    """A signature's executions (rows ``mine``) without a concurrent kernel, in start order."""
    keep = mine[~conc[mine]]
    out: np.ndarray = keep[np.argsort(kt.executions["start_ns"][keep], kind="stable")]
    return out


def _placed_by_signature(kt: KernelTrace, samples: np.ndarray, lmap: ShiftedMap,
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


def profile_signatures(found: Signatures, kt: KernelTrace, on_device: np.ndarray, conc: np.ndarray,
                        samples: np.ndarray, near: Optional[NearLogs], lmap: ShiftedMap, it_of: np.ndarray, *,
                        margin: Optional[float], min_executions: int, warmup_tolerance: float,
                        sensor: Optional[SensorModel], attribution: str, smoother: Optional[Smoother]) -> None:
    """Every signature of the device profiled into ``found``, the logs placed once for all of them.

    ``smoother``: the stitch's; None under the joint fit, which replaces each curve and energy and keeps
    only the golden executions, the warm-up and the placement (the bins still refuse what the stitch refuses).
    """
    by_sig = _rows_by_signature(kt, on_device)
    kept = [_kept(kt, rows, conc) for rows in by_sig]
    placed = _placed_by_signature(kt, samples, lmap, [k if len(k) >= min_executions else k[:0] for k in kept])
    for sig, rows, keep in zip(kt.signatures, by_sig, kept):
        _profile_signature(found, kt, sig, rows, keep, samples, near, lmap, it_of, placed.get(int(sig["id"])),
                           margin=margin, min_executions=min_executions, warmup_tolerance=warmup_tolerance,
                           sensor=sensor, attribution=attribution, smoother=smoother)


def _profile_signature(found: Signatures, kt: KernelTrace, sig: Any, mine: np.ndarray, keep: np.ndarray,
                       samples: np.ndarray, near: Optional[NearLogs], lmap: ShiftedMap, it_of: np.ndarray,
                       placed: Optional[np.ndarray], *, margin: Optional[float], min_executions: int,
                       warmup_tolerance: float, sensor: Optional[SensorModel], attribution: str,
                       smoother: Optional[Smoother]) -> None:
    """Profile one signature's executions (rows ``mine``; ``keep`` those without a concurrent kernel, in start
    order) past the warm-up into ``found`` (or say why not); ``placed``: their logs placed already, or None."""
    label = signature_label(sig)
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
                             sensor=sensor, attribution=attribution, smoother=smoother)
        else:
            # The warm-up's runs left out (run = row in the trace: each execution is a run of its own).
            ep = stitch_placed_logs(samples, ex[warm:], lmap, placed[np.isin(placed["run"], ex["run"][warm:])],
                                    margin=margin, label=label, sensor=sensor, attribution=attribution,
                                    smoother=smoother)
    except ValueError as exc:
        found.skipped[label] = str(exc)
        found.rare.append((int(sig["id"]), keep))
        return
    if warm and len(kt.steps):
        found.first_steady = max(found.first_steady, int(kt.steps["step"][max(int(it_of[keep[warm]]), 0)]))
    e = ep.energy["total"]
    found.rows.append(KernelRow(
        name=str(sig["name"]), grid=sig["grid"], block=sig["block"], count=len(mine), golden=int(ep.golden.count),
        warmup=warm, duration_ns=float(ep.duration_ns),
        power_w=float(e.energy_j / (ep.duration_ns * 1e-9)) if ep.duration_ns > 0 else math.nan,
        energy_j=float(e.energy_j), energy_half_width_j=float(e.uncertainty_j), share=0.0, joint=False))
    found.profiles.append(ep)
    found.sig_ids.append(int(sig["id"]))
    found.kept_ids.append(keep[warm:])
