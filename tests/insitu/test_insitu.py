"""In-situ profiling from an application's profiler trace: the Kineto reader, profile_trace, the
timeline deconvolution, the logs' alignment, the Perfetto export and `fingrav trace`.

A training loop on the simulated GPU is written out as a torch.profiler
(Kineto) Chrome trace on the Unix-epoch clock with the power capture a
recorder would have saved; profile_trace reads them back and is scored
against the simulator's truth.
"""

from __future__ import annotations

import gzip
import json
import time

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.app import _cli as cli
from fingrav_native.app import simulate_training_loop
from fingrav_native.files import (
    insitu_trace_events,
    load_capture,
    read_kineto_trace,
    read_rocprof_kernel_trace,
    write_kineto_trace,
)
from fingrav_native.insitu import KernelTrace, TraceFormatError, align_logs_to_trace
from fingrav_native.method import fit_timeline
from fingrav_native.records import EXECUTION_DTYPE
from fingrav_native.sensors import SensorModel

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


def test_steps_and_launches_assign_kernels_to_iterations(tmp_path) -> None:
    # Kernel 2 runs during step 1's CPU time but was launched in step 0: it is step 0's.
    path = write_kineto_trace(tmp_path / "s.json", ["a", "b", "c"], [(1, 1, 1)] * 3, [(1, 1, 1)] * 3,
                              [EPOCH + 100, EPOCH + 2_000, EPOCH + 10_500], [EPOCH + 1_000, EPOCH + 10_200,
                                                                              EPOCH + 11_000],
                              base_time_ns=EPOCH, launch_ns=[EPOCH, EPOCH + 50, EPOCH + 10_100],
                              steps=[(EPOCH - 10, EPOCH + 9_000), (EPOCH + 9_000, EPOCH + 20_000)])
    t = read_kineto_trace(path)
    assert t.steps["step"].tolist() == [0, 1]
    assert (t.launch_ns + t.origin_ns).tolist() == [EPOCH, EPOCH + 50, EPOCH + 10_100]
    assert t.iteration().tolist() == [0, 0, 1]
    # Without launch records, the kernel's own start decides.
    bare = write_kineto_trace(tmp_path / "b.json", ["a"], [(1, 1, 1)], [(1, 1, 1)], [EPOCH + 9_500],
                              [EPOCH + 9_600], base_time_ns=EPOCH, steps=[(EPOCH, EPOCH + 9_000)])
    assert read_kineto_trace(bare).iteration().tolist() == [-1]


def _truth_iteration_energy(loop, tp) -> float:
    """Mean true energy of the steady iterations (trace times back to the simulator's host clock)."""
    out = []
    for r in tp.iterations[tp.iterations["steady"]]:
        e = np.array([r["start_ns"], r["end_ns"]], dtype=np.int64) + tp.trace.origin_ns - loop.epoch_offset_ns
        h = e - np.rint(loop.epoch_slew_ppm * 1e-6 * e.astype(np.float64)).astype(np.int64)
        t = np.arange(h[0], h[1], 2000, dtype=np.int64)
        out.append(float(loop.gpu.truth_power(t)[:, 0].sum()) * 2e-6)
    return float(np.mean(out))


def _check_against_truth(loop, tp, rel: float) -> None:
    k = tp.kernels
    # The two shapes of one GEMM stay apart; rows by descending total energy.
    assert sorted(zip(k["name"].tolist(), k["grid"][:, 0].tolist())) == [("gemm", 32), ("gemm", 128), ("gemv", 64)]
    assert np.all(np.diff(k["count"] * k["energy_j"]) <= 0)
    assert k["share"].sum() == pytest.approx(1.0)
    assert tp.concurrent == 0 and not tp.skipped
    presets = {(x.name, x.grid[0]): x.preset for x in loop.kernels}
    names = [loop.kernels[i].preset for i in loop.signature]
    for row, ep in zip(k, tp.profiles):
        ids = ep.golden.run_ids
        # Trace ids are start order, as the loop's executions are.
        assert {names[i] for i in ids} == {presets[(row["name"], int(row["grid"][0]))]}
        truth = loop.truth_energy_j(ids)
        assert row["energy_j"] == pytest.approx(truth, rel=rel), (row, truth)
        assert row["energy_half_width_j"] > 0
    assert k["warmup"].max() > 0  # the loop starts cold


