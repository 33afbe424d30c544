"""Real traces others recorded (``traces/`` of the real-data folder, tests/real_data.py): read exactly, and
profiled end to end.

The counts pinned here come from tests/data/traces/facts.py, a plain json/gzip/csv parse that does not
use this package. The power logs are synthetic (no power was recorded with these traces): an idle level
plus a fixed draw per kernel running, logged every 100 us on the trace's own clock, so the test checks
that the in-situ path takes real schemas whole (zero-duration kernels, old categories, NCCL overlap,
names of 600-2000 characters), not its accuracy.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.files import load_profile, read_trace, save_profile
from fingrav_native.sim import EpochIdentity
from real_data import require
from sim_captures import synthetic_energy as _synthetic_energy
from sim_captures import synthetic_logs as _synthetic_logs

# file: (kernels, zero-duration kernels, ProfilerStep#N read, longest name, devices) per facts.py.
FACTS = {
    "hta/sampled_rank-0.json.gz": (1154, 0, 2, 1956, [0]),
    "hta/nccl_data.ProfilerStep5.json.gz": (900, 0, 1, 1677, [0]),
    "hta/inference_rank_1.json.gz": (4, 0, 0, 912, [0]),
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (14, 0, 2, 938, [2]),
    "kineto/gpu_metrics_input.json": (30, 0, 1, 779, [0]),  # ProfilerStep#2 under category "Operator"
    "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz": (1455, 104, 1, 657, [0]),
    "rocprofv3/kernel_trace.csv": (7, 0, 0, 73, [1]),
    "rocprofv3/kernel_trace.agent-string.csv": (9, 0, 0, 73, [4]),
}


def _facts_module():
    path = os.path.join(os.path.dirname(__file__), os.pardir, "data", "traces", "facts.py")
    spec = importlib.util.spec_from_file_location("trace_facts", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_pinned_facts_are_those_of_the_real_traces() -> None:
    # The counts below are pinned from facts.py's EXPECTED; the traces live outside the repository, so a
    # changed or substituted folder must fail here rather than move the readers' tests in silence.
    facts = _facts_module()
    for rel in facts.EXPECTED:
        require(f"traces/{rel}")
    assert facts.all_facts() == facts.EXPECTED
    for name, (kernels, zero, _, longest, _) in FACTS.items():
        assert (facts.EXPECTED[name]["kernels"], facts.EXPECTED[name]["dur0"],
                facts.EXPECTED[name]["max_name_len"]) == (kernels, zero, longest)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_real_traces_read_whole(name: str) -> None:
    # Zero-duration kernels read, PyTorch 1.8's "Operator" ProfilerStep
    # counted, names never cut.
    kernels, zero, steps, longest, devices = FACTS[name]
    kt = read_trace(require(f"traces/{name}"))
    ex = kt.executions
    assert len(ex) == kernels
    assert int(np.sum(ex["end_ns"] == ex["start_ns"])) == zero
    assert len(kt.steps) == steps
    assert max(len(n) for n in kt.signatures["name"]) == longest
    assert np.unique(kt.device).tolist() == devices




@functools.cache
def _trace(name: str):
    """The real trace ``name``, read once for the tests that profile it (shared: they only read it)."""
    return read_trace(require(f"traces/{name}"))


@functools.cache
def _profiled(name: str, device=None):
    """``profile_trace`` of trace ``name`` with its synthetic logs and default options (``device`` as given),
    computed once for every test that asks the same (shared: they only read it)."""
    kt = _trace(name)
    return profile_trace(kt, _synthetic_logs(kt), EpochIdentity(), device=device)


@pytest.mark.parametrize("name", ["hta/nccl_data.ProfilerStep5.json.gz",
                                  "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz"])
def test_real_traces_profile_with_default_options(name: str) -> None:
    tp = _profiled(name)
    assert len(tp.kernels) >= 1 and np.all(np.nan_to_num(tp.kernels["energy_j"]) >= 0)
    # ProfilerStep exists in each: an energy per iteration is reported (no interval from one or two steps).
    assert tp.summary is not None and tp.summary.energy_j > 0
    assert "too few for an interval" in tp.summary.note
    if "resnet50" in name:
        assert any("104 of 1455 kernel executions have zero recorded duration" in w for w in tp.warnings)
    text = str(tp)
    assert "the trace has no ProfilerStep" not in text


@pytest.mark.parametrize("name", ["hta/sampled_rank-0.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                                  "kineto/gpu_metrics_input.json"])
def test_a_trace_of_too_few_executions_still_gives_the_energy_per_iteration(name: str) -> None:
    # "the iteration summary present whenever ProfilerStep exists". These traces hold one or two
    # ProfilerStep#N and no signature with min_executions=20 executions alone on the device; the whole trace
    # was refused ("no kernel signature could be profiled"). Now: an empty table, the reason, the summary.
    # The logs are exact on the trace's clock: no clock mismatch may be reported (pytest fails on a warning).
    kt = _trace(name)
    tp = _profiled(name, device=int(np.unique(kt.device)[0]))
    assert tp.summary is not None and tp.summary.energy_j > 0
    assert len(tp.kernels) == 0 or np.all(np.nan_to_num(tp.kernels["energy_j"]) >= 0)
    if len(tp.kernels) == 0:
        assert any("only the energy per iteration is reported" in w for w in tp.warnings)
    assert not any("clock mismatch" in w for w in tp.warnings)


def _true_span_energy(kt) -> float:
    """The synthetic logs' truth over the kernel span: 80 W plus 150 W per kernel running (at most two), in J."""
    ex = kt.executions
    grid = np.arange(int(ex["start_ns"].min()), int(ex["end_ns"].max()), 50) + 25
    s, e = np.sort(ex["start_ns"]), np.sort(ex["end_ns"])
    running = np.searchsorted(s, grid, side="right") - np.searchsorted(e, grid, side="right")
    return float(np.sum(80.0 + 150.0 * np.minimum(running, 2)) * 50e-9)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_every_real_trace_profiles_with_default_options(name: str, tmp_path) -> None:
    # "every real trace in the test set profiles with default options (no whole-trace refusal)".
    # HTA's inference_rank_1 (4 kernels) and rocprofv3's two sample CSVs (7 and 9) have no ProfilerStep and
    # no signature with min_executions=20 executions; they were refused whole ("no kernel signature could be
    # profiled"). Now: an empty table, each signature's shortfall, and what the logs can say: the energy
    # per iteration, or without iterations the energy over the trace's kernel span, with its interval.
    # Exact logs on the trace's clock: no clock mismatch may be reported (pytest fails on a warning).
    kt = _trace(name)
    tp = _profiled(name)
    assert np.all(np.nan_to_num(tp.kernels["energy_j"]) >= 0)
    assert not any("clock mismatch" in w for w in tp.warnings)
    if tp.concurrency is not None:
        # Compute kernels on several streams (rocprofv3's sample): at least 90 % of the executions accounted
        # for, alone or in a span attributed jointly, or the printout says why not (signatures not profiled).
        c = tp.concurrency
        assert f"{c.used} of {c.device_executions} executions of the device" in str(tp).replace("\n    ", " ")
        assert c.used_share >= 0.9 or ("not profiled, by reason" in str(tp) and tp.skipped)
    if len(tp.kernels):
        return
    note = [w for w in tp.warnings if w.startswith("no kernel signature could be profiled")]
    assert len(note) == 1 and len(tp.skipped) == len(np.unique(kt.executions["kernel_id"]))
    assert all("fewer than min_executions=20" in why for why in tp.skipped.values())
    for label, why in list(tp.skipped.items())[:10]:  # the note names ten, tp.skipped every one
        assert f"{label[:80]}: {why}" in note[0]
    if len(kt.steps):
        assert tp.summary is not None
        if math.isfinite(tp.summary.energy_half_width_j):
            assert tp.span is None
            return
        # Too few iterations for the energy per iteration's interval: the kernel span's energy is given beside
        # it, its interval holding the closed-form truth (every execution then accounted for, jointly).
        span = tp.span
        assert span is not None and span.logs >= 2
        assert abs(span.energy_j - _true_span_energy(kt)) <= span.energy_half_width_j
        assert tp.used_executions()[0] == tp.used_executions()[1]
        return
    assert "only the energy over its kernel span" in note[0] and tp.summary is None
    span = tp.span
    assert span is not None and span.logs >= 2 and span.energy_j > 0
    assert abs(span.energy_j - _true_span_energy(kt)) <= span.energy_half_width_j
    text = str(tp)
    assert f"{span.duration_ns / 1e6:.3f} ms of kernels on this device: {1e3 * span.energy_j:.3f} +-" in text
    # Saved and loaded whole, as every result is.
    assert load_profile(save_profile(tp, tmp_path / "small.fgprof")).span == span


