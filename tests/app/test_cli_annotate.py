"""``fingrav trace --annotate OUT``: the output refused by name before any work, the copy written,
and the energy closure line printed when the capture holds a counter (the simulated loop's true-power
accumulator)."""

from __future__ import annotations

import gzip
import json

import pytest

from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_files, simulate_training_loop
from fingrav_native.files import read_trace


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("session")
    return simulate_training_loop(300, seed=5, pause_every=30).save(folder, energy_counter=True)


def test_annotate_writes_the_trace_again_and_the_closure_line_is_printed(session, tmp_path, capsys,
                                                                        monkeypatch) -> None:
    trace, capture = session
    out = tmp_path / "annotated.json.gz"
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "report"), "--min-executions", "50",
                     "--annotate", str(out)]) == cli.EXIT_OK
    printed = capsys.readouterr()
    assert "energy closure over" in printed.out and "counter (simulated energy accumulator" in printed.out
    assert "(agree)" in printed.out and "warning" not in printed.err
    assert str(out) in printed.out
    with gzip.open(trace, "rt") as f:
        n = len(json.load(f)["traceEvents"])
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    assert len(doc["traceEvents"]) > n and doc["fingrav"]["closure"]["agrees"] is True
    assert sum("fingrav_energy_j" in e.get("args", {}) for e in doc["traceEvents"]) == doc["fingrav"][
        "kernel_events_annotated"] > 1000
    assert len(read_trace(out)) == len(read_trace(trace))
    table = json.loads((tmp_path / "report" / "kernels.json").read_text())
    assert table["closure"]["counter_j"] > 0
    # Again without --force: refused by name, exit 2, before any profiling.
    calls = []
    real = _cli_files.profile_trace

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(_cli_files, "profile_trace", counted)
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "r2"),
                     "--annotate", str(out)]) == cli.EXIT_USAGE
    assert "--annotate=" in capsys.readouterr().err and not calls
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "r3"), "--min-executions", "50",
                     "--annotate", str(out), "--force"]) == cli.EXIT_OK


@pytest.mark.parametrize("where, match", [
    ("dir", "is a folder"), ("missing/out.json", "does not exist"), ("TRACE", "is the trace itself")])
def test_a_bad_annotate_output_is_bad_usage(session, tmp_path, capsys, where, match) -> None:
    trace, capture = session
    (tmp_path / "dir").mkdir()
    out = trace if where == "TRACE" else str(tmp_path / where)
    args = ["trace", trace, "--power", capture, "--out", str(tmp_path / "report"), "--annotate", out]
    assert cli.main(args + (["--force"] if where == "TRACE" else [])) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("fingrav trace: --annotate=") and match in err and "Traceback" not in err
    assert not (tmp_path / "report").exists()  # refused before any work


def test_force_without_annotate_is_bad_usage(session, tmp_path, capsys) -> None:
    trace, capture = session
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "r"), "--force"]) == cli.EXIT_USAGE
    assert "--force" in capsys.readouterr().err