@pytest.mark.slow
def test_a_training_loop_logged_in_the_loggers_own_clock_is_within_3_percent_per_signature(tmp_path) -> None:
    # The criterion: thousands of iterations, one GEMM name with two grids, a warm-up, slow
    # outliers (cold executions after the data loader's pauses, slow runs), a 1 ms logger stamping with
    # its own firmware clock; the capture round-trips through its file.
    loop = simulate_training_loop(3000, seed=1)
    trace, capture = loop.save(tmp_path)
    tp = profile_trace(trace, load_capture(capture))
    _check_against_truth(loop, tp, rel=0.03)
    # A one-sided logger fit lands on publication; the offset measured against the kernels is applied.
    assert tp.alignment is not None and tp.alignment_applied and tp.alignment.offset_ns < -10_000
    # Energy per iteration against the simulator's, and the part between kernels.
    s = tp.summary
    assert s is not None and s.iterations > 2000
    assert s.energy_j == pytest.approx(_truth_iteration_energy(loop, tp), rel=0.02)
    assert 0.05 < s.between_share < 0.3 and s.kernel_energy_j + s.between_kernels_j == pytest.approx(s.energy_j)


def test_a_short_loop_is_profiled_with_its_iterations(tmp_path) -> None:
    loop = simulate_training_loop(400, seed=2, pause_every=25)
    tp = profile_trace(loop.write_trace(tmp_path / "t.json.gz"), loop.capture(), min_executions=50)
    _check_against_truth(loop, tp, rel=0.06)
    it = tp.iterations
    assert len(it) == 400 and it["step"].tolist() == list(range(400))
    assert np.all(it["kernels"] == 7) and np.all(np.diff(it["start_ns"]) > 0)
    assert np.all(it["busy_ns"] < it["end_ns"] - it["start_ns"])
    assert np.all(~it["steady"][:10]) and it["steady"][-1]
    text = str(tp)
    assert "gemm" in text and "steady iterations" in text and "applied" in text


def test_an_averaging_sensor_is_deconvolved_over_the_whole_loop(tmp_path) -> None:
    # A 1 ms window in a loop covers several kernels: placing it at one instant (or deconvolving one
    # signature at a time) is tens of percent off; the joint fit keeps the long kernel within 10 %.
    loop = simulate_training_loop(1500, seed=3, sensor="amd-1ms-average")
    tp = profile_trace(loop.write_trace(tmp_path / "t.json.gz"), loop.capture())
    # An averaging sensor's offset is measured through its windows and reported, never applied (it trades with
    # the model's delay); this capture's clock is right, so no mismatch is warned (pytest fails on a warning).
    assert tp.alignment is not None and tp.alignment.window_ns > 0 and not tp.alignment_applied
    assert "reported, not applied" in str(tp)
    top = tp.kernels[0]
    assert (top["name"], int(top["grid"][0])) == ("gemm", 128)
    ep = tp.profile(0)
    assert ep.deconvolution is not None and "between kernels" in " ".join(ep.deconvolution.assumptions)
    assert top["energy_j"] == pytest.approx(loop.truth_energy_j(ep.golden.run_ids), rel=0.10)
    point = profile_trace(loop.write_trace(tmp_path / "t.json.gz"), loop.capture(), attribution="instant")
    assert abs(point.kernels["energy_j"][point.kernels["grid"][:, 0] == 64][0]
               / loop.truth_energy_j(point.profiles[int(np.flatnonzero(point.kernels["grid"][:, 0] == 64)[0])]
                                     .golden.run_ids) - 1) > 0.2