def test_silently_wrong_the_kernel_span_energy_accounts_for_the_execution_outside_the_concurrent_spans() -> None:
    # rocprofv3's sample: 6 of its 7 executions overlap on several streams, the 7th runs alone and its signature
    # runs fewer than min_executions times. The energy over the kernel span (its interval holding the closed-form
    # truth) holds all seven jointly, so all seven are accounted for, not only the six in the concurrent span.
    kt = _trace("rocprofv3/kernel_trace.csv")
    tp = _profiled("rocprofv3/kernel_trace.csv")
    span, c = tp.span, tp.concurrency
    assert span is not None and c is not None and math.isfinite(span.energy_half_width_j)
    assert abs(span.energy_j - _true_span_energy(kt)) <= span.energy_half_width_j
    assert c.used == c.device_executions == len(kt.executions) == 7
    text = str(tp).replace("\n    ", " ")
    assert "7 of 7 executions of the device (100 %) accounted for" in text
    assert "in the energy over the trace's kernel span" in text


def test_a_span_no_log_measures_inside_says_so() -> None:
    # 1 ms averages over rocprofv3's 0.14 ms sample trace: every window reaches outside the span, so its
    # energy is not determined (NaN), and the table says why rather than printing a number.
    kt = read_trace(require("traces/rocprofv3/kernel_trace.agent-string.csv"))
    logs = _synthetic_logs(kt, period_ns=1_000_000)
    logs["window_ns"] = 1_000_000  # logs that declare their window are an averaging sensor's
    tp = profile_trace(kt, logs, EpochIdentity())
    assert tp.span is not None and tp.span.logs == 0 and np.isnan(tp.span.energy_j)
    assert "energy not determined (the logs' 1 ms responses are longer than the span" in str(tp)


