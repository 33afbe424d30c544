"""Campaign folders: runs on disk as they complete, Ctrl-C, resume."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import fingrav_native as fn
from fingrav_native.app import CampaignProgress, ProgressReporter
from fingrav_native.backends import SimBackend
from fingrav_native.files import (
    CampaignFormatError,
    CampaignMismatchError,
    load_campaign_runs,
    load_profile,
    read_manifest,
    write_run,
)

KERNEL = "cb-4k-gemm"
# Small enough to be quick, large enough to need a top-up sometimes.
SETTINGS = dict(mode="both", runs=40, executions=16, seed=0)


class CountingBackend(SimBackend):
    """A simulated backend that counts runs and can be 'interrupted' (KeyboardInterrupt) at run k."""

    def __init__(self, interrupt_at: int | None = None, **kw):
        super().__init__(**kw)
        self.executed = 0
        self.interrupt_at = interrupt_at

    def execute_run(self, kernel, executions, run):
        if self.interrupt_at is not None and self.executed == self.interrupt_at:
            raise KeyboardInterrupt
        self.executed += 1
        return super().execute_run(kernel, executions, run)


def test_every_completed_run_is_on_disk_and_the_profile_is_saved(tmp_path):
    out = tmp_path / "c"
    backend = CountingBackend()
    p = fn.profile(KERNEL, backend, out_dir=str(out), **SETTINGS)
    runs = load_campaign_runs(str(out))
    assert len(runs) == backend.executed == p.runs
    assert [r.seq for r in runs] == list(range(len(runs)))
    assert runs[0].role == "timing" and {r.role for r in runs[1:]} <= {"campaign", "top-up"}
    assert all(r.kernel == KERNEL for r in runs)
    manifest = read_manifest(str(out))
    assert manifest["state"] == "complete" and manifest["runs"] == p.runs
    assert manifest["settings"]["runs"] == 40
    back = load_profile(str(out / "profile.fgprof"))
    assert back.runs == p.runs
    # The simulator's truth arrays travel in the run files.
    assert "truth_start_ns" in runs[1].record.meta
    assert len(runs[1].record.meta["truth_start_ns"]) == 16


def test_interrupt_keeps_the_runs_and_resume_does_not_run_them_again(tmp_path):
    out = str(tmp_path / "c")
    first = CountingBackend(interrupt_at=25)
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, first, out_dir=out, **SETTINGS)
    kept = load_campaign_runs(out)
    assert len(kept) == 25 == first.executed
    manifest = read_manifest(out)
    assert manifest["state"] == "interrupted" and manifest["runs"] == 25
    assert not os.path.exists(os.path.join(out, "profile.fgprof"))

    second = CountingBackend()
    p = fn.profile(KERNEL, second, out_dir=out, resume=True, **SETTINGS)
    # Replayed runs are not executed again; the campaign goes on after them.
    assert second.executed == p.runs - 25
    assert p.settings["resumed_runs"] == 25
    runs = load_campaign_runs(out)
    assert len(runs) == p.runs
    # The new runs come after the replayed ones on the host timeline, and
    # every run id is unique.
    ids = [r.record.run for r in runs]
    assert len(set(ids)) == len(ids)
    last_old = runs[24].record.brackets[:, 2].max()
    assert runs[25].record.brackets[:, 0].min() > last_old
    for label in ("sse", "ssp"):
        ep = p.profiles[label]
        assert len(ep.lois) >= 10
    # The resumed profile agrees with an uninterrupted one within their uncertainty.
    ref = fn.profile(KERNEL, SimBackend(seed=0), **SETTINGS)
    for label in ("sse", "ssp"):
        a, b = p.profiles[label].energy["total"], ref.profiles[label].energy["total"]
        assert abs(a.energy_j - b.energy_j) <= 4 * np.hypot(a.uncertainty_j, b.uncertainty_j) + 0.02 * b.energy_j


def test_resuming_a_complete_campaign_replays_it_exactly(tmp_path):
    out = str(tmp_path / "c")
    p = fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)
    again = CountingBackend()
    q = fn.profile(KERNEL, again, out_dir=out, resume=True, **SETTINGS)
    assert again.executed == 0
    for label in ("sse", "ssp"):
        np.testing.assert_array_equal(p.profiles[label].lois, q.profiles[label].lois)


@pytest.mark.slow
def test_resume_during_the_ssp_search(tmp_path):
    out = str(tmp_path / "c")
    settings = dict(mode="ssp", runs=30, seed=0)
    first = CountingBackend(interrupt_at=60)  # inside the search's probe pool
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, first, out_dir=out, **settings)
    roles = [r.role for r in load_campaign_runs(out)]
    assert "probe" in roles and "campaign" not in roles
    p = fn.profile(KERNEL, CountingBackend(), out_dir=out, resume=True, **settings)
    assert p.ssp_search is not None and p.profiles["ssp"].executions_per_run >= 8


def test_a_folder_with_a_campaign_is_never_overwritten(tmp_path):
    out = str(tmp_path / "c")
    fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)
    with pytest.raises(ValueError, match="out_dir=.*already holds a campaign"):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **SETTINGS)


@pytest.mark.parametrize("change, message", [
    (dict(runs=50), "runs=50"),
    (dict(mode="sse", executions=None), "mode='sse'"),
    (dict(margin=0.03), "margin=0.03"),
])
def test_resume_with_other_settings_is_refused(tmp_path, change, message):
    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=10), out_dir=out, **SETTINGS)
    with pytest.raises(CampaignMismatchError, match=message):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, resume=True, **{**SETTINGS, **change})


def test_resume_of_another_kernel_is_refused(tmp_path):
    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=10), out_dir=out, **SETTINGS)
    with pytest.raises(CampaignMismatchError, match="kernel"):
        fn.profile("cb-2k-gemm", SimBackend(seed=0), out_dir=out, resume=True, **SETTINGS)


def test_runs_that_do_not_match_the_request_are_refused(tmp_path):
    # Edit a run file's recorded executions: the replay must notice, not mix.
    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=5), out_dir=out, **SETTINGS)
    runs = load_campaign_runs(out)
    rec = runs[3].record
    os.remove(runs[3].path)
    write_run(out, 3, "top-up", KERNEL, rec, campaign_id=runs[3].campaign_id)
    with pytest.raises(CampaignMismatchError, match="run 3 on disk"):
        fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, resume=True, **SETTINGS)


def test_a_missing_or_truncated_run_file_is_a_clear_error(tmp_path):
    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=6), out_dir=out, **SETTINGS)
    runs = load_campaign_runs(out)
    with open(runs[2].path, "r+b") as f:
        f.truncate(100)
    with pytest.raises(CampaignFormatError, match="run_000002.npz"):
        load_campaign_runs(out)
    os.remove(runs[2].path)
    with pytest.raises(CampaignFormatError, match="misses a run"):
        load_campaign_runs(out)


def test_a_leftover_temporary_file_is_ignored(tmp_path):
    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=4), out_dir=out, **SETTINGS)
    # What Ctrl-C during a write leaves: a partial file under the temporary name.
    with open(os.path.join(out, "runs", "run_000004.npz.tmp"), "wb") as f:
        f.write(b"PK\x03\x04 partial")
    assert len(load_campaign_runs(out)) == 4
    p = fn.profile(KERNEL, CountingBackend(), out_dir=out, resume=True, **SETTINGS)
    assert p.settings["resumed_runs"] == 4


def test_manifest_from_a_newer_version_or_foreign_file_is_refused(tmp_path):
    out = tmp_path / "c"
    out.mkdir()
    (out / "campaign.json").write_text(json.dumps({"format": "fingrav-campaign", "version": 99}))
    with pytest.raises(CampaignFormatError, match="newer"):
        read_manifest(str(out))
    (out / "campaign.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(CampaignFormatError, match="not a fingrav campaign"):
        read_manifest(str(out))
    (out / "campaign.json").write_text("{")
    with pytest.raises(CampaignFormatError, match="not readable JSON"):
        read_manifest(str(out))


def test_resume_needs_out_dir():
    with pytest.raises(ValueError, match="resume=True: needs out_dir"):
        fn.profile(KERNEL, resume=True)


class Recorder(ProgressReporter):
    def __init__(self):
        self.lines: list[str] = []
        self.states: list[CampaignProgress] = []
        self.closed = False

    def line(self, text):
        self.lines.append(text)

    def update(self, state):
        self.states.append(state)

    def close(self):
        self.closed = True


def test_progress_reports_every_run_lois_and_eta(tmp_path):
    rec = Recorder()
    p = fn.profile(KERNEL, SimBackend(seed=0), progress=rec, **SETTINGS)
    assert rec.closed
    phases = [s.phase for s in rec.states]
    assert phases[0] == "timing" and phases[-1] == "done"
    assert "runs" in phases
    run_states = [s for s in rec.states if s.phase == "runs"]
    # Runs done count up one by one to the plan.
    done = [s.runs_done for s in run_states]
    assert done == sorted(done) and run_states[-1].runs_done == run_states[-1].runs_planned
    assert all(s.eta_s is not None for s in run_states[2:])
    final = rec.states[-1]
    assert final.runs_done == p.runs
    # The LOI count shown at the end is that of the profile furthest from its target.
    shortest = max(p.profiles.values(), key=lambda ep: ep.loi_target - len(ep.lois))
    assert (final.lois, final.loi_target) == (len(shortest.lois), shortest.loi_target)
    assert any(line.startswith("  runs 40/40, LOIs ") for line in rec.lines)


def test_progress_counts_replayed_runs(tmp_path):
    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=12), out_dir=out, **SETTINGS)
    rec = Recorder()
    fn.profile(KERNEL, CountingBackend(), out_dir=out, resume=True, progress=rec, **SETTINGS)
    assert rec.states[-1].replayed == 12
    assert rec.lines[0] == f"{KERNEL}: resuming, 12 runs on disk"


def test_a_wrapped_backend_sees_every_device_call_and_resumes_through_the_wrapper(tmp_path):
    from fingrav_native.backends import BackendWrapper

    class Tally(BackendWrapper):
        def __init__(self, inner):
            super().__init__(inner)
            self.calls: dict[str, int] = {}

        def _around(self, call, *args):
            self.calls[call.__name__] = self.calls.get(call.__name__, 0) + 1
            return call(*args)

    out = str(tmp_path / "c")
    with pytest.raises(KeyboardInterrupt):
        fn.profile(KERNEL, CountingBackend(interrupt_at=8), out_dir=out, **SETTINGS)
    inner = CountingBackend()
    wrapped = Tally(inner)
    p = fn.profile(KERNEL, wrapped, out_dir=out, resume=True, **SETTINGS)
    # Resuming reads the clock and advances the simulated device through the wrapper.
    assert wrapped.calls["execute_run"] == inner.executed == p.runs - 8
    assert wrapped.calls["wait_idle"] == inner.executed
    assert wrapped.calls["read_clocks"] == 1
    assert wrapped.gpu is inner.gpu and wrapped.capabilities is inner.capabilities


def test_a_resumed_steered_campaign_records_its_replayed_runs_as_steered(tmp_path):
    # The steerer plans each replayed run from the "now" and release its file records, so the profile's
    # phase summary (and every decision after) is that of the campaign as it was run; it had recorded the
    # replayed steered runs as random phase ("used": "random", no steered runs).
    settings = {**SETTINGS, "phase": "steered"}
    out = str(tmp_path / "c")
    p = fn.profile(KERNEL, SimBackend(seed=0), out_dir=out, **settings)
    assert p.settings["phase"]["used"] == "steered" and p.settings["phase"]["steered_runs"] > 10
    steered = [r for r in load_campaign_runs(out) if r.steer is not None and r.steer["release_ns"] is not None]
    assert len(steered) == p.settings["phase"]["steered_runs"]
    again = CountingBackend()
    q = fn.profile(KERNEL, again, out_dir=out, resume=True, **settings)
    assert again.executed == 0
    assert q.settings["phase"] == p.settings["phase"]
    for label in ("sse", "ssp"):
        np.testing.assert_array_equal(p.profiles[label].lois, q.profiles[label].lois)


def test_executions_with_mode_sse_is_refused_not_ignored():
    # SSE runs have four executions; a count given must not be ignored without a word.
    with pytest.raises(ValueError, match="executions=8: sets the executions per run of SSP runs; mode 'sse'"):
        fn.profile(KERNEL, SimBackend(seed=0), mode="sse", executions=8, runs=10)