def test_fit_timeline_recovers_piecewise_constant_kernels_through_a_boxcar() -> None:
    # An exact forward model: two kernels of constant power in a random loop, an idle level in the gaps,
    # 1 ms boxcar logs every 1 ms. Energies come back to 0.5 %.
    rng = np.random.default_rng(0)
    starts, ends, cls = [], [], []
    t = 0.0
    for _ in range(6000):
        c = int(rng.integers(0, 2))
        d = (300_000.0, 40_000.0)[c]
        starts.append(t)
        ends.append(t + d)
        cls.append(c)
        t += d + float(rng.uniform(20_000, 300_000))
    s, e, k = np.array(starts), np.array(ends), np.array(cls)
    level = np.array([600.0, 420.0])
    sensor = SensorModel("box", "window", period_ns=1e6, window_ns=1e6)
    stamps = np.arange(2e6, t - 1e6, 1e6)
    grid = np.arange(0.0, t, 250.0)
    i = np.searchsorted(s, grid, side="right") - 1
    inside = (i >= 0) & (grid < e[np.clip(i, 0, None)])
    power = np.where(inside, level[k[np.clip(i, 0, None)]], 150.0)
    csum = np.concatenate([[0.0], np.cumsum(power) * 250.0])
    logs = (np.interp(stamps, np.append(grid, t), csum) - np.interp(stamps - 1e6, np.append(grid, t), csum)) / 1e6
    fit = fit_timeline(sensor, stamps, {"total": logs}, s, e, k, [4, 4])
    for c, d in enumerate((300_000.0, 40_000.0)):
        assert fit.energy_j["total"][c] == pytest.approx(level[c] * d * 1e-9, rel=0.005)
        assert fit.energy_half_width_j["total"][c] > 0
    assert np.nanmax(np.abs(fit.gap_w["total"][:2] - 150.0)) < 10.0
    with pytest.raises(ValueError, match="not overlap"):
        fit_timeline(sensor, stamps, {"total": logs}, s[::-1], e[::-1], k, [4, 4])
    with pytest.raises(ValueError, match="bins"):
        fit_timeline(sensor, stamps, {"total": logs}, s, e, k, [0, 4])
    with pytest.raises(ValueError, match="'total'"):
        fit_timeline(sensor, stamps, {"io": logs}, s, e, k, [4, 4])


def test_the_logs_offset_is_measured_against_the_kernels() -> None:
    rng = np.random.default_rng(1)
    s = np.cumsum(rng.uniform(60_000, 200_000, 3000))
    d = np.where(np.arange(3000) % 2 == 0, 40_000.0, 25_000.0)
    e = s + d
    k = np.arange(3000) % 2
    t = np.sort(rng.uniform(s[0], e[-1], 4000))
    i = np.searchsorted(s, t, side="right") - 1
    inside = (i >= 0) & (t < e[np.clip(i, 0, None)])
    y = np.where(inside, np.where(k[np.clip(i, 0, None)] == 0, 700.0, 450.0), 200.0) + rng.normal(0, 5, len(t))
    # The logs are stamped 23 us late: the alignment moves them back.
    a = align_logs_to_trace(t + 23_000, y, s, e, k)
    assert a.low_ns <= -23_000 <= a.high_ns and a.half_width_ns < 2_000 and not a.at_edge and a.ss_ratio < 0.2
    with pytest.raises(ValueError, match="at least 50"):
        align_logs_to_trace(t[:10], y[:10], s, e, k)
    with pytest.raises(ValueError, match="step_ns"):
        align_logs_to_trace(t, y, s, e, k, step_ns=0)


def _edited_trace(loop, path, edit) -> tuple[str, list[dict]]:
    """The loop's Kineto trace written to ``path`` with ``edit(kernel_events)`` applied; the path and the events."""
    out = loop.write_trace(path)
    with open(out) as f:
        doc = json.load(f)
    kernels = [ev for ev in doc["traceEvents"] if ev.get("cat") == "kernel"]
    edit(kernels)
    with open(out, "w") as f:
        json.dump(doc, f)
    return out, kernels


def test_kernels_of_several_devices_need_the_device_named(tmp_path) -> None:
    loop = simulate_training_loop(60, seed=4, pause_every=0)
    path, _ = _edited_trace(loop, tmp_path / "t.json",
                            lambda kernels: [ev["args"].__setitem__("device", 1) for ev in kernels[::2]])
    with pytest.raises(ValueError, match=r"device: the trace holds kernels of devices \[0, 1\]"):
        profile_trace(path, loop.capture(), min_executions=5)
    with pytest.raises(ValueError, match="device=7"):
        profile_trace(path, loop.capture(), min_executions=5, device=7)


