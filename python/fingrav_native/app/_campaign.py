"""A campaign on a device: its runs, the folder they are written to (and resumed from), the pooled SSP probe.

The driver state :func:`~fingrav_native.profile` and
:func:`~fingrav_native.app.profile_interleaved` share: each run is executed,
placed on its own clock maps and written to the campaign folder as it
completes, so a campaign stopped at any point resumes without losing one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
import uuid
from typing import Any, Callable, Literal, Optional, Sequence

import numpy as np

from fingrav_native._checks import short_repr
from fingrav_native._version import __version__
from fingrav_native.app._progress import CampaignProgress, ProgressReporter
from fingrav_native.backends._base import Backend, KernelSpec, can_advance, can_arm_release, can_steer
from fingrav_native.clocks._runs import Timeline, timeline_of
from fingrav_native.files._campaign import (
    CAMPAIGN_FILE,
    RUNS_DIR,
    CampaignFormatError,
    CampaignMismatchError,
    StoredRun,
    campaign_contents,
    load_campaign_runs,
    read_manifest,
    write_manifest,
    write_run,
)
from fingrav_native.method._agreement import Agreement, LocalAgreement
from fingrav_native.method._align import place_logs
from fingrav_native.method._deconvolve import deconvolve
from fingrav_native.method._phase import PhaseSteerer
from fingrav_native.method._pipeline import (
    stratified_mean,
)
from fingrav_native.method._steady import PowerMeasurement
from fingrav_native.records._layouts import LOI_DTYPE
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sensors._model import SensorModel

_log = logging.getLogger(__name__)

#: What a run is for, as its file records it (a resume replays it only to the same request).
RunRole = Literal["timing", "probe", "campaign", "top-up"]


#: Where a campaign is, as its progress reports it.
CampaignPhase = Literal["timing", "ssp-search", "runs", "top-up", "done"]


def kernel_label(backend: Backend, kernel: Any) -> str:
    if isinstance(kernel, (str, int)):
        return backend.kernel_name(kernel)
    if isinstance(kernel, (list, tuple)):
        return "+".join(f"{kernel_label(backend, k)}x{int(n)}" for k, n in kernel)
    return str(kernel)


def _host_ns(value: Any, backend: Any) -> float:
    """What a backend's ``wait_until`` returned, as the host time it must be (named where it is not one)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)):
        raise ValueError(f"backend.wait_until: {type(backend).__name__}.wait_until returned {short_repr(value)}; "
                         "it must return the host time in ns (an int) at which it released")
    return float(value)


