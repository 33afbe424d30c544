"""Phase-steered launches: equivalent-time sampling instead of waiting for luck.

FinGraV (paper Section IV-A) relies on random phase: a run yields a log of
interest only if the free-running logger happens to sample inside the
execution of interest, at a random point of it. With the paper's 1 ms
logger and a 366 us execution that is a third of the runs, landing unevenly;
with a sensor that reports one 25 ms window every 100 ms a sub-millisecond
execution is hit in well under 1% of runs.

Sampling oscilloscopes solved this long ago. *Sequential equivalent-time
sampling* places each sample at a chosen delay after the trigger and
measures the delay (Tektronix, "XYZs of oscilloscopes"; Pico Technology,
"Equivalent-time sampling"); the random variant (Frye and Nahman, IEEE
Trans. Instrum. Meas. IM-13, 1964) is what FinGraV does by default. Here
the trigger is ours to move: the sensor's sample instants are predicted on
the host timeline, and each run's launch is delayed so that a sample (for an
averaging sensor, an edge of a window) lands at the time of interest the
data needs most.

The pieces:

* :func:`predict_sample_instants`: period and phase of the sensor's samples
  on the host timeline, fitted on the logs of recent runs (through the
  logger's clock map), with their jitter; refitted after every run, so slow
  drift of the logger's clock is followed.
* :class:`PhaseSteerer`: the launch offset (launch to execution of
  interest, with its jitter), coverage of the execution's time axis per bin,
  the choice of the next target, and the fallback to random phase where
  prediction fails (jitter too large for the execution, no stable period, a
  backend that cannot delay a launch precisely).

Steering changes only *when* a run starts, never what it executes, so
golden-run selection (execution times) and the SSE/SSP semantics are those
of the paper. A run whose sample missed its target is used where it landed.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional, Sequence

import numpy as np
import scipy.stats

from fingrav_native._checks import finite_array, positive_number
from fingrav_native._errors import FingravWarning
from fingrav_native.clocks._fitting import linregress_line, median
from fingrav_native.clocks._runs import Timeline, timeline_of
from fingrav_native.method._forward_model import curve_precision_inverse, curve_variance, design_rows
from fingrav_native.method._phase_modes import PHASES
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sensors._model import SensorModel

_log = logging.getLogger(__name__)


#: Runs whose logs the prediction is fitted on (recent ones: drift is followed, cost stays bounded).
_HISTORY_RUNS = 24


#: Deconvolved sensors whose random phase puts an edge in the execution in at least this share of runs
#: are given quasi-random phases, not a model-based design (:meth:`PhaseSteerer._plan_stratified`).
_STRATIFY_ABOVE = 0.25


#: The golden ratio's fractional part: the additive recurrence with the lowest discrepancy.
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


#: Steered runs before steering is judged (and stopped if it does no better than random phase).
_JUDGE_AFTER = 16


class PhaseSteeringWarning(FingravWarning):
    """``phase="steered"`` was asked for but the campaign fell back to random phase (the reason is given)."""


@dataclass(frozen=True)
class SamplePrediction:
    """The sensor's sample instants on the host timeline: ``anchor_ns + k * period_ns``.

    Attributes
    ----------
    period_ns : float
        Fitted period (host ns per sample).
    anchor_ns : float
        The fitted instant of the latest sample seen.
    jitter_ns : float
        Standard deviation of the samples about the fit.
    logs : int
        Samples the fit used (after outliers were left out).
    outliers : int
        Samples left out (more than five robust deviations off the grid).
    """

    period_ns: float
    anchor_ns: float
    jitter_ns: float
    logs: int
    outliers: int

    def next_after(self, host_ns: float) -> float:
        """The first predicted sample instant at or after ``host_ns``."""
        k = math.ceil((float(host_ns) - self.anchor_ns) / self.period_ns)
        return self.anchor_ns + k * self.period_ns


#: The median absolute deviation's scale to a normal's deviation, 1 / Phi^-1(3/4)
#: (``scipy.stats.median_abs_deviation(..., scale="normal")``).
_MAD_NORMAL = 1.482602218505602
#: Phi^-1(3/4) (``scipy.special.ndtri(0.75)``), the divisor of ``median_abs_deviation(..., scale="normal")``.
_PHI_INV_3_4 = 0.6744897501960817


def _line(k: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept of ``t`` on ``k`` (centred sums: no normal matrix to form)."""
    km, tm = float(k.sum() / k.size), float(t.sum() / t.size)  # numpy.mean's sums, without its dispatch
    dk = k - km
    slope = float(np.dot(dk, t - tm) / np.dot(dk, dk))
    return slope, tm - slope * km