def test_profile_trace_refuses_bad_arguments(tmp_path) -> None:
    loop = simulate_training_loop(30, seed=4, pause_every=0)
    path = loop.write_trace(tmp_path / "t.json.gz")
    cap = loop.capture()
    for kw, match in (({"margin": 2.0}, "margin"), ({"min_executions": 1}, "min_executions"),
                      ({"attribution": "guess"}, "attribution"), ({"bins": 1}, "bins"), ({"align": "yes"}, "align")):
        with pytest.raises(ValueError, match=match):
            profile_trace(path, cap, **kw)
    # No signature with enough executions to stitch, but ProfilerStep#N: the energy per iteration, and no
    # stitched row (each signature's energy is a coarse level over its own executions, marked as joint).
    tp = profile_trace(path, cap, min_executions=10_000)
    assert not np.any(~tp.kernels["joint"]) and tp.summary is not None
    assert any(w.startswith("no kernel signature could be profiled") for w in tp.warnings)
    with pytest.raises(ValueError, match="logger_map: required"):
        profile_trace(path, cap.samples)
    with pytest.raises(ValueError, match="samples"):
        profile_trace(path, [1, 2, 3], _EpochMap())


class _EpochMap:
    def to_host(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, dtype=np.float64) + EPOCH

    def error_bound_at(self, host_ns: np.ndarray) -> np.ndarray:
        return np.full(np.shape(host_ns), 300.0)


def test_the_perfetto_export_draws_power_over_the_kernels_and_the_cli_writes_everything(tmp_path, capsys) -> None:
    loop = simulate_training_loop(300, seed=5, pause_every=30)
    trace, capture = loop.save(tmp_path / "session")
    tp = profile_trace(trace, load_capture(capture), min_executions=50)
    doc = insitu_trace_events(tp)
    ev = doc["traceEvents"]
    slices = [e for e in ev if e.get("cat") == "kernel"]
    assert len(slices) == len(tp.trace)
    assert {e["name"] for e in slices} == {"gemm", "gemv"}
    assert any(e["args"].get("golden") for e in slices) and any(e["args"].get("warmup") for e in slices)
    counters = [e for e in ev if e.get("ph") == "C" and e["name"] == "power total (W)"]
    assert len(counters) == len(tp.logs)
    assert len([e for e in ev if e.get("cat") == "iteration"]) == len(tp.iterations)
    assert doc["baseTimeNanoseconds"] == tp.trace.origin_ns
    out = tmp_path / "out"
    assert cli.main(["trace", trace, "--power", capture, "--out", str(out), "--top", "2",
                     "--min-executions", "50"]) == cli.EXIT_OK
    printed = capsys.readouterr().out
    assert "gemm" in printed and "ui.perfetto.dev" in printed
    for name in ("power_trace.json.gz", "energy_by_kernel.png", "top_kernels.png", "kernels.json"):
        assert (out / name).stat().st_size > 0
    with gzip.open(out / "power_trace.json.gz", "rt") as f:
        assert len(json.load(f)["traceEvents"]) == len(ev)
    table = json.loads((out / "kernels.json").read_text())
    assert [r["grid"][0] for r in table["kernels"]] == tp.kernels["grid"][:, 0].tolist()
    assert table["iterations"]["energy_j"] == pytest.approx(tp.summary.energy_j)
    # A capture that is not one, and bad usage.
    (tmp_path / "junk.npz").write_bytes(b"junk")
    assert cli.main(["trace", trace, "--power", str(tmp_path / "junk.npz"), "--out", str(out)]) == cli.EXIT_FAILURE
    assert "junk.npz" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:  # --top out of range: refused by argparse
        cli.main(["trace", trace, "--power", capture, "--top", "0"])
    assert bad.value.code == cli.EXIT_USAGE

def test_the_trace_command_calls_data_problems_failures_not_bad_usage(tmp_path, capsys, monkeypatch) -> None:
    # Logs that miss the trace (a clock mismatch) exited 2, "bad usage", for a data problem.
    from fingrav_native.app import _cli_files

    loop = simulate_training_loop(300, seed=5, pause_every=30)
    trace, capture = loop.save(tmp_path / "session")

    def refuse(*a, **k):
        raise ValueError("samples: no power log falls within the trace's kernels: ... a clock mismatch")

    monkeypatch.setattr(_cli_files, "profile_trace", refuse)
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "o")]) == cli.EXIT_FAILURE
    assert "clock mismatch" in capsys.readouterr().err

    def bad_option(*a, **k):
        raise ValueError("bins=1: must be an integer in [2, 64]")

    monkeypatch.setattr(_cli_files, "profile_trace", bad_option)
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "o")]) == cli.EXIT_USAGE