class Campaign:
    """Runs, records and (optionally) streams them to disk as they complete.

    With ``out_dir`` every completed run is written at once
    (:mod:`fingrav_native.files`), so an interrupted campaign keeps them;
    with ``replay`` those runs are handed back, in order, to the same
    requests before any new run is executed (``profile(resume=True)``).
    """

    def __init__(self, backend: Backend, out_dir: Optional[str], *, kernel: str = "",
                 replay: Sequence[StoredRun] = (), reporter: Optional[ProgressReporter] = None,
                 campaign_id: Optional[str] = None) -> None:
        self.backend = backend
        #: The id every run file names (campaign.json's ``campaign_id``; None for a folder older than ids).
        self.campaign_id = campaign_id
        self.caps = backend.capabilities
        self.records: list[RunRecord] = []
        self.next_run = 0
        self.out_dir = out_dir
        self.kernel = kernel
        self._replay = list(replay)
        self.replayed = 0
        self._live_started = False
        #: Phase steering of the campaign's runs (None: random phase, the paper's protocol).
        self.steerer: Optional[PhaseSteerer] = None
        self.reporter = reporter or ProgressReporter()
        # Progress state, kept up to date by the orchestrator.
        self.phase = "timing"
        self.planned: Optional[int] = None
        self.lois = 0
        self.loi_target = 0
        self._t0 = time.monotonic()
        self._phase_t0 = self._t0
        self._phase_live = 0
        if out_dir is not None:
            os.makedirs(out_dir, exist_ok=True)

    @property
    def on_disk(self) -> int:
        """Runs of the folder so far: what campaign.json records (never fewer than were replayed)."""
        # A replay stopped early (settings differ) must not lower the count a
        # later resume checks the folder against.
        return max(self.next_run, len(self._replay))

    def set_phase(self, phase: CampaignPhase, planned: Optional[int] = None) -> None:
        self.phase, self.planned = phase, planned
        self._phase_t0, self._phase_live = time.monotonic(), 0
        self.report()

    def report(self) -> None:
        now = time.monotonic()
        eta = None
        if self.planned is not None and self._phase_live:
            # Replayed runs cost nothing: the rate is that of runs executed in this phase.
            eta = (now - self._phase_t0) / self._phase_live * max(0, self.planned - self.next_run)
        self.reporter.update(CampaignProgress(
            kernel=self.kernel, phase=self.phase, runs_done=self.next_run, runs_planned=self.planned,
            lois=self.lois, loi_target=self.loi_target, elapsed_s=now - self._t0, eta_s=eta,
            replayed=self.replayed))

    def _go_live(self) -> None:
        """Before the first new run after a replay: one timeline with the runs on disk, fresh run ids."""
        self._live_started = True
        if not self.replayed:
            return
        done = [r.record for r in self._replay[:self.replayed]]
        last = max(int(r.brackets[:, 2].max()) for r in done if len(r.brackets))
        now = int(self.backend.read_clocks(1)[0, 0])
        if now <= last:
            if not can_advance(self.backend):
                raise RuntimeError(
                    f"cannot resume: the host clock ({now} ns) is behind the interrupted campaign's last run "
                    f"({last} ns), as after a reboot; the runs on disk and new ones would not share a "
                    "timeline. Start a new campaign folder.")
            # A simulated device restarts at its own time zero: let it sit idle
            # (as the real one did while the campaign was stopped) until after
            # the last run on disk.
            self.backend.advance_to(last + 1_000_000_000)
        top = max(r.run for r in done)
        while self.backend.new_run_id() < top:
            pass

    def run(self, kernel: KernelSpec, executions: int, keep: bool = True, role: RunRole = "campaign") -> RunRecord:
        label = kernel_label(self.backend, kernel)
        # Only the runs that are profiled are steered (not timing or SSP-search probes).
        steer = self.steerer if role in ("campaign", "top-up") else None
        if self.replayed < len(self._replay):
            stored = self._replay[self.replayed]
            if (stored.role, stored.kernel, stored.record.executions) != (role, label, executions):
                raise CampaignMismatchError(
                    f"run {stored.seq} on disk ({stored.path}) is a {stored.role!r} run of "
                    f"{stored.record.executions} executions of {stored.kernel!r}, but the resumed campaign asks "
                    f"for a {role!r} run of {executions} executions of {label!r}: the settings or the device "
                    "differ from the interrupted campaign's; resume with the same ones or start a new folder")
            self.replayed += 1
            rec = stored.record
            if steer is not None and steer.active and stored.steer is not None:
                # The steerer plans from the same "now" and learns the same
                # release as when the run was made: its state, and what the
                # profile records of the steered runs, are as they were.
                steer.plan(stored.steer["now_ns"])
                if stored.steer["release_ns"] is not None:
                    steer.released(float(stored.steer["release_ns"]))
        else:
            if not self._live_started:
                self._go_live()
            self.backend.wait_idle()
            steered = self._steer(steer)
            # Run ids come from the backend, so campaigns sharing a device (an
            # interleaved scenario after its reference) never reuse one.
            rec = self.backend.execute_run(kernel, executions, self.backend.new_run_id())
            if self.out_dir is not None:
                # One file per completed run: an interrupted campaign keeps them.
                write_run(self.out_dir, self.next_run, role, label, rec, campaign_id=self.campaign_id,
                          steer=steered)
            self._phase_live += 1
        if steer is not None:
            steer.observe(rec)
        self.next_run += 1
        if keep:
            self.records.append(rec)
        self.report()
        return rec

    def _steer(self, steer: Optional[PhaseSteerer]) -> Optional[dict[str, Any]]:
        """Release the next launch where the steerer plans it; what a replay needs to plan the same (None: random)."""
        if steer is None or not steer.active:
            return None
        # Equivalent-time sampling: release the launch so that a
        # sensor sample lands where the coverage is thinnest. A
        # target already past returns the host time at once: that is
        # how the campaign reads "now" (no other device call).
        backend = self.backend
        if not can_steer(backend):
            # make_steerer leaves the steerer inactive on such a backend; one made by hand is refused by name.
            raise ValueError(f"steerer: active, but the {type(backend).__name__} backend cannot release a launch "
                             "at a chosen host time (no wait_until)")
        now = _host_ns(backend.wait_until(0), backend)
        release = steer.plan(now)
        released: Optional[float] = None
        if release is not None:
            if can_arm_release(backend):
                # The run sets itself up, then launches at the release.
                backend.release_at(release)
                released = float(release)
            else:
                released = _host_ns(backend.wait_until(release), backend)
            steer.released(released)
        return {"now_ns": now, "release_ns": released}

    def timeline(self, records: Sequence[RunRecord]) -> Timeline:
        """Steps 5-6's inputs for ``records``: their logs and executions on host time."""
        return timeline_of(records, self.caps)


