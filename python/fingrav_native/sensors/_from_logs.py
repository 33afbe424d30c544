"""A sensor characterised from logs a user recorded under a known load (no device needed).

Yang, Adamek and Armour (SC'24) drove square waves of load through NVIDIA
GPUs and read the sensor's behaviour from nvidia-smi's logs beside an
external meter. :func:`characterize_logs` is that analysis for any record:
the logs (host time, power) and the instants the load was on, on one clock.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt
import scipy.stats

from fingrav_native._checks import check_power, finite_array, flag, instance_of, numbers, positive_number, short_repr
from fingrav_native._errors import FingravWarning
from fingrav_native.records._recording import Recording
from fingrav_native.sensors._characterize import Characterisation, PeriodEstimate, estimate_period
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sensors._response_fit import StepFit, fit_load_response, fit_meter_response

#: Two halves of a record whose fitted window (or time constant) or delay differ by more than this many
#: combined standard errors are reported: the errors, or the model, are not to be trusted.
SPLIT_Z = 3.0


class SplitDisagreementWarning(FingravWarning):
    """The two halves of a record characterise the sensor differently (beyond their errors)."""


def _arrays(t_ns: npt.ArrayLike, power_w: npt.ArrayLike, load: npt.ArrayLike,
            allow_empty: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The logs sorted by time, and the load's intervals, checked (errors name the argument). With
    ``allow_empty`` (a reference meter given) the load may hold no interval."""
    # Numbers of one shape each (a ragged list, text or a complex value named, not a numpy error).
    t_raw, iv_raw = numbers(t_ns, "t_ns").ravel(), numbers(load, "load")
    if allow_empty and iv_raw.size == 0:
        iv_raw = iv_raw.reshape(0, 2)
    t0 = 0
    # Integer epoch nanoseconds are taken relative to the record's start before they become floats.
    if t_raw.dtype.kind in "iu" and t_raw.size and (iv_raw.dtype.kind in "iu" or not iv_raw.size):
        t0 = min(int(t_raw.min()), int(iv_raw.min())) if iv_raw.size else int(t_raw.min())
        t_raw, iv_raw = t_raw - t0, iv_raw - t0
    t = t_raw.astype(np.float64)
    p = numbers(power_w, "power_w").astype(np.float64).ravel()
    iv = iv_raw.astype(np.float64)
    if t.shape != p.shape:
        raise ValueError(f"power_w: one value per timestamp, got {p.size} for {t.size} in t_ns")
    if iv.ndim != 2 or iv.shape[1] != 2 or (len(iv) == 0 and not allow_empty):
        raise ValueError(f"load: an (n, 2) array of [start_ns, end_ns] of each interval the load was on, "
                         f"got shape {iv.shape}" + ("" if allow_empty else " (none at all is taken only beside a "
                                                    "reference meter)"))
    if not np.all(np.isfinite(iv)) or np.any(iv[:, 1] <= iv[:, 0]):
        raise ValueError("load: every interval needs finite start_ns < end_ns")
    # A log without a time or a reading is refused, not dropped (the caller decides what it was).
    finite_array(t, "t_ns")
    check_power(p, "power_w")
    if len(t) < 8:
        raise ValueError(f"t_ns, power_w: at least 8 logs are needed, got {len(t)}")
    order = np.argsort(t, kind="stable")
    return t[order], p[order], iv[np.argsort(iv[:, 0])], float(t0)


