"""The FinGraV orchestrator: the paper's eight steps on any backend.

:func:`profile` runs Section IV-B end to end against a
:class:`~fingrav_native.backends.Backend` (the simulated GPU by default) and
returns a :class:`Profile`. :func:`stitch_logs` runs steps 5-8 on arrays a
user brings (bring-your-own-logs). :func:`profile_interleaved` profiles a
kernel preceded by other kernels (Section V-C3).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import warnings
from typing import Any, Literal, Optional, Sequence, Union

import numpy as np

from fingrav_native._checks import (
    choice,
    file_path,
    flag,
    fraction,
    instance_of,
    integer_in,
    short_repr,
)
from fingrav_native._threads import numeric_threads
from fingrav_native.app._campaign import (
    Campaign,
    PooledProbe,
    kernel_label,
    open_campaign,
    package_versions,
    write_state,
)
from fingrav_native.app._open import open_device
from fingrav_native.app._progress import ProgressLike, as_reporter
from fingrav_native.backends._base import Backend, KernelSpec, check_kernel_spec
from fingrav_native.clocks._runs import Timeline, nominal_durations
from fingrav_native.files._campaign import PROFILE_FILE
from fingrav_native.files._campaign_lock import lock_campaign
from fingrav_native.files._profiles import save_profile
from fingrav_native.method._agreement import Agreement, LocalAgreement
from fingrav_native.method._guidance import Guidance, lookup_guidance, target_loi_count
from fingrav_native.method._phase import PhaseSteerer, PhaseSteeringWarning, make_steerer
from fingrav_native.method._phase_modes import PHASES
from fingrav_native.method._pipeline import (
    ATTRIBUTIONS,
    Attribution,
    PlacedRuns,
    build_execution_profile,
    error_budget,
    finish_execution,
    log_records,
    place_every_run,
    place_runs,
)
from fingrav_native.method._results import CampaignTimeline, ExecutionProfile, InterleavedProfile, Profile
from fingrav_native.method._steady import SSE_EXECUTIONS, SSE_INDEX, SspSearch, find_ssp_executions
from fingrav_native.method._stitch import check_stitch_options
from fingrav_native.method._whole_run import whole_run_view
from fingrav_native.records._recording import Capabilities
from fingrav_native.sensors._model import SensorModel, as_sensor

_log = logging.getLogger(__name__)

#: Which execution(s) of interest a campaign profiles (Section IV-A).
Mode = Literal["sse", "ssp", "both"]
#: When each campaign run is launched (the values of ``method._phase_modes.PHASES``).
Phase = Literal["auto", "steered", "random"]
#: The stitched profile's smooth fit.
Smoother = Literal["local", "poly4"]
#: What the stitched profile is laid out on: time of interest or fraction of the execution.
StitchX = Literal["time", "fraction"]










@dataclasses.dataclass(frozen=True)
class _Settings:
    """What :func:`profile` was asked for, handed as one value to each phase of the campaign."""

    mode: Mode
    runs: Optional[int]
    margin: Optional[float]
    executions: Optional[int]
    ssp_tolerance: float
    max_executions: int
    top_up: bool
    max_top_up_runs: Optional[int]
    smoother: Optional[Smoother]
    span: Union[float, Literal["auto"]]
    x: StitchX
    timing_executions: int
    probe_lois: int
    seed: int
    phase: Phase
    sensor: Optional[SensorModel] = None
    attribution: Attribution = "auto"

    def requested(self) -> dict[str, Any]:
        """The settings ``campaign.json`` records, which a resume must repeat (the sensor and attribution are not)."""
        return {
            "mode": self.mode, "runs": self.runs, "margin": self.margin, "executions": self.executions,
            "ssp_tolerance": self.ssp_tolerance, "max_executions": self.max_executions, "top_up": self.top_up,
            "max_top_up_runs": self.max_top_up_runs, "smoother": self.smoother, "span": self.span, "x": self.x,
            "timing_executions": self.timing_executions, "probe_lois": self.probe_lois, "seed": self.seed,
            "phase": self.phase,
        }


@dataclasses.dataclass
class _Plan:
    """What the campaign settles on as it goes: Table I row, runs, bin margin, executions per run and of interest."""

    guidance: Guidance
    runs: int
    margin: float
    executions: int = 0
    search: Optional[SspSearch] = None
    labels: list[tuple[str, int]] = dataclasses.field(default_factory=list)


def _check_profile_args(kernel: KernelSpec, what: tuple[Any, Any, Any, Any, Any],
                        how: tuple[Any, Any, Any, Any, Any, Any], size: tuple[Any, Any, Any, Any, Any, Any],
                        smoother: Any, span: Any, agreement: Any) -> None:
    """Every argument of :func:`profile` checked by name, before the device is opened or a run is taken."""
    mode, runs, margin, executions, timing_executions = what
    x, resume, out_dir, attribution, phase, sensor = how
    ssp_tolerance, max_executions, top_up, max_top_up_runs, probe_lois, seed = size
    check_kernel_spec(kernel)
    _check_what_to_run(mode, runs, margin, executions, timing_executions)
    _check_executions_used(mode, executions)
    _check_how_to_run(x, resume, out_dir, attribution, phase, sensor)
    _check_campaign_size(ssp_tolerance, max_executions, top_up, max_top_up_runs, probe_lois, seed)
    check_stitch_options(smoother, 0.95, span, 201)  # before the campaign, not after it
    instance_of(agreement, "agreement", (Agreement, type(None)), "an Agreement or None")


@numeric_threads()
def profile(
    kernel: KernelSpec,
    backend: Union[Backend, str, None] = None,
    *,
    mode: Mode = "both",
    runs: Optional[int] = None,
    margin: Optional[float] = None,
    executions: Optional[int] = None,
    ssp_tolerance: float = 0.02,
    max_executions: int = 512,
    top_up: bool = True,
    max_top_up_runs: Optional[int] = None,
    smoother: Optional[Smoother] = "local",
    span: Union[float, Literal["auto"]] = "auto",
    x: StitchX = "time",
    timing_executions: int = 5,
    probe_lois: int = 120,
    out_dir: Optional[str] = None,
    resume: bool = False,
    seed: int = 0,
    progress: ProgressLike = None,
    agreement: Optional[Agreement] = None,
    sensor: Union[SensorModel, str, None] = None,
    attribution: Attribution = "auto",
    phase: Phase = "auto",
) -> Profile:
    """Profile one kernel with FinGraV: guidance, runs, golden runs, LOIs, stitching.

    Parameters
    ----------
    kernel : str or int
        The kernel, as the backend names it (a simulator preset such as
        ``"cb-4k-gemm"``).
    backend : Backend or str, optional
        Where to run: a backend, or a device string that
        :func:`~fingrav_native.open_device` opens (``"sim"``, ``"nvidia:0"``,
        ``"amd:0:socket"``); default: the simulated GPU in virtual time,
        ``SimBackend(seed=seed)``.
    mode : {"sse", "ssp", "both"}
        Which execution(s) of interest to profile (Section IV-A). ``"both"``
        profiles SSE and SSP from the same SSP-length runs (an SSP run also
        contains the SSE execution).
    runs : int, optional
        Runs in the campaign; default from the guidance (Table I).
    margin : float, optional
        Golden-run binning margin in (0, 1); default from the guidance.
    executions : int, optional
        Executions per run, skipping the SSP search (mode "ssp"/"both";
        refused with mode "sse", whose runs have four).
    ssp_tolerance : float
        Relative power change treated as steady in the SSP search.
    max_executions : int
        Upper bound of the SSP search.
    top_up : bool
        Step 7: add runs while the LOIs fall short of the guidance density.
    max_top_up_runs : int, optional
        Cap on the top-up runs (default: as many as the campaign had).
    smoother : {"local", "poly4", None}
        Smooth fit of the stitched profile (local smoother by default; the
        paper's degree-4 regression as ``"poly4"``).
    span : float or "auto"
        Share of the LOIs each local fit uses, or ``"auto"`` (default): the
        window generalised cross-validation picks per channel, at least
        6 LOIs or a quarter of them
        (:func:`~fingrav_native.method.stitch`). A fixed
        small span with the ~40 LOIs Table I asks for follows single noisy
        LOIs; the stitched profile's ``fit_low``/``fit_high`` band says
        which features the LOIs support.
    x : {"time", "fraction"}
        Stitch on absolute time of interest or fraction of the execution.
    timing_executions : int
        Executions timed in step 1.
    probe_lois : int
        LOIs each probe of the SSP search aims for (more: a steadier search,
        more runs).
    out_dir : str, optional
        Campaign folder: ``campaign.json``, every completed run as it
        finishes (``runs/run_NNNNNN.npz``, see
        :mod:`fingrav_native.files`) and, at the end, the profile
        (``profile.fgprof``). A campaign interrupted by Ctrl-C keeps its
        completed runs there. A folder that already holds a campaign is
        refused unless ``resume`` is set. The folder is locked
        (:func:`~fingrav_native.files.lock_campaign`) before
        anything is written in it, so no other process can write there
        meanwhile.
    resume : bool
        Continue the campaign in ``out_dir``: its runs are replayed from
        disk (the same requests get the same runs, so every decision comes
        out the same) and the campaign goes on on the device from where it
        stopped. The settings must be those of the interrupted campaign. A
        folder without a campaign starts one; one that holds runs or a
        profile but no ``campaign.json``, or fewer runs than its
        ``campaign.json`` records, is refused (nothing is written).
    seed : int
        Seed of the default backend.
    progress : None, bool, callable or ProgressReporter
        ``True``: a status line on stderr when it is a terminal (runs done,
        LOIs against the target, ETA; silent otherwise); a callable gets
        each line of text (``print``); a
        :class:`~fingrav_native.app.ProgressReporter` also gets a
        :class:`~fingrav_native.app.CampaignProgress` after every run.
    agreement : Agreement, optional
        For several ranks profiling one collective together (Section V-D):
        every decision that sets which runs happen (the guidance row, each
        SSP-search probe, the top-ups) is taken once for all ranks through
        it, so every rank runs the same runs (a rank that ran a different
        count would leave the others waiting in the collective). See
        :mod:`fingrav_native.multi`. Default: this process decides alone.
    sensor : SensorModel or str, optional
        What each log measures (a :data:`~fingrav_native.sensors.SENSOR_PRESETS`
        name, or a characterisation's model); default the backend's
        ``capabilities.sensor``. Recorded in the profile (its ``backend``).
    attribution : {"auto", "instant", "deconvolve"}
        As for :func:`stitch_logs`: ``"auto"`` deconvolves every execution of
        interest whose logs average over more than half the resolution asked
        for (a log that averages over a window longer than the features
        asked for smears them: the sensor is part of the measurement; Yang
        et al., SC'24), and the SSP search's probes take the deconvolved mean of
        execution n-1 when the sensor's window is longer than the execution.
        The same policy as :func:`stitch_logs`'s
        (:func:`~fingrav_native.method._pipeline.finish_execution`): with
        ``"auto"``, logs too few to deconvolve are stitched at their instants
        with a :class:`~fingrav_native.method.SensorResolutionWarning` (the
        profile's ``deconvolution`` is None); with ``"deconvolve"`` they raise.
    phase : {"auto", "steered", "random"}
        When each campaign run is launched. ``"random"``: the paper's
        protocol (Section IV-A), logs land at whatever phase the free-running
        logger gives. ``"steered"`` and ``"auto"`` (default): sequential
        equivalent-time sampling (:mod:`fingrav_native.method`), the
        launch released so that a sensor sample (or window edge) lands in the
        least-covered bin of the execution; when ``runs`` is not given the
        campaign ends once every bin holds what random phase would give it on
        average. Where prediction fails (no stable sensor period, jitter of
        more than a quarter of the execution, a backend without
        ``wait_until``) the campaign goes on at random phase and says why;
        ``"steered"`` also raises a
        :class:`~fingrav_native.method.PhaseSteeringWarning`. What was
        done is in ``settings["phase"]``.

    Returns
    -------
    Profile

    Raises
    ------
    ValueError
        Bad arguments (named), or a campaign that yields no LOI.
    CampaignMismatchError
        ``resume`` with settings, kernel or backend other than those of the
        campaign on disk.
    CampaignFormatError
        A damaged ``campaign.json`` or run file, runs missing from the
        folder, or runs without ``campaign.json`` (names the file).
    CampaignLockedError
        Another process holds ``out_dir`` (names it).

    Notes
    -----
    The paper's eight steps (Section IV-B), with this package's additions:

    1. Time the kernel: one run of ``timing_executions`` executions; the
       median of all but the first (warm-up) sets the Table I row
       (:func:`~fingrav_native.method.lookup_guidance`).
    2. Instrumentation is the backend's: GPU-side begin/end markers per
       execution, bracketed clock reads around every run, the sampler
       started around each run; the device returns to idle between runs,
       measured from the logs (``Backend.wait_idle``).
    3. SSE: four executions per run, the fourth is of interest. SSP: the
       binary search on executions per run
       (:func:`~fingrav_native.method.find_ssp_executions`). A probe of n
       executions measures execution n-1 (and its neighbours, +-n/8) in a
       shared pool of long runs, with enough runs for about ``probe_lois``
       LOIs, averaged per stratum of progress through the execution (an
       execution's power does not depend on what follows it, so one long
       run serves every shorter probe).
    4. Execute the runs (each streamed to ``out_dir`` as it completes).
    5. Fit the clock maps over the whole campaign (piecewise when it is
       long: drift), place the markers on host time, and keep the golden
       runs (:func:`~fingrav_native.method.select_golden_runs`).
    6. Place the logs: LOIs and TOIs with their uncertainty
       (:func:`~fingrav_native.method.place_logs`).
    7. Top up with more runs while the LOIs are fewer than the guidance
       density asks, up to ``max_top_up_runs``.
    8. Stitch (:func:`~fingrav_native.method.stitch`), integrate energy per
       execution, and build the whole-run view.
    """
    _check_profile_args(kernel, (mode, runs, margin, executions, timing_executions),
                        (x, resume, out_dir, attribution, phase, sensor),
                        (ssp_tolerance, max_executions, top_up, max_top_up_runs, probe_lois, seed), smoother, span,
                        agreement)
    # Every driver opens its device through the one resolver (a string, or a backend as it is).
    backend = open_device("sim", seed=seed) if backend is None else open_device(backend)
    model, caps = _sensor_of(backend.capabilities, sensor)
    settings = _Settings(mode=mode, runs=runs, margin=margin, executions=executions, ssp_tolerance=ssp_tolerance,
                         max_executions=max_executions, top_up=top_up, max_top_up_runs=max_top_up_runs,
                         smoother=smoother, span=span, x=x, timing_executions=timing_executions,
                         probe_lois=probe_lois, seed=seed, phase=phase, sensor=model, attribution=attribution)
    reporter = as_reporter(progress)
    name = kernel_label(backend, kernel)
    requested = settings.requested()
    # The folder is ours alone from before its manifest is read until the
    # profile is saved: another process can neither interleave runs nor
    # overwrite them.
    with lock_campaign(out_dir) if out_dir is not None else contextlib.nullcontext():
        replay, campaign_id = open_campaign(out_dir, resume, name, caps, requested)
        camp = Campaign(backend, out_dir, kernel=name, replay=replay, reporter=reporter, campaign_id=campaign_id)
        if replay:
            reporter.line(f"{name}: resuming, {len(replay)} runs on disk")
        try:
            result = _run_profile(camp, kernel, name, agreement or LocalAgreement(), settings)
        except BaseException as exc:
            # Ctrl-C (KeyboardInterrupt) included: the runs on disk stay, and the
            # manifest says how far the campaign got.
            if out_dir is not None:
                write_state(out_dir, name, caps, requested, "interrupted", camp.on_disk, error=repr(exc),
                            campaign_id=campaign_id)
            raise
        finally:
            reporter.close()
        if result.backend != caps:
            result = dataclasses.replace(result, backend=caps)
        if out_dir is not None:
            save_profile(result, os.path.join(out_dir, PROFILE_FILE))
            write_state(out_dir, name, caps, requested, "complete", camp.on_disk, campaign_id=campaign_id)
    return result


def _check_what_to_run(mode: str, runs: Optional[int], margin: Optional[float], executions: Optional[int],
                       timing_executions: int) -> None:
    """:func:`profile`'s execution(s) of interest and campaign size, each named when it is wrong."""
    choice(mode, "mode", ("sse", "ssp", "both"))
    if runs is not None:
        integer_in(runs, "runs", 2, MAX_RUNS)
    if margin is not None:
        fraction(margin, "margin")
    if executions is not None:
        integer_in(executions, "executions", SSE_EXECUTIONS, 1 << 20)
    integer_in(timing_executions, "timing_executions", 2, 100_000)


#: The most runs one campaign may ask for, as ``fingrav profile --runs``: each run is a device call and a file
#: (Table I asks 50 to 800).
MAX_RUNS = 100_000


def _check_campaign_size(ssp_tolerance: Any, max_executions: Any, top_up: Any, max_top_up_runs: Any,
                         probe_lois: Any, seed: Any) -> None:
    """:func:`profile`'s search and top-up limits, each named when it is wrong or absurd."""
    fraction(ssp_tolerance, "ssp_tolerance")
    integer_in(max_executions, "max_executions", 2, 1 << 20)
    flag(top_up, "top_up")
    if max_top_up_runs is not None:
        integer_in(max_top_up_runs, "max_top_up_runs", 0, MAX_RUNS)
    integer_in(probe_lois, "probe_lois", 1, 10**7)
    integer_in(seed, "seed", 0)


def _check_executions_used(mode: str, executions: Optional[int]) -> None:
    """``executions`` sets SSP runs' length: with mode "sse" (four-execution runs) it would be ignored without a word."""
    if executions is not None and mode == "sse":
        raise ValueError(f"executions={executions!r}: sets the executions per run of SSP runs; mode 'sse' "
                         f"profiles the SSE execution of {SSE_EXECUTIONS}-execution runs: leave it out, or use "
                         "mode 'ssp' or 'both'")


def _check_how_to_run(x: str, resume: bool, out_dir: Optional[str], attribution: str, phase: str,
                      sensor: object) -> None:
    """:func:`profile`'s stitching axis, folder, attribution, phase and sensor, each named when it is wrong."""
    choice(x, "x", ("time", "fraction"))
    resume = flag(resume, "resume")
    if out_dir is not None:
        file_path(out_dir, "out_dir")
    if resume and out_dir is None:
        raise ValueError("resume=True: needs out_dir, the folder of the campaign to continue")
    choice(attribution, "attribution", ATTRIBUTIONS)
    choice(phase, "phase", PHASES)
    as_sensor(sensor)


def _sensor_of(caps: Capabilities, sensor: Union[SensorModel, str, None]) -> tuple[Optional[SensorModel],
                                                                                  Capabilities]:
    """The model the logs are taken as (``sensor``, else the backend's), and the capabilities the profile records."""
    model = as_sensor(sensor)
    if model is None:
        return caps.sensor, caps
    if model != caps.sensor:
        # The profile records what the logs were taken as.
        return model, dataclasses.replace(caps, sensor=model)
    return model, caps






def _shortest(placed: dict[str, PlacedRuns], guidance: Guidance) -> tuple[int, int]:
    """(LOIs, target) of the execution of interest furthest from its target: the progress figure."""
    counts = [(len(pl.lois), target_loi_count(guidance, pl.duration_ns)) for pl in placed.values()]
    return max(counts, key=lambda c: c[1] - c[0])


class _LoiCount:
    """The LOIs of the golden runs so far, for the progress line, counted at every tenth of the runs.

    Each count fits the clock maps of the runs since the last one only and
    keeps their placed logs (:func:`place_every_run`), so a campaign fits
    each run's clocks once for its progress, not once per count; the
    profile's own placement (step 5) fits every run together.
    """

    def __init__(self) -> None:
        self.counted = 0
        self.placed: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}

    def update(self, camp: Campaign, labels: Sequence[tuple[str, int]], margin: float, guidance: Guidance) -> None:
        """Place the runs not counted yet, then count into the campaign's progress state."""
        try:
            tl = camp.timeline(list(camp.records[self.counted:]))
            batch = {label: place_every_run(tl.samples, tl.executions, tl.logger_map, execution_index=idx)
                     for label, idx in labels}
            for label, placed in batch.items():
                self.placed.setdefault(label, []).append(placed)
            self.counted = len(camp.records)
            placed_runs = {label: place_runs(tl.samples, np.concatenate([e for e, _ in self.placed[label]]),
                                             tl.logger_map, execution_index=idx, margin=margin,
                                             lois=np.concatenate([lois for _, lois in self.placed[label]]))
                           for label, idx in labels}
        except ValueError as exc:
            # Too few runs yet for a clock map (they are counted with the next ones) or a golden bin.
            _log.debug("LOIs not counted after %d runs: %s", len(camp.records), exc)
            return
        camp.lois, camp.loi_target = _shortest(placed_runs, guidance)


def _run_profile(camp: Campaign, kernel: KernelSpec, name: str, agree: Agreement, settings: _Settings) -> Profile:
    """The paper's eight steps on ``camp`` (step 2, the instrumentation, is the backend's)."""
    plan = _time_kernel(camp, kernel, name, agree, settings)
    plan.executions, plan.search = _executions_per_run(camp, kernel, agree, plan.guidance, settings)
    if settings.mode in ("sse", "both"):
        plan.labels.append(("sse", SSE_INDEX))
    if settings.mode in ("ssp", "both"):
        plan.labels.append(("ssp", plan.executions - 1))
    camp.steerer = _steerer(camp, agree, plan, settings)
    _run_campaign(camp, kernel, plan, settings)
    tl, placed, top_ups, top_cap = _place_and_top_up(camp, kernel, agree, plan, settings)
    profiles = _finish_profiles(tl, placed, plan, top_ups, settings)
    camp.set_phase("done", camp.next_run)
    return _package(camp, name, tl, plan, profiles, top_cap, settings)


def _time_kernel(camp: Campaign, kernel: KernelSpec, name: str, agree: Agreement, settings: _Settings) -> _Plan:
    """Step 1: time the kernel; its Table I row sets the runs and the bin margin not given."""
    camp.set_phase("timing")
    timing = camp.run(kernel, settings.timing_executions, keep=False, role="timing")
    durations = nominal_durations(timing.markers, camp.caps.device_tick_ns)
    # Ranks of a collective see slightly different durations (arrival skew):
    # one guidance row for all, from the longest.
    guidance = lookup_guidance(agree.max(float(np.median(durations[1:]))))
    plan = _Plan(guidance, runs=settings.runs if settings.runs is not None else guidance.runs,
                 margin=settings.margin if settings.margin is not None else guidance.margin)
    camp.loi_target = target_loi_count(guidance, guidance.exec_time_ns)
    camp.reporter.line(f"{name}: {guidance.exec_time_ns / 1e3:.1f} us per execution -> {plan.runs} runs, "
                       f"margin {plan.margin:.0%}")
    return plan


def _executions_per_run(camp: Campaign, kernel: KernelSpec, agree: Agreement, guidance: Guidance,
                        settings: _Settings) -> tuple[int, Optional[SspSearch]]:
    """Step 3: executions per run: SSE's four, the number given, or the SSP search's."""
    if settings.mode == "sse":
        return SSE_EXECUTIONS, None
    if settings.executions is not None:
        return settings.executions, None
    camp.set_phase("ssp-search")
    sensor, attribution = settings.sensor, settings.attribution
    reach = 0.0 if sensor is None else max(sensor.window_ns, sensor.tau_ns,
                                           sensor.period_ns if sensor.kind == "counter" else 0.0)
    deconv_probes = attribution == "deconvolve" or (attribution == "auto" and reach > guidance.exec_time_ns)
    measure = PooledProbe(camp, kernel, guidance.exec_time_ns, settings.probe_lois, camp.reporter.line, agree,
                           sensor=sensor, deconvolve_probes=deconv_probes)
    search = find_ssp_executions(measure, tolerance=settings.ssp_tolerance, max_executions=settings.max_executions)
    return max(SSE_EXECUTIONS, search.executions), search


def _steerer(camp: Campaign, agree: Agreement, plan: _Plan, settings: _Settings) -> Optional[PhaseSteerer]:
    """Step 4's launch phase: a steerer (equivalent-time sampling), or None for random phase (the paper)."""
    sensor, guidance, say = settings.sensor, plan.guidance, camp.reporter.line
    period = sensor.period_ns if sensor is not None else camp.caps.logger_period_ns
    n_bins = max(1, math.ceil(guidance.exec_time_ns / guidance.loi_interval_ns))
    # A steered campaign is complete when every bin holds as many samples as
    # random phase would place in it on average over the planned runs.
    per_bin = max(1, math.ceil(plan.runs * min(1.0, guidance.exec_time_ns / period) / n_bins))
    # Logs that will be deconvolved are steered by the information they add to the deconvolution.
    design = sensor is not None and sensor.averages and settings.attribution != "instant"
    steer = make_steerer(camp.caps, sensor, camp.backend, plan.labels, guidance.exec_time_ns,
                         guidance.loi_interval_ns, per_bin, settings.seed, settings.phase, say, design=design)
    if steer is not None and steer.active and getattr(agree, "size", 1) > 1:
        # The ranks of a collective launch together; a release chosen per
        # rank would skew their arrival (and so the collective's time).
        steer.active = False
        steer.note = "the ranks of a collective launch together: one rank's steering would skew their arrival"
        say(f"  phase: random ({steer.note})")
    if steer is not None and steer.active:
        say(f"  phase: steered ({'by the deconvolution design, ' if design else ''}"
            f"{n_bins} bins of {steer.bin_ns / 1e3:.1f} us, {per_bin} per bin)")
    return steer


def _run_campaign(camp: Campaign, kernel: KernelSpec, plan: _Plan, settings: _Settings) -> None:
    """Step 4: the campaign's runs; a steered one ends early once every bin is covered (``plan.runs`` says when)."""
    steer, say, n_runs = camp.steerer, camp.reporter.line, plan.runs
    camp.set_phase("runs", camp.next_run + n_runs)
    step, count = max(1, n_runs // 10), _LoiCount()
    for i in range(n_runs):
        camp.run(kernel, plan.executions)
        if settings.runs is None and steer is not None and steer.active and steer.complete:
            # Every bin has its samples: the guidance's run count was sized
            # for random phase, which needs more runs for the same cover.
            say(f"  phase: every bin covered after {i + 1} of {n_runs} runs")
            plan.runs = i + 1
            break
        # The last count is the placement below (step 5), not a second one here.
        if (i + 1) % step == 0 and i + 1 < n_runs:
            count.update(camp, plan.labels, plan.margin, plan.guidance)
            say(f"  runs {i + 1}/{n_runs}, LOIs {camp.lois}/{camp.loi_target}")
    if steer is not None and not steer.active and steer.note:
        say(f"  phase: random from run {steer.summary()['steered_runs']} on: {steer.note}")
        if settings.phase == "steered":
            # Level 4: the caller of profile() (through _run_profile).
            warnings.warn(f"phase='steered': fell back to random phase: {steer.note}", PhaseSteeringWarning,
                          stacklevel=4)


def _place_and_top_up(camp: Campaign, kernel: KernelSpec, agree: Agreement, plan: _Plan,
                      settings: _Settings) -> tuple[Timeline, dict[str, PlacedRuns], int, int]:
    """Steps 5-7: clock maps, golden runs and LOIs; top-up runs while the LOIs fall short of the guidance.

    Returns the campaign's timeline, each execution of interest's placed
    runs, the top-up runs made and the cap they were held to.
    """
    say, guidance = camp.reporter.line, plan.guidance
    top_cap = settings.max_top_up_runs if settings.max_top_up_runs is not None else plan.runs
    top_ups = 0
    while True:
        tl = camp.timeline(camp.records)
        placed = {label: place_runs(tl.samples, tl.executions, tl.logger_map, execution_index=idx,
                                    margin=plan.margin) for label, idx in plan.labels}
        # Step 7: top up while the LOIs fall short of the guidance.
        targets = {label: target_loi_count(guidance, pl.duration_ns) for label, pl in placed.items()}
        short = int(agree.max(max(targets[label] - len(pl.lois) for label, pl in placed.items())))
        fewest = min(len(pl.lois) for pl in placed.values())
        camp.lois, camp.loi_target = _shortest(placed, guidance)
        if top_ups == 0:
            say(f"  runs {plan.runs}/{plan.runs}, LOIs {camp.lois}/{camp.loi_target}")
        if not settings.top_up or short <= 0 or top_ups >= top_cap:
            return tl, placed, top_ups, top_cap
        per_run = max(fewest / max(1, len(camp.records)), 0.5 / max(1, len(camp.records)))
        # The rank that needs the most runs sets the count for all.
        more = int(agree.max(min(top_cap - top_ups, max(1, math.ceil(short / per_run)))))
        say(f"  top-up: {short} LOIs short, {more} more runs")
        camp.set_phase("top-up", camp.next_run + more)
        for _ in range(more):
            camp.run(kernel, plan.executions, role="top-up")
        top_ups += more


def _finish_profiles(tl: Timeline, placed: dict[str, PlacedRuns], plan: _Plan, top_ups: int,
                     settings: _Settings) -> dict[str, ExecutionProfile]:
    """Step 8: each execution of interest by the attribution policy :func:`stitch_logs` applies too."""
    # Level 4: profile() itself (through _run_profile and _finish_profiles), where it always pointed.
    return {label: finish_execution(label, placed[label], tl.samples, tl.executions, tl.logger_map, settings.sensor,
                                    attribution=settings.attribution, execution_index=idx,
                                    executions_per_run=plan.executions, guidance=plan.guidance,
                                    smoother=settings.smoother, x=settings.x, kernel_id=None, top_up_runs=top_ups,
                                    span=settings.span, stacklevel=4)
            for label, idx in plan.labels}


def _package(camp: Campaign, name: str, tl: Timeline, plan: _Plan, profiles: dict[str, ExecutionProfile],
             top_cap: int, settings: _Settings) -> Profile:
    """The :class:`Profile`: whole-run view, error budget, settings as run, clock maps and the campaign's timeline."""
    samples, ex, dmap, lmap = tl.samples, tl.executions, tl.device_map, tl.logger_map
    golden_runs = np.unique(np.concatenate([p.golden.run_ids for p in profiles.values()]))
    wr = whole_run_view(lmap.to_host(samples["source_ts"]), samples["total"], ex, runs=golden_runs)
    budget = error_budget([p.lois for p in profiles.values()], ex, lmap, camp.caps)
    steer = camp.steerer
    run_settings = {
        "phase": steer.summary() if steer is not None else {"requested": settings.phase, "used": "random"},
        "runs": plan.runs, "margin": plan.margin, "executions_per_run": plan.executions,
        "ssp_tolerance": settings.ssp_tolerance, "max_executions": settings.max_executions,
        "top_up": settings.top_up, "max_top_up_runs": top_cap, "smoother": settings.smoother,
        "span": settings.span, "x": settings.x, "timing_executions": settings.timing_executions,
        "seed": settings.seed,
    }
    if camp.replayed:
        run_settings["resumed_runs"] = camp.replayed
    clock = {"device": dmap.as_dict(), "logger": lmap.as_dict() if lmap is not dmap else "device"}
    return Profile(
        kernel=name, backend=camp.caps, mode=settings.mode, guidance=plan.guidance, settings=run_settings,
        profiles=profiles, ssp_search=plan.search, whole_run=wr, clock=clock, error_budget=budget,
        runs=camp.next_run, versions=package_versions(),
        timeline=CampaignTimeline(executions=ex, logs=log_records(samples, lmap), golden_runs=golden_runs),
    )


@numeric_threads()
def profile_interleaved(
    kernel: str,
    preceded_by: Sequence[tuple[str, int]],
    backend: Union[Backend, str, None] = None,
    *,
    runs: Optional[int] = None,
    margin: Optional[float] = None,
    reference: Optional[Profile] = None,
    smoother: Optional[Smoother] = "local",
    seed: int = 0,
    progress: ProgressLike = None,
) -> InterleavedProfile:
    """Profile ``kernel`` run once right after ``preceded_by``, against its own SSP.

    Parameters
    ----------
    kernel : str
        The kernel of interest.
    preceded_by : sequence of (kernel, executions)
        What runs before it in each run, e.g. ``[("mb-4k-gemv", 40)]`` (the
        paper's MB->2K case).
    backend : Backend or str, optional
        A backend or a device string (:func:`~fingrav_native.open_device`);
        default: the simulated GPU (``SimBackend(seed=seed)``).
    runs, margin
        As for :func:`profile` (defaults from the kernel's guidance).
    reference : Profile, optional
        The kernel's own SSP profile; profiled here when not given.

    Returns
    -------
    InterleavedProfile

    Notes
    -----
    1. Profile the kernel's own SSP (unless given).
    2. Run ``preceded_by`` then one execution of the kernel, as one run, as
       many times as the guidance says; the execution of interest is that
       last one.
    3. Golden runs, LOIs and stitching as in :func:`profile`; compare the
       mean total power with the SSP's.
    """
    instance_of(kernel, "kernel", str, "the kernel of interest's name, a str")
    if not isinstance(preceded_by, (list, tuple)) or not preceded_by or not check_kernel_spec(preceded_by,
                                                                                          "preceded_by"):
        raise ValueError(f"preceded_by={short_repr(preceded_by)}: at least one (kernel, executions) pair is needed")
    plan = [(str(k), int(n)) for k, n in preceded_by]
    if runs is not None:
        integer_in(runs, "runs", 2, MAX_RUNS)
    if margin is not None:
        fraction(margin, "margin")
    instance_of(reference, "reference", (Profile, type(None)), "the kernel's own SSP Profile, or None")
    integer_in(seed, "seed", 0)
    backend = open_device("sim", seed=seed) if backend is None else open_device(backend)
    if reference is None:
        reference = profile(kernel, backend, mode="ssp", margin=margin, progress=progress)
    camp = Campaign(backend, None, reporter=as_reporter(progress))
    guidance = reference.guidance
    n_runs = runs if runs is not None else guidance.runs
    bin_margin = margin if margin is not None else guidance.margin
    seq = [*plan, (kernel, 1)]
    total = sum(n for _, n in seq)
    for _ in range(n_runs):
        camp.run(seq, total)
    tl = camp.timeline(camp.records)
    label = "->".join(k for k, _ in plan) + "->" + kernel
    scenario = build_execution_profile(
        label, tl.samples, tl.executions, tl.logger_map, execution_index=total - 1, executions_per_run=total,
        margin=bin_margin, guidance=guidance, smoother=smoother, x="time")
    ref = reference.profiles["ssp"]
    ratio = float(np.mean(scenario.lois["total"]) / np.mean(ref.lois["total"]))
    return InterleavedProfile(scenario, reference, tuple(plan), ratio)