@pytest.mark.optional
def test_the_reader_pins_the_real_exporters_layout(tmp_path) -> None:
    # torch.profiler on CPU activities only: the exporter's file layout
    # (traceEvents, baseTimeNanoseconds) without a GPU; no kernel is said so.
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile


    before = time.time_ns()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(torch.ones(64, 64), torch.ones(64, 64))
    after = time.time_ns()
    path = str(tmp_path / "cpu.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        doc = json.load(f)
    assert isinstance(doc["traceEvents"], list) and "baseTimeNanoseconds" in doc
    # The clock: ts (us) + baseTimeNanoseconds is the Unix epoch (CLOCK_REALTIME), what the capture maps onto.
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    assert ops and all(before - 1_000_000 <= e["ts"] * 1000 + doc["baseTimeNanoseconds"] <= after + 1_000_000
                       for e in ops)
    with pytest.raises(TraceFormatError, match="ProfilerActivity.CUDA"):
        read_kineto_trace(path)


ROCPROF_CSV = (
    '"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count",'
    '"Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
    '"KERNEL_DISPATCH","Agent 2",1,0,70,2,16,"gemm(float*, int)",119670,172352210061004,172352210062686,'
    '0,0,4,4,16,256,1,1,1024,1,1\n'
    '"KERNEL_DISPATCH","Agent 2",1,0,70,1,33,"gemm(float*, int)",119662,172352210005122,172352210008687,'
    '0,0,12,4,48,256,1,1,4096,1,1\n'
    '"KERNEL_DISPATCH","Agent 3",2,0,70,3,31,"gemv",119696,172352210143326,172352210149335,'
    '0,0,4,4,16,64,1,1,64,1,1\n')


def test_a_rocprofv3_kernel_trace_is_read_exactly(tmp_path) -> None:
    path = tmp_path / "1234_kernel_trace.csv"
    path.write_text(ROCPROF_CSV)
    t = read_rocprof_kernel_trace(path)
    # rocprofv3 stamps on CLOCK_BOOTTIME (rocprofiler-sdk's default_clock_id; ROCr's system clock).
    assert t.clock == "CLOCK_BOOTTIME" and t.origin_ns == 172352210005122
    assert (t.executions["start_ns"].astype(np.int64) + t.origin_ns).tolist() == [172352210005122, 172352210061004,
                                                                                   172352210143326]
    assert (t.executions["end_ns"] - t.executions["start_ns"]).astype(np.int64).tolist() == [3565, 1682, 6009]
    # One kernel name with two grids: two signatures. Without agent_info.csv the agent numbers stay, and
    # the trace says they are not GPU ordinals.
    assert t.signatures["grid"][:, 0].tolist() == [4096, 1024, 64] and t.device.tolist() == [2, 2, 3]
    assert "not GPU ordinals" in t.device_numbering
    assert t.correlation.tolist() == [119662, 119670, 119696] and len(t.steps) == 0
    with pytest.raises(ValueError, match=r"device: the trace holds kernels of rocprofv3 agent numbers"):
        profile_trace(t, simulate_training_loop(30, seed=4, pause_every=0).capture())
    # With the agent table rocprofv3 writes beside it (two CPU agents first), the GPU ordinals.
    (tmp_path / "1234_agent_info.csv").write_text('"Node_Id","Logical_Node_Id","Agent_Type"\n0,0,"CPU"\n1,1,"CPU"\n'
                                                  '2,2,"GPU"\n3,3,"GPU"\n')
    t = read_rocprof_kernel_trace(path)
    assert t.device.tolist() == [0, 0, 1] and t.device_numbering == "GPU ordinal"
    bad = tmp_path / "bad.csv"
    bad.write_text(ROCPROF_CSV.replace("172352210062686", "soon"))
    with pytest.raises(TraceFormatError, match="row 0 has End_Timestamp='soon'"):
        read_rocprof_kernel_trace(bad)
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(TraceFormatError, match="no column 'Kernel_Name'"):
        read_rocprof_kernel_trace(tmp_path / "other.csv")


def test_executions_with_names_are_a_trace_too() -> None:
    # Bring-your-own executions (host clock) and logs with their true times: no file in between.
    loop = simulate_training_loop(400, seed=6, pause_every=0, logger_own_clock=0.0)
    ex = np.zeros(len(loop.executions), dtype=EXECUTION_DTYPE)
    ex["run"] = np.arange(len(ex))
    ex["start_ns"] = loop.executions["start_ns"]
    ex["end_ns"] = loop.executions["end_ns"]
    kern = [loop.kernels[i] for i in loop.signature]
    kt = KernelTrace.from_executions(ex, [k.name for k in kern], grid=[k.grid for k in kern],
                                     block=[k.block for k in kern])
    assert len(kt.signatures) == 3 and kt.clock == "host"
    logs = loop.gpu.logs()
    samples = np.zeros(len(logs), dtype=SAMPLE_DTYPE)
    samples["source_ts"] = logs["sample_ns"]
    for c in ("total", "compute", "io", "memory"):
        samples[c] = logs[c]
    tp = profile_trace(kt, samples, _HostMap(), min_executions=50)
    top = tp.kernels[0]
    assert (top["name"], int(top["grid"][0])) == ("gemm", 128)
    assert top["energy_j"] == pytest.approx(loop.truth_energy_j(tp.profile(0).golden.run_ids), rel=0.03)
    with pytest.raises(ValueError, match="names: 2 names"):
        KernelTrace.from_executions(ex, ["a", "b"])


class _HostMap:
    def to_host(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, dtype=np.float64)

    def error_bound_at(self, host_ns: np.ndarray) -> np.ndarray:
        return np.full(np.shape(host_ns), 100.0)


def test_zero_duration_kernels_are_left_out_and_counted_not_a_refusal(tmp_path) -> None:
    # Older Kineto traces record durations in whole microseconds, so 3-7 % of their
    # kernels have dur 0; the reader took them and profile_trace refused the whole trace.
    loop = simulate_training_loop(400, seed=2, pause_every=25)
    path, kernels = _edited_trace(loop, tmp_path / "t.json",
                                  lambda kernels: [e.__setitem__("dur", 0) for e in kernels[::20]])
    tp = profile_trace(path, loop.capture(), min_executions=50)
    n_zero = len(kernels[::20])
    note = [w for w in tp.warnings if "zero recorded duration" in w]
    assert len(note) == 1 and note[0].startswith(f"{n_zero} of {len(kernels)} kernel executions")
    assert len(tp.trace.executions) == len(kernels) - n_zero
    assert len(tp.kernels) == 3 and tp.summary is not None
    # The rest is attributed as before (the left-out executions are not in any signature's count).
    assert int(tp.kernels["count"].sum()) == len(kernels) - n_zero


def test_long_and_control_character_names_are_never_cut_or_merged(tmp_path) -> None:
    # Names were cut to 256 characters after the signatures were formed (about half of
    # real C++ template kernel names are longer), so distinct signatures printed with one label and
    # vanished from `skipped`; numpy's strings drop trailing NULs, so "gemm" and "gemm\0" printed alike.
    prefix = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<" * 5  # 360 characters
    kt = KernelTrace.from_rows([0, 10, 20, 30], [5, 15, 25, 35], [prefix + "A>", prefix + "B>", "gemm", "gemm\0"],
                               [(1, 1, 1)] * 4, [(1, 1, 1)] * 4, clock="host", source="test")
    names = kt.signatures["name"].tolist()
    assert len(set(names)) == 4 and prefix + "A>" in names and prefix + "B>" in names
    assert "gemm" in names and "gemm\\x00" in names
    loop = simulate_training_loop(400, seed=2, pause_every=25)
    path, _ = _edited_trace(loop, tmp_path / "t.json",
                            lambda kernels: [e.__setitem__("name", prefix + e["name"]) for e in kernels])
    tp = profile_trace(path, loop.capture(), min_executions=50)
    assert sorted(tp.kernels["name"].tolist()) == sorted([prefix + "gemm", prefix + "gemm", prefix + "gemv"])
