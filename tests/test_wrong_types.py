"""Wrong types and absurd values at every public entry point: only the documented errors come out.

The guarantees (docs/explanation/guarantees.md) promise that bad input gives one line naming the
argument, as a ``ValueError`` (or a subclass: ``fg.ProfileFormatError``,
``fg.CaptureFormatError``, ...), a ``FileNotFoundError`` or
``fg.CampaignLockedError``, never a ``TypeError``, ``AttributeError`` or
``IndexError`` from inside the package. ``ENTRIES`` below lists every public
function and every value type a user builds, with a valid call and the kind
of each argument; hypothesis then replaces one argument at a time with a
wrong type (None, str, bytes, list, dict, an object, a bool), a float where an
int belongs, a fractional one, an int past 2**63, a negative, NaN, infinity,
3e38, or an array with one such element. A call must

* raise only a documented error, whose message names the argument (or one
  of the entry's aliases for it),
* raise at all where the value is wrong for its kind (a string for a
  number, NaN, a fraction for an id, a number for a path: "must refuse"),
* warn only with the package's own warnings, and
* finish within ``CALL_LIMIT_S`` of CPU time (an absurd count must be refused, not run).

``test_every_public_callable_is_covered`` keeps the table complete: a new
public function fails until it is listed, or excluded with a reason.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import itertools
import math
import os
import re
import signal
import sys
import warnings
from typing import Any, Callable, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import fingrav_native as fg
from fingrav_native import _core, app, backends, clocks, files, insitu, method, multi, records, sensors, sim

#: The errors the guarantees (docs/explanation/guarantees.md) document for bad input.
DOCUMENTED = (ValueError, FileNotFoundError, fg.CampaignLockedError)
#: The package's own warnings (anything else, e.g. numpy's RuntimeWarning, is an internal leaking out).
OWN_WARNINGS = (fg.SensorResolutionWarning, fg.PhaseSteeringWarning, fg.ClockStepWarning,
                fg.UnknownSensorWindowWarning, sensors.SplitDisagreementWarning, sensors.CounterDiscontinuityWarning,
                method.LogQualityWarning)
#: A call on a bad value that spends more CPU time than this is a hang (an absurd count run instead of refused).
#: CPU time, not wall time: a loaded machine (CI beside other jobs, parallel test workers) stretches the wall
#: clock of a quick call, never its CPU time.
CALL_LIMIT_S = 20
#: A call still running after this much wall time is blocked (waiting on something that never comes).
BLOCKED_LIMIT_S = 300

FAST = settings(max_examples=int(os.environ.get("FG_WRONG_TYPES_EXAMPLES", "12")), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                phases=[Phase.explicit, Phase.generate] + ([] if os.environ.get("FG_NO_SHRINK") else [Phase.shrink]))
# Derandomized like FAST: CI sees the same draws on every run (a new draw that finds a defect is found here,
# with FG_WRONG_TYPES_RANDOM=1 locally, not by a red CI run on an unrelated change).
DEEP = settings(max_examples=150, deadline=None, derandomize=not os.environ.get("FG_WRONG_TYPES_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- argument kinds


@dataclasses.dataclass(frozen=True)
class Arg:
    """One argument's kind; ``valid(value)`` says whether a value may be accepted (else it must be refused).

    kind: ``int``, ``num``, ``str``, ``flag``, ``ints`` / ``nums`` / ``power`` (1-D numeric arrays: ids,
    finite numbers, power in W), ``samples``, ``executions``, ``obj`` (an instance of ``types``),
    ``callable``, ``path`` (a file path), ``any`` (nothing refused; only the error types are checked).
    """

    kind: str
    optional: bool = False
    lo: Optional[float] = None
    hi: Optional[float] = None
    choices: Optional[tuple[Any, ...]] = None
    types: tuple[type, ...] = ()
    nan_ok: bool = False
    #: ``lo`` and ``hi`` exclusive (a duration > 0, a margin < 1).
    open_lo: bool = False
    open_hi: bool = False
    #: A path argument that may be "" (checked where the file is written, not here).
    empty_ok: bool = False
    #: Structured arrays: the fields the entry reads and must refuse a corrupted value in (others may pass).
    checked: tuple[str, ...] = ()
    #: Structured arrays: a NaN total is a failed read the entry keeps (a recording, a capture).
    nan_total: bool = False
    #: 0 is valid besides [lo, hi] (a figure not known).
    zero_ok: bool = False
    #: Valid values above this are not run (a bootstrap of 10^5 resamples is valid and takes minutes);
    #: wrong values above it still must be refused.
    max_tried: Optional[float] = None

    def valid(self, value: Any) -> bool:
        if value is None:
            return self.optional or self.kind == "any"
        k = self.kind
        if k == "any":
            return True
        if k in ("int", "num"):
            return self._number(value)
        if k == "str":
            return isinstance(value, str) and (self.choices is None or value in self.choices)
        if k == "flag":
            return isinstance(value, (bool, np.bool_))
        if k == "obj":
            return isinstance(value, self.types)
        if k == "callable":
            return callable(value)
        if k == "path":
            return isinstance(value, (str, os.PathLike)) and (value != "" or self.empty_ok)
        if k in ("ints", "nums", "power", "samples", "executions"):
            return _valid_array(self, value)
        raise AssertionError(k)

    def _number(self, value: Any) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            return False
        if self.kind == "int" and not isinstance(value, (int, np.integer)):
            return bool(math.isfinite(value) and float(value).is_integer()) and self._in(value)
        if not math.isfinite(float(value)):
            return self.nan_ok and math.isnan(float(value))
        if self.kind == "int" and not -(2**63) <= int(value) < 2**63:
            return False
        return self._in(value)

    def _in(self, value: Any) -> bool:
        x = float(value)
        if self.zero_ok and x == 0:
            return True
        above = self.lo is None or (x > self.lo if self.open_lo else x >= self.lo)
        below = self.hi is None or (x < self.hi if self.open_hi else x <= self.hi)
        return above and below


def _valid_array(spec: Arg, value: Any) -> bool:
    """Arrays: the corrupted copies carry their verdict (see ``_corrupt``); whole replacements are wrong."""
    return isinstance(value, _Corrupted) and value.acceptable


class _Corrupted:
    """A valid array with one element replaced, and whether the result may still be accepted."""

    def __init__(self, array: Any, acceptable: bool, what: str) -> None:
        self.array, self.acceptable, self.what = array, acceptable, what

    def __repr__(self) -> str:
        return f"<array with {self.what}>"


class _Odd:
    """An object of no type the package knows."""

    def __repr__(self) -> str:
        return "<odd object>"


#: Numbers for fresh folder names (hypothesis's own draws repeat between tests when derandomized).
_FRESH = itertools.count()

WRONG_TYPES = [None, "x", b"x", [1, 2], {}, {"a": 1}, _Odd(), True, 1j]
NUMBERS = [0.5, 2.5, -1, -1.0, 0, 0.0, math.nan, math.inf, -math.inf, 3e38, -3e38, 1e300, 2**63, 2**64,
           -(2**63) - 1, np.float64(0.5), np.int64(3), np.uint64(2**63 + 1), "1e6", "3"]


def _values(spec: Arg, base: Any) -> st.SearchStrategy[Any]:
    """Wrong and absurd values for one argument (``base`` is its valid value)."""
    k = spec.kind
    if k in ("int", "num"):
        return st.one_of(st.sampled_from(WRONG_TYPES + NUMBERS), st.floats(allow_nan=True, allow_infinity=True),
                         st.integers(-(2**70), 2**70))
    if k == "str":
        extra = ["no-such-choice", ""] if spec.choices else [""]
        return st.one_of(st.sampled_from([v for v in WRONG_TYPES if not isinstance(v, str)] + extra + [5, 0.5]),
                         st.text(max_size=4))
    if k == "flag":
        return st.sampled_from(WRONG_TYPES + [0, 1, 2, "yes", "no", math.nan, np.bool_(True)])
    if k in ("obj", "callable", "any"):
        return st.sampled_from(WRONG_TYPES + [5, 0.5, math.nan, -1, "sim", np.zeros(3)])
    if k == "path":
        # A missing folder, fresh each time (a writer that creates folders must not make it exist for the next).
        missing = st.builds(lambda: os.path.join(F.tmp, f"missing-{next(_FRESH)}", "file.fg"))
        return st.one_of(st.sampled_from([None, 123, 1.5, b"x", [], {}, _Odd(), True, ""]), missing)
    # Whole replacements: wrong types must be refused; a scalar, a list or another array may be read as one.
    wrong = [v for v in WRONG_TYPES if not isinstance(v, (list, bool))] + [[[1, 2], [3]], ["a", "b"]]
    maybe = [_Maybe(v, f"{type(v).__name__} {v!r}") for v in (5, 3e38, [1, 2], True, np.zeros(3), np.zeros((2, 2)))]
    return st.one_of(st.sampled_from(wrong + maybe), _corruptions(spec, base))


def _corruptions(spec: Arg, base: Any) -> st.SearchStrategy[_Corrupted]:
    """``base`` with one element made wrong: NaN, infinity, negative, 3e38, a fraction, past 2**63."""
    arr = np.array(base, copy=True)
    if arr.dtype.names:
        fields = [f for f in arr.dtype.names if arr.dtype[f].kind in "iuf"]
        if not fields or not len(arr):
            return st.nothing()
        return st.builds(lambda f, i, v: _set_field(spec, arr, f, i, v), st.sampled_from(fields),
                         st.integers(0, len(arr) - 1),
                         st.sampled_from([math.nan, math.inf, -1.0, 3e38, 0.5, -(2**62)]))
    flat = arr.ravel()
    if not flat.size:
        return st.nothing()
    return st.builds(lambda i, v: _set_element(spec, arr, i, v), st.integers(0, flat.size - 1),
                     st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 3e38, 0.5, 2**63 + 1, 2**64]))


def _set_element(spec: Arg, arr: np.ndarray, i: int, v: Any) -> _Corrupted:
    what = f"{v} at {i}"
    if isinstance(v, int) and v >= 2**63:
        # Past int64: as a uint64 array (wrapped to negative by a careless astype) or as Python ints.
        if arr.dtype.kind in "iu" and v < 2**64:
            out = arr.astype(np.uint64) if np.all(arr >= 0) else arr.astype(object)
            out.ravel()[i] = v
            return _Corrupted(out, spec.kind != "ints", what)
        out = arr.astype(object)
        out.ravel()[i] = v
        return _Corrupted(out.tolist(), spec.kind != "ints", what)
    out = arr.astype(np.float64)
    out.ravel()[i] = v
    if not math.isfinite(v) and not spec.nan_ok:
        return _Corrupted(out, False, what)
    if spec.kind == "ints" and v != int(v):
        return _Corrupted(out, False, what)
    if spec.kind == "power" and (v < 0 or v > 1e4):
        return _Corrupted(out, False, what)
    return _Maybe(out, what)


_POWER = ("total", "compute", "io", "memory")


def _set_field(spec: Arg, arr: np.ndarray, field: str, i: int, v: float) -> _Corrupted:
    """``arr`` with ``arr[field][i] = v``: must be refused where the entry reads that field and ``v`` is no value of it."""
    out = arr.copy()
    what = f"{field}[{i}] = {v}"
    kind = out.dtype[field].kind
    if kind in "iu" and (not math.isfinite(v) or v != int(v)):
        return _Maybe(out, f"{field} unchanged (an integer field holds no {v})")
    try:
        out[field][i] = v
    except (OverflowError, ValueError):
        return _Maybe(out, f"{field} unchanged")
    if field not in spec.checked:
        return _Maybe(out, what)
    if field in _POWER:
        wrong = math.isinf(v) or v < 0 or v > 1e4 or (math.isnan(v) and field == "total" and not spec.nan_total)
    elif field.endswith("_err_ns") or field == "window_ns":
        wrong = not math.isfinite(v) or v < 0
    else:
        wrong = not math.isfinite(v)
    return _Corrupted(out, False, what) if wrong else _Maybe(out, what)


class _Maybe(_Corrupted):
    """A corruption that may be accepted or refused (a -1 id may be valid; a changed time may be fine)."""

    def __init__(self, array: Any, what: str) -> None:
        super().__init__(array, True, what)


# ---------------------------------------------------------------- valid inputs, built once


class Identity:
    """Logs stamped in host ns already."""

    def to_host(self, ticks):
        return np.asarray(ticks)

    def error_bound_at(self, host_ns):
        return np.full(np.shape(host_ns), 100.0)


class FX:
    """Valid objects for the table, each built on first use (a profile, a trace, a capture...)."""

    @functools.cached_property
    def tmp(self) -> str:
        import tempfile
        return tempfile.mkdtemp(prefix="fg-wrong-types-")

    @functools.cached_property
    def campaign(self) -> tuple[np.ndarray, np.ndarray]:
        n = 60
        starts = np.arange(n, dtype=np.int64) * 10_000_000
        ex = fg.make_executions(np.arange(n), np.zeros(n, int), np.zeros(n, int), starts, starts + 100_000)
        logs = np.zeros(n * 3, dtype=fg.SAMPLE_DTYPE)
        rng = np.random.default_rng(0)
        logs["source_ts"] = np.repeat(starts, 3) + rng.integers(0, 100_000, 3 * n)
        logs["total"], logs["compute"], logs["io"], logs["memory"] = 300.0, 200.0, 50.0, 50.0
        return logs, ex

    @property
    def samples(self) -> np.ndarray:
        return self.campaign[0]

    @property
    def executions(self) -> np.ndarray:
        return self.campaign[1]

    @functools.cached_property
    def sensor(self) -> fg.SensorModel:
        return fg.sensor_preset("amd-1ms-average")

    @functools.cached_property
    def backend(self) -> backends.SimBackend:
        return backends.SimBackend(seed=6)

    @property
    def caps(self) -> fg.Capabilities:
        return self.backend.capabilities

    @functools.cached_property
    def profile(self) -> fg.Profile:
        return fg.profile("cb-4k-gemm", backends.SimBackend(seed=6), mode="both", runs=12, top_up=False)

    @property
    def ep(self) -> fg.ExecutionProfile:
        return next(iter(self.profile.profiles.values()))

    @functools.cached_property
    def loop(self) -> Any:
        return app.simulate_training_loop(60, seed=4, pause_every=0)

    @functools.cached_property
    def trace_path(self) -> str:
        return str(self.loop.write_trace(os.path.join(self.tmp, "t.json.gz")))

    @functools.cached_property
    def capture(self) -> files.PowerCapture:
        return self.loop.capture()

    @functools.cached_property
    def capture_path(self) -> str:
        return self.capture.save(os.path.join(self.tmp, "c.npz"))

    @functools.cached_property
    def logs_csv_path(self) -> str:
        path = os.path.join(self.tmp, "logs.csv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("t_ns,power_w\n1000000,100.5\n2000000,101.0\n")
        return path

    @functools.cached_property
    def power_log_path(self) -> str:
        # nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv -lms 100, as the tool writes it.
        path = os.path.join(self.tmp, "smi.csv")
        with open(path, "w") as f:
            f.write("timestamp, index, power.draw [W]\n")
            for i in range(50):
                f.write(f"2026/11/29 10:00:{i // 10:02d}.{(i % 10) * 100:03d}, 0, {100.0 + i:.2f} W\n")
        return path

    @functools.cached_property
    def kernel_trace(self) -> fg.KernelTrace:
        return files.read_trace(self.trace_path)

    @functools.cached_property
    def trace_profile(self) -> fg.TraceProfile:
        return fg.profile_trace(self.trace_path, self.capture, min_executions=5)

    @functools.cached_property
    def profile_path(self) -> str:
        return fg.save(self.profile, os.path.join(self.tmp, "p.fgprof"))

    @functools.cached_property
    def node(self) -> fg.NodeProfile:
        return multi.merge_ranks([self.profile, self.profile], [clocks.HostAlignment.identity(r) for r in range(2)])

    @functools.cached_property
    def interleaved(self) -> fg.InterleavedProfile:
        return app.profile_interleaved("cb-4k-gemm", [("mb-8k-gemv", 4)], backends.SimBackend(seed=1), runs=12,
                                       reference=self.profile)

    @functools.cached_property
    def brackets(self) -> np.ndarray:
        host = 10**12 + np.arange(64, dtype=np.int64) * 5_000_000
        return np.stack([host - 500, host // 10, host + 500], axis=1)

    @functools.cached_property
    def record(self) -> records.RunRecord:
        b = backends.SimBackend(seed=2)
        return b.execute_run("cb-4k-gemm", 8, b.new_run_id())

    @functools.cached_property
    def device_map(self) -> Any:
        return clocks.fit_device_map(self.record.brackets, self.caps.device_tick_ns)

    @functools.cached_property
    def dec(self) -> method.Deconvolution:
        s, ex = self.campaign
        return method.deconvolve(s, ex, Identity(), self.sensor, execution_of_interest=0, runs=np.arange(60), bins=8,
                                 bootstrap=0)

    @functools.cached_property
    def char_logs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Logs of a 1 ms instant sensor under a 20/20 ms square wave (300 W light, 500 W heavy)."""
        t = np.arange(0, 400e6, 1e6)
        on = np.array([[s, s + 20e6] for s in np.arange(0, 400e6, 40e6)])
        p = np.where(((t % 40e6) < 20e6), 500.0, 300.0) + np.random.default_rng(1).normal(0, 2, len(t))
        return t, p, on

    @functools.cached_property
    def meter(self) -> tuple[np.ndarray, np.ndarray]:
        """A reference meter at 5 kHz beside ``char_logs``: the same square wave, without noise."""
        tm = np.arange(0, 400e6, 0.2e6)
        return tm, np.where(((tm % 40e6) < 20e6), 500.0, 300.0)

    @functools.cached_property
    def window_logs(self) -> dict[str, Any]:
        """1 ms window averages of a loop of 1,000 kernels (sim.draw_schedule), for measure_window_offset."""
        rng = np.random.default_rng(0)
        starts, ends, sig, _, _, _, end = sim.draw_schedule(rng, 200, duration_jitter=0.005, pause_ns=300_000.0,
                                                            pause_jitter=0.1, warmup=0.04, warmup_iterations=10,
                                                            lead_ns=2e6, gap_range_ns=(2_000.0, 8_000.0))
        t = np.arange(0.0, end, 1e6) + 3e5
        return {"t_ns": t, "power_w": rng.normal(200.0, 2.0, len(t)), "windows_ns": np.full(len(t), 1e6),
                "sensor": fg.sensor_preset("amd-1ms-average"), "starts_ns": starts, "ends_ns": ends,
                "kernel_ids": sig}

    @functools.cached_property
    def characterisation_path(self) -> str:
        t, p, on = self.char_logs
        return fg.save(fg.characterize_logs(t, p, on, split_check=False), os.path.join(self.tmp, "s.json"))

    @functools.cached_property
    def sim_run(self) -> sim.RunResult:
        return sim.SimGPU(seed=1).run("cb-4k-gemm", 4)

    @functools.cached_property
    def sync(self) -> app.SyncReport:
        return app.sync_report(backends.SimBackend(seed=1), seconds=0.2, burst=4, interval_s=0.05)


