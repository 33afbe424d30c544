"""Do the stated 95 % energy intervals hold the truth 95 % of the time? Measured on closed-form curves.

A kernel's power is a known function of its progress (a fast rise from idle, a plateau, a last partial wave
that drops: a GEMM's shape), so its energy per execution is exact; logs land at random phases with white
noise, as a free-running logger against runs released at random. Each test counts, over many seeds, how
often the interval the package states covers that energy, with few LOIs (most of the execution interpolated)
and with many (none interpolated).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.method import energy_per_execution, stitch
from fingrav_native.records import LOI_DTYPE

T_NS = 1_000_000.0  # a 1 ms execution: Table I's 10 us bins, 100 of them
TAU = 0.06          # the rise from idle, as a fraction of the execution
DROP_AT = 0.85      # the last partial wave starts here and draws 200 W less


def power(u: np.ndarray) -> np.ndarray:
    """The closed-form curve (W) at progress ``u`` in [0, 1]."""
    u = np.clip(u, 0.0, 1.0)
    return 150.0 + 350.0 * (1.0 - np.exp(-u / TAU)) - 200.0 * (u > DROP_AT)


#: Its energy per execution (J), integrated by hand.
TRUE_J = (500.0 - 350.0 * TAU * (1.0 - math.exp(-1.0 / TAU)) - 200.0 * (1.0 - DROP_AT)) * T_NS * 1e-9


def covered(n_lois: int, seeds: range, noise_w: float = 0.5) -> tuple[float, float]:
    """Share of seeds whose stated interval holds TRUE_J, and the median half-width relative to it."""
    hits, widths = 0, []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        toi = rng.uniform(0.0, T_NS, n_lois)
        lois = np.zeros(n_lois, dtype=LOI_DTYPE)
        lois["toi_ns"], lois["toi_frac"], lois["duration_ns"] = toi, toi / T_NS, T_NS
        lois["run"] = np.arange(n_lois)
        lois["total"] = power(toi / T_NS) + rng.normal(0.0, noise_w, n_lois)
        for c in ("compute", "io", "memory"):
            lois[c] = np.nan
        est = energy_per_execution(stitch(lois, channels=("total",), smoother=None)["total"], T_NS)
        hits += abs(est.energy_j - TRUE_J) <= est.uncertainty_j
        widths.append(est.uncertainty_j / TRUE_J)
    return hits / len(seeds), float(np.median(widths))


def test_silently_wrong_interval_when_most_of_the_execution_is_interpolated_covers_the_truth():
    # 60 LOIs in 100 bins: about 55 % of the execution has none. Interpolating across the rise and the drop
    # is off by several stated half-widths unless the interval counts what interpolation can miss.
    share, width = covered(60, range(40))
    assert share >= 0.9, share
    assert width < 0.1, width  # wider than the noise alone, not unbounded


def test_interval_with_every_bin_filled_covers_the_truth_and_stays_narrow():
    share, width = covered(2_000, range(40))
    assert share >= 0.85, share
    assert width < 0.005, width


@pytest.mark.slow
@pytest.mark.parametrize("n_lois", [30, 60, 150, 2_000])
def test_interval_coverage_at_its_level_over_many_seeds(n_lois):
    share, _ = covered(n_lois, range(300))
    assert share >= 0.92, (n_lois, share)


class Identity:
    def to_host(self, t):
        return np.asarray(t, dtype=np.float64)

    def error_bound_at(self, h):
        return np.zeros_like(np.asarray(h, dtype=np.float64))


def campaign(seed: int, runs: int = 60, execs: int = 8, gap_ns: int = 20_000, noise_w: float = 0.5):
    """A campaign's arrays: ``runs`` runs of ``execs`` executions, a 1 ms logger free-running at a random phase."""
    rng = np.random.default_rng(seed)
    period = int(T_NS) + gap_ns
    t0 = np.arange(runs, dtype=np.int64) * 50_000_000 + rng.integers(0, 1_000, runs)
    run = np.repeat(np.arange(runs), execs)
    index = np.tile(np.arange(execs), runs)
    start = t0[run] + index * period
    ex = fg.make_executions(run, index, np.zeros_like(run), start, start + int(T_NS))
    span_logs = execs * period // 1_000_000
    off = rng.integers(0, 1_000_000, runs)[:, None] + np.arange(span_logs)[None, :] * 1_000_000
    into = (off % period) / T_NS
    logs = np.zeros(off.size, dtype=[("source_ts", "<i8"), ("total", "<f4")])
    logs["source_ts"] = (t0[:, None] + off).ravel()
    logs["total"] = (np.where(into <= 1, power(into), 120.0) + rng.normal(0.0, noise_w, off.shape)).ravel()
    return logs, ex


