"""The orchestrator: the eight steps end to end on the simulated GPU, scored against its truth."""

from __future__ import annotations

import doctest
import importlib
import json
import os
import sys

import numpy as np
import pytest

import fingrav_native  # noqa: F401  (the package re-exports profile(), which hides the module name)
from fingrav_native.app import profile, profile_interleaved
from fingrav_native.backends import SimBackend
from fingrav_native.method import stitch_logs
from fingrav_native.records import LOI_DTYPE


@pytest.fixture(scope="module")
def sse_4k():
    backend = SimBackend(seed=2)
    return backend, profile("cb-4k-gemm", backend, mode="sse", runs=120, max_top_up_runs=120)


def test_sse_profile_places_logs_inside_the_fourth_execution(sse_4k) -> None:
    backend, p = sse_4k
    sse = p.profiles["sse"]
    assert p.kernel == "cb-4k-gemm" and p.mode == "sse" and p.ssp_search is None
    assert sse.execution_index == 3 and sse.executions_per_run == 4
    assert sse.lois.dtype == LOI_DTYPE and len(sse.lois) >= 10
    # Every LOI is inside its execution (TOI within the duration, up to its uncertainty).
    assert np.all(sse.lois["toi_ns"] >= -sse.lois["uncert_ns"])
    assert np.all(sse.lois["toi_ns"] <= sse.lois["duration_ns"] + sse.lois["uncert_ns"])
    assert set(np.unique(sse.lois["run"])) <= set(sse.golden.run_ids)
    # Guidance: 200 us - 1 ms -> 2% margin.
    assert p.guidance.margin == 0.02 and sse.golden.margin == 0.02


def test_logged_power_matches_the_truth_at_the_same_instants(sse_4k) -> None:
    backend, p = sse_4k
    lois = p.profiles["sse"].lois
    # A LOI's host time, through the fitted clock map, is where the truth
    # says the logged value was: instantaneous logs equal the truth there.
    truth = backend.gpu.truth_power(np.round(lois["host_ns"]).astype(np.int64))[:, 0]
    assert np.median(np.abs(lois["total"] / truth - 1)) < 0.01


def test_energy_per_execution_is_close_to_the_truth(sse_4k) -> None:
    backend, p = sse_4k
    sse = p.profiles["sse"]
    ex = backend.gpu.executions()
    golden = ex[np.isin(ex["run"], sse.golden.run_ids) & (ex["index"] == 3)]
    true_energy = np.median(golden["energy_j"])
    est = sse.energy["total"]
    assert abs(est.energy_j / true_energy - 1) < 0.06
    assert est.uncertainty_j > 0


def test_error_budget_is_reported_and_bounded(sse_4k) -> None:
    _, p = sse_4k
    b = p.error_budget
    assert 0 < b.clock_map_ns < 5_000 and 0 < b.marker_ns < 5_000 and b.logger_window_ns == 0
    assert b.total_ns >= b.clock_map_ns
    assert "device" in p.clock and "cb-4k-gemm" in repr(p)


@pytest.mark.slow
def test_ssp_search_finds_the_cb2k_climb_and_both_profiles_differ() -> None:
    p = profile("cb-2k-gemm", SimBackend(seed=4), mode="both", runs=60, probe_lois=60, max_top_up_runs=60)
    n = p.ssp_search.executions
    assert p.ssp_search.converged and 25 <= n <= 80  # the paper: around the 40th execution
    assert [s.phase for s in p.ssp_search.trace][0] == "start"
    sse, ssp = p.profiles["sse"], p.profiles["ssp"]
    assert ssp.execution_index == n - 1 and sse.execution_index == 3
    # Takeaway 1: similar execution times, different power.
    assert abs(sse.duration_ns / ssp.duration_ns - 1) < 0.06
    assert np.mean(ssp.lois["total"]) > 1.04 * np.mean(sse.lois["total"])


def test_interleaved_light_kernel_after_memory_bound_kernels_draws_less() -> None:
    backend = SimBackend(seed=5)
    ref = profile("cb-2k-gemm", backend, mode="ssp", executions=48, runs=60, max_top_up_runs=60)
    res = profile_interleaved("cb-2k-gemm", [("mb-4k-gemv", 40)], backend, runs=80, reference=ref)
    assert res.scenario.execution_index == 40 and res.preceded_by == (("mb-4k-gemv", 40),)
    assert res.power_ratio < 0.97