def _collapse(t: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first poll of each new reading: a host tool polling a cached value sees one update many times."""
    new = np.concatenate([[True], p[1:] != p[:-1]])
    return t[new], p[new]


def _check_moves(t: np.ndarray, p: np.ndarray, iv: np.ndarray) -> None:
    """Refuse a record whose logs do not follow the load (nothing to fit a response to)."""
    idx = np.searchsorted(iv[:, 0], t, side="right") - 1
    on = (idx >= 0) & (t < iv[np.maximum(idx, 0), 1])
    if on.sum() < 3 or (~on).sum() < 3:
        raise ValueError(f"load: {int(on.sum())} logs fall while it is on and {int((~on).sum())} while it is off; "
                         "a record needs several of each")
    res = scipy.stats.ttest_ind(p[on], p[~on], equal_var=False)
    if not (res.pvalue < 1e-2):
        raise ValueError(f"power_w: the logs do not follow the load (on {np.mean(p[on]):.1f} W, off "
                         f"{np.mean(p[~on]):.1f} W, p = {res.pvalue:.2g}): a flat record has no response to fit; "
                         "check that load and logs share one clock")


#: Fewest distinct phases (of :data:`PHASE_BINS` per update period) at which the load's edges must fall
#: for the logs to trace the response: edges at fewer phases show every update the same part of the wave.
MIN_EDGE_PHASES = 10

#: The bins of one update period in which the load's edge phases are counted.
PHASE_BINS = 50


def _check_not_counter(v: np.ndarray, arg: str) -> None:
    """Refuse readings that only ever rise: an energy counter (J), not a power."""
    d = np.diff(v)
    if len(d) >= 7 and np.all(d >= 0) and v[-1] > v[0]:
        raise ValueError(f"{arg}: the readings only rise ({v[0]:.6g} to {v[-1]:.6g} over {len(v)} readings): an "
                         "energy counter (J), not a power; give its differences over time "
                         "(fingrav_native.sensors.counter_to_logs turns counter reads into power logs)")


#: Fewest distinct places (of :data:`RAMP_BINS` along the fitted response) at which the logs must sample
#: a windowed response where the load's edges fall at few phases of the update period.
MIN_RAMP_POSITIONS = 10

#: The bins along the fitted response in which the logs' places are counted.
RAMP_BINS = 20


def _edge_phases(tc: np.ndarray, iv: np.ndarray, period: float) -> tuple[np.ndarray, int]:
    """The load's edges that can reach a log, and at how many of :data:`PHASE_BINS` phases of the update
    period they fall."""
    edges = np.sort(iv.ravel())
    edges = edges[(edges >= tc[0] - 2.0 * period) & (edges <= tc[-1])]
    return edges, len(np.unique(np.floor((edges / period) % 1.0 * PHASE_BINS)))


def _ramp_positions(tc: np.ndarray, edges: np.ndarray, period: float, delay: float, reach: float) -> int:
    """At how many of :data:`RAMP_BINS` places along a response of length ``reach`` (after ``delay``) the
    updates fall, each against the latest edge before it."""
    if not len(edges) or not reach > 0:
        return 0
    # Each stamp snapped to the update grid (its mean phase): a host tool's polls stamp an update up to a
    # poll late, a spread of places the sensor itself never sampled.
    phase = float(np.angle(np.exp(2j * np.pi * tc / period).mean())) / (2.0 * np.pi)
    u = period * (np.round(tc / period - phase) + phase) - delay
    j = np.searchsorted(edges, u, side="right") - 1
    x = (u[j >= 0] - edges[j[j >= 0]]) / reach
    x = x[(x > 0) & (x < 1)]
    return len(np.unique(np.floor(x * RAMP_BINS)))


def _undetermined(n: int, k: int, period: float, places: int) -> ValueError:
    """Why a windowed response fitted on edges at few phases is not determined, in words."""
    head = (f"load: its {n} edges fall at only {k} of {PHASE_BINS} phases of the sensor's {period / 1e6:.4g} ms "
            f"update period, and the logs sample the fitted response at {places} of {RAMP_BINS} places along it "
            f"(at least {MIN_EDGE_PHASES} phases or {MIN_RAMP_POSITIONS} places are needed)")
    if n >= 2 * MIN_EDGE_PHASES:
        return ValueError(head + ": the load's on and off lengths are multiples of, or commensurate with, the "
                          "update period, so every update sees the same part of the wave and the window, delay and "
                          "shape are not determined; drive on/off lengths of random duration (not whole multiples "
                          "of the update period)")
    return ValueError(head + ": too few edges to trace the response; record more on/off intervals of random "
                      "length, or give a reference meter")


#: A reference meter's change must exceed its noise this many times for it to show a response.
MIN_METER_SWING = 10.0


def _check_meter_moves(rp: np.ndarray) -> None:
    """Refuse a meter whose power does not change beyond its noise: no edge, nothing to fit."""
    noise = 1.4826 * float(np.median(np.abs(np.diff(rp) - np.median(np.diff(rp))))) / math.sqrt(2.0)
    lo, hi = (float(v) for v in np.percentile(rp, [5, 95]))
    if not hi - lo > MIN_METER_SWING * noise:
        raise ValueError(f"reference: the meter's power is constant within its noise ({lo:.1f} to {hi:.1f} W, 5th to "
                         f"95th percentile; noise {noise:.2g} W): a constant load has no edge and no response to "
                         f"fit; the swing must exceed {MIN_METER_SWING:g} times the noise")


def _meter_inside(reference: Optional[tuple[npt.ArrayLike, npt.ArrayLike]], t_origin: float, tc: np.ndarray,
                  pc: np.ndarray) -> tuple[Optional[tuple[np.ndarray, np.ndarray]], list[str], np.ndarray]:
    """The meter on the logs' origin, checked; the notes it leaves; which updates fall within its samples."""
    if reference is None:
        return None, [], np.ones(len(tc), dtype=bool)
    try:
        rt_raw = np.asarray(reference[0]).ravel()
        # On the logs' origin, in integers where the stamps are (epoch ns lose 256 ns as float64).
        rt = (rt_raw - int(t_origin) if rt_raw.dtype.kind in "iu" else rt_raw - t_origin).astype(np.float64)
        rp = np.asarray(reference[1], dtype=np.float64).ravel()
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"reference: a (t_ns, power_w) pair of arrays ({exc})") from None
    if rt.shape != rp.shape or len(rt) < 16 or not (np.all(np.isfinite(rt)) and np.all(np.isfinite(rp))):
        raise ValueError(f"reference: one finite power per stamp and at least 16 samples, got {rt.size} stamps "
                         f"and {rp.size} values")
    # A log outside the meter's samples would be compared with the meter's edge value held (a meter on
    # another clock or epoch shares no time with the logs at all): only the logs inside are fitted, and
    # the rest are said; too few inside is refused with both spans.
    keep = (tc >= rt.min()) & (tc <= rt.max())
    spans = (f"the meter's samples span {rt.min() / 1e9:.6g} to {rt.max() / 1e9:.6g} s and hold "
             f"{100 * float(np.mean(keep)):.0f} % of the logs ({int(keep.sum())} of {len(tc)} updates, "
             f"{tc[0] / 1e9:.6g} to {tc[-1] / 1e9:.6g} s; both from the record's first stamp)")
    if keep.sum() < 8 or len(np.unique(pc[keep])) < 8:
        raise ValueError(f"reference: {spans}; at least 8 distinct readings must fall inside: give the meter "
                         "on the logs' clock, in ns, over the whole record")
    order = np.argsort(rt, kind="stable")
    _check_not_counter(rp[order], "reference")
    _check_meter_moves(rp[order])
    notes = [] if keep.all() else [f"{spans}: only those are fitted (the meter is not extrapolated)"]
    return (rt, rp), notes, keep


