"""``fingrav demo``: the profiling demo on the simulated GPU, its files and its summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fingrav_native.app import _cli as cli
from fingrav_native.app._demo import run_demo
from fingrav_native.files import load_profile
from fingrav_native.method import InterleavedProfile, Profile

SUBPROCESS_TIMEOUT_S = 120  # bounds a hang only
EXPECTED_FILES = {
    "cb-4k-gemm.fgprof", "mb-4k-gemv_then_cb-2k-gemm.fgprof", "cb-4k-gemm.trace.json", "overview.png",
    "whole_run.png", "sse_vs_ssp.png", "interleaved.png", "ssp_search.png", "sync_error.png",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("demo") / "out"
    lines: list[str] = []
    result = run_demo(str(out_dir), seed=0, out=lines.append)
    return out_dir, lines, result


@pytest.mark.slow
def test_demo_writes_every_file_it_names(demo):
    out_dir, lines, result = demo
    assert set(result["files"]) == EXPECTED_FILES
    assert sorted(os.listdir(out_dir)) == sorted(EXPECTED_FILES)
    for name, path in result["files"].items():
        assert os.path.getsize(path) > 0, name
        # The summary names each file it wrote.
        assert any(name in line for line in lines), name
    for name in EXPECTED_FILES:
        if name.endswith(".png"):
            with open(out_dir / name, "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", name


@pytest.mark.slow
def test_demo_profiles_load_back(demo):
    out_dir, _, result = demo
    prof = load_profile(out_dir / "cb-4k-gemm.fgprof")
    assert isinstance(prof, Profile) and prof.kernel == "cb-4k-gemm" and prof.mode == "both"
    assert set(prof.profiles) == {"sse", "ssp"}
    assert prof.profiles["ssp"].execution_index == result["profile"].profiles["ssp"].execution_index
    assert prof.error_budget == result["profile"].error_budget
    il = load_profile(out_dir / "mb-4k-gemv_then_cb-2k-gemm.fgprof")
    assert isinstance(il, InterleavedProfile)
    assert il.preceded_by == (("mb-4k-gemv", 40),) and il.reference.kernel == "cb-2k-gemm"
    assert il.power_ratio == pytest.approx(result["interleaved"].power_ratio)


@pytest.mark.slow
def test_demo_reproduces_the_papers_observations(demo):
    _, _, result = demo
    prof, il = result["profile"], result["interleaved"]
    sse, ssp = prof.profiles["sse"], prof.profiles["ssp"]
    # SSE is the fourth execution; the SSP search found a later one.
    assert sse.execution_index == 3 and ssp.execution_index > sse.execution_index
    # Section IV-A: the SSP execution draws more power than the SSE one.
    assert np.mean(ssp.lois["total"]) > np.mean(sse.lois["total"])
    # Section V-C3, MB->2K: a compute-light GEMM after GEMVs draws less than its SSP.
    assert il.power_ratio < 1


@pytest.mark.slow
def test_demo_trace_is_valid_trace_event_json(demo):
    out_dir, _, result = demo
    with open(out_dir / "cb-4k-gemm.trace.json") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    phases = {e["ph"] for e in events}
    assert {"M", "X", "C"} <= phases
    slices = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] > 0 and e["ts"] >= 0 for e in slices)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.endswith("(golden)") for n in names)
    assert len(slices) == len(result["profile"].timeline.executions)


@pytest.mark.slow
def test_demo_summary_is_short_and_gives_the_error_budget(demo):
    _, lines, result = demo
    assert lines == result["summary"]
    assert len(lines) <= 20
    text = "\n".join(lines)
    b = result["profile"].error_budget
    budget = next(line for line in lines if "error budget" in line)
    for value in (b.clock_map_ns, b.marker_ns, b.logger_window_ns, b.total_ns):
        assert f"{value / 1e3:.2f}" in budget
    assert f"known to +-{b.total_ns / 1e3:.2f} us" in text
    assert "SSE" in text and "SSP" in text and "mJ" in text
    assert "fingrav plot" in text and "ui.perfetto.dev" in text


@pytest.mark.slow
def test_demo_is_deterministic_for_a_seed_and_fast(demo, tmp_path):
    _, lines, result = demo
    again = run_demo(str(tmp_path / "again"), seed=0, out=lambda _line: None)
    # The first line carries the wall time and the last two the folder.
    strip = lambda ls: [line for line in ls[1:] if "wrote" not in line and "next:" not in line]  # noqa: E731
    assert strip(again["summary"]) == strip(lines)
    assert result["seconds"] < 60  # the bound; a few seconds in practice


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_run_demo_rejects_a_bad_seed(tmp_path, seed):
    with pytest.raises(ValueError, match="seed="):
        run_demo(str(tmp_path / "x"), seed=seed, out=lambda _line: None)
    assert not (tmp_path / "x").exists()


def test_demo_out_that_is_a_file_exits_2(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    assert cli.main(["demo", "--out", str(f)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("fingrav demo: --out=") and "not a folder" in err


@pytest.mark.slow
def test_python_dash_m_demo_out(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fingrav_native", "demo", "--out", "tmp", "--seed", "1"],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("fingrav demo: cb-4k-gemm on a simulated MI300X-class GPU")
    assert "error budget" in proc.stdout
    assert sorted(os.listdir(tmp_path / "tmp")) == sorted(EXPECTED_FILES)


def test_demo_help_lists_examples(capsys):
    with pytest.raises(SystemExit) as excinfo:
        cli.main(["demo", "--help"])
    assert excinfo.value.code == 0
    out = capsys.readouterr().out
    assert "fingrav demo --out" in out and "fingrav demo --live" in out