class PooledProbe:
    """Power of execution n-1, measured in a shared pool of long runs.

    An execution's power cannot depend on how many executions follow it
    (the device is causal), so the power of the last execution of an n-run
    equals that of execution n-1 of any longer run. Each long run therefore
    answers every probe up to its length at once: the pool grows only when
    the search asks for a count beyond the longest runs so far, and a probe
    also pools the executions around n-1 (+- n/8), so one run contributes
    several LOIs. Together this makes the SSP search roughly an order of
    magnitude cheaper than fresh runs per probe, for the same estimate.
    """

    def __init__(self, camp: "Campaign", kernel: KernelSpec, duration_ns: float, target_lois: int,
                 say: Callable[[str], None], agree: Optional[Agreement] = None,
                 sensor: Optional[SensorModel] = None, deconvolve_probes: bool = False) -> None:
        self.agree = agree or LocalAgreement()
        self.sensor = sensor
        # A log that averages a window much longer than the execution says
        # little about execution n-1 alone: its point attribution would read
        # the average of the window (tens of executions either side, and
        # idle), so the search would chase the window, not the execution.
        # Such probes take the deconvolved mean of execution n-1 instead.
        self.deconvolve_probes = deconvolve_probes and sensor is not None
        self.camp = camp
        self.kernel = kernel
        self.duration = duration_ns
        self.target = target_lois
        self.say = say
        self.records: list[RunRecord] = []
        self._lois = np.zeros(0, dtype=LOI_DTYPE)
        self._length: dict[int, int] = {}
        self._lois_for = -1  # pool size the placed LOIs belong to

    def _window(self, n: int) -> tuple[int, int]:
        w = (n - 1) // 8
        return max(0, n - 1 - w), n - 1 + w

    def __call__(self, n: int) -> PowerMeasurement:
        lo, hi = self._window(n)
        per_run = (hi - lo + 1) * min(1.0, self.duration / self.camp.caps.logger_period_ns)
        need = int(min(2000, max(8, math.ceil(self.target / per_run))))
        usable = sum(1 for r in self.records if r.executions > hi)
        if usable < need:
            length = max(hi + 1, 2 * n)
            for _ in range(need - usable):
                self.records.append(self.camp.run(self.kernel, length, keep=False, role="probe"))
            usable = need
        # Every execution of every pooled run, placed once per pool; each
        # probe (bisection probes add no runs) only selects from it.
        if self._lois_for != len(self.records):
            tl = self.camp.timeline(self.records)
            self._lois = place_logs(tl.samples, tl.executions, tl.logger_map)
            self._length = {r.run: r.executions for r in self.records}
            self._lois_for = len(self.records)
        runs_long_enough = np.array([run for run, length in self._length.items() if length > hi])
        if self.deconvolve_probes and self.sensor is not None:
            tl = self.camp.timeline(self.records)
            try:
                dec = deconvolve(tl.samples, tl.executions, tl.logger_map, self.sensor, execution_of_interest=n - 1,
                                 runs=runs_long_enough, bins=8, bootstrap=0, channels=("total",))
            except ValueError as exc:
                # Too few logs around execution n-1 yet: this probe falls back to the point attribution below.
                _log.debug("SSP search: execution %d not deconvolved (%s); point attribution instead", n, exc)
                dec = None
            if dec is not None:
                ch = dec.channels[0]
                mean = float(np.mean(ch.curve))
                se = float(np.sqrt(np.mean(ch.sd ** 2)) / math.sqrt(len(ch.curve))) if np.isfinite(ch.sd).all() \
                    else float(ch.residual_w) / math.sqrt(max(1, dec.n_logs))
                m = self.agree.measurement(PowerMeasurement(mean, se, int(dec.n_logs)))
                self.say(f"  SSP search: execution {n} -> {m.mean_w:.1f} +- {m.stderr_w:.1f} W "
                         f"(deconvolved from {dec.n_logs} logs of {usable} runs)")
                return m
        lois = self._lois[(self._lois["execution"] >= lo) & (self._lois["execution"] <= hi)
                          & np.isin(self._lois["run"], runs_long_enough)]
        m = self.agree.measurement(stratified_mean(lois["toi_frac"], lois["total"]))
        self.say(f"  SSP search: execution {n} -> {m.mean_w:.1f} +- {m.stderr_w:.1f} W "
                 f"({m.count} LOIs in executions {lo + 1}-{hi + 1} of {usable} runs)")
        return m


