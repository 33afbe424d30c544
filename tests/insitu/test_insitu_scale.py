"""profile_trace's shortcuts for long traces give the very profile the plain steps give.

At 10^6 kernels each signature's placement paid for every
log of the capture (40 signatures, 210 000 logs each), and the iteration
energy's bootstrap drew 999 x 17 858 indices at once. Each signature now
gets only the logs near its executions, and the bootstrap runs in batches;
here both must leave the TraceProfile exactly as it was.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fingrav_native import profile_trace
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.insitu import KernelTrace, _signatures, _summary
from fingrav_native.records._layouts import lex_order
from fingrav_native.sim import SIGNATURES, EpochIdentity, LoopSchedule, draw_schedule

EPOCH = 1_763_900_000_000_000_000


def _loop(kernels: int, layers: int = 4, seed: int = 3) -> tuple[KernelTrace, np.ndarray]:
    """The simulator's loop as a trace of ``layers`` x 5 signatures, and instantaneous 1 ms logs of it."""
    rng = np.random.default_rng(seed)
    starts, ends, sig, it, level, pause_after, end = draw_schedule(
        rng, kernels // 7, duration_jitter=0.005, pause_ns=300_000.0, pause_jitter=0.1, warmup=0.04,
        warmup_iterations=20, lead_ns=2e6, gap_range_ns=(2_000.0, 8_000.0))
    sc = LoopSchedule(starts, ends, sig, it, level, pause_after, record_end_ns=float(end), idle_w=120.0, gap_w=180.0,
                      gap_tau_ns=2_000.0, pause_tau_ns=50_000.0, drift_w_per_s=0.0, max_power_w=750.0)
    s = EPOCH + np.round(starts).astype(np.int64)
    e = EPOCH + np.round(ends).astype(np.int64)
    layer = it % layers
    bounds = np.flatnonzero(np.diff(it // layers, prepend=-1))
    steps = [(k, int(s[b]) - 1_000, int(s[bounds[k + 1]]) - 1_000 if k + 1 < len(bounds) else int(e[-1]) + 1_000)
             for k, b in enumerate(bounds)]
    kt = KernelTrace.from_rows(s, e, [SIGNATURES[g][0] for g in sig], [(64 * (1 + x), 1, 1) for x in layer],
                               [(256, 1, 1)] * len(s), clock="unix-epoch", source="loop", launch_ns=s - 20_000,
                               steps=steps)
    t = np.arange(0.0, end, 1e6) + 137.0
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = EPOCH + np.round(t).astype(np.int64)
    logs["seq"] = np.arange(len(t))
    logs["total"] = sc.power(t) + rng.normal(0.0, 2.0, len(t))
    for ch in ("compute", "io", "memory"):
        logs[ch] = np.nan
    return kt, logs


def _same(a: Any, b: Any) -> bool:
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (a.tobytes() == b.tobytes() or (
            a.dtype.kind == "f" and np.array_equal(a, b, equal_nan=True)))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    return bool(a == b)


@pytest.fixture(scope="module")
def loop() -> tuple[KernelTrace, np.ndarray]:
    return _loop(6_000)


def test_each_signature_placed_on_the_logs_near_it_profiles_as_on_all_logs(loop, monkeypatch) -> None:
    kt, logs = loop
    fast = profile_trace(kt, logs, EpochIdentity())
    assert len(fast.kernels) == 20 and fast.summary is not None
    # Without a seq field the logs' positions are their ids: every signature then sees every log, as before.
    plain = np.zeros(len(logs), dtype=[(n, logs.dtype[n]) for n in logs.dtype.names if n != "seq"])
    for n in plain.dtype.names:
        plain[n] = logs[n]
    whole = profile_trace(kt, plain, EpochIdentity())
    assert _same(fast, whole)
    # And the shortcut really hands each signature a fraction of the capture.
    sizes = []
    around = _signatures.NearLogs.around
    monkeypatch.setattr(_signatures.NearLogs, "around", lambda self, ex: sizes.append(len(r := around(self, ex))) or r)
    profile_trace(kt, logs, EpochIdentity())
    assert len(sizes) == 20 and max(sizes) < 0.5 * len(logs), sizes


def test_logs_with_a_nan_anywhere_are_refused_whole(loop) -> None:
    kt, logs = loop
    bad = logs.copy()
    bad["total"][-1] = np.nan  # after the last kernel: near no signature's executions
    with pytest.raises(ValueError, match="samples: .*total"):
        profile_trace(kt, bad, EpochIdentity())


def test_the_iteration_bootstrap_in_batches_draws_the_same_resamples(loop, monkeypatch) -> None:
    kt, logs = loop
    batched = profile_trace(kt, logs, EpochIdentity())
    bootstrap = _summary.stats.bootstrap

    def at_once(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("batch")
        return bootstrap(*args, **kwargs)

    monkeypatch.setattr(_summary.stats, "bootstrap", at_once)
    whole = profile_trace(kt, logs, EpochIdentity())
    assert batched.summary is not None and whole.summary is not None
    assert batched.summary.iterations >= 10 and np.isfinite(batched.summary.energy_half_width_j)
    assert batched.summary == whole.summary


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), max_size=40), st.booleans())
def test_records_in_order_skip_the_sort_and_get_lexsorts_order(pairs, presort) -> None:
    # validate_executions and place_logs order records by (run, start): sorted input (every in-situ signature's
    # executions) skips the two sorts, any input gets np.lexsort's stable order.
    if presort:
        pairs = sorted(pairs)
    p = np.array([a for a, _ in pairs], dtype=np.int64)
    s = np.array([b for _, b in pairs], dtype=np.int64)
    assert lex_order(s, p).tolist() == np.lexsort((s, p)).tolist()


