"""What profile_trace gives a person and a file: kernel names whole in the table and every file written from
it, cut for display only and marked; a printout that groups what was left out by reason, shows no NaN as
a number and stays short on a real trace; every signature of the trace in the table or in ``skipped``.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import re
import time

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native.app import simulate_training_loop
from fingrav_native.app._progress import PhaseProgress
from fingrav_native.files import annotate_trace, export_trace, load_profile, read_trace, save_profile
from fingrav_native.sim import EpochIdentity
from real_data import require

# Names that differ only past 256 characters, and past 1,000 (the simulated loop's three signatures:
# gemm at grid 128 and 32, gemv at 64).
_STEM = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<" * 16  # 1,152 characters
_NAMES = {128: _STEM + "A>", 32: _STEM + "B>", 64: _STEM[:300] + "C>"}


@pytest.fixture(scope="module")
def long_names(tmp_path_factory):
    """The loop's trace with long names, a kernel only on device 1 and one of zero duration; its profile."""
    tmp = tmp_path_factory.mktemp("names")
    loop = simulate_training_loop(200, seed=3, pause_every=25)
    path = loop.write_trace(tmp / "t.json")
    with open(path) as f:
        doc = json.load(f)
    kernels = [ev for ev in doc["traceEvents"] if ev.get("cat") == "kernel"]
    for ev in kernels:
        ev["name"] = _NAMES[int(ev["args"]["grid"][0])]
    for i, ev in enumerate(kernels[:6]):
        extra = json.loads(json.dumps(ev))
        extra["name"], extra["args"]["device"] = ("other_device_kernel", 1) if i % 2 else ("zero_kernel", 0)
        extra["dur"] = 1 if i % 2 else 0
        doc["traceEvents"].append(extra)
    with open(path, "w") as f:
        json.dump(doc, f)
    tp = profile_trace(path, loop.capture(), min_executions=50, device=0)
    return tmp, path, tp


def test_silently_wrong_names_differing_past_256_and_1000_characters_stay_whole_in_every_file(long_names) -> None:
    tmp, path, tp = long_names
    want = sorted(_NAMES.values())
    assert sorted(tp.kernels["name"].tolist()) == want
    back = load_profile(save_profile(tp, tmp / "p.fgprof"))
    assert back.kernels["name"].tolist() == tp.kernels["name"].tolist()
    with gzip.open(export_trace(back, tmp / "x.json.gz"), "rt") as f:
        slices = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    assert set(_NAMES.values()) <= {e["name"] for e in slices}
    with open(annotate_trace(path, back, tmp / "a.json")) as f:
        annotated = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    # Each kernel event's row is the row of its own whole name.
    rows = {(e["name"], int(e["args"]["fingrav_row"])) for e in annotated if "fingrav_row" in e["args"]}
    assert len(rows) == 3 and all(back.kernels["name"][row] == name for name, row in rows)


def test_unclear_cut_names_are_marked_and_numbered_in_the_printout(long_names) -> None:
    _, _, tp = long_names
    text = str(tp)
    rows = [line for line in text.splitlines() if re.match(r"\s*\d+ void at::native", line)]
    assert len(rows) == 3 and all("..." in line for line in rows)
    assert [int(line.split()[0]) for line in rows] == [0, 1, 2]  # the row's index in tp.kernels and kernels.json
    assert 'kernels["name"][#]' in text and _STEM not in text


def test_data_loss_every_signature_is_in_the_table_or_skipped_with_its_reason(long_names) -> None:
    _, _, tp = long_names
    assert len(tp.kernels) + len(tp.skipped) == len(tp.trace.signatures)
    why = {label.split(" grid=")[0]: reason for label, reason in tp.skipped.items()}
    assert why["other_device_kernel"].startswith("no execution on the power logs' device (it ran on device(s) [1])")
    assert why["zero_kernel"].startswith("every execution has zero recorded duration")
    groups = dict((words, labels) for words, labels in tp.skipped_by_reason())
    # Three launches of each, each with the grid of another signature: three signatures each.
    assert sum(len(v) for v in groups.values()) == len(tp.skipped) == 6 and len(groups) == 2
    assert "  3 only on other devices than the power logs', e.g. other_device_kernel grid=(" in str(tp)