F = FX()
HERE = os.path.dirname(os.path.abspath(__file__))
GPU_METRICS = os.path.join(HERE, "fixtures", "gpu_metrics_v1_9_smu_13_0_6.bin")
# The synthesized rocprofv3 CSV the repository writes itself (tests/data/traces/synth_rocprofv3.py).
ROCPROF_CSV = os.path.join(HERE, "data", "traces", "rocprofv3", "synth", "7301_kernel_trace.csv")


def a_workload() -> backends.Workload:
    """A workload for resolve_workload's ``module:function``."""
    return backends.Workload("w", lambda: None)


def _measure(n):
    return method.PowerMeasurement(300.0 + 0.0 * n, 1.0, 20)


# ---------------------------------------------------------------- the table


@dataclasses.dataclass
class Entry:
    """A public entry point: how to call it validly, and its arguments' kinds."""

    name: str
    fn: Callable[..., Any]
    base: Callable[[], dict[str, Any]]
    args: dict[str, Arg]
    aliases: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    #: Errors other than the documented ones a valid-typed value may meet (no device on this machine).
    also: tuple[type, ...] = ()
    #: Only must-refuse values (a call that accepts runs a whole campaign).
    refusals_only: bool = False
    #: Optional modules the entry needs (torch: installed with the test-full extra); skipped without them.
    needs: tuple[str, ...] = ()


I = Arg("int")  # noqa: E741
N = Arg("num")
POS = Arg("num", lo=0.0)
GT0 = Arg("num", lo=0.0, open_lo=True)
UNIT = Arg("num", lo=0.0, hi=1.0, open_lo=True, open_hi=True)
COUNT = Arg("int", lo=0)
TICK = Arg("num", lo=1e-3, hi=1e9)  # a clock's tick: between a terahertz's and a second's (fg's MIN/MAX_TICK_NS)
TICK_OR_0 = Arg("num", lo=1e-3, hi=1e9, zero_ok=True)  # a tick, or 0: not known
S = Arg("str")
FLAG = Arg("flag")
PATH = Arg("path")
#: A launch journal the C++ launch-capture test wrote (tests/cpp/test_launch_capture.cpp).
LAUNCH_JOURNAL = os.path.join(os.path.dirname(__file__), "data", "launches_cpp.journal")
ANY = Arg("any")
SENSOR = Arg("obj", types=(fg.SensorModel, str))
OPT_SENSOR = Arg("obj", optional=True, types=(fg.SensorModel, str))
MAP = Arg("obj", types=(Identity, clocks.ClockMap, clocks.PiecewiseClockMap, clocks.EpochMap))
#: Power logs an entry validates (every field it reads), and executions likewise.
SAMPLES = Arg("samples", checked=("source_ts", "window_ns", *_POWER))
EXECS = Arg("executions", checked=("start_ns", "end_ns", "start_err_ns", "end_err_ns"))
#: Kept as recorded: a NaN total is a failed read (NVML's); an infinite, negative or absurd power is refused.
KEPT_SAMPLES = Arg("samples", checked=("window_ns", *_POWER), nan_total=True)
#: Read for some fields only: nothing in them is required to be refused.
READ = Arg("samples")


def opt(a: Arg) -> Arg:
    return dataclasses.replace(a, optional=True)


def obj(*types: type, optional: bool = False) -> Arg:
    return Arg("obj", types=types, optional=optional)


def choice(*choices: Any) -> Arg:
    return Arg("str", choices=choices)


NO_DEVICE = (fg.DeviceUnavailableError, fg.LibraryNotFoundError, fg.SymbolNotFoundError)