def _unwrap(t: np.ndarray, period: float) -> np.ndarray:
    """Sample index of each sorted instant: bursts unwrapped in turn against the line fitted to those before.

    Rounding every gap by a fixed period fails across the long gaps between
    runs (a period 200 ppm off is a whole period wrong after 5000 periods).
    Inside a burst (gaps under ten periods) rounding each gap is exact even
    for a guess a few percent off, and for instants up to half a period off
    the grid; the first instant of the next burst is placed by the line
    fitted to every burst before it, which is as precise as the span seen.
    The loop is over bursts (runs), not samples; each refit is a closed-form
    line on instants relative to the first (epoch-scale nanoseconds lose
    their low bits in a product), so a campaign's steering refits cost
    linear time per run.
    """
    gaps = np.diff(t)
    cuts = np.flatnonzero(gaps > 10 * period) + 1
    k = np.zeros(len(t))
    rel = t - float(t[0])
    slope, icept = period, 0.0
    start = 0
    for stop in (*cuts.tolist(), len(t)):
        if start > 0:
            # The burst's first index from the line so far; the rest by its own gaps.
            k[start] = np.rint((rel[start] - icept) / slope)
        k[start + 1:stop] = k[start] + np.cumsum(np.rint(gaps[start:stop - 1] / slope))
        # The line only places the next burst: none is fitted after the last.
        if stop < len(t) and stop >= 2 and k[stop - 1] > k[0]:
            # Refit once without outliers: one log 300 us off in a burst of 40
            # tilts the line enough to misplace a burst 3000 periods later.
            ks, ts = k[:stop], rel[:stop]
            slope, icept = _line(ks, ts)
            resid = ts - (icept + slope * ks)
            centre = median(resid)
            mad = _MAD_NORMAL * median(np.abs(resid - centre))
            good = np.abs(resid - centre) <= max(5 * mad, 1e-3 * slope)
            if 2 <= good.sum() < stop and np.ptp(ks[good]) > 0:
                slope, icept = _line(ks[good], ts[good])
        start = stop
    return k


def predict_sample_instants(instants_ns: np.ndarray, nominal_period_ns: float) -> SamplePrediction:
    """Fit the grid ``anchor + k * period`` to observed sample instants.

    Parameters
    ----------
    instants_ns : numpy.ndarray
        Host times of the sensor's samples (the logs' timestamps through the
        logger's clock map, minus the reporting delay), from one or more
        runs; gaps between runs are allowed.
    nominal_period_ns : float
        The sensor's nominal period (at least 1 ns): the first guess,
        refined by the fit.

    Returns
    -------
    SamplePrediction

    Raises
    ------
    ValueError
        Fewer than four distinct instants, or a nominal period that is not
        positive.

    Notes
    -----
    The sample index of each instant is found by unwrapping in time order
    against the line fitted to the instants before it (so the precision of
    the period grows with the span seen, and long gaps between runs unwrap
    correctly); the fit (ordinary least squares,
    :func:`scipy.stats.linregress`) is then redone without outliers, three
    times (fewer once the logs kept stop changing: the passes left would
    repeat the last). Samples more than five robust
    deviations (MAD) off the grid are left out and counted. This is the
    timebase of sequential equivalent-time sampling (see the module
    docstring); the paper (Section IV-A) leaves the phase to chance.
    """
    # Below a nanosecond no logger samples (and the instants' gaps in periods overflow).
    if not positive_number(nominal_period_ns, "nominal_period_ns") >= 1.0:
        raise ValueError(f"nominal_period_ns={nominal_period_ns!r}: must be at least 1 ns")
    # A NaN instant is refused, not dropped.
    t = np.unique(finite_array(instants_ns, "instants_ns"))
    if len(t) < 4:
        raise ValueError(f"instants_ns: {len(t)} distinct sample instants; the period fit needs at least 4")
    k = _unwrap(t, float(nominal_period_ns))
    keep = np.ones(len(t), dtype=bool)
    period, intercept = float(nominal_period_ns), float(t[0])
    resid = np.zeros(len(t))
    for _ in range(3):
        if keep.sum() < 3:
            break
        slope, icept = linregress_line(k[keep], t[keep])
        if not slope > 0:
            break
        period, intercept = slope, icept
        resid = t - (intercept + period * k)
        kept = resid[keep]
        centre = median(kept)
        # scipy.stats.median_abs_deviation(kept, scale="normal"), its arithmetic: the MAD over Phi^-1(3/4).
        mad = median(np.abs(kept - centre)) / _PHI_INV_3_4
        new_keep = np.abs(resid - centre) <= max(5 * mad, 1e-3 * period)
        if np.array_equal(new_keep, keep):
            break  # a fixed point: another pass would refit the same logs to the same line
        keep = new_keep
    jitter = float(np.std(resid[keep], ddof=1)) if keep.sum() > 2 else float("inf")
    return SamplePrediction(period_ns=period, anchor_ns=intercept + period * float(k[-1]), jitter_ns=jitter,
                            logs=int(keep.sum()), outliers=int((~keep).sum()))


