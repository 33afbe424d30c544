"""Live power capture for in-situ profiling: epoch brackets, EpochMap, PowerRecorder.

The map from the host clock (CLOCK_MONOTONIC_RAW) onto the Unix epoch
(CLOCK_REALTIME, what torch.profiler stamps kernels with) is checked on
synthetic brackets built with exact integer arithmetic from a known offset
and a known NTP-like drift, including a realtime step; the recorder on the
real-time simulated GPU. Nothing here asserts timing: the machine may be a
loaded 2-core VM.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zipfile

import numpy as np
import pytest

from fingrav_native import _core
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.app import PowerRecorder, record_torch
from fingrav_native.app import _recorder as cap
from fingrav_native.backends import LiveSimBackend
from fingrav_native.clocks import ClockStepWarning, fit_epoch_map
from fingrav_native.files import CAPTURE_FORMAT, CAPTURE_VERSION, CaptureFormatError, PowerCapture, load_capture
from fingrav_native.sensors import sensor_preset
from fingrav_native.sim import SimGPU

M0 = 21_156_703_160_344                # a CLOCK_MONOTONIC_RAW time (~6 hours of uptime)
E0 = 1_795_448_360_714_669_054         # the Unix-epoch time then: a float64 resolves only 256 ns here
DRIFT_PPM_NUM = 50                     # realtime runs 50 ppm fast: an NTP slew


def truth(mono: int, *, drift_ppm: int = DRIFT_PPM_NUM, step_at: int | None = None, step_ns: int = 0) -> int:
    """Exact epoch ns at host time ``mono`` (Python ints: no rounding anywhere)."""
    e = E0 + ((mono - M0) * (1_000_000 + drift_ppm)) // 1_000_000
    if step_at is not None and mono >= step_at:
        e += step_ns
    return e


def make_brackets(seconds: float, *, every_s: float = 0.5, per: int = 8, seed: int = 0, **kw) -> np.ndarray:
    """Bursts of epoch brackets as read_epoch_brackets would take them: realtime read somewhere inside."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(int(seconds / every_s) + 1):
        t = M0 + int(b * every_s * 1e9)
        for i in range(per):
            mb = t + i * 150
            w = int(rng.integers(40, 120))
            read = mb + int(rng.integers(0, w + 1))
            rows.append((mb, truth(read, **kw), mb + w))
    return np.array(rows, dtype=np.int64)


B0 = 270_000_123_456_789               # CLOCK_BOOTTIME then: 3 days up, 2.7 of them suspended at times


