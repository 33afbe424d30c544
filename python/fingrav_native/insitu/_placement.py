"""Where the logs sit against the trace's kernels: the clock map onto the trace, the logs' measured offset and
the checks that refuse or warn of a mismatch.

The trace and the power logs are stamped on different clocks; a map fitted on
bracketed reads bounds its error, and the kernels themselves measure the logs'
offset (:func:`~fingrav_native.insitu.align_logs_to_trace`; an averaging
sensor's through its windows). Here the offset is measured, applied where the
map cannot be trusted to the microsecond (one-sided, or coarser than the
search), and otherwise checked against the map's bound: the paper's sync error
(Section IV-A) made visible instead of assumed.
"""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any, Optional

import numpy as np

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
from fingrav_native.insitu._concurrent import concurrent_spans
from fingrav_native.insitu._overlap import communication_overlap
from fingrav_native.insitu._trace import GPU_ORDINAL, KernelTrace
from fingrav_native.sensors._model import SensorModel

_log = logging.getLogger(__name__)


class ShiftedMap:
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


#: Offsets tried across a map's bound where it is wider than the fine search (each step at least 1 us; a
#: parabola refines the minimum between steps): a 100 ms bound in 500 us steps. At 100 steps two of the tool
#: logs' closed-form tests (tests/files/test_power_logs.py) missed their 1.5 %.
WIDE_SEARCH_STEPS = 200


def one_sided(logger_map: ClockMapLike) -> bool:
    """Whether a clock map was fitted one-sidedly (a logger's own clock, seen only when published)."""
    inner = getattr(logger_map, "logger", None)
    return "one-sided" in (getattr(logger_map, "method", None), getattr(inner, "method", None))


def check_overlap(kt: KernelTrace, on_device: np.ndarray, t_logs: np.ndarray, notes: list[str]) -> None:
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


def device_of(kt: KernelTrace, device: Optional[int]) -> int:
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


def _placement_bound(lmap: ShiftedMap, t_logs: np.ndarray, kt: KernelTrace) -> float:
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


def _mismatch_note(alignment: LogAlignment, lmap: ShiftedMap, t_logs: np.ndarray, kt: KernelTrace,
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


def aligned_logs(kt: KernelTrace, samples: np.ndarray, t_logs: np.ndarray, model: Optional[SensorModel],
            on_device: np.ndarray, conc: np.ndarray, lmap: ShiftedMap, apply: str,
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
                   on_device: np.ndarray, lmap: ShiftedMap, notes: list[str], coarse: bool) -> Optional[LogAlignment]:
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