def test_unclear_no_nan_is_printed_as_a_number(long_names) -> None:
    _, _, tp = long_names
    k = tp.kernels.copy()
    k["energy_half_width_j"][0] = k["power_w"][1] = k["share"][2] = k["duration_ns"][2] = math.nan
    assert tp.summary is not None
    summary = dataclasses.replace(tp.summary, energy_half_width_j=math.nan, between_kernels_j=math.nan,
                                  between_share=math.nan)
    text = str(dataclasses.replace(tp, kernels=k, summary=summary))
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE), text
    assert "+-   n/a" in text and "+- n/a: no interval, " in text and "(row 0)" in text
    assert "+- n/a mJ each" in text and "the energy between them not reported" in text


def test_unclear_printout_of_a_real_trace_is_grouped_short_and_without_nan() -> None:
    # 1,455 kernels of ResNet-50 (208 signatures, 204 not profiled, names up to 657 characters): the
    # printout was 210 lines of up to 822 characters, one per signature left out, some naming it twice,
    # with "+- nan" in the table.
    kt = read_trace(require("traces/kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz"))
    from test_real_traces import _synthetic_logs

    tp = profile_trace(kt, _synthetic_logs(kt), EpochIdentity())
    lines = str(tp).splitlines()
    assert len(lines) - len(tp.kernels) - 1 < 30
    assert max(map(len, lines)) <= 160
    assert not any(re.search(r"\bnan\b", line, flags=re.IGNORECASE) for line in lines)
    # Every signature once: in a row of its own or in skipped (the joint row [g], signature -1, holds skipped ones).
    assert int(np.sum(tp.signature_rows >= 0)) + len(tp.skipped) == len(kt.signatures)
    head = [i for i, line in enumerate(lines) if line.endswith("not profiled, by reason (each one's reason: "
                                                               'TraceProfile.skipped, kernels.json "skipped"):')]
    assert len(head) == 1 and lines[head[0]].startswith(f"{len(tp.skipped)} signatures")
    groups = tp.skipped_by_reason()
    counted = lines[head[0] + 1:head[0] + 1 + len(groups)]
    assert [int(line.split()[0]) for line in counted] == [len(labels) for _, labels in groups]
    # Two reasons: most signatures left out are in the joint row [g], the rest on other devices or without a log.
    assert sum(len(labels) for _, labels in groups) == len(tp.skipped) and len(groups) >= 2
    for line in counted:  # a name at most once a line: examples only, each cut and marked
        names = [label.split(" grid=")[0] for label in tp.skipped]
        assert all(line.count(n) <= 1 for n in names if len(n) > 20)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_unclear_a_long_step_shows_its_phase_on_a_terminal_only_and_clears_it() -> None:
    term, pipe = _Terminal(), io.StringIO()
    with PhaseProgress("fingrav trace", stream=term, after_s=0.0, interval_s=0.01) as shown, \
            PhaseProgress("fingrav trace", stream=pipe, after_s=0.0, interval_s=0.01) as silent:
        shown.phase("profiling the trace")
        silent.phase("profiling the trace")
        time.sleep(0.1)
    assert shown.enabled and not silent.enabled
    assert "fingrav trace: profiling the trace  elapsed 0:00" in term.getvalue()
    assert term.getvalue().endswith("\r") and pipe.getvalue() == ""
    quick = _Terminal()
    with PhaseProgress("fingrav trace", stream=quick, after_s=2.0, interval_s=0.01) as p:
        p.phase("a step of under two seconds")
        time.sleep(0.05)
    assert quick.getvalue() == ""
    with pytest.raises(ValueError, match="after_s"):
        PhaseProgress("x", after_s=-1.0)