def test_campaign_streams_runs_to_disk(tmp_path) -> None:
    out = tmp_path / "campaign"
    p = profile("cb-8k-gemm", SimBackend(seed=6), mode="sse", runs=12, top_up=False, out_dir=str(out))
    files = sorted(os.listdir(out))
    assert "campaign.json" in files and "profile.fgprof" in files
    runs = sorted(os.listdir(out / "runs"))
    assert len(runs) == p.runs  # every run, the timing run included, is on disk
    with np.load(out / "runs" / runs[-1], allow_pickle=False) as z:
        assert {"samples", "markers", "brackets"} <= set(z.files)
    meta = json.loads((out / "campaign.json").read_text())
    assert meta["kernel"] == "cb-8k-gemm" and meta["settings"]["runs"] == 12


@pytest.mark.parametrize(
    "kwargs,name",
    [({"mode": "fast"}, "mode"), ({"runs": 1}, "runs"), ({"margin": 1.5}, "margin"),
     ({"executions": 2}, "executions"), ({"x": "phase"}, "x"), ({"timing_executions": 1}, "timing_executions")],
)
def test_bad_arguments_are_named(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        profile("cb-4k-gemm", SimBackend(seed=0), **kwargs)


def test_stitch_logs_refuses_bad_input() -> None:
    from fingrav_native.records import make_executions

    ex = make_executions([0, 1], [0, 0], [0, 0], [0.0, 1e7], [1e5, 1e7 + 1e5])
    logs = np.zeros(2, dtype=[("source_ts", "<i8"), ("total", "<f4")])
    logs["source_ts"] = [5e7, 6e7]  # after every execution
    logs["total"] = [300.0, 310.0]  # two readings: one value throughout is warned of

    class Identity:
        def to_host(self, t):
            return np.asarray(t, dtype=float)

        def error_bound_at(self, t):
            return np.zeros(np.shape(t))

    with pytest.raises(ValueError, match="margin"):
        stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0)
    with pytest.raises(ValueError, match="no power log landed"):
        stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)
    with pytest.raises(ValueError, match="executions"):
        stitch_logs(logs, ex[:0], Identity(), execution_of_interest=0, margin=0.05)


@pytest.mark.parametrize("name", ["fingrav_native.method._pipeline", "fingrav_native.method._steady",
                                  "fingrav_native.sim._device"])
def test_docstring_examples_run(name: str) -> None:
    importlib.import_module(name)
    failed, attempted = doctest.testmod(sys.modules[name], raise_on_error=False, verbose=False)[:2]
    assert attempted > 0 and failed == 0


@pytest.mark.slow
def test_profile_runs_the_same_on_the_real_time_device() -> None:
    # The live path: a real sampler thread, live bracketed clock reads, real
    # latencies; the simulator still knows the truth.
    from fingrav_native.backends import LiveSimBackend

    backend = LiveSimBackend(seed=3)
    p = profile("cb-8k-gemm", backend, mode="sse", runs=10, top_up=False)
    assert p.backend.name == "sim-live" and not p.backend.virtual_time
    sse = p.profiles["sse"]
    assert len(sse.lois) >= 5
    truth = backend.gpu.truth_power(np.round(sse.lois["host_ns"]).astype(np.int64))[:, 0]
    assert np.median(np.abs(sse.lois["total"] / truth - 1)) < 0.01
    # The fitted device clock has the simulated skew (20 ppm, +-0.5 ppm wander).
    assert abs(p.clock["device"]["skew_ppm"] - 20.0) < 1.0


def test_logger_clock_with_its_own_tick_is_fitted_in_its_own_units() -> None:
    # A logger whose timestamps tick at 40 ns while the device counter ticks
    # at 10 ns (as NVML's us stamps differ from %globaltimer's ns): the
    # logger map must be fitted with the logger's tick, not the device's.
    backend = SimBackend(seed=3, logger_own_clock=1, logger_tick_ns=40)
    assert backend.capabilities.logger_tick_ns == 40 and backend.capabilities.device_tick_ns == 10
    p = profile("cb-4k-gemm", backend, mode="sse", runs=30, top_up=False)
    assert p.clock["logger"]["ns_per_tick"] == pytest.approx(40, rel=1e-3)
    # The one-sided fit is as tight as with a 10 ns logger tick (the publication delay dominates).
    same = profile("cb-4k-gemm", SimBackend(seed=3, logger_own_clock=1), mode="sse", runs=30, top_up=False)
    assert p.error_budget.clock_map_ns < 1.5 * same.error_budget.clock_map_ns
    ssp = p.profiles["sse"]
    assert len(ssp.lois) > 0 and np.all(np.abs(ssp.lois["toi_ns"]) < 2 * ssp.duration_ns)