def _entries() -> list[Entry]:
    s, ex = "samples", "executions"
    e: list[Entry] = [
        # ---- top level and app
        Entry("fg.open_device", fg.open_device, lambda: {"device": "sim", "seed": 1},
              {"device": Arg("obj", types=(str, backends.SimBackend)), "seed": opt(COUNT)}, also=NO_DEVICE),
        Entry("fg.profile", fg.profile, lambda: {"kernel": "cb-4k-gemm", "backend": backends.SimBackend(seed=1),
                                                 "mode": "sse", "runs": 12, "top_up": False},
              {"kernel": Arg("obj", types=(str, int, backends.Workload)), "mode": choice("sse", "ssp", "both"),
               "runs": opt(Arg("int", lo=2, hi=100_000)), "top_up": FLAG, "margin": opt(UNIT),
               "backend": obj(backends.SimBackend, str, optional=True)},
              refusals_only=True),
        Entry("fg.record", fg.record, lambda: {"device": "sim-live", "path": None},
              {"device": obj(str, backends.SimBackend), "path": Arg("path", optional=True, empty_ok=True),
               "period_ns": opt(Arg("int", lo=_core.MIN_PERIOD_NS, hi=_core.MAX_PERIOD_NS)),
               "brackets_every_s": Arg("num", lo=0.01, hi=60.0), "brackets_per_read": Arg("int", lo=1, hi=4096),
               "capacity": opt(Arg("int", lo=_core.MIN_CAPACITY, hi=1 << 26)),
               "counter": obj(str, _core.PowerSource, optional=True),
               "counter_period_ns": opt(Arg("int", lo=_core.MIN_PERIOD_NS, hi=_core.MAX_PERIOD_NS))},
              also=NO_DEVICE, refusals_only=True),
        Entry("fg.stitch_logs", fg.stitch_logs, lambda: {s: F.samples, ex: F.executions, "logger_map": Identity(),
                                                         "execution_of_interest": 0, "margin": 0.05},
              {s: SAMPLES, ex: EXECS, "logger_map": MAP, "execution_of_interest": Arg("int", lo=-1),
               "margin": opt(UNIT), "kernel_id": opt(I), "label": S, "sensor": OPT_SENSOR,
               "attribution": choice("auto", "instant", "deconvolve"), "x": choice("time", "fraction")}),
        Entry("fg.profile_trace", fg.profile_trace, lambda: {"trace": F.trace_path, "samples": F.capture,
                                                             "min_executions": 5},
              {"trace": obj(str, os.PathLike, fg.KernelTrace), "samples": obj(np.ndarray, files.PowerCapture),
               "logger_map": obj(Identity, clocks.EpochMap, optional=True), "margin": opt(UNIT),
               "min_executions": Arg("int", lo=2), "warmup_tolerance": UNIT,
               "sensor": OPT_SENSOR, "attribution": choice("auto", "instant", "deconvolve"),
               "device": opt(COUNT), "bins": Arg("int", lo=2, hi=64), "align": ANY,
               "max_power_w": opt(GT0)}),
        Entry("fg.characterize", fg.characterize, lambda: {"backend": "sim", "runs": 4, "cycles": 2},
              {"backend": obj(str, backends.SimBackend), "runs": Arg("int", lo=2, hi=100_000),
               "cycles": Arg("int", lo=1, hi=1000), "half_period_ns": opt(GT0),
               "prior": obj(fg.SensorModel, optional=True), "channel": S}, refusals_only=True),
        Entry("fg.characterize_logs", fg.characterize_logs,
              lambda: dict(zip(("t_ns", "power_w", "load"), F.char_logs)) | {"split_check": False},
              {"t_ns": Arg("nums"), "power_w": Arg("power"), "load": Arg("nums"), "scale_ns": opt(GT0),
               "name": S, "device": S, "split_check": FLAG, "reference": ANY},
              aliases={"t_ns": ("t_ns, power_w",), "power_w": ("t_ns, power_w",)}),
        Entry("fg.save", fg.save, lambda: {"obj": F.profile, "path": os.path.join(F.tmp, "saved.fgprof")},
              {"obj": obj(fg.Profile, fg.TraceProfile, fg.Recording, fg.Characterisation, fg.NodeProfile,
                          fg.InterleavedProfile), "path": PATH}),
        Entry("fg.load", fg.load, lambda: {"path": F.profile_path}, {"path": PATH}),
        Entry("fg.export_trace", fg.export_trace, lambda: {"profile": F.profile,
                                                           "path": os.path.join(F.tmp, "trace.json")},
              {"profile": obj(fg.Profile, fg.TraceProfile, fg.NodeProfile, fg.InterleavedProfile), "path": PATH}),
        Entry("fg.thread_policy", fg.thread_policy, lambda: {"enabled": False}, {"enabled": FLAG}),
        Entry("fg.sensor_preset", fg.sensor_preset, lambda: {"name": "instant-1ms"},
              {"name": choice(*sensors.SENSOR_PRESETS)}),
        Entry("fg.make_executions", fg.make_executions,
              lambda: {"run": [0, 1], "index": [0, 0], "kernel_id": [0, 0], "start_ns": [0, 10_000],
                       "end_ns": [5_000, 15_000], "start_err_ns": [0.0, 0.0], "end_err_ns": [0.0, 0.0]},
              {"run": Arg("ints"), "index": Arg("ints"), "kernel_id": Arg("ints"),
               "start_ns": Arg("nums"), "end_ns": Arg("nums"),  # floats are rounded to the ns, as documented
               "start_err_ns": Arg("nums"), "end_err_ns": Arg("nums")},  # or one for all
              aliases={"start_ns": ("executions",), "end_ns": ("executions",)}),
        Entry("fg.SensorModel", fg.SensorModel, lambda: {"name": "s", "kind": "window", "period_ns": 1e6,
                                                         "window_ns": 1e6},
              {"name": S, "kind": choice("instant", "window", "counter"), "period_ns": GT0,
               "window_ns": POS, "shape": choice("boxcar", "first_order"), "tau_ns": POS, "delay_ns": N,
               "gain": GT0, "offset_w": N, "quantum": POS, "source": S, "notes": S}),
        Entry("fg.SensorModel.from_dict", fg.SensorModel.from_dict, lambda: {"d": F.sensor.as_dict()},
              {"d": obj(dict)}, aliases={"d": ("sensor", "name", "kind", "period_ns")}),
        Entry("fg.Capabilities", fg.Capabilities, lambda: dataclasses.asdict(F.caps) | {"sensor": F.caps.sensor},
              {"name": S, "device": S, "logger_period_ns": GT0, "logger_window_ns": POS,
               "logger_clock": S, "device_tick_ns": TICK, "gpu_markers": FLAG, "marker_err_ns": POS,
               "channels": obj(tuple, list), "virtual_time": FLAG, "logger_tick_ns": TICK_OR_0,
               "sensor": obj(fg.SensorModel, optional=True), "sensor_semantics": S, "provenance": obj(dict),
               "device_resolution_ticks": Arg("num", lo=1.0)}),
        Entry("fg.Recording", fg.Recording, lambda: {"samples": F.samples, "executions": F.executions},
              {"samples": KEPT_SAMPLES, "executions": Arg("executions", optional=True), "clocks": obj(dict),
               "sensor": obj(fg.SensorModel,
                                                                                                 optional=True),
               "source": obj(dict), "provenance": obj(dict)}),
        Entry("fg.KernelTrace.from_rows", fg.KernelTrace.from_rows,
              lambda: {"start_ns": [0, 10_000], "end_ns": [5_000, 15_000], "names": ["a", "b"],
                       "grid": [(1, 1, 1)] * 2, "block": [(64, 1, 1)] * 2, "clock": "unix-epoch", "source": "test"},
              {"start_ns": Arg("ints"), "end_ns": Arg("ints"), "names": ANY, "grid": ANY, "block": ANY,
               "clock": S, "source": S}, aliases={"start_ns": ("trace",), "end_ns": ("trace",)}),
        Entry("fg.KernelTrace.from_executions", fg.KernelTrace.from_executions,
              lambda: {"executions": F.executions[:4], "names": ["k"] * 4},
              {"executions": EXECS, "names": ANY, "grid": ANY, "block": ANY}),
        # ---- app
        Entry("app.simulate_training_loop", app.simulate_training_loop, lambda: {"iterations": 20, "seed": 1},
              {"iterations": Arg("int", lo=1, hi=10**6), "seed": COUNT, "sensor": OPT_SENSOR,
               "pause_every": COUNT, "pause_ns": COUNT, "idle_before_ns": COUNT, "epoch_slew_ppm": N,
               "brackets_every_ns": Arg("int", lo=1)}, refusals_only=True),
        Entry("app.profile_interleaved", app.profile_interleaved,
              lambda: {"kernel": "cb-4k-gemm", "preceded_by": [("mb-8k-gemv", 4)],
                       "backend": backends.SimBackend(seed=1), "runs": 12, "reference": F.profile},
              {"kernel": S, "preceded_by": ANY, "runs": opt(Arg("int", lo=2, hi=100_000))},
              refusals_only=True),
        Entry("app.profile_node", app.profile_node,
              lambda: {"kernel": "cb-4k-gemm", "backends": ["sim:1", "sim:2"], "mode": "sse", "runs": 12,
                       "top_up": False},
              {"kernel": obj(str, int, optional=True), "backends": ANY, "runs": opt(Arg("int", lo=2, hi=100_000)),
               "top_up": FLAG}, refusals_only=True),
        Entry("app.sync_report", app.sync_report, lambda: {"backend": backends.SimBackend(seed=1), "seconds": 0.2,
                                                           "burst": 4, "interval_s": 0.05},
              {"backend": obj(backends.SimBackend), "seconds": Arg("num", lo=0.0, hi=3600, open_lo=True),
               "burst": Arg("int", lo=2, hi=10_000), "interval_s": Arg("num", lo=0.0, hi=3600, open_lo=True)},
              refusals_only=True),
        Entry("app.TerminalProgress", app.TerminalProgress, lambda: {"min_interval_s": 0.1},
              {"min_interval_s": POS, "force": opt(FLAG)}),
        Entry("app.LineProgress", app.LineProgress, lambda: {"fn": print}, {"fn": Arg("callable")}),
        Entry("app.as_reporter", app.as_reporter, lambda: {"progress": None}, {"progress": ANY}),
        Entry("app.LoopKernel", app.LoopKernel, lambda: {"preset": "cb-4k-gemm", "name": "k", "grid": (1, 1, 1)},
              {"preset": S, "name": S, "grid": ANY, "block": ANY}),
        Entry("app.plot_kernel", app.plot_kernel, lambda: {"ep": F.ep}, {"ep": obj(fg.ExecutionProfile),
                                                                          "channels": ANY, "bands": FLAG}),
        Entry("app.plot_kernels", app.plot_kernels, lambda: {"profiles": F.profile.profiles},
              {"profiles": ANY, "channel": choice("total", "compute", "io", "memory"),
               "x": choice("fraction", "time")}),
        Entry("app.plot_kernel_energy", app.plot_kernel_energy, lambda: {"tp": F.trace_profile},
              {"tp": obj(fg.TraceProfile), "top": Arg("int", lo=1)}),
        Entry("app.plot_whole_run", app.plot_whole_run, lambda: {"profile": F.profile},
              {"profile": obj(fg.Profile), "max_runs": opt(Arg("int", lo=1))}),
        Entry("app.plot_ssp_search", app.plot_ssp_search, lambda: {"search": F.profile.ssp_search},
              {"search": obj(method.SspSearch)}),
        Entry("app.plot_sync_error", app.plot_sync_error,
              lambda: {"brackets": F.sync.brackets, "clock_map": F.sync.linear, "tick_ns": F.sync.tick_ns},
              {"brackets": Arg("ints"), "clock_map": obj(clocks.ClockMap, clocks.PiecewiseClockMap),
               "tick_ns": TICK, "max_brackets": Arg("int", lo=1)}),
        Entry("app.plot_interleaved", app.plot_interleaved, lambda: {"il": F.interleaved},
              {"il": obj(fg.InterleavedProfile), "channel": choice("total", "compute", "io", "memory")}),
        Entry("app.figure_kernels_by_component", app.figure_kernels_by_component,
              lambda: {"profiles": F.profile.profiles},
              {"profiles": ANY, "channels": ANY, "x": choice("fraction", "time")}),
        Entry("app.figure_trace_profiles", app.figure_trace_profiles, lambda: {"tp": F.trace_profile},
              {"tp": obj(fg.TraceProfile), "top": Arg("int", lo=1), "channels": ANY}),
        # ---- backends
        Entry("backends.SimBackend", backends.SimBackend, lambda: {"seed": 1},
              {"seed": COUNT, "brackets_per_run": Arg("int", lo=1), "idle_tolerance": GT0,
               "max_idle_ns": Arg("int", lo=1), "gpu": obj(sim.SimGPU, optional=True)}),
        Entry("backends.LiveSimBackend", backends.LiveSimBackend, lambda: {"seed": 1},
              {"seed": COUNT, "period_ns": Arg("int", lo=1), "depth": Arg("int", lo=1),
               "brackets_per_run": Arg("int", lo=1), "idle_tolerance": GT0}),
        Entry("backends.AmdBackend", backends.AmdBackend, lambda: {"device": 0},
              {"device": COUNT, "channel": choice("energy", "power"), "prefer": choice("gpu_metrics", "hwmon"),
               "period_ns": Arg("int", lo=1)}, also=NO_DEVICE + (RuntimeError,)),
        Entry("backends.NvidiaBackend", backends.NvidiaBackend, lambda: {"device": 0},
              {"device": COUNT, "power": choice(*backends.NVML_MODES), "period_ns": opt(Arg("int", lo=1)),
               "brackets_per_run": Arg("int", lo=1)}, also=NO_DEVICE + (RuntimeError,)),
        Entry("backends.Workload", backends.Workload, lambda: {"name": "w", "launch": lambda: None},
              {"name": S, "launch": Arg("callable")}),
        Entry("backends.execution_plan", backends.execution_plan, lambda: {"kernel": "cb-4k-gemm", "executions": 4},
              {"kernel": ANY, "executions": Arg("int", lo=1), "limit": opt(Arg("int", lo=1)), "device": S}),
        Entry("backends.find_amd_gpus", backends.find_amd_gpus, lambda: {"sysfs_root": F.tmp},
              {"sysfs_root": PATH}),
        Entry("backends.format_reports", backends.format_reports, lambda: {"reports": [], "verbose": False},
              {"reports": ANY, "verbose": FLAG}),
        Entry("backends.list_backends", backends.list_backends, lambda: {"backends": ["sim"]}, {"backends": ANY}),
        Entry("backends.marker_records", backends.marker_records,
              lambda: {"run": 0, "kernel_id": 0, "ticks": np.array([[0, 10], [20, 30]], dtype=np.int64),
                       "host_launch_ns": np.array([0, 20], dtype=np.int64), "host_sync_ns": 40},
              {"run": Arg("int", lo=0, hi=2**31 - 1), "kernel_id": ANY, "ticks": Arg("ints"),
               "host_launch_ns": Arg("ints"),
               "host_sync_ns": I}),
        Entry("backends.match_nvml_device", backends.match_nvml_device,
              lambda: {"cuda_device": {"uuid": "GPU-1", "pci_bus_id": "0000:01:00.0"},
                       "nvml_devices": [{"index": 0, "uuid": "GPU-1", "pci_bus_id": "0000:01:00.0"}]},
              {"cuda_device": obj(dict), "nvml_devices": obj(list)}, also=NO_DEVICE),  # no match: documented
        Entry("backends.nvml_provenance", backends.nvml_provenance, lambda: {"window_documented": True},
              {"window_documented": opt(FLAG), "sensor": obj(fg.SensorModel, optional=True)}),
        Entry("backends.nvml_semantics", backends.nvml_semantics, lambda: {"mode": "samples"},
              {"mode": choice(*backends.NVML_MODES), "window_ns": opt(POS), "window_documented": opt(FLAG)}),
        Entry("backends.nvml_sensor", backends.nvml_sensor,
              lambda: {"mode": "samples", "period_ns": 1e6, "window_ns": 0.0, "window_documented": True},
              {"mode": choice(*backends.NVML_MODES), "period_ns": POS, "window_ns": POS,  # period 0: unknown
               "window_documented": FLAG}),
        Entry("backends.read_gpu_metrics", backends.read_gpu_metrics, lambda: {"path": GPU_METRICS},
              {"path": PATH}, also=NO_DEVICE),  # a missing sysfs file: DeviceUnavailableError, documented
        Entry("backends.resolve_workload", backends.resolve_workload,
              lambda: {"spec": f"{__name__}:a_workload"}, {"spec": S},
              also=(ModuleNotFoundError,)),  # a module that is not there: documented, exit 1 in the CLI
        Entry("backends.sim_markers", backends.sim_markers, lambda: {"ex": F.sim_run.executions}, {"ex": READ}),
        Entry("backends.torch_gemm", backends.torch_gemm, lambda: {"m": 8, "n": 8, "k": 8, "device": "cpu"},
              {"m": Arg("int", lo=1), "n": Arg("int", lo=1), "k": Arg("int", lo=1), "dtype": S}, also=NO_DEVICE, needs=("torch",)),
        Entry("backends.torch_gemv", backends.torch_gemv, lambda: {"m": 8, "k": 8, "device": "cpu"},
              {"m": Arg("int", lo=1), "k": Arg("int", lo=1), "dtype": S}, also=NO_DEVICE, needs=("torch",)),
        Entry("backends.torch_workload", backends.torch_workload, lambda: {"fn": lambda: None, "device": "cpu"},
              {"fn": Arg("callable"), "name": opt(S)}, also=NO_DEVICE, needs=("torch",)),
        Entry("backends.cupy_workload", backends.cupy_workload, lambda: {"fn": lambda: None},
              {"fn": Arg("callable"), "name": opt(S)}, also=NO_DEVICE + (ImportError,)),
        Entry("backends.wait_for_idle", backends.wait_for_idle,
              lambda: {"idle_level": lambda ns: 100.0, "baseline_w": 100.0, "tolerance": 0.01,
                       "logger_period_ns": 1e6, "max_idle_ns": 10_000_000},
              {"idle_level": Arg("callable"), "baseline_w": Arg("num", lo=0.0), "tolerance": GT0,
               "logger_period_ns": Arg("num", lo=0.0, hi=3.6e12, open_lo=True), "max_idle_ns": COUNT}),
        # ---- clocks
        Entry("clocks.fit_clock_map", clocks.fit_clock_map, lambda: {"brackets": F.brackets, "tick_ns": 10.0},
              {"brackets": Arg("ints"), "tick_ns": TICK, "select_factor": Arg("num", lo=1.0),
               "offset": choice("band", "midpoint"), "fit_skew": FLAG, "coverage": GT0,
               "min_reads": Arg("int", lo=2)}),
        Entry("clocks.fit_piecewise_clock_map", clocks.fit_piecewise_clock_map,
              lambda: {"brackets": F.brackets, "tick_ns": 10.0, "segment_ns": 1e8},
              {"brackets": Arg("ints"), "tick_ns": TICK, "segment_ns": GT0,
               "min_reads": Arg("int", lo=2)}),
        Entry("clocks.fit_device_map", clocks.fit_device_map,
              lambda: {"brackets": F.brackets, "tick_ns": 10.0},
              {"brackets": Arg("ints"), "tick_ns": TICK, "resolution_ticks": GT0}),
        Entry("clocks.fit_epoch_map", clocks.fit_epoch_map, lambda: {"brackets": F.capture.epoch_brackets},
              {"brackets": Arg("ints"), "step_threshold_ns": GT0}),
        Entry("clocks.fit_one_sided_clock_map", clocks.fit_one_sided_clock_map,
              lambda: {"read_host_ns": np.arange(64, dtype=np.int64) * 1_000_000 + 5_000,
                       "log_ticks": np.arange(64, dtype=np.int64) * 100_000, "tick_ns": 10.0},
              {"read_host_ns": Arg("ints"), "log_ticks": Arg("ints"), "tick_ns": TICK,
               "min_delay_ns": POS, "min_logs": Arg("int", lo=2)}),
        Entry("clocks.fit_host_alignment", clocks.fit_host_alignment,
              lambda: {"brackets": None, "rank": 0, "shares_host_clock": True},
              {"rank": COUNT, "root": COUNT, "shares_host_clock": FLAG, "trust_shared_clock": FLAG,
               "hostname": S}),
        Entry("clocks.fit_logger_map", clocks.fit_logger_map,
              lambda: {"caps": F.caps, "device_map": F.device_map, "samples": F.record.samples,
                       "tick_ns": F.caps.device_tick_ns},
              {"caps": obj(fg.Capabilities), "device_map": obj(clocks.ClockMap, clocks.PiecewiseClockMap),
               "samples": READ, "tick_ns": TICK}),
        Entry("clocks.executions_from_markers", clocks.executions_from_markers,
              lambda: {"markers": F.record.markers, "device_map": F.device_map, "marker_err_ns": 100.0},
              {"markers": READ, "device_map": obj(clocks.ClockMap, clocks.PiecewiseClockMap),
               "marker_err_ns": POS}),
        Entry("clocks.host_ns_exact", clocks.host_ns_exact, lambda: {"clock_map": F.device_map,
                                                                     "ticks": F.brackets[:, 1]},
              {"clock_map": obj(clocks.ClockMap, clocks.PiecewiseClockMap), "ticks": Arg("nums"), "name": S}),
        Entry("clocks.host_relative", clocks.host_relative,
              lambda: {"clock_map": F.device_map, "ticks": F.brackets[:, 1], "origin_ns": 10**12},
              {"clock_map": obj(clocks.ClockMap, clocks.PiecewiseClockMap), "ticks": Arg("nums"), "origin_ns": I,
               "name": S}),
        Entry("clocks.nominal_durations", clocks.nominal_durations,
              lambda: {"markers": F.record.markers, "tick_ns": 10.0},
              {"markers": READ, "tick_ns": TICK}),
        Entry("clocks.summarize_read_latency", clocks.summarize_read_latency, lambda: {"brackets": F.brackets},
              {"brackets": Arg("ints")}),
        Entry("clocks.record_clock_error", clocks.record_clock_error,
              lambda: {"brackets": F.brackets, "clock": "CLOCK_BOOTTIME"}, {"brackets": Arg("ints"), "clock": S}),
        Entry("clocks.timeline_of", clocks.timeline_of, lambda: {"records": [F.record], "caps": F.caps},
              {"records": ANY, "caps": obj(fg.Capabilities)}),
        Entry("clocks.SkewedClock", clocks.SkewedClock, lambda: {"offset_ns": 0, "skew_ppm": 1.0},
              {"offset_ns": I, "skew_ppm": Arg("num", lo=-1e5, hi=1e5), "base": ANY}),
        # ---- files
        Entry("files.load_profile", files.load_profile, lambda: {"path": F.profile_path}, {"path": PATH}),
        Entry("files.save_profile", files.save_profile, lambda: {"profile": F.profile,
                                                                 "path": os.path.join(F.tmp, "sp.fgprof")},
              {"profile": obj(fg.Profile, fg.TraceProfile, fg.NodeProfile, fg.InterleavedProfile), "path": PATH}),
        Entry("files.load_capture", files.load_capture, lambda: {"path": F.capture_path}, {"path": PATH}),
        Entry("files.load_characterisation", files.load_characterisation, lambda: {"path": F.characterisation_path},
              {"path": PATH}),
        Entry("files.save_characterisation", files.save_characterisation,
              lambda: {"characterisation": files.load_characterisation(F.characterisation_path),
                       "path": os.path.join(F.tmp, "sc.json")},
              {"characterisation": obj(fg.Characterisation), "path": PATH}),
        Entry("files.read_trace", files.read_trace, lambda: {"trace": F.trace_path}, {"trace": PATH}),
        Entry("files.read_launches", files.read_launches, lambda: {"path": LAUNCH_JOURNAL}, {"path": PATH}),
        Entry("files.read_logs_csv", files.read_logs_csv,
              lambda: {"path": F.logs_csv_path, "columns": ("t_ns", "power_w"), "what": "logs"},
              {"path": PATH, "columns": ANY, "what": S}, aliases={"path": ("logs",)}),
        Entry("files.read_power_log", files.read_power_log, lambda: {"path": F.power_log_path, "tz": "UTC"},
              {"path": PATH, "tz": opt(S), "device": opt(Arg("int", lo=0)), "period_s": opt(GT0)}),
        Entry("files.power_log_summary", files.power_log_summary, lambda: {"capture": F.capture},
              {"capture": obj(files.PowerCapture)}),
        Entry("sim.standin_library", sim.standin_library, lambda: {"vendor": "rocm"},
              {"vendor": choice("rocm", "cuda")}, also=(FileNotFoundError,)),
        Entry("files.read_kineto_trace", files.read_kineto_trace, lambda: {"trace": F.trace_path}, {"trace": PATH}),
        Entry("files.read_rocprof_kernel_trace", files.read_rocprof_kernel_trace, lambda: {"trace": ROCPROF_CSV},
              {"trace": PATH}),
        Entry("files.export_parquet", files.export_parquet,
              lambda: {"profile": F.profile, "directory": os.path.join(F.tmp, "pq")},
              {"profile": obj(fg.Profile, fg.InterleavedProfile), "directory": PATH}),
        Entry("files.export_trace", files.export_trace, lambda: {"profile": F.profile,
                                                                 "path": os.path.join(F.tmp, "t2.json")},
              {"profile": obj(fg.Profile, fg.TraceProfile, fg.NodeProfile, fg.InterleavedProfile), "path": PATH}),
        Entry("files.trace_events", files.trace_events, lambda: {"profile": F.profile},
              {"profile": obj(fg.Profile, fg.InterleavedProfile)}),
        Entry("files.insitu_trace_events", files.insitu_trace_events, lambda: {"tp": F.trace_profile},
              {"tp": obj(fg.TraceProfile)}),
        Entry("files.node_trace_events", files.node_trace_events, lambda: {"node": F.node},
              {"node": obj(fg.NodeProfile)}),
        Entry("files.annotate_trace", files.annotate_trace,
              lambda: {"trace": F.trace_path, "profile": F.trace_profile,
                       "out": os.path.join(F.tmp, f"annotated-{next(_FRESH)}.json")},
              {"trace": PATH, "profile": obj(fg.TraceProfile), "out": PATH, "overwrite": FLAG}),
        Entry("files.write_rocprof_trace", files.write_rocprof_trace,
              lambda: {"path": os.path.join(F.tmp, f"w{next(_FRESH)}_kernel_trace.csv"), "names": ["a", "b"],
                       "grid": [(1, 1, 1)] * 2, "block": [(64, 1, 1)] * 2, "start_ns": [0, 10_000],
                       "end_ns": [5_000, 15_000]},
              {"path": PATH, "names": ANY, "grid": ANY, "block": ANY, "start_ns": Arg("ints"), "end_ns": Arg("ints"),
               "output_format": choice("csv", "json", "rocpd"), "device": ANY, "stream": ANY, "correlation": ANY,
               "pid": Arg("int", lo=0), "cpu_agents": Arg("int", lo=0)}, refusals_only=True),
        Entry("files.write_kineto_trace", files.write_kineto_trace,
              lambda: {"path": os.path.join(F.tmp, "k.json"), "names": ["a", "b"], "grid": [(1, 1, 1)] * 2,
                       "block": [(64, 1, 1)] * 2, "start_ns": [0, 10_000], "end_ns": [5_000, 15_000],
                       "base_time_ns": 1_700_000_000_000_000_000},
              {"path": PATH, "start_ns": Arg("ints"), "end_ns": Arg("ints"), "base_time_ns": I,
               "names": ANY, "grid": ANY, "block": ANY}),
        Entry("files.PowerCapture.save", lambda capture, path: capture.save(path),
              lambda: {"capture": F.capture, "path": os.path.join(F.tmp, "c2.npz")}, {"path": PATH}),
        # ---- insitu
        # The public entry given a trace already read (a KernelTrace): the in-situ engine's own checks.
        Entry("fg.profile_trace(KernelTrace)", fg.profile_trace,
              lambda: {"trace": F.kernel_trace, "samples": F.capture, "min_executions": 5},
              {"trace": obj(fg.KernelTrace), "samples": obj(np.ndarray, files.PowerCapture),
               "min_executions": Arg("int", lo=2), "bins": Arg("int", lo=2, hi=64), "sensor": OPT_SENSOR,
               "device": opt(COUNT), "max_power_w": opt(GT0)}),
        Entry("insitu.align_logs_to_trace", insitu.align_logs_to_trace, _align_base,
              {"t_ns": Arg("nums"), "power_w": Arg("power"), "starts_ns": Arg("nums"), "ends_ns": Arg("nums"),
               "kernel_ids": Arg("ints"), "search_ns": GT0, "step_ns": GT0,
               "confidence": UNIT, "max_logs": Arg("int", lo=1)},
              aliases={k: ("t_ns, power_w", "starts_ns, ends_ns", "logs") for k in
                       ("t_ns", "power_w", "starts_ns", "ends_ns", "kernel_ids")}),
        # ---- method
        Entry("method.place_logs", method.place_logs, lambda: {s: F.samples, ex: F.executions,
                                                               "logger_map": Identity(), "execution_of_interest": 0},
              {s: SAMPLES, ex: EXECS, "logger_map": MAP, "execution_of_interest": opt(Arg("int", lo=-1)),
               "kernel_id": opt(I), "runs": Arg("ints", optional=True), "min_overlap": Arg("num", lo=0.0, hi=1.0)}),
        Entry("method.deconvolve", method.deconvolve,
              lambda: {s: F.samples, ex: F.executions, "logger_map": Identity(), "sensor": F.sensor,
                       "execution_of_interest": 0, "runs": np.arange(60), "bins": 8, "bootstrap": 0},
              {s: SAMPLES, ex: EXECS, "logger_map": MAP, "sensor": obj(fg.SensorModel),
               "execution_of_interest": Arg("int", lo=-1), "runs": Arg("ints"), "kernel_id": opt(I),
               "bins": Arg("int", lo=2, hi=10_000), "bootstrap": Arg("int", lo=0, hi=100_000, max_tried=200),
               "confidence": UNIT, "lam": opt(Arg("num", lo=0.0, hi=1e6)),
               "resolution_ns": opt(Arg("num", lo=1.0)), "seed": COUNT}),
        Entry("method.select_executions_of_interest", method.select_executions_of_interest,
              lambda: {ex: F.executions, "execution_of_interest": 0},
              {ex: EXECS, "execution_of_interest": opt(Arg("int", lo=-1)), "kernel_id": opt(I),
               "runs": Arg("ints", optional=True)}),
        Entry("method.select_golden_runs", method.select_golden_runs,
              lambda: {"durations_ns": np.full(60, 1e5) + np.arange(60), "margin": 0.05},
              {"durations_ns": Arg("nums"), "margin": UNIT, "runs": Arg("ints", optional=True)}),
        Entry("method.whole_run_view", method.whole_run_view,
              lambda: {"samples_host_ns": F.samples["source_ts"], "values": F.samples["total"], ex: F.executions,
                       "runs": np.arange(4)},
              {"samples_host_ns": Arg("nums"), "values": Arg("power"), ex: EXECS, "runs": Arg("ints"),
               "sse_index": opt(COUNT), "pad_ns": POS}),
        Entry("method.assign_logs_to_executions", method.assign_logs_to_executions,
              lambda: {"samples_host_ns": F.samples["source_ts"], ex: F.executions},
              {"samples_host_ns": Arg("nums"), ex: EXECS}),
        Entry("method.stitch", method.stitch, lambda: {"lois": method.place_logs(F.samples, F.executions,
                                                                                  Identity(), execution_of_interest=0)},
              {"lois": Arg("samples", checked=("toi_ns", "duration_ns", *_POWER)), "x": choice("time", "fraction"),
               "bin_width": opt(GT0),
               "channels": ANY, "smoother": ANY, "confidence": UNIT, "span": ANY,
               "weighted": FLAG, "grid_points": Arg("int", lo=2, hi=1_000_000)}),
        Entry("method.as_stitched", method.as_stitched, lambda: {"dec": F.dec},
              {"dec": obj(method.Deconvolution), "x": choice("time", "fraction"),
               "uncert_ns_median": Arg("num", lo=0.0, nan_ok=True), "uncert_ns_max": Arg("num", lo=0.0, nan_ok=True)}),
        Entry("method.energy_per_execution", method.energy_per_execution,
              lambda: {"stitched_channel": F.ep.stitched.channels[0], "duration_ns": F.ep.duration_ns},
              {"stitched_channel": obj(method.StitchedChannel), "duration_ns": GT0,
               "duration_err_ns": Arg("num", lo=0.0, hi=86_400e9)}),  # up to a day, as the duration
        Entry("method.lookup_guidance", method.lookup_guidance, lambda: {"exec_time_ns": 1e5},
              {"exec_time_ns": Arg("nums")}),  # one timing or several
        Entry("method.target_loi_count", method.target_loi_count,
              lambda: {"guidance": method.lookup_guidance(1e5), "exec_time_ns": 1e5},
              {"guidance": obj(method.Guidance), "exec_time_ns": GT0}),
        Entry("method.runs_needed", method.runs_needed,
              lambda: {"sensor": F.sensor, "duration_ns": 1e5, "bins": 8},
              {"sensor": obj(fg.SensorModel), "duration_ns": Arg("num", lo=1.0, hi=86_400e9),
               "bins": Arg("int", lo=1), "edges_per_bin": Arg("int", lo=1)}),
        Entry("method.needs_deconvolution", method.needs_deconvolution,
              lambda: {s: F.samples, "sensor": F.sensor, "duration_ns": 1e5, "resolution_ns": 1e4},
              {s: READ, "sensor": obj(fg.SensorModel, optional=True), "duration_ns": GT0,
               "resolution_ns": GT0}),
        Entry("method.declared_windows", method.declared_windows, lambda: {s: F.samples}, {s: READ}),
        Entry("method.predict_sample_instants", method.predict_sample_instants,
              lambda: {"instants_ns": np.arange(50) * 1e6 + 3.0, "nominal_period_ns": 1e6},
              {"instants_ns": Arg("nums"), "nominal_period_ns": Arg("num", lo=1.0)}),
        Entry("method.find_ssp_executions", method.find_ssp_executions, lambda: {"measure": _measure},
              {"measure": Arg("callable"), "start": Arg("int", lo=1), "tolerance": GT0,
               "max_executions": Arg("int", lo=1, hi=2**40), "sigmas": POS, "confirm": FLAG}),
        Entry("method.fit_timeline", method.fit_timeline, _timeline_base,
              {"sensor": obj(fg.SensorModel), "t_ns": Arg("nums"), "values": obj(dict), "starts_ns": Arg("nums"),
               "ends_ns": Arg("nums"), "classes": Arg("ints"), "bins": ANY,
               "confidence": UNIT, "bootstrap": Arg("int", lo=0, hi=100_000, max_tried=200)},
              aliases={k: ("t_ns", "values", "starts_ns, ends_ns", "classes", "logs") for k in
                       ("t_ns", "starts_ns", "ends_ns", "classes")}),
        Entry("method.design_rows", method.design_rows, _design_base,
              {"sensor": obj(fg.SensorModel), "stamps_ns": Arg("nums"), "windows_ns": Arg("nums"),
               "run_executions": READ, "execution_of_interest": I, "bins": Arg("int", lo=1),
               "n_max": Arg("int", lo=1), "duration_ns": GT0, "warmup": opt(COUNT)}),
        Entry("method.curve_scale", method.curve_scale, _curve_base,
              {"G": Arg("nums"), "bins": Arg("int", lo=1), "n_max": Arg("int", lo=1)}),
        Entry("method.curve_variance", method.curve_variance, _curve_base,
              {"G": Arg("nums"), "bins": Arg("int", lo=1), "n_max": Arg("int", lo=1), "lam_rel": Arg("num", lo=0.0),
               "scale": opt(GT0)}),
        Entry("method.curve_precision_inverse", method.curve_precision_inverse, _curve_base,
              {"G": Arg("nums"), "bins": Arg("int", lo=1), "n_max": Arg("int", lo=1), "lam_rel": Arg("num", lo=0.0),
               "scale": opt(GT0)}),
        # ---- multi
        Entry("multi.merge_ranks", multi.merge_ranks,
              lambda: {"profiles": [F.profile, F.profile],
                       "alignments": [clocks.HostAlignment.identity(r) for r in range(2)]},
              {"profiles": ANY, "alignments": ANY, "root": COUNT, "grid_points": Arg("int", lo=2, hi=1_000_000)}),
        Entry("multi.check_steady_states", multi.check_steady_states, lambda: {"prof": F.profile},
              {"prof": obj(fg.Profile), "z": GT0, "tolerance": GT0}),
        # ---- records
        Entry("records.validate_executions", records.validate_executions, lambda: {ex: F.executions},
              {ex: EXECS, "name": S, "exclusive": FLAG}),
        Entry("records.validate_samples", records.validate_samples, lambda: {s: F.samples},
              {s: SAMPLES, "name": S, "require_total": FLAG, "max_power_w": opt(GT0)}),
        Entry("records.RunRecord", records.RunRecord,
              lambda: {k: getattr(F.record, k) for k in ("run", "executions", "samples", "markers", "brackets")},
              {"run": COUNT, "executions": COUNT, "samples": KEPT_SAMPLES, "markers": READ, "brackets": Arg("ints"),
               "idle_wait_ns": COUNT, "meta": obj(dict)}),
        # ---- sensors
        Entry("sensors.counter_to_logs", sensors.counter_to_logs,
              lambda: {"timestamps_ns": np.arange(20, dtype=np.int64) * 1_000_000, "energy_j": np.arange(20) * 0.3},
              {"timestamps_ns": Arg("ints"), "energy_j": Arg("nums"), "quantum_j": POS,
               "wrap_j": opt(GT0), "max_window_ns": Arg("num", lo=0.0, hi=2**32 - 1, open_lo=True),
               "max_power_w": opt(GT0)},
              aliases={"timestamps_ns": ("timestamps_ns, energy_j",), "energy_j": ("timestamps_ns, energy_j",)}),
        Entry("sensors.EnergyCounter", sensors.EnergyCounter,
              lambda: {"t": np.arange(10, dtype=np.int64) * 1_000_000, "energy_j": np.arange(10) * 0.1,
                       "segment": np.zeros(10, dtype=np.int64)},
              {"t": Arg("ints"), "energy_j": Arg("nums"), "segment": Arg("ints"), "quantum_j": POS, "stale_ns": POS,
               "scope": S, "name": S}),
        Entry("sensors.EnergyCounter.from_steps", sensors.EnergyCounter.from_steps,
              lambda: {"end_ts": np.arange(1, 11, dtype=np.int64) * 1000, "window_ns": np.full(10, 1000.0),
                       "power_w": np.full(10, 100.0), "tick_ns": 1.0},
              {"end_ts": Arg("ints"), "window_ns": Arg("nums"), "power_w": Arg("nums", nan_ok=True),
               "tick_ns": TICK, "quantum_j": POS, "stale_ns": POS},
              aliases={k: ("end_ts, window_ns, power_w",) for k in ("end_ts", "window_ns", "power_w")}),
        Entry("sensors.counter_resolution", sensors.counter_resolution, lambda: {"energy_j": np.arange(20) * 0.3},
              {"energy_j": Arg("nums")}),
        Entry("sensors.estimate_period", sensors.estimate_period,
              lambda: {"timestamps_ns": np.arange(50) * 1e6 + np.random.default_rng(0).normal(0, 1e3, 50)},
              {"timestamps_ns": Arg("nums"), "values": Arg("nums", optional=True), "blocks": Arg("int", lo=2)}),
        Entry("sensors.fit_step_response", sensors.fit_step_response, _step_base,
              {"offset_ns": Arg("nums"), "values": Arg("power"), "scale_ns": opt(GT0)},
              aliases={"offset_ns": ("offset_ns, values",), "values": ("offset_ns, values",)}),
        Entry("sensors.fit_load_response", sensors.fit_load_response,
              lambda: {"t_ns": F.char_logs[0], "values": F.char_logs[1], "busy_ns": F.char_logs[2],
                       "scale_ns": 1e6},
              {"t_ns": Arg("nums"), "values": Arg("power"), "busy_ns": Arg("nums"), "scale_ns": GT0,
               "min_delay_ns": N, "period_ns": opt(GT0)},
              aliases={k: ("t_ns, values, busy_ns", "t_ns, values") for k in ("t_ns", "values", "busy_ns")}),
        Entry("insitu.measure_window_offset", insitu.measure_window_offset, lambda: dict(F.window_logs),
              {"t_ns": Arg("nums"), "power_w": Arg("power", nan_ok=True), "windows_ns": Arg("nums"),
               "sensor": obj(fg.SensorModel), "starts_ns": Arg("nums"), "ends_ns": Arg("nums"),
               "kernel_ids": Arg("ints"), "search_ns": GT0, "step_ns": GT0, "confidence": UNIT,
               "max_logs": Arg("int", lo=2), "max_signatures": Arg("int", lo=1), "logs_per_column": Arg("int", lo=1)},
              aliases={"t_ns": ("t_ns, power_w",), "power_w": ("t_ns, power_w",),
                       "starts_ns": ("starts_ns, ends_ns, kernel_ids", "starts_ns, ends_ns"),
                       "ends_ns": ("starts_ns, ends_ns, kernel_ids", "starts_ns, ends_ns"),
                       "kernel_ids": ("starts_ns, ends_ns, kernel_ids",),
                       "search_ns": ("search_ns=",), "step_ns": ("search_ns=",)}),
        Entry("sensors.fit_meter_response", sensors.fit_meter_response,
              lambda: {"t_ns": F.char_logs[0], "values": F.char_logs[1], "meter_t_ns": F.meter[0],
                       "meter_w": F.meter[1], "scale_ns": 1e6},
              {"t_ns": Arg("nums"), "values": Arg("power"), "meter_t_ns": Arg("nums"), "meter_w": Arg("power"),
               "scale_ns": GT0, "min_delay_ns": opt(N), "period_ns": opt(GT0)},
              aliases={"t_ns": ("t_ns, values",), "values": ("t_ns, values",),
                       "meter_t_ns": ("meter_t_ns, meter_w",), "meter_w": ("meter_t_ns, meter_w",)}),
        Entry("sensors.SensorModel.interval_weights", lambda t_ns, a_ns, b_ns: F.sensor.interval_weights(t_ns, a_ns,
                                                                                                          b_ns),
              lambda: {"t_ns": np.arange(5) * 1e6, "a_ns": np.zeros(5), "b_ns": np.full(5, 5e5)},
              # NaN and infinities are numbers here: an interval from -inf is "everything before".
              {"t_ns": Arg("nums", nan_ok=True), "a_ns": Arg("nums", nan_ok=True), "b_ns": Arg("nums", nan_ok=True)}),
        # ---- sim
        Entry("sim.SimGPU", sim.SimGPU, lambda: {"seed": 1}, {"seed": COUNT, "realtime": FLAG, "sensor": OPT_SENSOR,
                                                              "cached_poll_ns": opt(Arg("num", lo=1.0))}),
        Entry("sim.SimNode", sim.SimNode, lambda: {"devices": 2, "seed": 1},
              {"devices": Arg("int", lo=1, hi=1024), "seed": COUNT, "fabric": obj(sim.FabricParams, optional=True),
               "shared_host_clock": FLAG}),
        Entry("sim.FabricParams", sim.FabricParams, lambda: {},
              {"links": Arg("int", lo=1), "link_bandwidth_gbs": GT0,
               "link_efficiency": Arg("num", lo=0.0, hi=1.0, open_lo=True), "link_latency_ns": POS, "exec_cv": POS}),
        Entry("sim.collective_time", sim.collective_time,
              lambda: {"kind": "allreduce", "nbytes": 1 << 20, "devices": 4},
              {"kind": choice(*sim.COLLECTIVE_KINDS), "nbytes": COUNT, "devices": Arg("int", lo=1),
               "fabric": obj(sim.FabricParams, optional=True)}),
        # Where the stand-in runtime is; not built here (no CUPTI headers at build time) is FileNotFoundError.
        Entry("sim.standin_library", sim.standin_library, lambda: {"vendor": "cuda"},
              {"vendor": choice("rocm", "cuda")}, also=(FileNotFoundError,)),
        Entry("sim.sensor_params", sim.sensor_params, lambda: {"sensor": "instant-1ms"}, {"sensor": SENSOR}),
        Entry("sim.steady_state_index", sim.steady_state_index, lambda: {"power": np.linspace(200, 300, 40)},
              {"power": Arg("power"), "start": COUNT, "tolerance": GT0, "tail": Arg("int", lo=1)}),
    ]
    return e