def _check_placed(step: StepFit, windowed: bool, tc: np.ndarray, edges: np.ndarray, phases: int, period: float,
                  referenced: bool) -> None:
    """Refuse a windowed response the updates sample at too few places (edges at few phases of them)."""
    # Edges at few phases of the updates sample a windowed response at few places along it: any window,
    # delay and shape through those places fit alike, with small stated errors. An instant sensor has no
    # response to sample (its delay's error is already a log interval where the logs cannot place an
    # edge), a gapless window is the update period held (the null model, not fitted: the notes say so),
    # and a response many updates long is traced at the update period whatever the phases. Beside a meter
    # a single step is traced by the meter's own ramp: only a locked wave is refused there.
    if (windowed and not step.gapless and phases < MIN_EDGE_PHASES
            and (not referenced or len(edges) >= 2 * MIN_EDGE_PHASES)):
        reach = step.window_ns if step.shape == "boxcar" else 3.0 * step.tau_ns
        places = _ramp_positions(tc, edges, period, step.delay_ns, reach)
        if places < MIN_RAMP_POSITIONS:
            raise _undetermined(len(edges), phases, period, places)


def _fit(t: np.ndarray, p: np.ndarray, iv: np.ndarray, scale: float,
         reference: Optional[tuple[np.ndarray, np.ndarray]], period: float) -> StepFit:
    """The step fit against the meter where there is one, else against the load's square wave; a gapless
    window (the update period) is the null model either way."""
    # Recorded logs: the delay may be negative (a stamp before the window ends); the data says.
    if reference is None:
        return fit_load_response(t, p, iv, scale_ns=scale, min_delay_ns=-4.0 * scale, period_ns=period)
    return fit_meter_response(t, p, reference[0], reference[1], scale_ns=scale, min_delay_ns=-4.0 * scale,
                              period_ns=period)