@dataclass
class _Aim:
    """One steered run's plan: where its sample should land and when the launch was released."""

    label: str
    toi_ns: float
    edge: Literal["end", "start", "stratified", "design"]  # the window edge aimed, or how the phase was chosen
    launch_ns: float


@dataclass
class _Coverage:
    """Edges that landed in each bin of one execution of interest."""

    index: int
    counts: np.ndarray


@dataclass
class PhaseSteerer:
    """Chooses each run's launch time so that a sensor sample lands where the profile needs one.

    Parameters
    ----------
    caps : Capabilities
        The backend's (logger period and clock, sensor).
    sensor : SensorModel, optional
        The sensor (default ``caps.sensor``; an instantaneous logger at the
        logger period when neither is known).
    labels : sequence of (str, int)
        The executions of interest by label and index within the run.
    duration_ns : float
        The execution's duration (from the timing runs).
    bin_ns : float
        Width of a coverage bin (the guidance's LOI interval).
    target_per_bin : int
        Edges per bin (on average over the bins, every bin at least one)
        before the coverage counts as complete.
    seed : int
        Seed of the dither inside a bin and of ties between bins.
    requested : {"auto", "steered"}
        What the user asked for: ``"steered"`` warns when falling back.
    design : bool
        The profile deconvolves the logs (an averaging sensor): choose each
        launch phase by the information its logs would add to the
        deconvolution (A-optimal sequential design over the execution's
        curve) instead of by the coverage of one sample per bin.

    Notes
    -----
    Sequential equivalent-time sampling (see the module docstring; Frye and
    Nahman 1964 for the random variant the paper uses, Section IV-A).

    Per run, :meth:`plan` (after the device is idle) returns the host time
    to release the launch at, or ``None`` (random phase); :meth:`observe`
    (after the run) refits the sample grid on recent runs, measures the
    launch offset and the aim error, and counts coverage. Steering stops,
    and the campaign goes on at random phase, when the measured aim error
    exceeds a quarter of the execution (samples cannot be placed inside it
    reliably) or the sample grid cannot be fitted; ``note`` says why.
    """

    caps: Capabilities
    sensor: Optional[SensorModel]
    labels: Sequence[tuple[str, int]]
    duration_ns: float
    bin_ns: float
    target_per_bin: int = 1
    seed: int = 0
    requested: Literal["auto", "steered"] = "auto"
    design: bool = False
    active: bool = True
    note: str = ""
    prediction: Optional[SamplePrediction] = None
    _coverage: dict[str, _Coverage] = field(default_factory=dict)
    _offsets: dict[str, list[float]] = field(default_factory=dict)
    _random_offsets: dict[str, list[float]] = field(default_factory=dict)
    _aim_errors: list[float] = field(default_factory=list)
    _hits: int = 0
    _steered: int = 0
    #: Runs (steered, random) and those of them with an edge inside an execution of interest.
    _landed: dict[str, list[int]] = field(default_factory=lambda: {"steered": [0, 0], "random": [0, 0]})
    _records: list[RunRecord] = field(default_factory=list)
    _pending: Optional[_Aim] = None
    #: Time from the plan to the release: grows while releases come late (a setup that outlasts it).
    _lead_ns: float = 200_000.0
    _late: int = 0
    #: How each steered run's phase was chosen: "coverage", "stratified" or "design".
    _modes: dict[str, int] = field(default_factory=dict)
    #: Per label: first execution start and last execution end of the latest run, relative to the
    #: execution of interest's start (where a window's partner edge falls).
    _run_span: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Design mode: information matrix per label, and recent runs' executions relative to their release.
    _info: dict[str, np.ndarray] = field(default_factory=dict)
    _design_logs: dict[str, int] = field(default_factory=dict)
    _templates: list[np.ndarray] = field(default_factory=list)
    _n_max: int = 0

    def __post_init__(self) -> None:
        if not (self.duration_ns > 0 and self.bin_ns > 0):
            raise ValueError(f"duration_ns={self.duration_ns}, bin_ns={self.bin_ns}: must be positive")
        if not self.labels:
            raise ValueError("labels: at least one execution of interest")
        if self.sensor is None:
            self.sensor = self.caps.sensor
        n_bins = max(1, math.ceil(self.duration_ns / self.bin_ns))
        self.bin_ns = self.duration_ns / n_bins
        self._coverage = {label: _Coverage(int(index), np.zeros(n_bins, dtype=np.int64))
                          for label, index in self.labels}
        self._offsets = {label: [] for label, _ in self.labels}
        self._random_offsets = {label: [] for label, _ in self.labels}
        self._rng = np.random.default_rng(self.seed)
        self._phase0 = float(self._rng.uniform())

    # ------------------------------------------------------------------ geometry of the sensor

    @property
    def _period_ns(self) -> float:
        return float(self.sensor.period_ns if self.sensor is not None else self.caps.logger_period_ns)

    @property
    def _delay_ns(self) -> float:
        return float(self.sensor.delay_ns) if self.sensor is not None else 0.0

    def _window_ns(self, logged: Optional[np.ndarray] = None) -> np.ndarray | float:
        """Boxcar window of each log (its own ``window_ns`` where it has one); 0 for instants and filters."""
        s = self.sensor
        if s is None or s.shape != "boxcar" or s.kind == "counter":
            # A counter's interval edges are its read instants (both edges are samples).
            return 0.0 if logged is None else np.zeros(len(logged))
        if logged is None:
            return float(s.window_ns)
        w = logged.astype(np.float64)
        return np.where(w > 0, w, float(s.window_ns))

    # ------------------------------------------------------------------ state

    @property
    def complete(self) -> bool:
        """Every bin of every execution of interest has an edge, and they hold ``target_per_bin`` per bin in all.

        Where launches jitter by more than a bin, which bin an edge lands in
        is partly chance; asking every bin for the full count would make the
        last bins a coupon collector's problem (many runs for the last few
        edges), so the count is asked of the total.
        """
        return all(int(c.counts.min()) >= 1 and int(c.counts.sum()) >= self.target_per_bin * len(c.counts)
                   for c in self._coverage.values())

    def coverage(self, label: str) -> np.ndarray:
        """Edges counted in each bin of ``label``'s execution (a copy)."""
        return self._coverage[label].counts.copy()

    def summary(self) -> dict[str, Any]:
        """What steering did, for the profile's settings (and the file)."""
        aim = np.asarray(self._aim_errors)
        out: dict[str, Any] = {
            "requested": self.requested,
            "used": "steered" if self._steered else "random",
            "active_at_end": bool(self.active),
            "note": self.note,
            "steered_runs": int(self._steered),
            "hits": int(self._hits),
            "late_releases": int(self._late),
            "modes": dict(self._modes),
            "lead_ns": float(self._lead_ns),
            "steered_inside_rate": self._rate("steered"),
            "random_inside_rate": self._rate("random"),
            "bin_ns": float(self.bin_ns),
            "target_per_bin": int(self.target_per_bin),
            "aim_error_sd_ns": float(np.std(aim, ddof=1)) if len(aim) > 1 else None,
            "aim_error_median_ns": float(np.median(aim)) if len(aim) else None,
            "empty_bins": {label: int((c.counts == 0).sum()) for label, c in self._coverage.items()},
        }
        if self.prediction is not None:
            out.update(period_ns=self.prediction.period_ns, sample_jitter_ns=self.prediction.jitter_ns)
        return out

    @property
    def _random_rate(self) -> float:
        """Share of runs random phase gives an edge inside the execution.

        The end edges form one grid of the sensor's period, the start edges
        the same grid shifted by the window: the share of phases for which
        either grid has a point inside the execution (one grid when the
        window is a whole number of periods, as for a 1 ms average every 1 ms).
        """
        p, d = self._period_ns, self.duration_ns
        w = float(self._window_ns())
        if w <= 0:
            return min(1.0, d / p)
        shift = w % p
        overlap = max(0.0, d - min(shift, p - shift))
        return min(1.0, (2 * d - overlap) / p)

    def _rate(self, kind: Literal["steered", "random"]) -> Optional[float]:
        runs, inside = self._landed[kind]
        return inside / runs if runs else None

    def _stop(self, reason: str) -> None:
        """Go on at random phase from the next run; ``note`` says why (the campaign reports it)."""
        if self.active:
            _log.info("phase steering stops: %s", reason)
        self.active = False
        self.note = reason

    # ------------------------------------------------------------------ per run

    def plan(self, now_ns: float) -> Optional[float]:
        """The host time to release the next launch at (``None``: launch now, at random phase).

        Parameters
        ----------
        now_ns : float
            Host time now, or an estimate of it (the device is idle): the
            release is at least a lead (a tenth of a period, 200 us or more)
            after it. An estimate that is behind makes the release late; the
            offset is measured from the actual release (:meth:`released`), so
            a late release is a missed aim, not a wrong offset.
        """
        self._pending = None
        if not self.active or self.prediction is None:
            return None
        if self.design and self._random_rate >= _STRATIFY_ABOVE:
            return self._plan_stratified(now_ns)
        if self.design and self._design_ready:
            return self._plan_design(now_ns)
        # The launch offset (release to the execution of interest's start)
        # varies from run to run: launch overhead and, before a late
        # execution of interest, the sum of every earlier execution's time
        # (hundreds of microseconds before the 64th). Each candidate target
        # is therefore scored by the coverage it is expected to add under
        # the offsets measured so far, not by the bin it aims at: where the
        # offset is steady this picks the emptiest bin, where it spreads over
        # a period it still raises the chance that a sample lands inside.
        # The execution of interest with the fewest edges so far is served
        # first (in mode "both" the SSE execution, early in the run, is easier
        # to hit and would otherwise take every run).
        totals = {label: int(c.counts.sum()) for label, c in self._coverage.items()}
        fewest = min(totals.values())
        order = [label for label in self._coverage if totals[label] == fewest] + \
            [label for label in self._coverage if totals[label] != fewest]
        best: Optional[tuple[float, str, int, float, float]] = None
        for label in order:
            cov = self._coverage[label]
            measured = self._offsets[label] if len(self._offsets[label]) >= 3 else self._random_offsets[label]
            if not measured:
                continue
            recent = np.asarray(measured[-32:], dtype=np.float64)
            offset = float(np.median(recent))
            spread = offset - recent  # where a sample aimed at toi lands, relative to toi
            need = 1.0 / (1.0 + cov.counts.astype(np.float64))  # diminishing returns per bin
            n_bins = len(cov.counts)
            tois = (np.arange(n_bins)[:, None] + self._rng.uniform(0.05, 0.95, size=(n_bins, 1))) * self.bin_ns
            period = self.prediction.period_ns
            reach = int(math.ceil((float(np.abs(spread).max()) + self.duration_ns) / period)) + 1
            score = np.zeros(n_bins)
            for j in range(-reach, reach + 1):
                at = tois + spread[None, :] + j * period
                lands = (at >= 0) & (at < self.duration_ns)
                idx = np.clip((at / self.bin_ns).astype(np.int64), 0, n_bins - 1)
                score += np.where(lands, need[idx], 0.0).mean(axis=1)
            top = np.flatnonzero(score >= score.max() * (1 - 1e-9))
            b = int(top[int(self._rng.integers(len(top)))])
            best = (float(score[b]), label, b, float(tois[b, 0]), offset)
            break
        if best is None:
            return None
        _, label, _, toi, offset = best
        # An averaging window has two edges; aim the one whose partner falls
        # outside the run's executions (where the other side is idle, the
        # edge's information is not cancelled by the executions it also
        # covers), alternating when both or neither do.
        edge: Literal["end", "start"] = "end"
        shift = self._delay_ns
        w = float(self._window_ns())
        if w > 0:
            span = self._run_span.get(label)
            end_partner_out = span is None or toi - w < span[0]
            start_partner_out = span is None or toi + w > span[1]
            if start_partner_out and not end_partner_out:
                edge = "start"
            elif start_partner_out == end_partner_out and self._steered % 2:
                edge = "start"
            if edge == "start":
                shift += w
        wanted_sample = now_ns + offset + toi + shift
        # The lead leaves the run's setup (sampler start, clock reads) time
        # to finish before the release; it grows while releases come late.
        lead = max(self._lead_ns, 0.1 * self.prediction.period_ns)
        sample = self.prediction.next_after(wanted_sample + lead)
        launch = sample - offset - toi - shift
        self._pending = _Aim(label, toi, edge, launch)
        return launch

    _DESIGN_BINS = 24
    _DESIGN_PHASES = 16
    _DESIGN_TEMPLATES = 2

    def _window_of_logs(self) -> float:
        s = self.sensor
        if s is None:
            return 0.0
        if s.kind == "counter":
            return self._period_ns  # a counter's log is the interval between two reads
        return float(s.window_ns) if s.shape == "boxcar" else 0.0

    def _design_rows(self, label: str, stamps: np.ndarray, windows: np.ndarray | float, ex: np.ndarray) -> np.ndarray:
        assert self.sensor is not None
        index = dict(self.labels)[label]
        return design_rows(self.sensor, stamps, windows, ex, index, self._DESIGN_BINS, self._n_max, self.duration_ns)

    @property
    def _design_ready(self) -> bool:
        """Enough logs for the deconvolution's model (twice its unknowns) to guide the design.

        Before that the deconvolution cannot run at all and the profile
        falls back to the logs inside the execution of interest, so edges
        are aimed there (the coverage targeting); a model-based design only
        pays once the model can be fitted (a sequential design's usual
        start-up, Chaloner and Verdinelli 1995).
        """
        return bool(self._info) and all(self._design_logs.get(label, 0) >= 2 * len(G)
                                        for label, G in self._info.items())

    def _plan_stratified(self, now_ns: float) -> Optional[float]:
        """Deconvolved sensor that random phase already serves: quasi-random phase (golden-ratio sequence).

        When random phase puts a window edge in the execution in a good
        share of runs, the deconvolution's information is spread over every
        phase, and a model-based design would concentrate the runs where the
        model (assumptions 1-4 of :func:`~fingrav_native.method.deconvolve`)
        says, amplifying its errors (measured: 17 % against 13 % RMSE at
        160 runs for cb-4k-gemm with a 1 ms average). A low-discrepancy
        sequence of phases keeps random phase's design, without its clumps
        (Weyl's additive recurrence with the golden ratio).
        """
        assert self.prediction is not None
        period = self.prediction.period_ns
        phi = ((self._phase0 + self._steered * _GOLDEN) % 1.0) * period
        lead = max(self._lead_ns, 0.1 * period)
        launch = self.prediction.next_after(now_ns + lead + phi) - phi
        label = self.labels[0][0]
        self._pending = _Aim(label, phi, "stratified", launch)
        return launch

    def _plan_design(self, now_ns: float) -> Optional[float]:
        """Design mode: the launch phase whose predicted logs lower the curve's variance most (A-optimal)."""
        assert self.prediction is not None and self.sensor is not None
        if not self._templates or not self._info:
            return None
        # The execution of interest whose curve is worst determined so far.
        crit = {label: curve_variance(G, self._DESIGN_BINS, self._n_max) for label, G in self._info.items()}
        label = max(crit, key=lambda lb: crit[lb])
        period = self.prediction.period_ns
        w = self._window_of_logs()
        after = float(self.sensor.memory_ns(w)) + self._delay_ns + 2 * period
        phases = (np.arange(self._DESIGN_PHASES) + self._rng.uniform()) / self._DESIGN_PHASES * period
        G = self._info[label]
        try:
            M_inv = curve_precision_inverse(G, self._DESIGN_BINS, self._n_max)
        except np.linalg.LinAlgError:
            return None  # no design to improve on yet: this launch at random phase

        K = self._DESIGN_BINS
        templates = self._templates[-self._DESIGN_TEMPLATES:]
        gain = np.zeros(len(phases))
        for ex in templates:
            # Release at 0: the run's executions as a recent run had them, the
            # sensor's samples at phi + j * period; every candidate's logs in
            # one design call.
            end = float(ex["end_ns"].max()) + after
            stamps, owner = [], []
            for i, phi in enumerate(phases):
                j = np.arange(math.floor(-phi / period), math.ceil((end - phi) / period))
                stamps.append(phi + j * period + self._delay_ns)
                owner.append(np.full(len(j), i))
            A_all = self._design_rows(label, np.concatenate(stamps), w, ex)
            who = np.concatenate(owner)
            for i in range(len(phases)):
                # What these logs would take off the curve's summed variance
                # (Woodbury: no refactorisation per candidate).
                A = A_all[who == i]
                U = A @ M_inv
                S = np.eye(len(A)) + U @ A.T
                UK = U[:, :K]
                gain[i] += float(np.trace(np.linalg.solve(S, UK @ UK.T)))
        scores = -gain
        phi = float(phases[int(np.argmin(scores))])
        lead = max(self._lead_ns, 0.1 * period)
        # The first grid instant at least lead + phi ahead; the release phi before it.
        launch = self.prediction.next_after(now_ns + lead + phi) - phi
        self._pending = _Aim(label, phi, "design", launch)
        return launch

    def released(self, host_ns: float) -> None:
        """The host time the launch planned by :meth:`plan` was actually released at."""
        if self._pending is not None:
            self._pending.launch_ns = float(host_ns)

    def observe(self, record: RunRecord) -> None:
        """Take a finished run: refit the sample grid, measure the launch offset and the aim, count coverage."""
        self._records.append(record)
        del self._records[:-_HISTORY_RUNS]
        aim, self._pending = self._pending, None
        self._note_late_release(record, aim)
        fitted = self._refit_grid(record)
        if fitted is None:
            return
        tl, samples, run_host = fitted
        ex = tl.executions[tl.executions["run"] == record.run]
        if len(ex) == 0:
            return
        w = np.asarray(self._window_ns(samples["window_ns"]), dtype=np.float64)
        edges = {"end": run_host, "start": run_host - w}
        release = float(record.brackets[0, 0]) if len(record.brackets) else float(ex["start_ns"].min())
        landed = self._count_coverage(ex, edges, w, aim, release)
        if self.design and self.sensor is not None:
            self._add_information(tl, samples, ex, w, aim, release)
        tally = self._landed["steered" if aim is not None else "random"]
        tally[0] += 1
        tally[1] += int(landed)
        if aim is not None:
            self._judge(aim, ex, edges)

    def _note_late_release(self, record: RunRecord, aim: Optional[_Aim]) -> None:
        """A steered launch released late, off its aim: the setup outlasted the lead, so the lead grows."""
        late = record.meta.get("release_late_ns") if isinstance(record.meta, dict) else None
        if aim is not None and late is not None and float(late) > min(self.bin_ns, 10_000.0):
            self._late += 1
            self._lead_ns = min(2 * self._lead_ns, max(10 * self._period_ns, 50_000_000.0))

    def _refit_grid(self, record: RunRecord) -> Optional[tuple[Timeline, np.ndarray, np.ndarray]]:
        """Refit the sensor's sample grid on the recent runs: their timeline, this run's logs and their instants, or None.

        Steering stops where the clock maps or the grid cannot be fitted, or
        the samples jitter by more than a quarter of the execution.
        """
        try:
            tl = timeline_of(self._records, self.caps)
        except (ValueError, np.linalg.LinAlgError) as exc:
            self._stop(f"the clock maps of the recent runs could not be fitted ({exc})")
            return None
        # timeline_of keeps the records' order: this run's logs are the last ones.
        first = len(tl.samples) - len(record.samples)
        samples = tl.samples[first:]
        # The maps are elementwise: this run's sample instants are the tail of the history's.
        host = np.asarray(tl.logger_map.to_host(tl.samples["source_ts"]), dtype=np.float64) - self._delay_ns
        try:
            self.prediction = predict_sample_instants(host, self._period_ns)
        except ValueError as exc:
            if len(self._records) >= 4:
                self._stop(f"the sensor's sample instants could not be fitted ({exc})")
            return None
        if self.prediction.jitter_ns > self.duration_ns / 4:
            self._stop(f"the sensor's samples jitter by {self.prediction.jitter_ns / 1e3:.1f} us about their "
                       f"{self.prediction.period_ns / 1e6:.3f} ms grid, more than a quarter of the "
                       f"{self.duration_ns / 1e3:.1f} us execution")
        return tl, samples, host[first:]

    def _count_coverage(self, ex: np.ndarray, edges: dict[str, np.ndarray], w: np.ndarray, aim: Optional[_Aim],
                        release: float) -> bool:
        """Count the window edges that landed in each execution of interest, and measure the launch offsets.

        Returns whether any edge landed inside one.
        """
        landed = False
        for label, cov in self._coverage.items():
            e = ex[ex["index"] == cov.index]
            if len(e) == 0:
                continue
            start, end = float(e["start_ns"][0]), float(e["end_ns"][0])
            self._run_span[label] = (float(ex["start_ns"].min()) - start, float(ex["end_ns"].max()) - start)
            for name, t in edges.items():
                if name == "start" and not np.any(w > 0):
                    continue
                pos = t - start
                inside = (pos >= 0) & (pos < min(end - start, self.duration_ns))
                np.add.at(cov.counts, np.minimum((pos[inside] / self.bin_ns).astype(int), len(cov.counts) - 1), 1)
                landed = landed or bool(inside.any())
            if aim is not None and aim.label == label:
                self._offsets[label].append(start - aim.launch_ns)
            else:
                self._random_offsets[label].append(start - release)
        return landed

    def _add_information(self, tl: Timeline, samples: np.ndarray, ex: np.ndarray, w: np.ndarray,
                         aim: Optional[_Aim], release: float) -> None:
        """Design mode: keep the run's executions as a template, and add its logs' rows to each label's information."""
        assert self.sensor is not None
        self._n_max = max(self._n_max, int(ex["index"].max()) + 1, *(int(i) + 1 for _, i in self.labels))
        rel = ex.copy()
        # Executions hold int64 ns: the origin to the nearest ns (the templates are only a design's layout).
        origin = int(round(aim.launch_ns if aim is not None else release))
        rel["start_ns"] -= origin
        rel["end_ns"] -= origin
        self._templates.append(rel)
        del self._templates[:-self._DESIGN_TEMPLATES]
        stamps = np.asarray(tl.logger_map.to_host(samples["source_ts"]), dtype=np.float64)
        for label, index in self.labels:
            if not np.any(ex["index"] == (index if index >= 0 else int(ex["index"].max()) + 1 + index)):
                continue
            try:
                A = self._design_rows(label, stamps, w if self.sensor.kind != "counter" else
                                      self._window_of_logs(), ex)
            except ValueError as exc:
                _log.debug("phase design: run %s adds nothing to %s (%s)", int(ex["run"][0]), label, exc)
                continue
            G = self._info.get(label)
            if G is None or G.shape[0] != A.shape[1]:
                G = np.zeros((A.shape[1], A.shape[1]))  # (a longer run widens the level columns: restart)
            self._info[label] = G + A.T @ A
            self._design_logs[label] = self._design_logs.get(label, 0) + int(np.any(A != 0, axis=1).sum())

    def _judge(self, aim: _Aim, ex: np.ndarray, edges: dict[str, np.ndarray]) -> None:
        """A steered run: where its aimed edge landed, and whether steering still beats random phase."""
        self._steered += 1
        mode = aim.edge if aim.edge in ("stratified", "design") else "coverage"
        self._modes[mode] = self._modes.get(mode, 0) + 1
        e = ex[ex["index"] == self._coverage[aim.label].index]
        if len(e) and aim.edge in edges:
            # Where the aimed edge landed: the edge nearest the target.
            pos = edges[aim.edge] - float(e["start_ns"][0])
            if len(pos):
                err = float(pos[np.argmin(np.abs(pos - aim.toi_ns))] - aim.toi_ns)
                self._aim_errors.append(err)
                self._hits += int(abs(err) <= self.bin_ns / 2)
        runs, n_inside = self._landed["steered"]
        if not self.design and runs >= _JUDGE_AFTER and n_inside / runs <= self._random_rate:
            # Steering is judged by what it is for: more runs with a sample
            # inside the execution than random phase gives.
            spread = float(scipy.stats.median_abs_deviation(np.asarray(self._aim_errors), scale="normal")) \
                if len(self._aim_errors) > 2 else float("nan")
            self._stop(f"after {runs} steered runs, {n_inside / runs:.0%} had a sample inside the execution, no "
                       f"more than random phase gives ({self._random_rate:.0%}): steered samples land "
                       f"{spread / 1e3:.0f} us (robust SD) from their targets (launch jitter, or an unstable "
                       "sensor period)")

