"""The simulated device reproduces the FinGraV paper's observations (Sections III and V).

Each behaviour is asserted from the device's ground truth, and where the paper
saw it in logs, from the power logs alone (placed with the GPU-side markers,
no truth used).
"""

from __future__ import annotations

import numpy as np
import pytest

from fingrav_native.sim import _device as sim

IDLE_NS = 100_000_000  # 100 ms: the device settles to idle before a run


def one_run(kernel: str, executions: int, seed: int = 3, **params: float) -> np.ndarray:
    gpu = sim.SimGPU(seed=seed, **params)
    gpu.idle(IDLE_NS)
    return gpu.run(kernel, executions).executions


def mean_power(kernel: str, executions: int, seed: int = 3) -> np.ndarray:
    return one_run(kernel, executions, seed)["mean_total_w"]


def ssp_level(kernel: str, executions: int, seed: int = 3) -> float:
    return float(mean_power(kernel, executions, seed)[-10:].mean())


def interleaved_last(prefix: list[tuple[str, int]], kernel: str, seed: int = 3) -> float:
    gpu = sim.SimGPU(seed=seed)
    gpu.idle(IDLE_NS)
    ex = gpu.sequence([*prefix, (kernel, 1)]).executions
    return float(ex["mean_total_w"][-1])


# ---------------------------------------------------------------- power trends (V-C1)


def test_cb8k_rises_sharply_then_firmware_pulls_down_then_creeps_to_ssp() -> None:
    # The firmware loop is scheduled with jitter, so single runs differ (a
    # late re-throttle, a cut that lands early); the paper's picture is the
    # typical one: judged per seed where it must hold always, by the median
    # over seeds otherwise.
    ssp_idx, creep = [], []
    for seed in range(1, 8):
        p = mean_power("cb-8k-gemm", 40, seed)
        sse, ssp = p[3], p[-10:].mean()
        # Sharp rise over the first executions, well above where it settles.
        assert p[:3].max() > 1.05 * max(sse, ssp), seed
        # SSP is only slightly different from SSE (the paper: "slightly
        # increases"); the SSE sits at the bottom of the firmware's undershoot.
        assert abs(ssp / sse - 1) < 0.06, seed
        ssp_idx.append(sim.steady_state_index(p, tolerance=0.015))
        creep.append(ssp / sse - 1)
    # Typically the firmware pulls it below the cap (SSE), then it creeps up
    # to SSP around the 11th execution.
    assert np.median(creep) > 0.003, creep
    assert 5 <= np.median(ssp_idx) <= 16, ssp_idx
    # Total power is dominated by the compute dies (Section V-C1).
    ex = one_run("cb-8k-gemm", 20, 3)
    assert np.all(ex["mean_compute_w"][3:] / ex["mean_total_w"][3:] > 0.55)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cb2k_climbs_gradually_while_execution_time_stays_flat(seed: int) -> None:
    ex = one_run("cb-2k-gemm", 150, seed)
    p = ex["mean_total_w"]
    d = (ex["end_ns"] - ex["start_ns"]).astype(float)
    ssp_idx = sim.steady_state_index(p, tolerance=0.02)
    assert 25 <= ssp_idx <= 90, ssp_idx  # the paper: around the 40th
    ssp = p[-10:].mean()
    assert p[3] < 0.95 * ssp  # starts low
    # Gradual: the gap closes over tens of executions, not at once.
    assert p[10] < p[30] < ssp * 1.02
    # Execution time flat after warm-up (binned over the runs' own jitter).
    flat = d[3:ssp_idx + 10]
    assert np.percentile(flat, 90) / np.percentile(flat, 10) < 1.04
    # Warm-up executions are slower.
    assert d[0] > 1.1 * np.median(flat)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("kernel,executions,rise", [("cb-4k-gemm", 40, 1.04), ("cb-2k-gemm", 150, 1.08)])
def test_execution_time_settles_by_the_sse_while_power_keeps_rising(
        kernel: str, executions: int, rise: float, seed: int) -> None:
    # The paper (Sections IV-A, V-C1): the SSE is the first execution after
    # the warm-ups beyond which time no longer falls; power then still rises
    # to the SSP, and "all executions between SSE and SSP have similar
    # execution times". CB-4K: the clock is at f_max by the SSE and the dies'
    # leakage heats up under it; CB-2K: the clock still climbs (DPM steps)
    # but its duration does not follow, its power does.
    ex = one_run(kernel, executions, seed)
    p = ex["mean_total_w"]
    ssp = sim.steady_state_index(p, tolerance=0.02)
    assert ssp > 6, ssp  # power is still changing well after the SSE
    assert p[ssp] > rise * p[3], (p[3], p[ssp])
    # Durations as a profile's golden bin sees them: the median over runs
    # (one execution alone also carries its own ~0.3% jitter).
    gpu = sim.SimGPU(seed=seed)
    d = []
    for _ in range(6):
        gpu.idle(IDLE_NS)
        e = gpu.run(kernel, ssp + 1).executions
        d.append((e["end_ns"] - e["start_ns"]).astype(float))
    d = np.median(d, axis=0)
    assert abs(d[3] / d[ssp] - 1) < 0.02, (d[3], d[ssp])
    assert np.ptp(d[3:]) / np.median(d[3:]) < 0.03
    if kernel == "cb-4k-gemm":
        # Power rises at a constant clock: leakage of the heating dies.
        assert abs(ex["mean_freq"][ssp] / ex["mean_freq"][3] - 1) < 0.01
        assert ex["mean_compute_w"][ssp] > 1.04 * ex["mean_compute_w"][3]