@pytest.mark.slow
def test_silently_wrong_stitch_logs_interval_covers_a_closed_form_kernel_over_many_seeds():
    hits, interpolated = 0, []
    seeds = range(100)
    for seed in seeds:
        logs, ex = campaign(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = fg.stitch_logs(logs, ex, Identity(), execution_of_interest=4).energy["total"]
        hits += abs(e.energy_j - TRUE_J) <= e.uncertainty_j
        interpolated.append(e.interpolated_share)
    assert float(np.median(interpolated)) > 0.4  # the case asked about: most of the execution interpolated
    assert hits / len(seeds) >= 0.92, hits / len(seeds)


def test_silently_wrong_stitch_logs_interval_on_a_mostly_interpolated_kernel():
    # One campaign of 60 runs, as a user would run it: the note says half the execution was interpolated,
    # and the interval must then still hold the truth.
    fails = 0
    for seed in range(3):
        logs, ex = campaign(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            e = fg.stitch_logs(logs, ex, Identity(), execution_of_interest=4).energy["total"]
        assert e.interpolated_share > 0.3 and "interpolated" in e.note
        fails += abs(e.energy_j - TRUE_J) > e.uncertainty_j
    assert fails == 0


# ---------------------------------------------------------------- logs that are not independent measurements


def test_silently_wrong_interval_from_logs_given_twice_is_counted_once_and_warned():
    logs, ex = campaign(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        once = fg.stitch_logs(logs, ex, Identity(), execution_of_interest=4)
    with pytest.warns(fg.method.LogQualityWarning, match=r"samples: 480 of 960 logs repeat .* counted once"):
        twice = fg.stitch_logs(np.concatenate([logs, logs]), ex, Identity(), execution_of_interest=4)
    assert len(twice.lois) == len(once.lois)
    assert twice.energy["total"].uncertainty_j == once.energy["total"].uncertainty_j
    # Each log twice in a row (a reader polling faster than the sensor updates) is the same case.
    with pytest.warns(fg.method.LogQualityWarning, match="counted once"):
        doubled = fg.stitch_logs(np.repeat(logs, 2), ex, Identity(), execution_of_interest=4)
    assert doubled.energy["total"].uncertainty_j == once.energy["total"].uncertainty_j


@pytest.mark.parametrize("value", [0.0, 250.0])
def test_unclear_logs_of_one_value_are_warned_not_a_zero_width_measurement(value):
    logs, ex = campaign(2)
    logs["total"] = value
    with pytest.warns(fg.method.LogQualityWarning, match="total is " + ("zero" if value == 0 else "250 W")):
        fg.stitch_logs(logs, ex, Identity(), execution_of_interest=4)


def test_unclear_log_stamps_in_microseconds_against_executions_in_ns_are_refused_with_the_factor():
    logs, ex = campaign(3, runs=200)
    us = logs.copy()
    us["source_ts"] //= 1_000
    with pytest.raises(ValueError, match=r"samples, executions: .* reach 1 of their 200 runs.*1e-3 times"):
        fg.stitch_logs(us, ex, Identity(), execution_of_interest=4)
    late = logs.copy()
    late["source_ts"] *= 1_000
    with pytest.raises(fg.method.NoLogsInExecutionsError, match=r"logs on host time .* 1e\+3 times"):
        fg.stitch_logs(late, ex, Identity(), execution_of_interest=4)


def test_short_runs_that_few_logs_reach_are_not_taken_for_a_unit_mismatch():
    # A 20 us kernel, one execution per run, a 1 ms logger: most runs hold no log, as the method expects.
    rng = np.random.default_rng(5)
    n = 400
    starts = np.arange(n, dtype=np.int64) * 3_000_000 + rng.integers(0, 1_000_000, n)
    ex = fg.make_executions(np.arange(n), np.zeros(n, int), np.zeros(n, int), starts, starts + 20_000)
    logs = np.zeros(n * 3, dtype=[("source_ts", "<i8"), ("total", "<f4")])
    logs["source_ts"] = np.arange(n * 3, dtype=np.int64) * 1_000_000 + 417
    logs["total"] = 300.0 + rng.normal(0.0, 2.0, n * 3)
    p = fg.stitch_logs(logs, ex, Identity(), execution_of_interest=0)
    assert 0 < len(np.unique(p.lois["run"])) < n // 10


def test_silently_wrong_interval_when_one_bin_holds_every_loi_is_nan_and_says_so():
    # Ten LOIs in the first 10 us of a 100 us execution: nothing tells what the other 90 us drew.
    lois = np.zeros(10, dtype=LOI_DTYPE)
    lois["toi_ns"] = np.linspace(500.0, 9_500.0, 10)
    lois["duration_ns"] = 100_000.0
    lois["total"] = 300.0 + np.arange(10) % 3
    for c in ("compute", "io", "memory"):
        lois[c] = np.nan
    est = energy_per_execution(stitch(lois, channels=("total",), smoother=None)["total"], 100_000.0)
    assert math.isnan(est.uncertainty_j) and "one bin" in est.note


def test_silently_wrong_bin_intervals_from_lois_given_twice_are_counted_once_and_warned():
    # 60 LOIs in 100 bins: most bins hold one LOI, which given twice has a standard deviation of zero.
    rng = np.random.default_rng(7)
    toi = rng.uniform(0.0, T_NS, 60)
    lois = np.zeros(60, dtype=LOI_DTYPE)
    lois["toi_ns"], lois["toi_frac"], lois["duration_ns"], lois["run"] = toi, toi / T_NS, T_NS, np.arange(60)
    lois["total"] = power(toi / T_NS) + rng.normal(0.0, 0.5, 60)
    for c in ("compute", "io", "memory"):
        lois[c] = np.nan
    once = energy_per_execution(stitch(lois, channels=("total",), smoother=None)["total"], T_NS)
    with pytest.warns(fg.method.LogQualityWarning, match=r"lois: 60 of 120 records repeat .* counted once"):
        twice = stitch(np.concatenate([lois, lois]), channels=("total",), smoother=None)["total"]
    assert twice.n_lois == 60
    assert energy_per_execution(twice, T_NS).uncertainty_j == once.uncertainty_j


# ---------------------------------------------------------------- the campaign path, against the simulator's truth


def sim_campaign_covers(kernel: str, runs: int, seeds: range, sensor: str | None = None) -> float:
    """Share of simulated campaigns whose stated energy interval holds the golden executions' true mean energy."""
    hits = 0
    for seed in seeds:
        backend = fg.backends.SimBackend(seed=seed) if sensor is None else fg.backends.SimBackend(seed=seed,
                                                                                                 sensor=sensor)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # few runs: the LOI shortfall is warned, and is not what is tested
            sse = fg.profile(kernel, backend, mode="sse", runs=runs, top_up=False).profiles["sse"]
        ex = backend.gpu.executions()
        golden = ex[np.isin(ex["run"], sse.golden.run_ids) & (ex["index"] == sse.execution_index)]
        e = sse.energy["total"]
        hits += abs(e.energy_j - float(np.mean(golden["energy_j"]))) <= e.uncertainty_j
    return hits / len(seeds)


def test_silently_wrong_campaign_interval_leaves_out_the_duration_error():
    # A 62 us GEMV: its markers add ~1.2 us (2 %) to every measured duration, several times the noise interval.
    assert sim_campaign_covers("mb-8k-gemv", 30, range(2)) == 1.0


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "runs"), [("mb-8k-gemv", 30), ("mb-8k-gemv", 120), ("cb-4k-gemm", 30),
                                              ("cb-4k-gemm", 120)])
def test_campaign_interval_coverage_on_the_simulator(kernel, runs):
    assert sim_campaign_covers(kernel, runs, range(20)) >= 0.9


@pytest.mark.slow
def test_silently_wrong_deconvolved_campaign_interval_leaves_out_the_duration_error():
    # A 1 ms averaging sensor: the curve is deconvolved, and the GEMV's lengthened duration biases it alike.
    assert sim_campaign_covers("mb-8k-gemv", 120, range(10), sensor="amd-1ms-average") >= 0.9


@pytest.mark.slow
def test_silently_wrong_part_time_sensor_campaign_interval_covers_the_truth():
    # Under a window ~70x the kernel (NVIDIA's part-time 25 ms every 100 ms) every window holding the execution of
    # interest holds the warm-up executions before it, whose durations vary 11-14 % over runs at nearly one energy
    # (a cold execution runs longer at lower power); the steered launch puts the window's edge in the execution of
    # interest by those durations. Drawn at their index's power, their energy grew with their duration and the
    # error landed in the execution of interest: +4 to +25 % over seeds, 7 of 10 covered.
    assert sim_campaign_covers("cb-4k-gemm", 120, range(10), sensor="part-time-100ms") >= 0.9