def make_steerer(caps: Capabilities, sensor: Optional[SensorModel], backend: Any, labels: Sequence[tuple[str, int]],
                 duration_ns: float, bin_ns: float, target_per_bin: int, seed: int, requested: str,
                 say: Callable[[str], None], design: bool = False) -> Optional[PhaseSteerer]:
    """A steerer for ``profile(phase=...)`` (``None`` for random phase); inactive, with the reason, where it cannot work.

    ``design``: the logs will be deconvolved (an averaging sensor), so the
    phases are chosen by the information they add to the deconvolution
    (:class:`PhaseSteerer`). ``requested`` is a :data:`Phase`; typed ``str`` because the campaign
    driver passes its own option through, so it is checked here.
    """
    if requested not in PHASES:
        raise ValueError(f"phase={requested!r}: must be one of {PHASES}")
    if requested == "random":
        return None
    if not callable(getattr(backend, "wait_until", None)):
        say(f"  phase: random (the {caps.name} backend cannot delay a launch to a chosen host time)")
        return PhaseSteerer(caps, sensor, labels, duration_ns, bin_ns, target_per_bin, seed, requested,
                            design=design, active=False, note=f"the {caps.name} backend has no wait_until")
    return PhaseSteerer(caps, sensor, labels, duration_ns, bin_ns, target_per_bin, seed, requested, design=design)