def test_compute_overlapped_by_nccl_is_kept_with_the_communication_level_subtracted() -> None:
    # On this DDP trace (rank 0 of 128) SendRecv kernels on streams 84 and 203 overlap
    # 22 % of the compute executions; "overlaps another kernel on the device, left out" dropped them all.
    # Synthetic truth on the real timeline: each compute signature draws its own power, communication
    # adds 60 W while it runs, whatever else does.
    kt = read_trace(require("traces/hta/sampled_rank-0.json.gz"))
    ex, rng = kt.executions, np.random.default_rng(1)
    comm = np.array(["nccl" in str(n).lower() for n in kt.signatures["name"]])[ex["kernel_id"]]
    draw = rng.uniform(100.0, 300.0, len(kt.signatures))
    t = np.arange(int(ex["start_ns"].min()) - 2_000_000, int(ex["end_ns"].max()) + 2_000_000, 20_000)
    p = np.full(len(t), 80.0)
    for i in np.flatnonzero(~comm):
        a, b = np.searchsorted(t, [ex["start_ns"][i], ex["end_ns"][i]])
        p[a:b] += draw[ex["kernel_id"][i]]
    for i in np.flatnonzero(comm):
        a, b = np.searchsorted(t, [ex["start_ns"][i], ex["end_ns"][i]])
        p[a:b] += 60.0
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = t + kt.origin_ns
    logs["total"] = p + rng.normal(0, 1.0, len(t))
    for ch in ("compute", "io", "memory"):
        if ch in (logs.dtype.names or ()):
            logs[ch] = np.nan
    # Two steps: no signature runs 20 times; min_executions=2 profiles the ones that run twice or more.
    tp = profile_trace(kt, logs, EpochIdentity(), align=False, min_executions=2)
    note = [w for w in tp.warnings if "overlapped a communication kernel" in w]
    assert len(note) == 1, tp.warnings
    level = float(note[0].split("additive level ")[1].split(" +-")[0])
    assert level == pytest.approx(60.0, abs=3.0)
    # At least 90 % of the compute executions are used (left out: only compute-compute overlap).
    kept_over = int(note[0].split(" of ")[0])
    compute_conc = int(note[0].split("; ")[-1].split(" overlapped")[0])
    assert kept_over > 200 and compute_conc <= 0.1 * int((~comm).sum())
    # The kept signatures' power is the compute kernel's own, not raised by the 60 W nor lowered.
    errs = []
    for row, sid in zip(tp.kernels, tp.signature_rows):
        if sid < 0:  # the joint row [g] holds several signatures: no one signature's power
            continue
        k = [i for i, s in enumerate(kt.signatures) if s["name"] == row["name"]
             and tuple(s["grid"]) == tuple(row["grid"]) and tuple(s["block"]) == tuple(row["block"])][0]
        errs.append(row["power_w"] - (80.0 + draw[k]))
    print(np.round(errs, 1))
    assert abs(float(np.nanmedian(errs))) < 15.0, errs


