"""A window declared per log (``window_ns``) or by a sensor model is one window: the same logs, one answer."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native.app import simulate_training_loop
from fingrav_native.sensors import SensorModel

MS_AVERAGE = SensorModel("1 ms average", "window", period_ns=1e6, window_ns=1e6)


def _energies(trace, capture) -> dict[tuple[str, int], float]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short loop: its LOI shortfall is warned alike in both, and not tested
        tp = profile_trace(trace, capture, min_executions=20)
    return {(str(r["name"]), int(r["grid"][0])): float(r["energy_j"]) for r in tp.kernels}


@pytest.mark.slow
def test_silently_wrong_a_window_declared_by_the_model_gives_the_answer_of_one_declared_per_log(tmp_path) -> None:
    # The same 1 ms average logs gave energies up to 6 % apart (the GEMV) when their windows were declared by
    # SensorModel(kind="window", window_ns=1e6) instead of per log: placing the logs read a 0 window as an instant.
    loop = simulate_training_loop(60, seed=2, pause_every=0, sensor="amd-1ms-average")
    cap = loop.capture()
    trace = loop.write_trace(tmp_path / "t.json")
    per_log = cap.samples.copy()
    per_log["window_ns"] = 1e6
    undeclared = per_log.copy()
    undeclared["window_ns"] = 0.0
    a = _energies(trace, dataclasses.replace(cap, samples=per_log, sensor=None))
    b = _energies(trace, dataclasses.replace(cap, samples=undeclared, sensor=MS_AVERAGE))
    assert a.keys() == b.keys() and len(a) >= 2
    for key, e in a.items():
        assert b[key] == pytest.approx(e, rel=0.005), key


def test_logs_with_windows_fills_only_what_a_log_leaves_undeclared() -> None:
    from fingrav_native.method._deconvolve import logs_with_windows

    logs = np.zeros(3, dtype=[("source_ts", "<i8"), ("window_ns", "<u4"), ("total", "<f4")])
    logs["window_ns"] = [0, 5_000, 0]
    out = logs_with_windows(logs, MS_AVERAGE)
    assert out.dtype.names == logs.dtype.names and out["window_ns"].tolist() == [1e6, 5e3, 1e6]
    bare = logs_with_windows(logs[["source_ts", "total"]], MS_AVERAGE)
    assert bare["window_ns"].tolist() == [1e6] * 3
    instant = SensorModel("instant", "instant", period_ns=1e6)
    assert logs_with_windows(logs, instant) is logs and logs_with_windows(logs, None) is logs
