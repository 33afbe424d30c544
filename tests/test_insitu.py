"""In-situ profiling from an application's profiler trace (issue 17, first part): the Kineto reader and profile_trace.

A training loop on the simulated GPU is written out as a torch.profiler
(Kineto) Chrome trace on the Unix-epoch clock; profile_trace reads it back
with the power logs and is scored against the simulator's truth.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native.insitu.kineto import TraceFormatError, read_kineto_trace, write_kineto_trace
from fingrav_native.method.records import SAMPLE_DTYPE
from fingrav_native.sim.device import SimGPU

EPOCH = 1_763_900_000_123_456_789  # a Unix-epoch time in ns: a float64 resolves only 256 ns here


def test_kernel_times_round_trip_exactly_on_the_epoch_clock(tmp_path) -> None:
    starts = [EPOCH + 5, EPOCH + 1_000_001, EPOCH + 2_500_333]
    ends = [EPOCH + 900_007, EPOCH + 1_800_000, EPOCH + 3_000_000]
    for name in ("t.json", "t.json.gz"):
        path = write_kineto_trace(tmp_path / name, ["gemm", "gemv", "gemm"], [(4, 1, 1), (2, 1, 1), (8, 1, 1)],
                                  [(256, 1, 1)] * 3, starts, ends, base_time_ns=EPOCH)
        t = read_kineto_trace(path)
        assert t.origin_ns == starts[0] and t.clock == "unix-epoch"
        assert (t.executions["start_ns"].astype(np.int64) + t.origin_ns).tolist() == starts
        assert (t.executions["end_ns"].astype(np.int64) + t.origin_ns).tolist() == ends
        # One kernel name with two grids: two signatures; the CPU op is ignored.
        assert t.signatures["name"].tolist() == ["gemm", "gemv", "gemm"]
        assert t.executions["kernel_id"].tolist() == [0, 1, 2]
        assert len(t) == 3 and t.device.tolist() == [0, 0, 0]


def test_concurrent_kernels_on_one_device_are_flagged(tmp_path) -> None:
    path = write_kineto_trace(tmp_path / "c.json", ["a", "b", "c"], [(1, 1, 1)] * 3, [(1, 1, 1)] * 3,
                              [EPOCH, EPOCH + 500, EPOCH + 10_000], [EPOCH + 1_000, EPOCH + 2_000, EPOCH + 11_000],
                              base_time_ns=EPOCH)
    assert read_kineto_trace(path).concurrent().tolist() == [True, True, False]


@pytest.mark.parametrize(("doc", "match"), [
    ({"nothing": 1}, "no traceEvents"),
    ({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}, "ProfilerActivity.CUDA"),
    ({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 2}]}, "event 0 has ts='soon'"),
    ({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": -2}]}, "dur=-2"),
    ({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"grid": "big"}}]},
     "args.grid='big'"),
])
def test_malformed_traces_are_refused_by_field(tmp_path, doc, match) -> None:
    path = tmp_path / "bad.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    with pytest.raises(TraceFormatError, match=match):
        read_kineto_trace(path)
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(TraceFormatError, match="not JSON"):
        read_kineto_trace(tmp_path / "junk.json")


#: How the simulator's kernels appear in the trace: one GEMM name launched with two grids.
SIGNATURES = {"cb-4k-gemm": ("gemm", (128, 1, 1)), "cb-2k-gemm": ("gemm", (32, 1, 1)),
              "mb-4k-gemv": ("gemv", (64, 1, 1))}


class _EpochMap:
    """The logger's clock (the simulator's host ns) onto the trace's Unix-epoch clock."""

    def to_host(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, dtype=np.float64) + EPOCH

    def error_bound_at(self, host_ns: np.ndarray) -> np.ndarray:
        return np.full(np.shape(host_ns), 300.0)