@functools.cache
def _align_inputs() -> tuple[np.ndarray, ...]:
    # The logs placed on the trace's clock once: the clock fit costs seconds, and every example asks for the base
    # twice (to draw a value, then to call).
    tp = F.trace_profile
    kt = tp.trace
    ex = kt.executions
    cap = F.capture
    t = np.asarray(cap.logger_map().to_host(cap.samples["source_ts"]), dtype=np.float64) - kt.origin_ns
    return t, cap.samples["total"].astype(np.float64), ex["start_ns"], ex["end_ns"], ex["kernel_id"]


def _align_base() -> dict[str, Any]:
    # Copies, so a call that wrote into its input could not change the next example's base.
    t, p, s, e, k = (a.copy() for a in _align_inputs())
    return {"t_ns": t, "power_w": p, "starts_ns": s, "ends_ns": e, "kernel_ids": k}


def _timeline_base() -> dict[str, Any]:
    rng = np.random.default_rng(3)
    starts = np.arange(200) * 400_000.0
    t = np.sort(rng.uniform(0, starts[-1] + 400_000, 2000))
    return {"sensor": F.sensor, "t_ns": t, "values": {"total": np.full(len(t), 300.0)}, "starts_ns": starts,
            "ends_ns": starts + 200_000, "classes": np.zeros(200, dtype=np.int64), "bins": [4], "bootstrap": 0}


