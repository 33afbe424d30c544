"""Signatures too rare to stitch: a coarse row (one level, fitted jointly) whose interval holds the truth.

The paper's stitch needs many executions of one kernel (Section IV-B steps 5-8); a kernel that runs a few
times in an excerpt has no curve, but every log in (instantaneous) or across (a window) its executions
measures its power. On the closed-form loop (fingrav_native.sim.logged_loop) a few steady executions of the 150 us
attention kernel are relabelled as a kernel of their own: their true energy is the integral of the loop's
power formula over them, which no step of the method sees.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from fingrav_native import SensorModel, profile_trace, sensor_preset
from fingrav_native.insitu import KernelTrace
from fingrav_native.sim import Identity, logged_loop

INSTANT = SensorModel("instant 100 us", "instant", period_ns=100_000.0)
AVG_1MS = sensor_preset("amd-1ms-average")
RARE = "attention_fwd_h128_rare_variant"


def _with_rare(sensor: SensorModel, seed: int, iterations: int = 120) -> tuple[Any, Any, float, int]:
    """A loop whose 3-10 steady attention executions (drawn by ``seed``) are a signature of their own, the trace,
    their true mean energy per execution (J) and how many there are."""
    lp = logged_loop(sensor, seed=seed, iterations=iterations)
    rng = np.random.default_rng([seed, 41])
    ex = lp.executions.copy()
    att = np.flatnonzero((lp.schedule.sig == 2) & (lp.schedule.iteration >= lp.warmup_iterations))
    pick = np.sort(rng.choice(att, size=int(rng.integers(3, 11)), replace=False))
    names = [lp.names[k] for k in ex["kernel_id"]]
    for i in pick:
        names[i] = RARE
    kt = dataclasses.replace(KernelTrace.from_executions(ex, names), steps=lp.trace.steps)
    # The truth: the loop's power formula integrated over each picked execution (1001 points, trapezoids).
    f = np.linspace(0.0, 1.0, 1001)
    s, e = lp.schedule.starts[pick], lp.schedule.ends[pick]
    t = s[:, None] + f[None, :] * (e - s)[:, None]
    energy = np.trapezoid(lp.power(t), t, axis=1) * 1e-9
    return lp, kt, float(np.mean(energy)), len(pick)


def _row(tp: Any) -> Any:
    r = tp.kernels[tp.kernels["name"] == RARE]
    assert len(r) == 1, f"{RARE} has no row: {tp.skipped.get(next((k for k in tp.skipped if RARE in k), ''), '')}"
    return r[0]


def _covered(sensor: SensorModel, seed: int) -> tuple[bool, float]:
    lp, kt, truth, n = _with_rare(sensor, seed)
    tp = profile_trace(kt, lp.samples, Identity(), sensor=sensor)
    r = _row(tp)
    assert r["joint"] and r["count"] == n
    return abs(r["energy_j"] - truth) <= r["energy_half_width_j"], (r["energy_j"] - truth) / truth


@pytest.mark.parametrize("sensor", [INSTANT, pytest.param(AVG_1MS, marks=pytest.mark.slow)],
                         ids=["instant", "1ms-average"])
def test_data_loss_rare_kernel_gets_a_coarse_row_holding_its_energy(sensor: SensorModel) -> None:
    ok, err = _covered(sensor, 0)
    assert ok and abs(err) < 0.05, err


@pytest.mark.slow
@pytest.mark.parametrize("sensor", [
    pytest.param(INSTANT, marks=pytest.mark.xfail(strict=True, reason=(
        "17 of 20: the attention kernel's narrow softmax dip makes its power over phase skewed, and a Student t "
        "interval on the 4-18 logs inside 3-10 executions is too narrow where the dip is missed or hit once"))),
    AVG_1MS], ids=["instant", "1ms-average"])
def test_data_loss_rare_kernel_interval_covers_on_90_percent_of_seeds(sensor: SensorModel) -> None:
    got = [_covered(sensor, seed) for seed in range(20)]
    assert sum(ok for ok, _ in got) >= 18, [round(e, 4) for _, e in got]


def test_unclear_rare_kernel_without_a_log_is_said_and_not_given_a_row() -> None:
    # Logs every 100 us only in the host's pauses: none falls inside the rare kernel, so its level is unknown.
    lp, kt, _, _ = _with_rare(INSTANT, 1)
    ex = kt.executions
    rare = kt.signatures["id"][kt.signatures["name"] == RARE][0]
    t = lp.samples["source_ts"].astype(np.float64) - kt.origin_ns
    inside = np.zeros(len(t), dtype=bool)
    for s, e in zip(ex["start_ns"][ex["kernel_id"] == rare], ex["end_ns"][ex["kernel_id"] == rare]):
        inside |= (t >= s - 1e3) & (t <= e + 1e3)
    tp = profile_trace(kt, lp.samples[~inside], Identity(), sensor=INSTANT)
    assert RARE not in tp.kernels["name"]
    why = next(v for k, v in tp.skipped.items() if k.startswith(RARE + " "))
    assert "fewer than min_executions" in why
    assert any("no log in or across their executions" in w and "not determined" in w for w in tp.warnings)


def test_silently_wrong_rare_kernel_level_counts_no_log_on_an_edge() -> None:
    # Closed form: the rare kernel draws 300 W over [start, end), the rest of the timeline 100 W. Logs on its
    # edges measure the neighbour as much as it (the trace's stamps are rounded to its tick), and the log on
    # the edge two back-to-back executions share belongs to at most one of them: counting it in both drew the
    # level towards 100 W with an interval too narrow to hold 300 W.
    from fingrav_native.insitu._rare import instant_level

    starts = np.array([0.0, 100e3, 110e3, 300e3])
    ends = starts + 10e3
    rng = np.random.default_rng(3)
    inside = np.concatenate([s + np.array([2.5e3, 5e3, 7.5e3]) for s in starts])
    edges = np.array([10e3, 110e3, 120e3, 310e3])  # ends: the idle (or, at 110 us, the next execution) follows
    t = np.concatenate([inside, edges])
    truth = np.where(np.any((t[:, None] >= starts) & (t[:, None] < ends), axis=1), 300.0, 100.0)
    power = truth + rng.normal(0.0, 1.0, len(t))
    level, lo, hi, n = instant_level(t, power, starts, ends)
    assert n == len(inside)
    assert lo <= 300.0 <= hi and abs(level - 300.0) < 2.0


def test_silently_wrong_rare_communication_kernel_beside_compute_gets_its_additive_level() -> None:
    # Closed form: 80 W idle, a GEMM draws 200 W more, an NCCL kernel 60 W more over whatever runs beside it.
    # The NCCL kernel runs 4 times (fewer than min_executions), each across a GEMM and the gap after it. Its
    # coarse row took the mean of the logs with its own 60 W already subtracted: the GEMM's and the idle's power
    # (about 200 W), its energy 3x the 60 W x its duration that CompPow's accounting gives it.
    from fingrav_native._core import SAMPLE_DTYPE
    from fingrav_native.records import EXECUTION_DTYPE

    n_gemm, comm_of = 40, (5, 15, 25, 35)
    ex = np.zeros(n_gemm + len(comm_of), dtype=EXECUTION_DTYPE)
    ex["start_ns"][:n_gemm] = np.arange(n_gemm) * 400_000
    ex["end_ns"][:n_gemm] = ex["start_ns"][:n_gemm] + 300_000
    ex["start_ns"][n_gemm:] = ex["start_ns"][list(comm_of)] + 150_000
    ex["end_ns"][n_gemm:] = ex["start_ns"][n_gemm:] + 500_000
    ex["run"] = ex["index"] = np.arange(len(ex))
    names = ["gemm_bf16"] * n_gemm + ["ncclKernel_AllReduce_RING_LL_Sum_bfloat16"] * len(comm_of)
    kt = KernelTrace.from_executions(ex, names, stream=[7] * n_gemm + [20] * len(comm_of))
    t = np.arange(-1_000_000, int(ex["end_ns"].max()) + 1_000_000, 7_000)
    p = np.full(len(t), 80.0)
    for (s, e), extra in zip(zip(ex["start_ns"], ex["end_ns"]), [200.0] * n_gemm + [60.0] * len(comm_of)):
        p[(t >= s) & (t < e)] += extra
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = t
    logs["total"] = p + np.random.default_rng(5).normal(0.0, 1.0, len(t))
    for ch in ("compute", "io", "memory"):
        logs[ch] = np.nan
    tp = profile_trace(kt, logs, Identity(), align=False)
    r = tp.kernels[tp.kernels["name"] == names[-1]]
    assert len(r) == 1 and r[0]["count"] == len(comm_of)
    truth = 60.0 * 500_000 * 1e-9
    assert abs(r[0]["energy_j"] - truth) <= r[0]["energy_half_width_j"], (r[0]["energy_j"], truth)