def _training_loop(tmp_path, iterations: int = 1500):
    gpu = SimGPU(seed=5)
    rng = np.random.default_rng(5)
    gpu.idle(50_000_000)
    for it in range(iterations):
        gpu.sequence([("cb-4k-gemm", 1), ("mb-4k-gemv", 2), ("cb-2k-gemm", 1)], run=it)
        gpu.idle(int(rng.integers(20_000, 200_000)))  # the host between iterations
        if it % 50 == 49:
            gpu.idle(3_000_000)  # a data-loading pause
    ex = gpu.executions()
    ex = ex[np.argsort(ex["start_ns"], kind="stable")]
    names = [gpu.kernel_names()[k] for k in ex["kernel_id"]]
    path = write_kineto_trace(tmp_path / "loop.json.gz", [SIGNATURES[n][0] for n in names],
                              [SIGNATURES[n][1] for n in names], [(256, 1, 1)] * len(names),
                              ex["start_ns"].astype(np.int64) + EPOCH, ex["end_ns"].astype(np.int64) + EPOCH,
                              base_time_ns=EPOCH)
    logs = gpu.logs()
    samples = np.zeros(len(logs), dtype=SAMPLE_DTYPE)
    samples["source_ts"] = logs["sample_ns"]
    for c in ("total", "compute", "io", "memory"):
        samples[c] = logs[c]
    return gpu, ex, names, path, samples


def test_a_training_loop_is_profiled_per_signature_against_the_truth(tmp_path) -> None:
    gpu, ex, names, path, samples = _training_loop(tmp_path)
    tp = profile_trace(path, samples, _EpochMap())
    k = tp.kernels
    # The two shapes of one GEMM stay apart; rows by descending total energy.
    assert sorted(zip(k["name"].tolist(), k["grid"][:, 0].tolist())) == [("gemm", 32), ("gemm", 128), ("gemv", 64)]
    total = k["count"] * k["energy_j"]
    assert np.all(np.diff(total) <= 0)
    assert k["share"].sum() == pytest.approx(1.0)
    assert tp.concurrent == 0 and not tp.skipped
    for row, ep in zip(k, tp.profiles):
        # Truth: the energy of the golden executions the profile used (trace ids are start order).
        assert ep.golden.run_ids is not None
        sel = ex[ep.golden.run_ids]
        assert {names[i] for i in ep.golden.run_ids} == {n for n, s in SIGNATURES.items()
                                                        if s == (row["name"], tuple(int(g) for g in row["grid"]))}
        truth = np.mean([gpu.truth_power(np.arange(int(e["start_ns"]), int(e["end_ns"]), 500, dtype=np.int64))[:, 0]
                         .mean() * (e["end_ns"] - e["start_ns"]) * 1e-9 for e in sel])
        assert row["energy_j"] == pytest.approx(truth, rel=0.03), (row, truth)
        assert row["energy_half_width_j"] > 0
    assert "gemm" in str(tp)


def test_profile_trace_refuses_bad_arguments(tmp_path) -> None:
    _, _, _, path, samples = _training_loop(tmp_path, iterations=30)
    with pytest.raises(ValueError, match="margin"):
        profile_trace(path, samples, _EpochMap(), margin=2.0)
    with pytest.raises(ValueError, match="min_executions"):
        profile_trace(path, samples, _EpochMap(), min_executions=1)
    with pytest.raises(ValueError, match="no kernel signature could be profiled"):
        profile_trace(path, samples, _EpochMap(), min_executions=10_000)


@pytest.mark.optional
def test_the_reader_pins_the_real_exporters_layout(tmp_path) -> None:
    # torch.profiler on CPU activities only: the exporter's file layout
    # (traceEvents, baseTimeNanoseconds) without a GPU; no kernel is said so.
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(torch.ones(64, 64), torch.ones(64, 64))
    path = str(tmp_path / "cpu.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        doc = json.load(f)
    assert isinstance(doc["traceEvents"], list) and "baseTimeNanoseconds" in doc
    with pytest.raises(TraceFormatError, match="ProfilerActivity.CUDA"):
        read_kineto_trace(path)