def _design_base() -> dict[str, Any]:
    ex = F.executions[:1]
    return {"sensor": F.sensor, "stamps_ns": np.array([50_000.0, 90_000.0]), "windows_ns": np.array([1e6, 1e6]),
            "run_executions": ex, "execution_of_interest": 0, "bins": 4, "n_max": 1, "duration_ns": 100_000.0}


def _curve_base() -> dict[str, Any]:
    rows = method.design_rows(**_design_base())
    return {"G": rows.T @ rows, "bins": 4, "n_max": 1}


def _step_base() -> dict[str, Any]:
    rng = np.random.default_rng(2)
    u = rng.uniform(-5e6, 10e6, 400)
    return {"offset_ns": u, "values": 300.0 + 200.0 * np.clip(u / 1e6, 0, 1) + rng.normal(0, 1, 400)}


ENTRIES = {e.name: e for e in _entries()}

#: Public callables that take no user values, or only the package's own results, with the reason.
EXCLUDED = {
    # Result types: built by the package (and by load, whose files are fuzzed in test_file_fuzz.py).
    **{n: "a result the package builds; users get it from a function and load it through fg.load" for n in (
        "Profile", "ExecutionProfile", "InterleavedProfile", "NodeProfile", "TraceProfile", "Characterisation",
        "CampaignProgress", "HostIdentity", "SyncReport", "SimTrainingLoop", "PowerRecorder", "BackendReport",
        "Component", "DeviceEntry", "AmdGpu", "ClockMap", "ClockStep", "EpochMap", "HostAlignment",
        "PiecewiseClockMap", "ReadLatency", "Timeline", "PowerCapture", "StoredRun", "IterationSummary", "SpanEnergy",
        "KernelTrace", "LogAlignment", "CampaignTimeline", "Deconvolution", "DeconvolvedChannel", "EnergyEstimate",
        "ErrorBudget", "GoldenSelection", "Guidance", "GuidanceRow", "LogAssignment", "ModelCheck",
        "PowerMeasurement", "SamplePrediction", "SspSearch", "SspStep", "StitchedChannel", "StitchedProfile",
        "TimelineFit", "WholeRunView", "NodeView", "SteadyCheck", "CounterLogs", "PeriodEstimate",
        "SensorSemantics", "StepFit", "CollectiveTime", "Parameter", "RunResult", "PhaseSteerer", "Agreement",
        "LocalAgreement", "ThreadAgreement", "TorchAgreement", "EnergyClosure", "CapturedCounter", "ConcurrentEnergy",
        "LaunchLog", "RecordClockError")},
    # Typing names: protocols and literal aliases, not called.
    **{n: "a typing protocol or alias" for n in (
        "Backend", "HostClock", "ClockMapLike", "AmdChannel", "AmdClock", "AmdKernelSpec", "AmdPrefer", "KernelSpec",
        "NvmlMode", "OffsetMethod", "SensorPresetName", "CollectiveKind", "ProgressReporter", "LivePower",
        "HostRelease", "BackendWrapper")},
    # Take no arguments.
    **{n: "takes no arguments" for n in ("host_identity", "kernel_presets", "parameters", "MonotonicRawClock",
                                         "app_path", "threads_in_force")},
    # The shared simulated GPU: made by its create/open class methods (every argument refused by name in
    # tests/sim/test_shared_app.py); its truth is read from what the simulated application wrote.
    "SharedSimGPU": "made by SharedSimGPU.create / .open, whose arguments tests/sim/test_shared_app.py checks",
    "SharedSimTruth": "a result the package builds (SharedSimGPU.truth)",
    # Distributed: need a torch.distributed process group (tests/clocks/test_distributed.py spawns ranks).
    **{n: "needs a torch.distributed process group (tests/clocks/test_distributed.py)" for n in (
        "align_ranks", "exchange_brackets", "gather_to_root", "shares_host_clock_with_root", "profile_distributed",
        "record_torch", "SimRankBackend")},
    # The analytic simulator: the tests' and benches' closed-form truth (tests/sim/test_analytic.py scores it),
    # called with the arguments a test chooses, never with a user's data.
    **{n: "the analytic simulator's ground truth for tests and benches (tests/sim/test_analytic.py)" for n in (
        "Identity", "EpochIdentity", "shape", "observe", "logged_runs", "simulate_runs", "logged_loop",
        "draw_schedule", "LoggedRuns", "RunsTruth", "LoggedLoop", "LoopSchedule")},
    # Formats a KernelTrace's own signature record; anything else is refused by name
    # (tests/insitu/test_joint_stitch.py::test_unclear_a_signature_label_refuses_what_is_not_a_signature).
    "signature_label": "formats a KernelTrace's own signature records; tests/insitu/test_joint_stitch.py",
    # Campaign folders and the recorder's sampler: the files-and-campaign checks (tests/app/test_campaign_safety.py).
    **{n: "a campaign-folder or sampler function, checked in tests/app/test_campaign_safety.py" for n in (
        "campaign_contents", "load_campaign_runs", "lock_campaign", "read_manifest", "run_files", "write_manifest",
        "write_run", "drain_all", "measure_logger_period", "power_semantics", "power_source")},
}