def test_slow_placement_once_per_signature_is_one_pass_for_all_with_the_same_profile(loop, monkeypatch) -> None:
    # Each signature placed the logs in its executions twice (its warm-up, then its golden
    # runs), each a validation, a sort and a search of its own: 600 placements for a 300-signature trace. One
    # placement over the merged timeline now serves every signature's warm-up and golden runs, with the very
    # records each placement alone gives (a pair's record depends on its log and its execution only).
    kt, logs = loop
    calls: list[int] = []
    place = _signatures.place_logs
    monkeypatch.setattr(_signatures, "place_logs", lambda *a, **k: calls.append(1) or place(*a, **k))
    shared = profile_trace(kt, logs, EpochIdentity())
    assert len(shared.kernels) == 20 and not calls
    monkeypatch.setattr(_signatures, "_placed_by_signature", lambda *a: {})
    alone = profile_trace(kt, logs, EpochIdentity())
    assert len(calls) == 20  # the warm-up's placement, one per signature (the golden runs' are stitch_logs')
    assert _same(shared, alone)


def test_slow_placement_of_kernels_that_overlap_others_gives_each_its_own_records(monkeypatch) -> None:
    # An all-reduce beside the compute kernels (instantaneous logs: the compute it overlaps is kept, its level
    # subtracted): executions of different signatures overlap on the merged timeline, and each signature's
    # records must still be those its own placement gives.
    from fingrav_native import SensorModel
    from fingrav_native.sim import Identity, logged_loop

    instant = SensorModel("instant 100 us", "instant", period_ns=100_000.0)
    lp = logged_loop(instant, seed=5, iterations=200, communication_w=60.0)
    shared = profile_trace(lp.trace, lp.samples, Identity(), sensor=instant, align=False)
    monkeypatch.setattr(_signatures, "_placed_by_signature", lambda *a: {})
    alone = profile_trace(lp.trace, lp.samples, Identity(), sensor=instant, align=False)
    assert int(np.sum(lp.trace.concurrent())) > 0 and len(shared.kernels) >= 5
    assert _same(shared, alone)


def test_slow_placement_shared_by_signatures_is_redone_for_logs_given_twice(loop, monkeypatch) -> None:
    # Logs given twice are counted once per signature (stitch_logs' rule): the records placed from the logs as
    # given must then not be used, or each log would count twice after all.
    import warnings

    kt, logs = loop
    twice = np.sort(np.concatenate([logs, logs]), order="seq", kind="stable")

    def run() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tp = profile_trace(kt, twice, EpochIdentity())
        assert any("counted once" in str(w.message) for w in caught)
        return tp

    shared = run()
    monkeypatch.setattr(_signatures, "_placed_by_signature", lambda *a: {})
    assert _same(shared, run())