def boot_brackets(seconds: float, *, suspend_at: int | None = None, suspend_ns: int = 0,
                  seed: int = 5) -> np.ndarray:
    """Bursts of CLOCK_BOOTTIME brackets; it runs with realtime's slew, and jumps by a suspend (the raw clock stops)."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(int(seconds / 0.5) + 1):
        for i in range(8):
            mb = M0 + int(b * 0.5e9) + i * 500  # one read after another: brackets never overlap
            w = int(rng.integers(100, 400))
            read = mb + int(rng.integers(0, w + 1))
            boot = B0 + ((read - M0) * (1_000_000 + DRIFT_PPM_NUM)) // 1_000_000
            if suspend_at is not None and read >= suspend_at:
                boot += suspend_ns
            rows.append((mb, boot, mb + w))
    return np.array(rows, dtype=np.int64)


def queries(seconds: float, n: int = 500, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return M0 + rng.integers(0, int(seconds * 1e9), n).astype(np.int64)


# --------------------------------------------------------------------------- epoch brackets


def test_read_epoch_brackets_are_int64_and_ordered():
    b = _core.read_epoch_brackets(64)
    assert b.dtype == np.int64 and b.shape == (64, 3)
    assert (b[:, 0] <= b[:, 2]).all()
    assert (b[1:, 0] >= b[:-1, 2]).all()       # back to back, in order
    assert (b[:, 1] > 10**18).all()            # epoch ns, not the host clock
    assert (b[:, 0] < 10**18).all()
    for n in (0, -1):
        with pytest.raises(ValueError, match=rf"n={n}"):
            _core.read_epoch_brackets(n)


# --------------------------------------------------------------------------- EpochMap


@pytest.mark.parametrize("seconds", [1.5, 10.0])  # a line, and a piecewise fit (over 2 s)
def test_epoch_map_recovers_offset_and_drift_within_50_ns(seconds):
    m = fit_epoch_map(make_brackets(seconds))
    assert m.n_brackets == len(make_brackets(seconds)) and m.steps == () and m.segments == 1
    assert m.drift_ppm == pytest.approx(DRIFT_PPM_NUM, abs=0.5)
    centre = M0 + int(seconds * 5e8)
    assert abs(m.offset_ns - (truth(centre) - centre)) < 100
    q = queries(seconds)
    want = np.array([truth(int(v)) for v in q], dtype=object)
    origin = int(want[0])
    rel = m.to_host_relative(q, origin)
    err = rel - np.array([int(w) - origin for w in want], dtype=np.float64)
    assert np.abs(err).max() < 50, np.abs(err).max()
    # The bound covers the error where the reads are.
    assert (np.abs(err) <= m.error_bound_at(np.array([int(w) for w in want], dtype=np.int64))).all()
    # int64 out: exact rounding of the same map.
    ns = m.to_host_ns(q)
    assert ns.dtype == np.int64
    assert np.abs(ns - np.array([int(w) for w in want], dtype=np.int64)).max() < 50
    # A scalar in, a scalar out.
    assert isinstance(m.to_host_relative(int(q[0]), origin), float)
    assert isinstance(m.to_host_ns(int(q[0])), int)
    # Extrapolating a little past the reads stays close; the bound grows there.
    after = M0 + int(seconds * 1e9) + 200_000_000
    assert abs(m.to_host_relative(after, origin) - (truth(after) - origin)) < 100
    assert m.error_bound_at(truth(after)) > m.error_bound_at(truth(centre))


def test_to_host_at_epoch_magnitude_rounds_to_256_ns_but_relative_does_not():
    m = fit_epoch_map(make_brackets(1.5))
    q = queries(1.5, n=2000, seed=7)
    want = np.array([truth(int(v)) for v in q], dtype=np.int64)
    coarse = m.to_host(q)
    assert coarse.dtype == np.float64
    # Every float64 near 1.8e18 is a multiple of 256 ns: up to 128 ns lost.
    assert (np.mod(coarse, 256.0) == 0).all()
    lost = np.abs(coarse - want.astype(np.float64)).max()
    assert lost > 64
    origin = int(want.min())
    fine = m.to_host_relative(q, origin)
    assert np.abs(fine - (want - origin).astype(np.float64)).max() < 50
    with pytest.raises(ValueError, match="origin_ns"):
        m.to_host_relative(q, float(origin))


@pytest.mark.parametrize("step_ns", [1_000_000_000, -300_000_000, 250_000])
def test_a_realtime_step_is_found_and_each_side_maps_to_its_own_realtime(step_ns):
    seconds = 5.0
    step_at = M0 + 2_250_000_000  # between two bursts
    brackets = make_brackets(seconds, step_at=step_at, step_ns=step_ns)
    with pytest.warns(ClockStepWarning, match="stepped"):
        m = fit_epoch_map(brackets)
    assert len(m.steps) == 1 and m.segments == 2
    s = m.steps[0]
    assert s.before_mono_ns < step_at <= s.after_mono_ns
    assert s.size_ns == pytest.approx(step_ns, abs=1_000)
    before = M0 + np.array([100_000_000, 1_900_000_000], dtype=np.int64)
    after = M0 + np.array([2_600_000_000, 4_900_000_000], dtype=np.int64)
    for q in (before, after):
        want = [truth(int(v), step_at=step_at, step_ns=step_ns) for v in q]
        got = m.to_host_relative(q, want[0])
        assert np.abs(got - np.array([w - want[0] for w in want], dtype=np.float64)).max() < 50
    # Inside the gap which side a time is on is unknown: the bound says so.
    gap = (s.before_mono_ns + s.after_mono_ns) // 2
    for t in (gap - 1000, gap, gap + 1000):
        assert m.error_bound_at(truth(t, step_at=gap, step_ns=step_ns)) >= abs(step_ns) * 0.99


def test_no_step_no_warning_under_drift_and_wide_brackets():
    # A preempted read (a bracket 2 ms wide) is not a step (pytest turns any warning into an error).
    b = make_brackets(3.0)
    b[20, 2] += 2_000_000
    m = fit_epoch_map(b)
    assert m.steps == ()


def test_fit_epoch_map_refuses_bad_brackets():
    good = make_brackets(1.0)
    with pytest.raises(ValueError, match="brackets: must be an int64"):
        fit_epoch_map(good.astype(np.float64))
    with pytest.raises(ValueError, match=r"brackets: expected shape \(n, 3\)"):
        fit_epoch_map(good[:, :2])
    with pytest.raises(ValueError, match="at least 3"):
        fit_epoch_map(good[:2])
    swapped = good.copy()
    swapped[3, 0], swapped[3, 2] = good[3, 2], good[3, 0]
    with pytest.raises(ValueError, match="row 3"):
        fit_epoch_map(swapped)
    with pytest.raises(ValueError, match="step_threshold_ns"):
        fit_epoch_map(good, step_threshold_ns=0)


# --------------------------------------------------------------------------- captures and files


def synthetic_capture(*, clock_domain: str = "sim-device", tick_ns: float = 10.0, n: int = 400,
                      sensor=None) -> tuple[PowerCapture, np.ndarray]:
    """A capture whose logger clock has a known map onto host time: (capture, true host ns of each log)."""
    rng = np.random.default_rng(3)
    true_host = M0 + 50_000_000 + np.arange(n, dtype=np.int64) * 1_000_000 + rng.integers(-2000, 2000, n)
    if clock_domain == "nvml-host-us":
        ticks = np.array([truth(int(h)) // 1000 for h in true_host], dtype=np.int64)
    elif clock_domain == "host-monotonic-raw":
        ticks = true_host.copy()
    else:  # a GPU clock: 10 ns ticks, 30 ppm fast, a large offset
        ticks = 987_654_321_000 + ((true_host - M0) * 1_000_030) // 10_000_000
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    s["host_ns"] = true_host + 20_000 + rng.integers(0, 216_500, n)  # seen after it was published
    s["host_poll_begin_ns"] = s["host_ns"] - 3_000
    s["source_ts"] = ticks
    s["source_seq"] = np.arange(n)
    s["seq"] = np.arange(n)
    s["total"] = 300 + rng.normal(0, 5, n)
    brackets = make_brackets(n / 1000 + 0.2)
    c = PowerCapture(
        samples=s, epoch_brackets=brackets,
        source={"name": "test", "clock_domain": clock_domain, "tick_ns": tick_ns, "native_period_ns": 1_000_000,
                "window_ns": 0, "channels": ["total"]},
        sensor=sensor, period_ns=216_500, stats={"drops": 0, "samples": n}, meta={"device": "test"})
    return c, true_host


def test_save_load_round_trip_is_exact(tmp_path):
    c, _ = synthetic_capture(sensor=sensor_preset("amd-1ms-average"))
    path = c.save(tmp_path / "power.npz")
    assert path == str(tmp_path / "power.npz")
    assert [p.name for p in tmp_path.iterdir()] == ["power.npz"]  # no temporary file left behind
    back = load_capture(path)
    assert back.samples.dtype == SAMPLE_DTYPE and np.array_equal(back.samples, c.samples)
    assert back.epoch_brackets.dtype == np.int64 and np.array_equal(back.epoch_brackets, c.epoch_brackets)
    assert int(back.epoch_brackets[0, 1]) == int(c.epoch_brackets[0, 1])  # epoch ns bit for bit
    assert back.sensor == c.sensor
    assert (back.source, back.period_ns, back.stats, back.meta) == (c.source, c.period_ns, c.stats, c.meta)
    assert len(back) == len(c) == 400
    assert not back.samples.flags.writeable
    # No sensor round-trips as None; the file holds no pickle.
    c2, _ = synthetic_capture(sensor=None)
    assert load_capture(c2.save(tmp_path / "b.npz")).sensor is None
    with np.load(tmp_path / "b.npz", allow_pickle=False) as z:
        header = json.loads(str(z["header"][()]))
    assert header["format"] == CAPTURE_FORMAT and header["version"] == CAPTURE_VERSION


def _write_npz(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return str(path)


def test_load_refuses_other_formats_newer_versions_and_corrupt_files(tmp_path):
    c, _ = synthetic_capture()
    good = c.save(tmp_path / "good.npz")
    with np.load(good, allow_pickle=False) as z:
        header = json.loads(str(z["header"][()]))
        samples, brackets = z["samples"], z["epoch_brackets"]

    other = _write_npz(tmp_path / "other.npz", samples=samples, epoch_brackets=brackets,
                       header=np.array(json.dumps(dict(header, format="fingrav-profile"))))
    with pytest.raises(CaptureFormatError, match=r"other\.npz: format 'fingrav-profile'"):
        load_capture(other)
    newer = _write_npz(tmp_path / "newer.npz", samples=samples, epoch_brackets=brackets,
                       header=np.array(json.dumps(dict(header, version=CAPTURE_VERSION + 1))))
    with pytest.raises(CaptureFormatError, match=rf"newer\.npz: format version {CAPTURE_VERSION + 1} is newer"):
        load_capture(newer)
    no_header = _write_npz(tmp_path / "plain.npz", samples=samples)
    with pytest.raises(CaptureFormatError, match=r"plain\.npz: not a fingrav-power-capture file"):
        load_capture(no_header)
    wrong_dtype = _write_npz(tmp_path / "dtype.npz", samples=samples["host_ns"], epoch_brackets=brackets,
                             header=np.array(json.dumps(header)))
    with pytest.raises(CaptureFormatError, match=r"dtype\.npz: samples: must be a 1-D SAMPLE_DTYPE"):
        load_capture(wrong_dtype)
    flat = _write_npz(tmp_path / "flat.npz", samples=samples, epoch_brackets=brackets[:, 0],
                      header=np.array(json.dumps(header)))
    with pytest.raises(CaptureFormatError, match=r"flat\.npz: epoch_brackets"):
        load_capture(flat)
    missing = _write_npz(tmp_path / "missing.npz", samples=samples, header=np.array(json.dumps(header)))
    with pytest.raises(CaptureFormatError, match="'epoch_brackets' is missing"):
        load_capture(missing)
    with open(good, "rb") as f:
        data = f.read()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(CaptureFormatError, match=r"truncated\.npz: not a readable"):
        load_capture(truncated)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(CaptureFormatError, match=r"garbage\.npz"):
        load_capture(garbage)
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_capture(tmp_path / "nope.npz")
    assert zipfile.is_zipfile(good)


def test_capture_fields_are_validated_by_name():
    c, _ = synthetic_capture()
    kw = dict(samples=c.samples, epoch_brackets=c.epoch_brackets, source=c.source, sensor=None, period_ns=1000,
              stats={}, meta={})
    with pytest.raises(ValueError, match="samples"):
        PowerCapture(**dict(kw, samples=np.zeros(3)))
    with pytest.raises(ValueError, match="epoch_brackets"):
        PowerCapture(**dict(kw, epoch_brackets=c.epoch_brackets.astype(np.float64)))
    with pytest.raises(ValueError, match="epoch_brackets: empty"):
        PowerCapture(**dict(kw, epoch_brackets=np.zeros((0, 3), dtype=np.int64)))
    with pytest.raises(ValueError, match=r"source: .*missing \['tick_ns'\]"):
        PowerCapture(**dict(kw, source={k: v for k, v in c.source.items() if k != "tick_ns"}))
    with pytest.raises(ValueError, match="period_ns"):
        PowerCapture(**dict(kw, period_ns=0))
    with pytest.raises(ValueError, match="sensor"):
        PowerCapture(**dict(kw, sensor="instant-1ms"))


def test_logger_maps_by_clock_domain():
    # A GPU clock: fitted one-sidedly from the samples, composed with the epoch map.
    c, true_host = synthetic_capture()
    lm = c.logger_map()
    assert lm.clock_domain == "sim-device" and lm.logger is not None and lm.logger.method == "one-sided"
    want = np.array([truth(int(h)) for h in true_host], dtype=np.int64)
    origin = int(want[0])
    err = c.logger_map().to_host_relative(c.samples["source_ts"], origin) - (want - origin).astype(np.float64)
    # Late by the publication delay the one-sided fit cannot see (20 us here), never early.
    assert err.min() > 15_000 and err.max() < 25_000, (err.min(), err.max())
    # NVML stamps with CLOCK_REALTIME in us: exactly ticks x 1000, bound one tick.
    nv, _ = synthetic_capture(clock_domain="nvml-host-us", tick_ns=1000.0)
    m = nv.logger_map()
    ts = nv.samples["source_ts"]
    assert np.array_equal(m.to_host_ns(ts), ts * 1000)
    assert m.error_bound_at(int(ts[0]) * 1000) == 1000.0 and m.logger is None
    # The host clock itself: the epoch map.
    hc, _ = synthetic_capture(clock_domain="host-monotonic-raw", tick_ns=1.0)
    q = hc.samples["source_ts"]
    assert np.abs(hc.logger_map().to_host_ns(q) - hc.epoch_map().to_host_ns(q)).max() <= 1
    few = PowerCapture(samples=c.samples[:5], epoch_brackets=c.epoch_brackets, source=c.source, sensor=None,
                       period_ns=1000, stats={}, meta={})
    with pytest.raises(ValueError, match="samples: the 'sim-device' logger clock"):
        few.logger_map()


def test_captures_bracket_boottime_and_monotonic_and_old_files_still_load(tmp_path):
    # A capture bracketed only CLOCK_REALTIME, so a rocprofv3 trace (CLOCK_BOOTTIME)
    # could not be matched with it. Format version 2 brackets CLOCK_BOOTTIME and CLOCK_MONOTONIC too.
    c, true_host = synthetic_capture(clock_domain="host-monotonic-raw", tick_ns=1.0)
    boot = boot_brackets(0.6)
    mono = boot.copy()
    mono[:, 1] -= 7_200_000_000_000  # two hours suspended before: CLOCK_MONOTONIC = BOOTTIME - that
    c2 = PowerCapture(samples=c.samples, epoch_brackets=c.epoch_brackets, source=c.source, sensor=None,
                      period_ns=1000, stats={}, meta={}, clock_brackets={"CLOCK_BOOTTIME": boot, "CLOCK_MONOTONIC": mono})
    back = load_capture(c2.save(tmp_path / "v2.npz"))
    assert back.clocks == ("CLOCK_REALTIME", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC")
    assert all(np.array_equal(back.clock_brackets[k], v) for k, v in c2.clock_brackets.items())
    with np.load(tmp_path / "v2.npz", allow_pickle=False) as z:
        assert json.loads(str(z["header"][()]))["clocks"] == list(back.clocks)
    # Each map lands on its own clock: exact ints, within the brackets' half widths.
    want = B0 + ((true_host - M0) * (1_000_000 + DRIFT_PPM_NUM)) // 1_000_000
    for clock, shift in (("CLOCK_BOOTTIME", 0), ("CLOCK_MONOTONIC", -7_200_000_000_000)):
        m = back.logger_map(clock=clock)
        assert m.clock == clock and np.abs(m.to_host_ns(c.samples["source_ts"]) - (want + shift)).max() < 250
    off = back.clock_offsets()["CLOCK_BOOTTIME"]
    assert abs(off["start_offset_ns"] - (B0 - M0)) <= off["start_bound_ns"] + 1
    assert off["drift_ppm"] == pytest.approx(DRIFT_PPM_NUM, abs=1.0)
    # A version 1 file (CLOCK_REALTIME only) loads as it did; asking it for CLOCK_BOOTTIME names the fix.
    with np.load(tmp_path / "v2.npz", allow_pickle=False) as z:
        header = json.loads(str(z["header"][()]))
        samples, brackets = z["samples"], z["epoch_brackets"]
    header.pop("clocks")
    v1 = _write_npz(tmp_path / "v1.npz", samples=samples, epoch_brackets=brackets,
                    header=np.array(json.dumps(dict(header, version=1, meta={"fingrav_native_version": "0.4.0"}))))
    old = load_capture(v1)
    assert old.clocks == ("CLOCK_REALTIME",) and old.clock_brackets == {}
    assert old.logger_map().to_host_ns(int(samples["source_ts"][0])) == back.logger_map().to_host_ns(
        int(samples["source_ts"][0]))
    with pytest.raises(ValueError, match=r"brackets only CLOCK_REALTIME \(recorded by fingrav_native 0\.4\.0, "
                                         r"before captures bracketed CLOCK_BOOTTIME\).*record the capture again"):
        old.logger_map(clock="CLOCK_BOOTTIME")
    with pytest.raises(ValueError, match=r"clock='CLOCK_TAI': must be one of CLOCK_REALTIME, CLOCK_BOOTTIME"):
        back.clock_map("CLOCK_TAI")


def test_a_version_2_header_and_its_clock_arrays_are_validated_by_name(tmp_path):
    c, _ = synthetic_capture()
    good = PowerCapture(samples=c.samples, epoch_brackets=c.epoch_brackets, source=c.source, sensor=None,
                        period_ns=1000, stats={}, meta={}, clock_brackets={"CLOCK_BOOTTIME": boot_brackets(0.6)})
    path = good.save(tmp_path / "good.npz")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(str(arrays.pop("header")[()]))
    cases = [({"clocks": ["CLOCK_BOOTTIME"]}, {}, r'the header field .clocks. is \["CLOCK_BOOTTIME"\]; expected'),
             ({"clocks": None}, {}, r"the header field 'clocks' is None"),
             ({"clocks": ["CLOCK_REALTIME", "CLOCK_TAI"]}, {},
              r'the header field .clocks. is \["CLOCK_REALTIME", "CLOCK_TAI"\]; expected a list of distinct'),
             ({"clocks": ["CLOCK_REALTIME", "CLOCK_MONOTONIC"]}, {},
              r"the header lists CLOCK_MONOTONIC but the array 'monotonic_brackets' is missing"),
             ({}, {"boottime_brackets": arrays["boottime_brackets"].astype(np.float64)},
              r"the array 'boottime_brackets' must be \(n, 3\) int64"),
             ({}, {"boottime_brackets": arrays["boottime_brackets"][:, ::-1].copy()},
              r"clock_brackets\['CLOCK_BOOTTIME'\]: row 0 ends before it starts"),
             ({}, {"boottime_brackets": arrays["boottime_brackets"][:2]},
              r"clock_brackets\['CLOCK_BOOTTIME'\]: 2 brackets; a map needs at least 3")]
    for i, (head, arr, message) in enumerate(cases):
        bad = _write_npz(tmp_path / f"bad{i}.npz", **dict(arrays, **arr), header=np.array(json.dumps(dict(header, **head))))
        with pytest.raises(CaptureFormatError, match=rf"bad{i}\.npz: {message}"):
            load_capture(bad)
    kw = dict(samples=c.samples, epoch_brackets=c.epoch_brackets, source=c.source, sensor=None, period_ns=1000,
              stats={}, meta={})
    with pytest.raises(ValueError, match=r"clock_brackets: unknown clock 'CLOCK_REALTIME'"):
        PowerCapture(**kw, clock_brackets={"CLOCK_REALTIME": c.epoch_brackets})
    with pytest.raises(ValueError, match=r"clock_brackets\['CLOCK_MONOTONIC'\]: must be an \(n, 3\) int64 array"):
        PowerCapture(**kw, clock_brackets={"CLOCK_MONOTONIC": c.epoch_brackets[:, :2]})


def test_a_suspend_is_a_boottime_step_and_boottime_stamped_logs_map_exactly():
    # CLOCK_BOOTTIME counts the time the host was asleep, the raw clock does not: a step, found and named.
    step_at = M0 + 1_000_000_000
    with pytest.warns(ClockStepWarning, match=r"CLOCK_BOOTTIME stepped .*the host was suspended"):
        m = fit_epoch_map(boot_brackets(2.0, suspend_at=step_at, suspend_ns=90_000_000_000), clock="CLOCK_BOOTTIME")
    assert m.clock == "CLOCK_BOOTTIME" and len(m.steps) == 1
    assert m.steps[0].size_ns == pytest.approx(90e9, abs=2_000)
    # The amdgpu driver's gpu_metrics stamp (domain "boottime") is CLOCK_BOOTTIME: onto it, ticks x 1 ns.
    c, true_host = synthetic_capture(clock_domain="host-monotonic-raw", tick_ns=1.0)
    s = c.samples.copy()
    s["source_ts"] = B0 + ((true_host - M0) * (1_000_000 + DRIFT_PPM_NUM)) // 1_000_000
    bc = PowerCapture(samples=s, epoch_brackets=c.epoch_brackets, source=dict(c.source, clock_domain="boottime"),
                      sensor=None, period_ns=1000, stats={}, meta={}, clock_brackets={"CLOCK_BOOTTIME": boot_brackets(0.6)})
    lm = bc.logger_map(clock="CLOCK_BOOTTIME")
    assert np.array_equal(lm.to_host_ns(s["source_ts"]), s["source_ts"]) and lm.error_bound_at(int(s["source_ts"][0])) == 1.0
    # NVML stamps on CLOCK_REALTIME: placing its logs on CLOCK_BOOTTIME is refused, not guessed.
    nv, _ = synthetic_capture(clock_domain="nvml-host-us", tick_ns=1000.0)
    nv = PowerCapture(samples=nv.samples, epoch_brackets=nv.epoch_brackets, source=nv.source, sensor=None,
                      period_ns=1000, stats={}, meta={}, clock_brackets={"CLOCK_BOOTTIME": boot_brackets(0.6)})
    with pytest.raises(ValueError, match=r"'nvml-host-us' logger stamps its logs on CLOCK_REALTIME"):
        nv.logger_map(clock="CLOCK_BOOTTIME")


# --------------------------------------------------------------------------- the recorder, live


def run_kernels(gpu: SimGPU, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        gpu.run("cb-4k-gemm", 10)
        gpu.idle(2e6)


def test_live_capture_on_the_real_time_simulator(tmp_path):
    gpu = SimGPU(realtime=True, seed=1)
    threads = threading.active_count()
    with PowerRecorder(gpu, tmp_path / "power.npz", brackets_every_s=0.05) as rec:
        assert threading.active_count() == threads + 1  # one Python thread (the sampler's is C++)
        run_kernels(gpu, 0.3)
    assert threading.active_count() == threads
    c = rec.capture
    s = c.samples
    assert len(c) > 0 and c.stats["drops"] == 0 and c.stats["drained"] == len(c)
    assert np.array_equal(s["seq"], np.arange(len(s), dtype=np.uint64))  # nothing lost between ring and capture
    assert c.sensor == gpu.sensor and c.source["clock_domain"] == "sim-device"
    assert c.period_ns == round(1e6 / (4 + (5**0.5 - 1) / 2))  # 1 ms logger / 4.618: never phase-locked to it
    # Brackets at the start, in the middle (the drain thread's bursts) and at the end.
    b = c.epoch_brackets
    assert c.stats["drains"] >= 1 and c.stats["epoch_bracket_reads"] == len(b)
    assert b[:, 0].min() < s["host_ns"].min() and b[:, 2].max() > s["host_ns"].max()
    assert ((b[:, 0] > s["host_ns"].min()) & (b[:, 2] < s["host_ns"].max())).any()
    assert c.meta["started_epoch_ns"] == int(b[0, 1]) and c.meta["stopped_epoch_ns"] == int(b[-1, 1])
    started, stopped = c.meta["started_epoch_ns"], c.meta["stopped_epoch_ns"]
    # Reads on the epoch clock lie inside the capture's window...
    em = c.epoch_map()
    reads = em.to_host_ns(s["host_ns"])
    assert reads.min() >= started and reads.max() <= stopped
    # ...and each log was produced before the read that saw it, at most a
    # few logger periods before (the source's buffer holds 8 logs).
    lm = c.logger_map()
    logs = lm.to_host_ns(s["source_ts"])
    bound = lm.error_bound_at(logs)
    assert (logs <= reads + bound).all()
    assert (logs >= started - 8 * 1_000_000 - bound).all() and (logs <= stopped).all()
    assert (reads - logs).max() < 50_000_000
    # Against the simulator's truth (its logger clock onto CLOCK_MONOTONIC_RAW): the logger map is
    # late by the logger's publication delay (20 us) plus what the envelope saw, never early.
    true_mono = gpu.host_at_logger_ticks(s["source_ts"].astype(np.float64))
    late = lm.to_host_relative(s["source_ts"], started) - em.to_host_relative(true_mono, started)
    assert late.min() > 0 and np.median(late) < 200_000
    back = load_capture(tmp_path / "power.npz")
    assert np.array_equal(back.samples, s) and np.array_equal(back.epoch_brackets, b)
    # CLOCK_BOOTTIME and CLOCK_MONOTONIC are bracketed in the same bursts, and the maps agree with the
    # clocks read now (clock_gettime through Python: within a few us on a loaded VM).
    assert back.clocks == ("CLOCK_REALTIME", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC")
    for clock, cid in (("CLOCK_BOOTTIME", time.CLOCK_BOOTTIME), ("CLOCK_MONOTONIC", time.CLOCK_MONOTONIC)):
        kb = back.clock_brackets[clock]
        assert len(kb) == len(b) and (kb[:, 2] >= kb[:, 0]).all()
        raw0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        now = time.clock_gettime_ns(cid)
        raw1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
        mapped = back.clock_map(clock).to_host_ns((raw0 + raw1) // 2)
        assert abs(mapped - now) < 200_000 + (raw1 - raw0), (clock, mapped - now)
        assert c.meta["clock_offsets"][clock]["start_bound_ns"] < 1_000_000


def test_an_exception_in_the_block_stops_everything_and_keeps_the_capture(tmp_path):
    src = _core.SyntheticSource(period_ns=1_000_000)
    threads = threading.active_count()
    with pytest.raises(KeyError, match="boom"):
        with PowerRecorder(src, tmp_path / "p.npz", brackets_every_s=0.02) as rec:
            time.sleep(0.05)
            raise KeyError("boom")
    assert threading.active_count() == threads
    assert not src.in_use
    assert load_capture(tmp_path / "p.npz").epoch_brackets.shape[0] >= 16
    with pytest.raises(RuntimeError, match="records once"):
        rec.__enter__()


def test_a_failure_in_the_drain_thread_surfaces_on_exit(monkeypatch):
    real = _core.read_epoch_brackets

    def failing(n):
        if threading.current_thread().name == "fingrav-power-recorder":
            raise OSError("clock gone")
        return real(n)

    monkeypatch.setattr(_core, "read_epoch_brackets", failing)
    src = _core.SyntheticSource(period_ns=1_000_000)
    threads = threading.active_count()
    rec = PowerRecorder(src, brackets_every_s=0.01)
    with pytest.raises(RuntimeError, match="drain thread failed: OSError") as info:
        with rec:
            time.sleep(0.1)
    assert isinstance(info.value.__cause__, OSError)
    assert threading.active_count() == threads and not src.in_use
    with pytest.raises(RuntimeError, match="no capture yet"):
        rec.capture  # noqa: B018


def test_a_failing_source_surfaces_as_a_sampler_error():
    src = _core.SyntheticSource(period_ns=1_000_000, fatal_error_at_poll=3)
    threads = threading.active_count()
    rec = PowerRecorder(src, period_ns=1_000_000, brackets_every_s=0.01)
    with pytest.raises(_core.SamplerError):
        with rec:
            deadline = time.monotonic() + 20
            while rec._sampler.error is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.05)  # the drain thread wakes on a failed sampler too
    assert threading.active_count() == threads and not src.in_use


def test_backends_lend_their_power_source():
    backend = LiveSimBackend(seed=2)
    assert isinstance(backend.power_source, _core.PowerSource)
    with pytest.raises(AttributeError):
        backend.power_source = None  # read-only
    with PowerRecorder(backend, brackets_every_s=0.05) as rec:
        backend.gpu.run("cb-4k-gemm", 5)
    assert rec.capture.sensor == backend.capabilities.sensor
    assert rec.capture.meta["device"] == backend.capabilities.device


def test_bad_arguments_are_refused_by_name():
    src = _core.SyntheticSource()
    for bad in (0, -5, 10):
        with pytest.raises(ValueError, match=rf"period_ns={bad}"):
            PowerRecorder(src, period_ns=bad)
    with pytest.raises(ValueError, match="brackets_every_s"):
        PowerRecorder(src, brackets_every_s=0)
    with pytest.raises(ValueError, match="brackets_every_s"):
        PowerRecorder(src, brackets_every_s=0.001)
    with pytest.raises(ValueError, match="brackets_per_read"):
        PowerRecorder(src, brackets_per_read=0)
    with pytest.raises(ValueError, match="capacity=1000: must be a power of two"):
        PowerRecorder(src, capacity=1000)
    with pytest.raises(ValueError, match="path"):
        PowerRecorder(src, path=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="path='/no/such/folder/p.npz': its folder does not exist"):
        PowerRecorder(src, path="/no/such/folder/p.npz")
    with pytest.raises(ValueError, match="device='tpu:0': unknown device string"):
        PowerRecorder("tpu:0")
    with pytest.raises(ValueError, match="device=42"):
        PowerRecorder(42)
    with pytest.raises(ValueError, match=r"device: a virtual-time SimGPU .*realtime=True"):
        PowerRecorder(SimGPU())
    with pytest.raises(ValueError, match="unknown NVML mode 'bogus'"):
        PowerRecorder("nvidia:0:bogus")


def test_missing_vendor_libraries_and_devices_say_which():
    for device, errors in (("nvidia:0", (_core.LibraryNotFoundError, _core.DeviceUnavailableError)),
                           ("amd:0", (_core.DeviceUnavailableError, _core.LibraryNotFoundError))):
        try:
            rec = PowerRecorder(device)
        except errors as exc:
            assert f"device='{device}'" in str(exc)
        else:  # pragma: no cover - a machine with that GPU
            assert rec.source.info.channels


def test_attach_exports_the_trace_next_to_the_capture(tmp_path):
    class FakeProfile:
        def export_chrome_trace(self, path: str) -> None:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "wt") as f:
                f.write(json.dumps({"traceEvents": [], "baseTimeNanoseconds": E0}))

    src = _core.SyntheticSource()
    with PowerRecorder(src, tmp_path / "run.npz") as rec:
        path = rec.attach(FakeProfile())
    assert path == str(tmp_path / "run.trace.json.gz") and rec.trace_path == path
    with gzip.open(path, "rt") as f:
        assert json.loads(f.read())["baseTimeNanoseconds"] == E0
    assert load_capture(tmp_path / "run.npz").meta["trace"] == "run.trace.json.gz"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz", "run.trace.json.gz"]
    with pytest.raises(ValueError, match="prof="):
        rec.attach(object())
    with PowerRecorder(_core.SyntheticSource()) as rec2:
        pass
    with pytest.raises(ValueError, match="path: this recorder saves no capture"):
        rec2.attach(FakeProfile())
    assert rec2.attach(FakeProfile(), tmp_path / "x.json") == str(tmp_path / "x.json")


def test_record_torch_writes_a_trace_and_a_capture(tmp_path):
    torch = pytest.importorskip("torch")
    gpu = SimGPU(realtime=True, seed=3)
    a = torch.ones(64, 64)

    def step():
        gpu.run("cb-4k-gemm", 4)
        return a @ a

    trace, power = record_torch(step, 3, gpu, tmp_path / "out", warmup_steps=1,
                                activities=[torch.profiler.ProfilerActivity.CPU])
    assert trace == str(tmp_path / "out" / "trace.json.gz") and power == str(tmp_path / "out" / "power.npz")
    with gzip.open(trace, "rt") as f:
        doc = json.loads(f.read())
    assert "traceEvents" in doc
    c = load_capture(power)
    assert len(c) > 0 and c.meta["trace"] == "trace.json.gz" and c.sensor == gpu.sensor
    c.logger_map()  # the capture maps onto the epoch the trace uses
    with pytest.raises(ValueError, match="steps"):
        record_torch(step, 0, gpu, tmp_path / "bad")
    with pytest.raises(ValueError, match="activities"):
        record_torch(step, 1, gpu, tmp_path / "bad", activities=[])


def test_module_imports_torch_only_when_asked():
    import subprocess
    import sys

    code = "import sys, fingrav_native.app._recorder; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert cap.record_torch is record_torch


def test_doctests():
    import doctest

    assert doctest.testmod(cap).failed == 0