# ---------------------------------------------------------------- the checks


class _Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def _call(entry: Entry, kwargs: dict[str, Any], limit_s: int = CALL_LIMIT_S
          ) -> tuple[Any, Optional[BaseException], list[warnings.WarningMessage]]:
    old = signal.signal(signal.SIGALRM, _alarm)
    old_prof = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, float(limit_s))  # the process's CPU time
    signal.alarm(max(limit_s, BLOCKED_LIMIT_S))
    cwd = os.getcwd()
    os.chdir(F.tmp)  # a path argument given "x" writes there, never into the repository
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                return entry.fn(**kwargs), None, list(seen)
            except _Hang:
                raise
            except BaseException as exc:  # noqa: BLE001 - what escapes is the finding
                return None, exc, list(seen)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        signal.alarm(0)
        signal.signal(signal.SIGPROF, old_prof)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
        if "matplotlib.pyplot" in sys.modules:  # the plot entries' figures, closed as they come
            sys.modules["matplotlib.pyplot"].close("all")


def _names(exc: BaseException, arg: str, entry: Entry) -> bool:
    text = str(exc)
    return any(re.search(rf"(?<![A-Za-z_]){re.escape(n)}(?![A-Za-z_])", text)
               for n in (arg, *entry.aliases.get(arg, ())))