def test_a_rocprofv3_csv_with_a_byte_order_mark_keeps_its_kind_column(tmp_path) -> None:
    # With a UTF-8 BOM the first column read as "\ufeffKind", so a row of another kind
    # (a memory copy) was taken for a kernel dispatch.
    with open(require("traces/rocprofv3/kernel_trace.csv"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    copy = lines[1].replace("KERNEL_DISPATCH", "MEMORY_COPY", 1)
    assert copy != lines[1]
    path = tmp_path / "kernel_trace.csv"
    path.write_text("\ufeff" + "\n".join([*lines, copy]) + "\n", encoding="utf-8")
    assert len(read_trace(str(path)).executions) == FACTS["rocprofv3/kernel_trace.csv"][0]


def test_a_capture_that_misses_the_trace_is_refused_as_a_clock_mismatch() -> None:
    # A trace and a capture that do not overlap were refused with "run more runs
    # (runs=...)", an option `fingrav trace` does not have; one that half overlaps gave no word.
    kt = read_trace(require("traces/hta/nccl_data.ProfilerStep5.json.gz"))
    logs = _synthetic_logs(kt)
    late = logs.copy()
    late["source_ts"] += 10_000_000_000  # 10 s later: another run, or a clock 10 s off
    with pytest.raises(ValueError, match="no power log falls within the trace's kernels.*clock mismatch"):
        profile_trace(kt, late, EpochIdentity())
    half = logs[logs["source_ts"] < np.median(logs["source_ts"])]
    tp = profile_trace(kt, half, EpochIdentity(), align=False, min_executions=5)
    assert any("the logs cover" in w and "of the trace's kernel span" in w for w in tp.warnings)


def test_silently_wrong_a_trace_without_launch_shapes_says_rows_are_keyed_by_name() -> None:
    # ROCm 6.2's Kineto trace gives no grid or block for any kernel: a kernel launched with two shapes
    # would share one row. That is said; a trace with shapes says nothing of the kind.
    kt = _trace("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    assert np.all(kt.signatures["grid"] < 0)
    tp = _profiled("hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", device=2)
    assert any(f"{len(kt.signatures)} of {len(kt.signatures)} kernel signature(s) have no grid or block" in w
               for w in tp.warnings)
    kt = _trace("kineto/gpu_metrics_input.json")
    assert np.all(kt.signatures["grid"] >= 0)
    tp = _profiled("kineto/gpu_metrics_input.json")
    assert not any("have no grid or block" in w for w in tp.warnings)


# Under the tests' instantaneous 100 us logs, the traces whose executions are at least 90 % used (each one's
# energy given with an interval) through their kernel span's energy, which holds every execution jointly: those
# with no iteration, and those whose one or two iterations are too few for the energy per iteration's interval
# and whose signatures run too few times, too briefly, for any row (no log falls inside their executions). The
# larger excerpts reach it through their rows and the joint row [g] (the slow test below).
SHARE_MET = ("hta/inference_rank_1.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
             "kineto/gpu_metrics_input.json", "rocprofv3/kernel_trace.agent-string.csv", "rocprofv3/kernel_trace.csv")


@pytest.mark.parametrize("name", SHARE_MET)
def test_data_loss_real_trace_uses_at_least_90_percent_of_its_executions(name: str) -> None:
    kt = _trace(name)
    tp = _profiled(name)
    used, n = tp.used_executions()
    assert n == len(kt.executions) and used >= 0.9 * n
    # The energy that holds them holds the closed-form truth, so the share is not bought with a wrong interval.
    span = tp.span
    assert span is not None and math.isfinite(span.energy_half_width_j)
    truth = float(_synthetic_energy(kt, np.array([span.start_ns]), np.array([span.end_ns]))[0])
    assert abs(span.energy_j - truth) <= span.energy_half_width_j


def _rows_covered(name: str) -> tuple[int, int]:
    """Of the rows whose energy has an interval, those holding the closed-form truth: 230 W (80 W idle + 150 W for
    the kernel) x the row's duration, or 150 W x it for a communication kernel's additive level."""
    tp = _profiled(name)
    ok = [abs(r["energy_j"] - (150.0 if r["joint"] and not tp._coarse(i) else 230.0) * r["duration_ns"] * 1e-9)
          <= r["energy_half_width_j"] for i, r in enumerate(tp.kernels) if np.isfinite(r["energy_half_width_j"])]
    return sum(ok), len(ok)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "hta/nccl_data.ProfilerStep5.json.gz", "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz",
    pytest.param("hta/sampled_rank-0.json.gz", marks=pytest.mark.xfail(strict=True, reason=(
        "127 of 142: a communication signature that runs alone gets its coarse level from logs with the "
        "communication's additive level already subtracted (80 W for 230 W), and the coarse rows of compute "
        "kernels beside communication carry no share of that level's uncertainty"))),
])
def test_silently_wrong_real_trace_rows_hold_the_synthetic_truth(name: str) -> None:
    covered, rows = _rows_covered(name)
    assert rows > 50 and covered >= 0.9 * rows, (covered, rows)