def _split_check(t: np.ndarray, p: np.ndarray, iv: np.ndarray, scale: float, whole: StepFit, period: float,
                 reference: Optional[tuple[np.ndarray, np.ndarray]] = None
                 ) -> tuple[Optional[StepFit], Optional[StepFit], list[str]]:
    """The sensor fitted on each half of the record alone; what disagrees beyond the errors, in words."""
    mid = float(np.median(t))
    halves = []
    for sel_t, sel_iv in ((t < mid, iv[:, 1] <= mid), (t >= mid, iv[:, 0] >= mid)):
        try:
            if reference is None and not sel_iv.any():
                raise ValueError("no load interval in this half")
            halves.append(_fit(t[sel_t], p[sel_t], iv[sel_iv], scale, reference, period))
        except ValueError:
            return None, None, ["the halves of the record are too short to fit alone: errors not checked"]
    a, b = halves
    notes = []
    if a.shape != b.shape:
        notes.append(f"the halves prefer different shapes ({a.shape}, {b.shape})")
    length = {"boxcar": ("window_ns", "window_err_ns"), "first_order": ("tau_ns", "tau_err_ns")}[whole.shape]
    for what, (v, e) in (("window" if whole.shape == "boxcar" else "time constant", length),
                         ("delay", ("delay_ns", "delay_err_ns"))):
        va, vb, ea, eb = (getattr(a, v), getattr(b, v), getattr(a, e), getattr(b, e))
        if v == "window_ns" and a.gapless and b.gapless:
            continue  # both the update period: the same window by construction
        se = math.hypot(ea, eb)
        if not (math.isfinite(se) and se > 0):
            notes.append(f"the {what} fitted on the halves has no standard error ({va / 1e6:.2f} and "
                         f"{vb / 1e6:.2f} ms): not checked")
            continue
        z = abs(va - vb) / se
        if not z <= SPLIT_Z:
            notes.append(f"the {what} fitted on the halves differs by {abs(va - vb) / 1e6:.2f} ms, "
                         f"{z:.1f} standard errors ({va / 1e6:.2f} and {vb / 1e6:.2f} ms)")
    return a, b, notes


def _check_options(name: object, device: object, split_check: object, reference: Any,
                   scale_ns: Optional[float]) -> bool:
    """:func:`characterize_logs`'s options, each named when it is wrong; the split check as a bool."""
    instance_of(name, "name", str, "the sensor's name, a str")
    instance_of(device, "device", str, "what was measured, a str")
    if reference is not None and (isinstance(reference, (str, bytes, dict)) or not hasattr(reference, "__len__")
                                  or len(reference) != 2):
        raise ValueError(f"reference={short_repr(reference)}: a (t_ns, power_w) pair of arrays")
    if scale_ns is not None:
        positive_number(scale_ns, "scale_ns")
    return flag(split_check, "split_check")


def _given_arrays(t_ns: Any, power_w: Any, load: Any, beside_meter: bool) -> tuple[Any, Any, Any]:
    """The log times, powers and load intervals given as arrays, or held by a Recording given as ``t_ns``."""
    if isinstance(t_ns, Recording):
        return _recording_arrays(t_ns, power_w, load, beside_meter)
    for given, what in ((power_w, "power_w"), (load, "load")):
        if given is None:
            raise ValueError(f"{what}: required with an array of times (a Recording given as t_ns holds it)")
    return t_ns, power_w, load


