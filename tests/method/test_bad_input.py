"""Generated bad input for the analysis entry points: only documented errors, naming the argument.

Every public function that takes arrays a user brings (make_executions,
validate_executions, stitch_logs, place_logs, fit_clock_map) is fed
hypothesis-generated bad values; the only exception allowed out is
ValueError (its subclasses included) whose message names the argument, and a
result is allowed only when the input was in fact valid. Before these tests,
fractional run ids were truncated, 2**32 wrapped to 0, NaN power gave a
profile without energy and negative power a negative energy.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fingrav_native.clocks import fit_clock_map, host_relative
from fingrav_native.method import place_logs, stitch_logs
from fingrav_native.records import (
    EXECUTION_DTYPE,
    EXECUTION_DTYPE_V1,
    make_executions,
    validate_executions,
    validate_samples,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BAD_NUMBERS = st.sampled_from([math.nan, math.inf, -math.inf, -1.0, -1, 0.5, 2**32 + 0.5, 2**63, 2**64, -(2**63) - 1,
                               1e300, "x", None, True])


class Identity:
    """Logs stamped in host ns already (integer in, integer out: exact at any magnitude)."""

    def to_host(self, ticks):
        return np.asarray(ticks)

    def error_bound_at(self, host_ns):
        return np.full(np.shape(host_ns), 100.0)


def _columns(n=4):
    starts = np.arange(n, dtype=np.int64) * 10_000
    return {"run": list(range(n)), "index": [0] * n, "kernel_id": [0] * n,
            "start_ns": starts.tolist(), "end_ns": (starts + 5_000).tolist()}


def _names_argument(exc: Exception, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"\b{re.escape(n)}\b", str(exc)) for n in names)


# ---------------------------------------------------------------- make_executions


@FAST
@given(col=st.sampled_from(["run", "index", "kernel_id", "start_ns", "end_ns"]), pos=st.integers(0, 3),
       value=BAD_NUMBERS)
def test_make_executions_refuses_bad_values_by_name(col, pos, value):
    cols = _columns()
    cols[col][pos] = value
    try:
        ex = make_executions(**cols)
    except ValueError as exc:
        assert _names_argument(exc, (col, "executions")), str(exc)
        return
    # Accepted: then every value must have been stored exactly, nothing truncated or wrapped.
    assert ex.dtype == EXECUTION_DTYPE
    got = ex[col][pos].item()
    if col.endswith("_ns") and isinstance(value, float):
        assert abs(got - value) <= 0.5, (col, value, got)  # float times: rounded to the ns, as documented
    else:
        assert got == value, (col, value, got)  # (True inside a list of ints is numpy's 1)


@FAST
@given(name=st.sampled_from(["start_err_ns", "end_err_ns"]), value=BAD_NUMBERS)
def test_make_executions_refuses_bad_uncertainties(name, value):
    assume(not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and value >= 0))
    with pytest.raises(ValueError, match=name):
        make_executions(**_columns(), **{name: value})


def test_fractional_and_wrapping_run_ids_are_refused_not_truncated():
    cols = _columns(3)
    cols["run"] = [0.2, 0.7, 1.4]
    with pytest.raises(ValueError, match=r"run: position 0 is 0\.2, not a whole number"):
        make_executions(**cols)
    cols["run"] = [0, 1, 2**32]
    ex = make_executions(**cols)
    assert ex["run"].tolist() == [0, 1, 2**32]  # int64 now: no wrap to 0
    cols["run"] = [0, 1, 2**64]
    with pytest.raises(ValueError, match="run"):
        make_executions(**cols)


def test_duplicate_run_index_pairs_are_refused():
    cols = _columns(4)
    cols["run"] = [0, 0, 1, 1]
    cols["index"] = [0, 0, 0, 1]
    with pytest.raises(ValueError, match="run 0 has execution index 0 more than once"):
        make_executions(**cols)


def test_runs_at_identical_host_times_are_refused():
    cols = _columns(4)
    cols["start_ns"] = [0, 0, 0, 0]
    cols["end_ns"] = [5_000] * 4
    with pytest.raises(ValueError, match="overlap across runs"):
        make_executions(**cols)
    # A profiler trace of several streams may overlap across its one-execution runs.
    ex = np.zeros(4, dtype=EXECUTION_DTYPE)
    ex["run"], ex["end_ns"] = np.arange(4), 5_000
    assert len(validate_executions(ex, exclusive=False)) == 4


def test_epoch_times_are_exact():
    """A 25 us execution at Unix-epoch scale keeps its 25,000 ns (a float64 gave 24,832 or 25,088)."""
    t0 = 1_800_000_000_123_456_789
    ex = make_executions([0], [0], [0], np.array([t0]), np.array([t0 + 25_000]))
    assert int(ex["end_ns"][0] - ex["start_ns"][0]) == 25_000
    with pytest.raises(ValueError, match="start_ns: float64 times .* pass them as int64"):
        make_executions([0], [0], [0], [float(t0)], np.array([t0 + 25_000]))


def test_old_layout_converts_exactly():
    old = np.zeros(2, dtype=EXECUTION_DTYPE_V1)
    old["run"], old["index"], old["start_ns"], old["end_ns"] = [0, 1], [3, 3], [1e6, 3e6], [2e6, 4e6]
    new = validate_executions(old)
    assert new.dtype == EXECUTION_DTYPE
    assert new["start_ns"].tolist() == [1_000_000, 3_000_000]
    old["run"][1] = -1
    with pytest.raises(ValueError, match=r"executions\['run'\]"):
        validate_executions(old)


# ---------------------------------------------------------------- place_logs at epoch scale


def test_place_logs_is_exact_at_epoch_scale():
    """Log placement at 1.8e18 ns errs by < 1 ns (it erred by up to 234 ns through float64)."""
    t0 = 1_800_000_000_000_000_001
    starts = t0 + np.arange(20, dtype=np.int64) * 1_000_000
    ex = make_executions(np.arange(20), np.zeros(20, int), np.zeros(20, int), starts, starts + 25_000)
    s = np.zeros(20, dtype=[("source_ts", "<i8"), ("total", "<f4")])
    offsets = np.arange(20, dtype=np.int64) * 1_237 % 25_000
    s["source_ts"] = starts + offsets
    s["total"] = 100.0
    loi = place_logs(s, ex, Identity())
    assert np.array_equal(loi["toi_ns"], offsets.astype(float))
    assert np.array_equal(loi["duration_ns"], np.full(20, 25_000.0))
    assert np.array_equal(loi["host_ns"], s["source_ts"])


def test_float_epoch_maps_are_refused_not_rounded():
    class FloatMap:
        def to_host(self, ticks):
            return np.asarray(ticks, dtype=np.float64)

    with pytest.raises(ValueError, match="logger_map: to_host.. returns float64 host times .* beyond 2..53"):
        host_relative(FloatMap(), np.array([1_800_000_000_000_000_000]), 1_800_000_000_000_000_000, "logger_map")


# ---------------------------------------------------------------- stitch_logs


def _campaign(n_runs=60, power=300.0):
    starts = np.arange(n_runs, dtype=np.int64) * 10_000_000
    ex = make_executions(np.arange(n_runs), np.zeros(n_runs, int), np.zeros(n_runs, int), starts, starts + 100_000)
    logs = np.zeros(n_runs, dtype=[("source_ts", "<i8"), ("total", "<f4"), ("compute", "<f4")])
    rng = np.random.default_rng(0)
    logs["source_ts"] = starts + rng.integers(0, 100_000, n_runs)
    logs["total"] = power + rng.normal(0.0, 1.0, n_runs)  # a sensor that reads one value throughout is warned of
    logs["compute"] = np.nan  # a channel the backend does not report
    return logs, ex


def test_stitch_logs_baseline_is_valid():
    logs, ex = _campaign()
    p = stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)
    assert p.energy["total"].energy_j > 0


@pytest.mark.parametrize(("duration_ns", "table_margin"), [(100_000, 0.05), (500_000, 0.02)])
def test_stitch_logs_without_a_margin_takes_table_is(duration_ns, table_margin):
    # One margin policy: no margin means the paper's Table I for the executions' duration, exactly
    # as if that margin were given (5 % for 50-200 us, 2 % for 200 us-1 ms).
    n = 60
    starts = np.arange(n, dtype=np.int64) * 10_000_000
    rng = np.random.default_rng(1)
    ends = starts + duration_ns + rng.integers(-duration_ns // 40, duration_ns // 40, n)
    ex = make_executions(np.arange(n), np.zeros(n, int), np.zeros(n, int), starts, ends)
    logs = np.zeros(n, dtype=[("source_ts", "<i8"), ("total", "<f4")])
    logs["source_ts"] = starts + rng.integers(0, duration_ns, n)
    logs["total"] = 300.0 + rng.normal(0, 5, n)
    default = stitch_logs(logs, ex, Identity(), execution_of_interest=0)
    given = stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=table_margin)
    np.testing.assert_array_equal(default.golden.run_ids, given.golden.run_ids)
    other = stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.005)
    assert len(other.golden.run_ids) < len(default.golden.run_ids)  # the margin really is used


@FAST
@given(channel=st.sampled_from(["total", "compute"]),
       value=st.sampled_from([math.nan, math.inf, -math.inf, -19.6, -1e-3]),
       share=st.sampled_from(["one", "all"]))
def test_stitch_logs_refuses_non_power_values(channel, value, share):
    logs, ex = _campaign()
    if channel == "compute":
        logs["compute"] = 50.0
    if share == "all":
        logs[channel] = value
    else:
        logs[channel][7] = value
    if channel == "compute" and share == "all" and math.isnan(value):
        # An all-NaN sub-channel is one the backend does not report: allowed, the total still stands.
        stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)
        return
    if channel == "compute" and share == "one" and math.isnan(value):
        stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)
        return
    with pytest.raises(ValueError, match=rf"samples: {channel} has \d+ of 60 values that are not a power"):
        stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)


@FAST
@given(arg=st.sampled_from(["margin", "execution_of_interest", "kernel_id", "label", "attribution", "sensor"]),
       value=BAD_NUMBERS)
def test_stitch_logs_refuses_bad_arguments_by_name(arg, value):
    logs, ex = _campaign()
    kwargs = {"execution_of_interest": 0, "margin": 0.05, arg: value}
    if arg == "execution_of_interest" and value == -1:
        return  # valid: each run's last execution
    if arg == "kernel_id" and value in (-1, None):
        return  # a valid id (no execution of it: refused below) or "all kernels"
    if arg == "sensor" and value is None or arg == "label" and isinstance(value, str):
        return
    if arg == "margin" and (value == 0.5 or value is None):
        return  # valid: a margin in (0, 1), or None for Table I's
    with pytest.raises(ValueError) as info:
        stitch_logs(logs, ex, Identity(), **kwargs)
    assert arg in str(info.value) or "executions" in str(info.value), str(info.value)


@FAST
@given(bound=st.sampled_from([math.nan, math.inf, -1.0]), which=st.sampled_from(["start_err_ns", "end_err_ns"]))
def test_stitch_logs_refuses_bad_error_bounds(bound, which):
    logs, ex = _campaign()
    ex[which][3] = bound
    with pytest.raises(ValueError, match="start_err_ns and end_err_ns must be finite and >= 0"):
        stitch_logs(logs, ex, Identity(), execution_of_interest=0, margin=0.05)


@FAST
@given(value=st.sampled_from([math.nan, math.inf, -5.0]), what=st.sampled_from(["bound", "host"]))
def test_stitch_logs_refuses_broken_clock_maps(value, what):
    logs, ex = _campaign()

    class Broken(Identity):
        def to_host(self, ticks):
            out = np.asarray(ticks).astype(np.float64)
            if what == "host":
                out[0] = value
            return out

        def error_bound_at(self, host_ns):
            out = np.full(np.shape(host_ns), 100.0)
            if what == "bound":
                out[0] = value
            return out

    if what == "host" and value == -5.0:
        return  # a valid (if early) host time: the log simply falls outside every execution
    with pytest.raises(ValueError, match="logger_map"):
        stitch_logs(logs, ex, Identity() if False else Broken(), execution_of_interest=0, margin=0.05)


def test_validate_samples_names_the_field():
    s = np.zeros(3, dtype=[("source_ts", "<f8"), ("total", "<f4"), ("window_ns", "<f8")])
    s["source_ts"] = [0, 1, math.nan]
    with pytest.raises(ValueError, match="samples: source_ts must be finite"):
        validate_samples(s)
    s["source_ts"] = [0, 1, 2]
    s["window_ns"] = [0, -1, 0]
    with pytest.raises(ValueError, match="samples: window_ns must be finite and >= 0"):
        validate_samples(s)
    with pytest.raises(ValueError, match="samples: has no total field"):
        validate_samples(np.zeros(3, dtype=[("source_ts", "<i8")]), require_total=True)


# ---------------------------------------------------------------- fit_clock_map


def _brackets(n=64):
    host = 10**12 + np.arange(n, dtype=np.int64) * 5_000_000
    ticks = host // 10
    return np.stack([host - 500, ticks, host + 500], axis=1)


@FAST
@given(arg=st.sampled_from(["tick_ns", "coverage", "wander_ppm_per_s", "resolution_ticks", "max_skew_ppm",
                            "prior_skew_ppm", "select_factor", "min_reads"]),
       value=BAD_NUMBERS)
def test_fit_clock_map_refuses_bad_parameters_by_name(arg, value):
    kwargs = {"tick_ns": 10.0, arg: value}
    try:
        m = fit_clock_map(_brackets(), **kwargs)
    except ValueError as exc:
        assert arg in str(exc), str(exc)
        return
    # Accepted: only for values that make sense.
    assert not isinstance(value, (str, type(None), bool)), (arg, value)
    assert math.isfinite(m.offset_ns) and math.isfinite(m.ns_per_tick)


@FAST
@given(row=st.integers(0, 63), col=st.integers(0, 2),
       value=st.sampled_from([0, -1, 2**62, -(2**62), 2**63 - 1, -(2**63)]))
def test_fit_clock_map_refuses_corrupt_brackets(row, col, value):
    b = _brackets()
    b[row, col] = value
    try:
        m = fit_clock_map(b, tick_ns=10.0)
    except ValueError as exc:
        assert "brackets" in str(exc), str(exc)
        return
    assert math.isfinite(m.offset_ns) and math.isfinite(m.ns_per_tick)
    assert np.all(np.isfinite(m.to_host(b[:, 1])))


@FAST
@given(kind=st.sampled_from(["float", "nan", "shape", "object", "short"]))
def test_fit_clock_map_refuses_malformed_arrays(kind):
    b = _brackets()
    arr = {"float": b.astype(np.float64), "nan": np.where(b > 0, np.nan, 0.0), "shape": b[:, :2],
           "object": b.astype(object).tolist() + [["a", 1, 2]], "short": b[:3]}[kind]
    with pytest.raises(ValueError, match="brackets"):
        fit_clock_map(arr, tick_ns=10.0)