def test_only_the_heaviest_gemm_reaches_the_power_cap() -> None:
    # CB-8K overshoots the cap and the firmware cuts its clock (Section
    # V-C1, "the first few executions considerably stress power"); CB-4K and
    # CB-2K stay under it, so nothing slows them down after their warm-ups.
    for kernel, executions, capped in (("cb-8k-gemm", 20, True), ("cb-4k-gemm", 60, False),
                                       ("cb-2k-gemm", 150, False)):
        gpu = sim.SimGPU(seed=3)
        gpu.idle(IDLE_NS)
        t0 = gpu.now()
        gpu.run(kernel, executions)
        fw = gpu.firmware()
        fw = fw[fw["t_ns"] >= t0]
        assert bool(fw["throttled"].any()) == capped, kernel
        if capped:
            # The cut comes after the lagging average crosses the cap, not at once.
            first_cut = fw["t_ns"][np.argmax(fw["throttled"] > 0)] - t0
            assert first_cut > 2_000_000, first_cut


def test_first_executions_from_idle_are_slower() -> None:
    for kernel in ("cb-4k-gemm", "mb-8k-gemv", "allgather-1g"):
        d = one_run(kernel, 10)
        dur = (d["end_ns"] - d["start_ns"]).astype(float)
        assert dur[0] > dur[1] > dur[4] * 0.999
        assert d["warm_index"][0] == 0 and d["warm_index"][5] == 5


# ---------------------------------------------------------------- components (V-C2, V-D)


def steady(kernel: str, executions: int = 60) -> dict[str, float]:
    ex = one_run(kernel, executions)[-10:]
    return {c: float(ex[f"mean_{c}_w"].mean()) for c in ("total", "compute", "io", "memory")}


def test_component_shares_follow_the_paper() -> None:
    cb = {k: steady(k) for k in ("cb-8k-gemm", "cb-4k-gemm", "cb-2k-gemm")}
    mb = {k: steady(k, 120) for k in ("mb-8k-gemv", "mb-4k-gemv", "mb-2k-gemv")}
    # CB GEMMs draw more total and compute power than MB GEMVs.
    assert min(v["total"] for v in cb.values()) > max(v["total"] for v in mb.values())
    assert min(v["compute"] for v in cb.values()) > max(v["compute"] for v in mb.values())
    # MB-8K GEMV stresses the IO die more than any CB GEMM.
    assert mb["mb-8k-gemv"]["io"] > max(v["io"] for v in cb.values())
    # GEMV total drops from 8K to 2K.
    assert mb["mb-8k-gemv"]["total"] > mb["mb-4k-gemv"]["total"] > mb["mb-2k-gemv"]["total"]
    # CB-8K has the highest HBM power among the GEMMs/GEMVs.
    assert cb["cb-8k-gemm"]["memory"] == max(v["memory"] for v in {**cb, **mb}.values())


def test_bandwidth_bound_collectives_sit_between_latency_bound_and_cb_gemm() -> None:
    lb = [steady(k, 80) for k in ("allgather-64k", "allgather-128k", "allreduce-64k", "allreduce-128k")]
    bb = [steady(k, 15) for k in ("allgather-512m", "allgather-1g", "allreduce-512m", "allreduce-1g")]
    gemm = steady("cb-8k-gemm", 30)
    for b in bb:
        assert max(x["total"] for x in lb) < b["total"] < gemm["total"]
        assert b["io"] > gemm["io"] and b["memory"] > gemm["memory"]
        assert b["compute"] < gemm["compute"]


@pytest.mark.parametrize(
    "kernel,executions",
    [("allgather-64k", 80), ("allgather-128k", 80), ("allreduce-64k", 80), ("allreduce-128k", 80),
     ("allgather-512m", 20), ("allgather-1g", 15), ("allreduce-512m", 15), ("allreduce-1g", 12)],
)
def test_collectives_show_no_sse_ssp_difference(kernel: str, executions: int) -> None:
    p = mean_power(kernel, executions)
    assert abs(p[-5:].mean() - p[3]) / p[3] < 0.02


# ---------------------------------------------------------------- interleaving (V-C3)