def _recording_arrays(recording: Recording, power_w: Any, load: Any, beside_meter: bool
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Recording's log times, total power and load intervals (its executions), for :func:`characterize_logs`."""
    for given, what in ((power_w, "power_w"), (load, "load")):
        if given is not None:
            raise ValueError(f"{what}: the Recording given as t_ns holds it; give either the Recording or the "
                             "arrays, not both")
    names = recording.samples.dtype.names or ()
    for field, what in (("host_ns", "each log's host time, the load's clock"), ("total", "each log's power")):
        if field not in names:
            raise ValueError(f"t_ns: the Recording's logs have no {field} field ({what})")
    if recording.executions is None and beside_meter:
        intervals = np.zeros((0, 2), dtype=np.int64)
    else:
        ex = recording.executions_for("t_ns", "characterize_logs (the intervals the load was on)")
        intervals = np.column_stack([ex["start_ns"], ex["end_ns"]])
    return np.asarray(recording.samples["host_ns"]), np.asarray(recording.samples["total"]), intervals


def characterize_logs(
    t_ns: Union[npt.ArrayLike, Recording],
    power_w: Optional[npt.ArrayLike] = None,
    load: Optional[npt.ArrayLike] = None,
    *,
    scale_ns: Optional[float] = None,
    name: str = "characterised",
    device: str = "recorded logs",
    split_check: bool = True,
    reference: Optional[tuple[npt.ArrayLike, npt.ArrayLike]] = None,
) -> Characterisation:
    """Characterise a power sensor from logs recorded under a known load.

    Parameters
    ----------
    t_ns : array_like or Recording
        Each log's host time (ns, any epoch; the load's clock). Or a
        :class:`~fingrav_native.records.Recording` holding the whole record:
        its logs' ``host_ns`` and ``total`` are ``t_ns`` and ``power_w``, and
        its executions (``start_ns``, ``end_ns``, on the same host clock) the
        intervals the load was on; ``power_w`` and ``load`` are then not
        given. A Recording without executions (unless beside a
        ``reference``) or whose logs have no ``host_ns`` is refused, naming
        what it lacks.
    power_w : array_like
        Each log's power (W); required with an array of times. Repeated polls of a cached reading are
        collapsed to the first poll that saw it. NaN, infinite, negative and
        absurd values (above 10 kW, more than any accelerator draws) are
        refused: drop a log without a reading first.
    load : array_like, shape (n, 2)
        ``[start_ns, end_ns]`` of every interval the load was on. Beside a
        ``reference`` it only annotates (it may then hold no interval):
        the fit is to the meter's power.
    scale_ns : float, optional
        A first guess of the response's length (default the update period,
        at least 1 ms).
    name, device : str
        The sensor's name and what was measured, for the file.
    reference : (array_like, array_like), optional
        A reference meter's ``(t_ns, power_w)`` on the same clock. Given,
        the response is fitted to the board's measured power
        (:func:`fit_meter_response`) rather than to the load's square wave,
        so a board that ramps is not taken for a slow sensor, and the
        model's ``gain`` and ``offset_w`` are the field against the meter.
        Only the logs within the meter's samples are fitted (the meter is
        never extrapolated past its last sample; the notes say how many were
        left out); fewer than 8 distinct readings inside is refused with
        both spans (a meter on another clock or in other units). A meter
        whose power does not swing beyond :data:`MIN_METER_SWING` times its
        noise (a constant load) is refused.
    split_check : bool
        Fit each half of the record alone and warn
        (:class:`SplitDisagreementWarning`) where the halves disagree by more
        than :data:`SPLIT_Z` standard errors.

    Returns
    -------
    Characterisation
        The :class:`SensorModel` (``source="characterised"``; a negative
        delay where the logger stamps before its window ends), the period
        (:func:`estimate_period` over the collapsed updates), the step fit
        (:func:`fit_load_response`: both shapes, each with its residual) and
        what the halves showed, in ``notes``; logs that poll a cached
        reading also get a note of the reader's lag (step 7). ``save``
        writes the file that
        :func:`~fingrav_native.files.load_characterisation` reads back and
        every path takes as ``sensor=``.

    Raises
    ------
    ValueError
        Malformed input (the argument is named); logs that do not follow
        the load at all; readings that only rise (an energy counter, not a
        power); a windowed response the updates sample at too few places
        (a load phase-locked to the updates; or, without a meter, too few
        edges: step 5); a constant meter. Each names the reason.

    Notes
    -----
    Yang, Adamek and Armour, SC'24 (square-wave loads read through
    nvidia-smi; the method of their Section IV on any record):

    1. Sort; collapse polls of a cached reading to the first of each value
       (a host tool polls faster than the driver updates: fed every poll,
       the fit would take the update period for a window).
    2. The update period from the collapsed stamps (a least-squares slope
       on the update index, unbiased under the poll grid). Readings that
       only rise are an energy counter's and are refused.
    3. Without a reference, refuse logs that do not follow the load
       (Welch's t between logs in and out of the load, p < 0.01; the lag
       blurs the labels, not the test). With one, the meter fit's own test
       refuses logs that do not follow the meter.
    4. Fit boxcar and first-order responses with delay (variable
       projection, :func:`fit_load_response`); keep the better, unless a
       boxcar as long as the update period (a gapless average, its delay
       alone fitted) is not rejected by an F test at level
       :data:`~fingrav_native.sensors.GAPLESS_LEVEL` (``step.gapless``):
       a free window and delay trade along a valley of near-equal misfit,
       and with few edges in the record the free optimum moves with the
       stretch fitted.
    5. Where the load's edges fall at fewer than :data:`MIN_EDGE_PHASES`
       of :data:`PHASE_BINS` phases of the update period, count the places
       (of :data:`RAMP_BINS`) at which the updates, snapped to their grid,
       sample the fitted window or filter after the latest edge; a freely
       fitted windowed response sampled at fewer than
       :data:`MIN_RAMP_POSITIONS` places is refused. The logs trace a
       response by equivalent-time sampling (Yang et al. drive square
       waves at phases random against the sensor); a wave whose on and
       off lengths are multiples of, or commensurate with, the update
       period shows every update the same part of it, and every window,
       delay and shape through those few places fit alike, with small
       stated errors. Without a meter a record with too few edges is
       refused the same way; a gapless window kept as the null there is
       said to be held, not measured.
    6. Fit each half alone; a window, time constant or delay that differs
       beyond :data:`SPLIT_Z` combined standard errors is said.
    7. Where the logs poll a cached reading (at least one repeated poll per
       update), the poll interval (the median interval between all logs)
       and what it does to the fit are said: each update is stamped up to
       one poll late, so the delay and window are the stamps' as this
       reader logs them; the sensor's own delay is earlier by
       :data:`READER_DELAY_BIAS` of a poll (measured on synthetic records).
    """
    split_check = _check_options(name, device, split_check, reference, scale_ns)
    t, p, iv, t_origin = _arrays(*_given_arrays(t_ns, power_w, load, reference is not None),
                                 allow_empty=reference is not None)
    tc, pc = _collapse(t, p)
    if len(tc) < 8:
        raise ValueError(f"power_w: {len(tc)} distinct readings after collapsing repeated polls; at least 8 are "
                         "needed (a constant field, or a record too short)")
    _check_not_counter(pc, "power_w")
    period: PeriodEstimate = estimate_period(tc)
    edges, phases = _edge_phases(tc, iv, period.period_ns)
    if reference is None:
        # Against the load's square wave the logs must follow it; against a meter, the fit's own test
        # (the gain beyond 3 standard errors, finite errors) says whether they follow the meter. A
        # stretch that holds no log while the load is on (a 50/50 ms wave whose 100 ms updates lock to
        # its off phase) still sees the meter's power move through every window.
        try:
            _check_moves(tc, pc, iv)
        except ValueError:
            if phases < MIN_EDGE_PHASES and len(edges) >= 2 * MIN_EDGE_PHASES:
                raise _undetermined(len(edges), phases, period.period_ns, 0) from None  # the cause, named
            raise
    scale = (positive_number(scale_ns, "scale_ns") if scale_ns is not None
             else max(period.period_ns, 1e6))
    ref, notes_meter, inside = _meter_inside(reference, t_origin, tc, pc)
    if not inside.all():
        tc, pc = tc[inside], pc[inside]
        assert ref is not None
        t_in = (t >= ref[0].min()) & (t <= ref[0].max())
        t, p = t[t_in], p[t_in]
    step = _fit(tc, pc, iv, scale, ref, period.period_ns)
    windowed = step.shape == "first_order" or step.window_ns > 0.02 * period.period_ns
    _check_placed(step, windowed, tc, edges, phases, period.period_ns, reference is not None)
    notes = [f"{len(t)} logs, {len(t) - len(tc)} repeated polls of a cached reading collapsed, "
             f"{len(iv)} load intervals; period {period.period_ns / 1e6:.3f} +- {period.uncertainty_ns / 1e6:.3f} ms",
             (f"window taken as the update period, a gapless average (the free fit is not better beyond the "
              f"F test: p = {step.gapless_p:.2g})" if step.gapless else
              f"a gapless window (the update period) rejected by the F test (p = {step.gapless_p:.2g})"),
             f"the load's {len(edges)} edges fall at {phases} of {PHASE_BINS} phases of the update period"
             + (": too few for the logs to determine a window shorter than the update period; the gapless window "
                "is the null model held, not measured" if step.gapless and phases < MIN_EDGE_PHASES else ""),
             *notes_meter]
    lag = _reader_lag_note(t, tc, period.period_ns)
    if lag:
        notes.append(lag)
    if split_check:
        a, _, split = _split_check(tc, pc, iv, scale, step, period.period_ns, ref)
        for s in split if a is not None else []:
            warnings.warn(SplitDisagreementWarning(s + ": read the stated errors as too small, or the sensor as "
                                                   "changing over the record"), stacklevel=2)
        notes += split or ["the halves of the record agree within their errors"]
    sensor = SensorModel(
        name=name, kind="window" if windowed else "instant", period_ns=period.period_ns,
        window_ns=step.window_ns if (step.shape == "boxcar" and windowed) else 0.0,
        shape=step.shape, tau_ns=step.tau_ns, delay_ns=step.delay_ns, gain=step.gain, offset_w=step.offset_w,
        source="characterised",
        notes="; ".join(notes))
    return Characterisation(sensor=sensor, period=period, step=step, quantum=_quantum(pc), device=device,
                            notes=sensor.notes)


#: Where the fitted delay sits past the sensor's own under a host tool's polls, in polls: the range over
#: synthetic records (boxcars of 10 and 25 ms, delays -15 and +5 ms, polls of 7, 13 and 25 ms every 100 ms;
#: tests/sensors/test_characterize_logs.py pins it).
READER_DELAY_BIAS = (0.3, 0.5)


def _reader_lag_note(t: np.ndarray, tc: np.ndarray, period_ns: float) -> str:
    """What a host tool's polling does to the fitted delay and window, in words ("" where the logs are
    not polls of a cached reading: every log a new value).

    A tool that polls a cached reading stamps each update at the first poll that sees it, late by 0 to
    one poll interval. The fit takes the stamps as they are, so its delay and window are the stamps' as
    this reader logged them: a model that predicts this tool's logs, not the sensor's own timing. Said
    rather than corrected: the lag's distribution is the tool's (a poll phase-locked to the updates lags
    by a constant no record can tell from delay)."""
    repeats = len(t) - len(tc)
    if repeats < len(tc) or len(t) < 3:  # fewer than one repeated poll per update: not a polling reader
        return ""
    poll = float(np.median(np.diff(t)))
    if not (0.0 < poll < period_ns):
        return ""
    lo, hi = READER_DELAY_BIAS
    return (f"the logs are a host tool's polls of a cached reading every {poll / 1e6:.3g} ms ({repeats} repeats): "
            f"each update is stamped 0-{poll / 1e6:.3g} ms after it happened, and the fit takes that lag for "
            f"delay and window: they are this reader's stamps', not the sensor's own timing (its own delay is "
            f"earlier by about {lo * poll / 1e6:.2g}-{hi * poll / 1e6:.2g} ms, {lo}-{hi} of a poll on synthetic "
            f"records, and its window up to a quarter poll narrower); the stated errors leave that out. Poll "
            f"faster to shrink it")


def _quantum(p: np.ndarray) -> float:
    """The readings' step (W): the smallest nonzero difference between distinct values (0 if none)."""
    u = np.unique(p)
    d = np.diff(u)
    d = d[d > 0]
    return float(d.min()) if len(d) else 0.0