def _check(entry: Entry, arg: str, value: Any) -> None:
    spec = entry.args[arg]
    kwargs = dict(entry.base())
    given = value.array if isinstance(value, _Corrupted) else value
    kwargs[arg] = given
    must_refuse = not spec.valid(value)
    if entry.refusals_only and not must_refuse:
        return
    if not must_refuse and spec.max_tried is not None and float(value) > spec.max_tried:
        return
    try:
        result, exc, seen = _call(entry, kwargs)
    except _Hang:
        pytest.fail(f"{entry.name}({arg}={value!r}) ran past {CALL_LIMIT_S} s of CPU time (or "
                    f"{BLOCKED_LIMIT_S} s blocked): an absurd value run, not refused")
    strange = [w for w in seen if not issubclass(w.category, OWN_WARNINGS)]
    assert not strange, f"{entry.name}({arg}={value!r}) warned {strange[0].category.__name__}: {strange[0].message}"
    if exc is None:
        assert not must_refuse, f"{entry.name}({arg}={value!r}) accepted a wrong value (got {type(result).__name__})"
        return
    if not isinstance(exc, DOCUMENTED + entry.also):
        raise AssertionError(f"{entry.name}({arg}={value!r}) raised {type(exc).__name__}: {exc}") from exc
    if isinstance(exc, ValueError) and must_refuse:
        assert _names(exc, arg, entry), f"{entry.name}({arg}={value!r}): the message does not name {arg!r}: {exc}"


def _test(entry: Entry, data: st.DataObject) -> None:
    for module in entry.needs:
        pytest.importorskip(module)
    arg = data.draw(st.sampled_from(sorted(entry.args)), label="argument")
    base = entry.base()
    value = data.draw(_values(entry.args[arg], base.get(arg)), label="value")
    _check(entry, arg, value)


@pytest.mark.parametrize("name", sorted(ENTRIES))
@FAST
@given(data=st.data())
def test_wrong_values_get_documented_errors(name, data):
    _test(ENTRIES[name], data)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENTRIES))
@DEEP
@given(data=st.data())
def test_wrong_values_get_documented_errors_deeply(name, data):
    _test(ENTRIES[name], data)


#: Numbers at a float's edges and counts no run could take, for every numeric option: the random draws above
#: rarely reach them (``tick_ns=1e-300`` raised OverflowError where ``1e9 / tick_ns`` met int()).
EXTREMES = [1e-300, 5e-324, -1e-300, -5e-324, 1e-30, 1e300, -1e300, 1.7976931348623157e308, 10**12, 10**18,
            2**63 - 1, 2**53 + 1, np.float64(1e-300), np.float32(1e-38), np.int64(2**62)]
_NUMERIC = sorted(n for n, e in ENTRIES.items() if any(s.kind in ("int", "num") for s in e.args.values()))


def _numeric_args(entry: Entry) -> list[str]:
    return sorted(a for a, s in entry.args.items() if s.kind in ("int", "num"))


@pytest.mark.parametrize(("i", "name"), list(enumerate(_NUMERIC)))
def test_traceback_extreme_numbers_at_every_numeric_option_get_documented_errors(i, name):
    # One argument and one extreme per entry, rotating through both so the default run meets every extreme
    # across the entries at the cost of one call each; the slow test below tries every pair.
    entry = ENTRIES[name]
    for module in entry.needs:
        pytest.importorskip(module)
    args = _numeric_args(entry)
    _check(entry, args[i % len(args)], EXTREMES[i % len(EXTREMES)])