def test_power_light_kernels_follow_what_ran_before_heavy_ones_do_not() -> None:
    ssp_2k = ssp_level("cb-2k-gemm", 150)
    ssp_8k = ssp_level("cb-8k-gemm", 30)
    ssp_4k_gemv = ssp_level("mb-4k-gemv", 150)
    ssp_8k_gemv = ssp_level("mb-8k-gemv", 150)
    # CB -> 2K: more than its own SSP; MB -> 2K: less.
    assert interleaved_last([("cb-8k-gemm", 15), ("cb-4k-gemm", 15)], "cb-2k-gemm") > ssp_2k * 1.02
    assert interleaved_last([("mb-4k-gemv", 40)], "cb-2k-gemm") < ssp_2k * 0.95
    # CB -> 4K GEMV: more; MB -> 8K GEMV: less.
    assert interleaved_last([("cb-8k-gemm", 15), ("cb-4k-gemm", 15)], "mb-4k-gemv") > ssp_4k_gemv * 1.03
    assert interleaved_last([("mb-4k-gemv", 40), ("mb-2k-gemv", 40)], "mb-8k-gemv") < ssp_8k_gemv * 0.98
    # CB -> 8K: the power-heavy kernel is barely affected (the paper saw a
    # slight rise), far less than a power-light kernel is.
    heavy = abs(interleaved_last([("cb-2k-gemm", 60)], "cb-8k-gemm") / ssp_8k - 1)
    light = abs(interleaved_last([("mb-4k-gemv", 40)], "cb-2k-gemm") / ssp_2k - 1)
    assert heavy < 0.05 and heavy < light / 2


# ---------------------------------------------------------------- execution-time variation (III)


def test_run_to_run_variation_is_wide_enough_for_binning_to_matter() -> None:
    gpu = sim.SimGPU(seed=11)
    sse = []
    for _ in range(120):
        gpu.idle(20_000_000)
        # A steady execution: its time varies by run (allocation modes),
        # not by where the clocks are in their climb.
        ex = gpu.run("cb-4k-gemm", 25).executions
        sse.append(ex["end_ns"][20] - ex["start_ns"][20])
    d = np.asarray(sse, dtype=float)
    med = np.median(d)
    outside = np.mean(np.abs(d / med - 1) > 0.025)
    # A sizeable minority of runs fall outside a 5%-wide bin around the
    # mode (allocation modes), while the majority share it.
    assert 0.12 < outside < 0.5
    assert np.ptp(d) / med > 0.05


def test_memory_bound_barely_slows_when_clocks_drop() -> None:
    def sse_duration(kernel: str, **params: float) -> float:
        ex = one_run(kernel, 30, seed=5, **params)
        return float(np.median((ex["end_ns"] - ex["start_ns"])[10:]))

    cb_slow = sse_duration("cb-4k-gemm", cap_w=450) / sse_duration("cb-4k-gemm")
    mb_slow = sse_duration("mb-8k-gemv", cap_w=330) / sse_duration("mb-8k-gemv")
    assert cb_slow > 1.10
    assert mb_slow < 1.03


# ---------------------------------------------------------------- from logs alone


def per_execution_log_power(kernel: str, runs: int, executions: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Summed logged total power and log counts per execution index, logs placed by GPU markers only."""
    gpu = sim.SimGPU(seed=seed)
    rng = np.random.default_rng(seed)
    sums = np.zeros(executions)
    counts = np.zeros(executions)
    for _ in range(runs):
        # Idle gaps that are not whole logger periods, so the logger's phase
        # against the run differs from run to run (as FinGraV relies on).
        # Long enough for the package to cool, as a campaign must wait.
        gpu.idle(400_000_000 + int(rng.integers(0, 1_000_000)))
        ex = gpu.run(kernel, executions).executions
        s = gpu.samples()
        s = s[(s["host_ns"] >= ex["host_launch_ns"][0])]
        # Logs carry device-clock ticks (the default logger clock), so they
        # compare directly with the markers.
        idx = np.searchsorted(ex["begin_marker_ticks"], s["source_ts"], side="right") - 1
        ok = (idx >= 0) & (s["source_ts"] <= ex["end_marker_ticks"][np.clip(idx, 0, None)])
        np.add.at(sums, idx[ok], s["total"][ok])
        np.add.at(counts, idx[ok], 1)
    return sums, counts


def logged_mean(sums: np.ndarray, counts: np.ndarray, lo: int, hi: int) -> float:
    assert counts[lo:hi].sum() >= 10, "too few logs in that range to judge"
    return float(sums[lo:hi].sum() / counts[lo:hi].sum())


def test_cb8k_trend_is_visible_in_logs_alone() -> None:
    sums, counts = per_execution_log_power("cb-8k-gemm", 40, 14, seed=21)
    peak = max(logged_mean(sums, counts, i, i + 1) for i in range(3))
    sse = logged_mean(sums, counts, 3, 4)
    assert peak > 1.04 * sse
    assert logged_mean(sums, counts, 9, 14) > sse


def test_cb2k_trend_is_visible_in_logs_alone() -> None:
    sums, counts = per_execution_log_power("cb-2k-gemm", 60, 90, seed=22)
    assert logged_mean(sums, counts, 60, 90) > 1.04 * logged_mean(sums, counts, 3, 10)
