"""The shared simulated GPU and the simulated application (fingrav-sim-app) against the simulator's truth.

The parent creates the device, records its power with PowerRecorder while the application runs in
another process and reports its kernels through a recording stand-in runtime (tests/fakes/
standin_record.c, which implements only the stand-in C ABI); then the logs are checked against the
logger's period, the recorded energy against the truth's within the sampling error bound, and every
reported execution against the truth's, once each.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fingrav_native.app import PowerRecorder
from fingrav_native.sim import SharedSimGPU, app_path

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> str:
    """tests/fakes/standin_record.c built here: a stand-in runtime that writes each call to a file."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert cc, "no C compiler: the package itself needs one to build"
    out = tmp_path_factory.mktemp("standin") / "libfingrav-standin-record.so"
    subprocess.run([cc, "-std=c99", "-shared", "-fPIC", "-O1", "-pthread", "-I", str(REPO / "csrc"), "-o", str(out),
                    str(REPO / "tests" / "fakes" / "standin_record.c")], check=True)
    return str(out)


def _env(gpu: SharedSimGPU | None, calls: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FINGRAV_SIM_DEVICE", "FINGRAV_STANDIN_LIBRARY")}
    if gpu is not None:
        env.update(gpu.env())
    env["FINGRAV_TEST_STANDIN_OUT"] = str(calls)
    env.update(extra)
    return env


def _calls(path: Path) -> tuple[list[str], list[tuple[str, int, int]]]:
    lines = path.read_text().splitlines()
    dispatches = [(p[1], int(p[2]), int(p[3])) for p in (line.split() for line in lines) if p[0] == "D"]
    return [line for line in lines if not line.startswith("D ")], dispatches


def _ticks_to_host(brackets: np.ndarray):
    # The recorder's clock map: host midpoints against device ticks, a line (20 ppm over a second).
    b = np.asarray(brackets, dtype=np.float64)
    t0 = b[0, 1]
    slope, icpt = np.polyfit(b[:, 1] - t0, 0.5 * (b[:, 0] + b[:, 2]), 1)
    return lambda ticks: icpt + slope * (np.asarray(ticks, dtype=np.float64) - t0)


def test_silently_wrong_shared_device_logs_energy_and_executions_match_truth(tmp_path, standin):
    gpu = SharedSimGPU.create(tmp_path / "gpu.sim", seed=5)
    clock = gpu.timestamp_source()
    brackets = [clock.read() for _ in range(20)]
    calls = tmp_path / "calls.txt"
    # depth 128: a sampler thread stalled up to 128 ms on a loaded host still sees every log.
    with PowerRecorder(gpu.power_source(depth=128), period_ns=200_000) as rec:
        assert gpu.state == "waiting"
        proc = subprocess.run([app_path(), "--vendor", "rocm", "--standin", standin, "--seconds", "0.6",
                               "--seed", "3"], env=_env(gpu, calls), capture_output=True, text=True, timeout=60)
    brackets += [clock.read() for _ in range(20)]
    assert proc.returncode == 0, proc.stderr
    assert gpu.state == "detached"
    truth = gpu.truth()
    period = gpu.params["logger_period_ns"]
    to_host = _ticks_to_host(np.array(brackets))

    # (a) every log the application published, once, on the logger's grid.
    s = rec.capture.samples
    seq = s["source_seq"].astype(np.int64)
    assert len(s) == gpu.published == truth.meta["logs_published"]
    assert np.all(np.diff(seq) == 1), "a log was lost or repeated between the processes"
    span = truth.meta["detach_ns"] - truth.meta["attach_ns"]
    assert span / period - 2 <= len(s) <= span / period + 1
    t = to_host(s["source_ts"])
    jitter = gpu.params["logger_jitter_ns"]
    assert np.all(np.abs(np.diff(t) - period) <= 2 * jitter + 2_000)
    assert truth.meta["attach_ns"] - period <= t[0] and t[-1] <= truth.meta["detach_ns"]

    # (b) the logs' energy over their span (midpoint rule) against the exact energy; each log holds the
    # true power at its instant, so the error is bounded by the power's range over each log's interval.
    edges = np.concatenate([[t[0] - period / 2], 0.5 * (t[1:] + t[:-1]), [t[-1] + period / 2]])
    lo = max(edges[0], float(truth.energy["t_ns"][0]))
    hi = min(edges[-1], float(truth.energy["t_ns"][-1]))
    edges = np.clip(edges, lo, hi)
    estimate = float(np.sum(s["total"].astype(np.float64) * np.diff(edges) * 1e-9))
    exact = truth.energy_between(lo, hi)
    bins_t = truth.energy["t_ns"].astype(np.float64)
    bin_w = np.diff(truth.energy["energy_j"]) / (np.diff(bins_t) * 1e-9)
    bound = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        inside = bin_w[(bins_t[1:] > a) & (bins_t[:-1] < b)]
        bound += (inside.max() - inside.min()) * (b - a) * 1e-9 if len(inside) else 0.0
    print(f"energy: logs {estimate:.4f} J, truth {exact:.4f} J, bound {bound:.4f} J")
    assert abs(estimate - exact) <= bound, (estimate, exact, bound)
    assert abs(estimate - exact) <= 0.05 * exact

    # (c) every execution reported once, with the truth's times (this stand-in keeps the host clock).
    order, dispatched = _calls(calls)
    assert order == ["init", "flush", "fini"]
    ex = truth.executions
    assert len(ex) >= 30 and len(set(ex["kernel"])) == 5
    want = sorted(zip(ex["kernel"].astype(str), ex["start_ns"].tolist(), ex["end_ns"].tolist()))
    assert sorted(dispatched) == want
    assert truth.meta["dispatched"] == len(ex) and truth.meta["dispatch_errors"] == 0
    # Per kernel, the truth's table sums its executions.
    for row in truth.kernels:
        mine = ex[ex["kernel"] == row["kernel"]]
        assert row["count"] == len(mine)
        assert row["energy_j"] == pytest.approx(mine["energy_j"].sum(), rel=1e-12)
    durations = (ex["end_ns"] - ex["start_ns"]) * 1e-3
    assert durations.min() < 60 and durations.max() > 1500  # tens of us to milliseconds


def test_data_loss_sigterm_ends_the_app_cleanly_with_its_truth(tmp_path, standin):
    gpu = SharedSimGPU.create(tmp_path / "gpu.sim", seed=2)
    calls = tmp_path / "calls.txt"
    proc = subprocess.Popen([app_path(), "--vendor", "cuda", "--standin", standin, "--seconds", "60"],
                            env=_env(gpu, calls), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while gpu.published < 50 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGTERM, err  # ends as the signal ends a process, after cleaning up
    truth = gpu.truth()
    assert truth.meta["signal"] == signal.SIGTERM
    order, dispatched = _calls(calls)
    assert order == ["init", "flush", "fini"]
    assert len(dispatched) == len(truth.executions) > 0
    assert gpu.state == "detached"


def test_unclear_app_errors_name_the_variable_and_the_option(tmp_path, standin):
    calls = tmp_path / "calls.txt"
    app = app_path()
    r = subprocess.run([app, "--vendor", "rocm", "--standin", standin], env=_env(None, calls),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "FINGRAV_SIM_DEVICE is not set" in r.stderr
    not_device = tmp_path / "not-a-device"
    not_device.write_bytes(b"x" * 65536)
    r = subprocess.run([app, "--vendor", "rocm", "--standin", standin],
                       env=_env(None, calls, FINGRAV_SIM_DEVICE=str(not_device)), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "FINGRAV_SIM_DEVICE=" in r.stderr and "not a shared simulated device" in r.stderr
    gpu = SharedSimGPU.create(tmp_path / "gpu.sim")
    r = subprocess.run([app, "--vendor", "metal"], env=_env(gpu, calls), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--vendor=metal" in r.stderr
    r = subprocess.run([app, "--vendor", "rocm", "--standin", str(tmp_path / "none.so")], env=_env(gpu, calls),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "--standin=" in r.stderr and "cannot load" in r.stderr
    r = subprocess.run([app, "--vendor", "rocm", "--standin", standin, "--rate", "1e6"], env=_env(gpu, calls),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--rate=1e6" in r.stderr
    # A stand-in whose init fails: said with its code, and the device is left detached (no app runs on it).
    r = subprocess.run([app, "--vendor", "rocm", "--standin", standin],
                       env=_env(gpu, calls, FINGRAV_TEST_STANDIN_FAIL_INIT="7"), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "fingrav_standin_init failed with code 7" in r.stderr
    assert gpu.state == "detached"
    assert "Traceback" not in r.stderr


def test_data_loss_shared_device_never_written_over_and_idle_until_attached(tmp_path):
    path = tmp_path / "gpu.sim"
    gpu = SharedSimGPU.create(path, seed=1, sensor="amd-1ms-average")
    with pytest.raises(ValueError, match="path=.*exists"):
        SharedSimGPU.create(path)
    with pytest.raises(ValueError, match="capacity=100"):
        SharedSimGPU.create(tmp_path / "other.sim", capacity=100)
    with pytest.raises(ValueError, match="logger_window_ns"):
        SharedSimGPU.create(tmp_path / "other.sim", sensor="amd-1ms-average", logger_window_ns=1e6)
    for bad, needle in (({"path": 123}, "path=123"), ({"seed": -1}, "seed"), ({"capacity": "x"}, "capacity"),
                        ({"cap_w": "hot"}, "cap_w"), ({"no_such": 1.0}, "no_such")):
        kwargs = {"path": tmp_path / "bad.sim", **bad}
        with pytest.raises(ValueError, match=needle):
            SharedSimGPU.create(**kwargs)
    with pytest.raises(ValueError, match="folder"):
        SharedSimGPU.create(tmp_path / "missing" / "gpu.sim")
    again = SharedSimGPU.open(path)
    assert again.params == gpu.params and again.sensor.kind == gpu.sensor.kind
    src = gpu.power_source()
    assert src.info.name == "sim" and src.info.clock_domain == "sim-device"
    assert len(src.poll()) == 0 and gpu.state == "waiting"  # no app: no logs, and the state says why
    with pytest.raises(FileNotFoundError, match="no truth.*'waiting'"):
        gpu.truth()
    with pytest.raises(ValueError, match="not a shared simulated device"):
        (tmp_path / "junk").write_bytes(b"\0" * 65536)
        SharedSimGPU.open(tmp_path / "junk")


def test_unclear_app_path_names_where_it_looked(monkeypatch, tmp_path):
    from fingrav_native import _tools
    from fingrav_native.sim import _shared

    # The finder looks beside the package (the module that finds installed files) and on sys.path.
    monkeypatch.setattr(_tools, "__file__", str(tmp_path / "_tools.py"))
    monkeypatch.setattr(_shared, "__file__", str(tmp_path / "sim" / "_shared.py"))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="fingrav-sim-app.*pip install"):
        _shared.app_path()


def test_silently_wrong_app_through_the_rocprofiler_standin_and_tool(tmp_path):
    """The whole native path: every execution the device ran arrives once in the tool's journal, on CLOCK_BOOTTIME."""
    from fingrav_native import native
    from fingrav_native.files import read_launches
    from fingrav_native.sim import standin_library

    try:
        tool, standin_rocm = native.tool_library("rocm"), standin_library("rocm")
    except FileNotFoundError as exc:
        pytest.skip(f"the ROCm tool library or its stand-in runtime is not built here: {exc}")
    gpu = SharedSimGPU.create(tmp_path / "gpu.sim", seed=9)
    launches = tmp_path / "launches"
    launches.mkdir()
    env = _env(gpu, tmp_path / "unused.txt", FINGRAV_LAUNCH_DIR=str(launches), ROCP_TOOL_LIBRARIES=tool)
    r = subprocess.run([app_path(), "--vendor", "rocm", "--standin", standin_rocm, "--iterations", "25"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    truth = gpu.truth()
    log = read_launches(launches)
    assert log.closed and log.dropped == 0 and log.vendor_dropped == 0
    ex = truth.executions
    assert len(log.records) == len(ex) == truth.meta["dispatched"]
    b = log.brackets.astype(np.float64)
    offset = np.median(b[:, 1] - 0.5 * (b[:, 0] + b[:, 2]))  # CLOCK_BOOTTIME - CLOCK_MONOTONIC_RAW
    rec = log.records[np.argsort(log.records["start_ns"], kind="stable")]
    want = ex[np.argsort(ex["start_ns"], kind="stable")]
    assert [log.names[s] for s in rec["symbol"]] == want["kernel"].astype(str).tolist()
    np.testing.assert_array_equal(rec["end_ns"] - rec["start_ns"], want["end_ns"] - want["start_ns"])
    # The stand-in moves each time by the offset it reads when it converts; NTP's slew moves that a few us a second.
    assert np.all(np.abs(rec["start_ns"] - offset - want["start_ns"]) < 200_000)
    assert np.all(rec["grid"][:, 0] % rec["block"][:, 0] == 0)  # ROCm counts the grid in work-items


def test_data_loss_killed_app_is_said_lost_and_rate_mode_delivers_every_record(tmp_path, standin):
    gpu = SharedSimGPU.create(tmp_path / "gpu.sim")
    calls = tmp_path / "calls.txt"
    proc = subprocess.Popen([app_path(), "--vendor", "rocm", "--standin", standin, "--seconds", "60"],
                            env=_env(gpu, calls))
    deadline = time.monotonic() + 20
    while gpu.published < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gpu.state == "attached"
    proc.kill()
    proc.wait(timeout=20)
    assert gpu.state == "lost"  # not "attached" forever: no more logs will come
    with pytest.raises(FileNotFoundError, match="'lost'"):
        gpu.truth()
    # The stress mode: R records a second handed to the stand-in, every one delivered.
    gpu = SharedSimGPU.create(tmp_path / "rate.sim")
    r = subprocess.run([app_path(), "--vendor", "cuda", "--standin", standin, "--rate", "50000", "--iterations",
                        "5000"], env=_env(gpu, calls), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    order, dispatched = _calls(calls)
    assert order == ["init", "flush", "fini"] and len(dispatched) == 5000 == gpu.truth().meta["dispatched"]
    starts = np.array([d[1] for d in dispatched])
    assert np.all(np.diff(starts) == pytest.approx(20_000, abs=1))  # paced at 1/R on the host clock