def package_versions() -> dict[str, Any]:
    return {"fingrav_native": __version__, "profile_format": 1, "numpy": np.__version__}


def write_state(out_dir: str, name: str, caps: Capabilities, requested: dict[str, Any], state: str, runs: int,
                 error: Optional[str] = None, *, campaign_id: Optional[str] = None) -> None:
    manifest = {"kernel": name, "backend": dataclasses.asdict(caps), "settings": requested, "state": state,
                "runs": runs, "versions": package_versions()}
    if campaign_id is not None:
        manifest["campaign_id"] = campaign_id
    if error is not None:
        manifest["error"] = error
    write_manifest(out_dir, manifest)


def open_campaign(out_dir: Optional[str], resume: bool, name: str, caps: Capabilities,
                  requested: dict[str, Any]) -> tuple[list[StoredRun], Optional[str]]:
    """Check ``out_dir`` against the request; the runs to replay (empty for a new campaign) and the campaign's id.

    A new campaign draws its id here (``campaign.json`` records it, every
    run file names it); a resumed one replays only run files that name the
    id its manifest records (a folder written before ids: any).
    """
    if out_dir is None:
        return [], None
    manifest = read_manifest(out_dir)
    if manifest is None:
        held = campaign_contents(out_dir)
        if held:
            # Runs without their manifest cannot be checked against this
            # request; starting afresh would overwrite them from run 0.
            raise CampaignFormatError(
                f"{os.path.join(out_dir, CAMPAIGN_FILE)}: missing, but the folder holds {' and '.join(held)}; "
                "nothing was written: restore campaign.json to resume, or profile into another folder "
                "(the runs here are left as they are)")
        campaign_id = uuid.uuid4().hex
        write_state(out_dir, name, caps, requested, "running", 0, campaign_id=campaign_id)
        return [], campaign_id
    if not resume:
        raise ValueError(
            f"out_dir={out_dir!r}: already holds a campaign ({manifest.get('kernel')!r}, "
            f"{manifest.get('state')}); pass resume=True (fingrav profile --resume) to continue it, "
            "or choose another folder")
    if manifest.get("kernel") != name:
        raise CampaignMismatchError(f"kernel: the campaign in {out_dir!r} profiles {manifest.get('kernel')!r}, "
                                    f"not {name!r}")
    on_disk = manifest.get("backend", {})
    for key in ("name", "device"):
        if on_disk.get(key) != getattr(caps, key):
            raise CampaignMismatchError(f"backend: the campaign in {out_dir!r} ran on {key} "
                                        f"{on_disk.get(key)!r}, this backend is {getattr(caps, key)!r}")
    settings = manifest.get("settings", {})
    for key, value in requested.items():
        if settings.get(key) != value:
            raise CampaignMismatchError(f"{key}={value!r}: the campaign in {out_dir!r} was started with "
                                        f"{key}={settings.get(key)!r}; resume with the same settings")
    stored_id: Optional[str] = manifest.get("campaign_id")
    replay = load_campaign_runs(out_dir, campaign_id=stored_id)
    if len(replay) < manifest["runs"]:
        # Replaying fewer runs than were made would start the campaign over
        # and rewrite the missing ones: the measurements are gone, not redone.
        raise CampaignFormatError(
            f"{os.path.join(out_dir, RUNS_DIR)}: {len(replay)} run files, but {CAMPAIGN_FILE} records "
            f"{manifest['runs']} completed runs; nothing was written: restore the missing runs to resume, "
            "or profile into another folder")
    write_state(out_dir, name, caps, requested, "running", len(replay), campaign_id=stored_id)
    return replay, stored_id