@pytest.mark.slow
@pytest.mark.parametrize("name", _NUMERIC)
def test_traceback_extreme_numbers_at_every_numeric_option_get_documented_errors_all(name):
    entry = ENTRIES[name]
    for module in entry.needs:
        pytest.importorskip(module)
    for arg in _numeric_args(entry):
        for value in EXTREMES:
            _check(entry, arg, value)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_the_valid_call_is_valid(name):
    """Each entry's base call succeeds, so a refusal above is for the value changed, not a broken baseline."""
    entry = ENTRIES[name]
    for module in entry.needs:
        pytest.importorskip(module)
    result, exc, _ = _call(entry, entry.base(), limit_s=600)
    if exc is not None and not isinstance(exc, entry.also):
        raise AssertionError(f"{name}: the valid call failed: {type(exc).__name__}: {exc}") from exc


def test_every_public_callable_is_covered():
    faces = {"fg": fg, "app": app, "backends": backends, "clocks": clocks, "files": files, "insitu": insitu,
             "method": method, "multi": multi, "records": records, "sensors": sensors, "sim": sim}
    covered = {n.split(".")[1] for n in ENTRIES}
    missing = []
    for face, mod in faces.items():
        for name in mod.__all__:
            value = getattr(mod, name)
            if not callable(value) or (inspect.isclass(value) and issubclass(value, BaseException)):
                continue
            if name not in covered and name not in EXCLUDED:
                missing.append(f"{face}.{name}")
    assert not missing, f"public callables neither in ENTRIES nor EXCLUDED: {missing}"


# ---------------------------------------------------------------- the cases that escaped, one by one


def test_a_sensor_model_refuses_what_it_cannot_be():
    with pytest.raises(ValueError, match=r"sensor: missing fields \['name', 'kind', 'period_ns'\]"):
        fg.SensorModel.from_dict({})  # not the constructor's TypeError
    with pytest.raises(ValueError, match=r"sensor: must be a dict"):
        fg.SensorModel.from_dict([("name", "x")])
    with pytest.raises(ValueError, match=r"period_ns='1e6': must be a number, not a str"):
        fg.SensorModel("s", "instant", period_ns="1e6")  # not stored, to fail at first use
    m = fg.SensorModel("s", "window", period_ns=np.float32(1e6), window_ns=np.int64(1000))
    assert type(m.period_ns) is float and type(m.window_ns) is float  # stored as the floats checked
    with pytest.raises(ValueError, match=r"name=5: must be a str"):
        fg.SensorModel(5, "instant", period_ns=1e6)


def test_a_kernel_trace_from_no_rows_is_refused_by_name():
    with pytest.raises(ValueError, match=r"end_ns, names, grid, block: required; from_rows takes columns"):
        fg.KernelTrace.from_rows([])  # not a TypeError (missing arguments)
    with pytest.raises(fg.TraceFormatError, match="start_ns: no executions"):
        fg.KernelTrace.from_rows([], [], [], [], [], clock="c", source="s")  # not an IndexError
    rows = {"end_ns": [5_000, 15_000], "names": ["a", "b"], "grid": [(1, 1, 1)] * 2, "block": [(64, 1, 1)] * 2,
            "clock": "c", "source": "s"}
    with pytest.raises(ValueError, match=r"start_ns: position 1 is 10000.5, not a whole number"):
        fg.KernelTrace.from_rows([0, 10_000.5], **rows)  # not truncated to 10000
    with pytest.raises(ValueError, match=r"grid"):
        fg.KernelTrace.from_rows([0, 10_000], **{**rows, "grid": [1, 2]})  # not a TypeError (tuple(1))


def test_profile_trace_refuses_wrong_types_by_name():
    with pytest.raises(ValueError, match=r"trace=123: must be a file path"):
        fg.profile_trace(123, F.capture)  # not a TypeError from os.fspath
    with pytest.raises(ValueError, match=r"sensor=5: must be a SensorModel, a preset name"):
        fg.profile_trace(F.trace_path, F.capture, sensor=5, min_executions=5)  # not an AttributeError
    with pytest.raises(ValueError, match=r"device=0.5: must be an integer"):
        fg.profile_trace(F.trace_path, F.capture, device=0.5, min_executions=5)  # not truncated to device 0


def test_fractional_runs_are_refused_not_truncated():
    s, ex = F.campaign
    with pytest.raises(ValueError, match=r"runs: position 0 is 0.5, not a whole number"):
        method.deconvolve(s, ex, Identity(), F.sensor, execution_of_interest=0, runs=[0.5, 1.5], bins=4, bootstrap=0)


def test_uint64_epoch_brackets_past_2_63_are_refused_not_wrapped():
    b = F.capture.epoch_brackets.astype(np.uint64) + np.uint64(2**63)
    with pytest.raises(ValueError, match=r"brackets: \d+ does not fit int64"):
        clocks.fit_epoch_map(b)  # wrapped to negative times, and fitted


def test_estimate_period_refuses_a_nan_stamp():
    t = np.arange(50) * 1e6
    t[7] = math.nan
    with pytest.raises(ValueError, match=r"timestamps_ns: 1 of 50 values are not finite, the first at position 7"):
        sensors.estimate_period(t)  # not dropped without a word
    with pytest.raises(ValueError, match=r"values: 1 of 50 values are not finite"):
        sensors.estimate_period(np.arange(50) * 1e6, np.where(np.arange(50) == 3, math.nan, 1.0))


@pytest.mark.parametrize("where", ["stitch_logs", "profile_trace", "load_capture", "characterize_logs",
                                   "Recording"])
def test_one_absurd_log_among_hundreds_is_refused(where, tmp_path):
    """3e38 W (a flipped exponent) poisoned the table; NaN, infinity and negative power were already refused."""
    if where == "stitch_logs":
        s, ex = F.campaign
        s = s.copy()
        s["total"][57] = 3e38
        call = functools.partial(fg.stitch_logs, s, ex, Identity(), execution_of_interest=0, margin=0.05)
    elif where == "profile_trace":
        cap = F.capture
        s = cap.samples.copy()
        s["total"][len(s) // 2] = 3e38
        call = functools.partial(fg.profile_trace, F.trace_path, s, cap.logger_map(), min_executions=5)
    elif where == "load_capture":
        cap = F.capture
        s = cap.samples.copy()
        s["total"][3] = 3e38
        raw = dict(np.load(F.capture_path))
        raw["samples"] = s
        path = tmp_path / "absurd.npz"
        np.savez(path, **raw)
        call = functools.partial(files.load_capture, path)
    elif where == "characterize_logs":
        t, p, on = F.char_logs
        p = p.copy()
        p[123] = 3e38
        call = functools.partial(fg.characterize_logs, t, p, on)
    else:
        s = F.samples.copy()
        s["compute"][9] = 3e38
        call = functools.partial(fg.Recording, s)
    with pytest.raises(ValueError, match=r"has 1 of \d+ values above 10000 W, the ceiling for one accelerator .*"
                                         r"3e\+38 W; a corrupted log \(a flipped exponent\)"):
        call()


def test_a_board_limit_tightens_the_ceiling():
    s, ex = F.campaign
    s = s.copy()
    s["total"][5] = 2_500.0  # plausible for some board, not for a 700 W one
    records.validate_samples(s)
    with pytest.raises(ValueError, match=r"above 2100 W, 3 x the board's max_power_w=700"):
        records.validate_samples(s, max_power_w=700.0)


def test_fits_of_power_that_ignores_the_load_are_refused():
    t, p, on = F.char_logs
    flat = np.full(len(t), 300.0) + np.random.default_rng(4).normal(0, 2, len(t))
    # A model with NaN errors (or a window and delay fitted to noise) came back without a word.
    with pytest.raises(ValueError, match=r"values: the power does not follow the load .* standard errors"):
        sensors.fit_load_response(t, flat, on, scale_ns=1e6)
    u = np.random.default_rng(5).uniform(-5e6, 10e6, 400)
    with pytest.raises(ValueError, match=r"values: the power does not follow the step"):
        sensors.fit_step_response(u, np.full(400, 300.0))
    with pytest.raises(ValueError, match=r"busy_ns: 10 of 10 intervals end before they start .* row 0"):
        sensors.fit_load_response(t, p, on[:, ::-1], scale_ns=1e6)  # inverted intervals refused, not fitted


def test_characterize_refuses_a_wave_the_sensor_cannot_resolve():
    # A 1 us wave against a 1 ms sensor exited 0 with a fitted sensor (and the kernels, 0.33 ms and 26 us
    # long, could not even make it).
    with pytest.raises(ValueError, match=r"half_period_ns=1000.0: levels of 0.001 ms against a sensor that updates "
                                         r"every 1 ms cannot be resolved"):
        fg.characterize("sim", half_period_ns=1000.0, runs=4)
    with pytest.raises(ValueError, match=r"half_period_ns=200000: one execution of 'cb-8k-gemm' lasts"):
        fg.characterize("sim", half_period_ns=200_000.0, runs=4)


def test_the_characterize_command_refuses_a_wave_the_sensor_cannot_resolve(capsys):
    from fingrav_native.app import _cli as cli

    # A 1 us wave against a 1 ms sensor exited 0 with a fitted sensor.
    assert cli.main(["characterize", "--half-period-ms", "0.001", "--runs", "4"]) == 2
    assert "cannot be resolved" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "arg", "value"), [
    ("fg.Capabilities", "device_tick_ns", 1e-300), ("fg.Capabilities", "logger_tick_ns", 5e-324),
    ("sensors.EnergyCounter.from_steps", "tick_ns", 1e-300), ("clocks.fit_clock_map", "tick_ns", 1e-300),
    ("method.deconvolve", "resolution_ns", 5e-324)])
def test_traceback_a_tick_or_resolution_near_zero_is_refused_by_name(name, arg, value):
    """1e9 / tick_ns overflowed int() (OverflowError); a tick of 1e-300 ns was accepted and failed elsewhere."""
    _check(ENTRIES[name], arg, value)


def test_traceback_a_capture_whose_source_ticks_in_1e_300_ns_is_refused_by_name():
    # Its logs' map divided a second by the tick: OverflowError when the capture was profiled.
    source = {**F.capture.source, "tick_ns": 1e-300}
    with pytest.raises(ValueError, match=r"source\.tick_ns=1e-300: must be a clock's tick"):
        dataclasses.replace(F.capture, source=source)


def _literal_options(fn: Callable[..., Any]) -> dict[str, tuple[str, ...]]:
    """Each parameter of ``fn`` typed as a ``Literal`` of strings (or an optional one) -> its choices."""
    import typing

    hints = typing.get_type_hints(getattr(fn, "__init__", fn) if inspect.isclass(fn) else fn)
    out = {}
    for name, hint in hints.items():
        for h in (hint, *typing.get_args(hint)):
            if typing.get_origin(h) is typing.Literal and all(isinstance(c, str) for c in typing.get_args(h)):
                out[name] = typing.get_args(h)
    return out


@pytest.mark.slow  # every entry with a Literal option called once per option: seconds
def test_unclear_option_every_literal_option_is_checked_at_run_time():
    # docs/ARCHITECTURE.md, Conventions: string options are Literals, validated at run time as well (a
    # type checker is not there when the option comes from a config file or a command line).
    checked, unchecked = [], []
    for name, entry in ENTRIES.items():
        if any(importlib.util.find_spec(m) is None for m in entry.needs):
            continue
        for arg in _literal_options(entry.fn):
            _, exc, _ = _call(entry, {**entry.base(), arg: "no-such-option"})
            if isinstance(exc, ValueError) and _names(exc, arg, entry):
                checked.append(f"{name}({arg})")
            else:
                unchecked.append(f"{name}({arg}): {type(exc).__name__ if exc else 'accepted'}")
    assert not unchecked, unchecked
    assert len(checked) >= 5, checked
