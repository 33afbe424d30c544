"""``fingrav trace`` and ``fingrav export`` outputs: refused before any work when they would replace an input or
one another, and every JSON file they write parses with a strict parser (no bare NaN)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_files, simulate_training_loop


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("session")
    return simulate_training_loop(120, seed=5, pause_every=30).save(folder)


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if the trace is profiled (the work a refused output must not cost)."""
    def refuse(*a, **k):
        raise AssertionError("the trace was profiled before the output was refused")

    monkeypatch.setattr(_cli_files, "profile_trace", refuse)


def _strict(path) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"{token} is not JSON")

    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_constant=refuse)


def test_data_loss_annotate_over_the_commands_own_power_capture_is_refused_with_force(session, tmp_path, capsys,
                                                                                       no_work):
    trace, capture = session
    with open(capture, "rb") as f:
        before = f.read()
    assert cli.main(["trace", trace, "--power", capture, "--out", str(tmp_path / "r"), "--annotate", capture,
                     "--force"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("fingrav trace: --annotate=") and "Traceback" not in err
    with open(capture, "rb") as f:
        assert f.read() == before


def test_unclear_annotate_onto_one_of_the_out_files_is_refused_before_any_work(session, tmp_path, capsys, no_work):
    trace, capture = session
    out = tmp_path / "report"
    out.mkdir()
    assert cli.main(["trace", trace, "--power", capture, "--out", str(out), "--annotate",
                     str(out / "kernels.json")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--annotate=" in err and "kernels.json" in err and "the same file" in err
    assert list(out.iterdir()) == []


@pytest.mark.slow
def test_silently_wrong_every_json_the_trace_command_writes_is_strict(session, tmp_path, capsys, monkeypatch):
    trace, capture = session
    real = _cli_files.profile_trace

    def undetermined(*a, **k):
        # An iteration energy whose interval the logs do not determine (NaN), as sparse logs give.
        tp = real(*a, **k)
        return dataclasses.replace(tp, summary=dataclasses.replace(tp.summary, energy_half_width_j=math.nan))

    monkeypatch.setattr(_cli_files, "profile_trace", undetermined)
    out = tmp_path / "report"
    assert cli.main(["trace", trace, "--power", capture, "--out", str(out), "--min-executions", "20",
                     "--annotate", str(tmp_path / "a.json")]) == cli.EXIT_OK
    capsys.readouterr()
    table = _strict(out / "kernels.json")
    assert table["kernels"] and table["iterations"]["energy_half_width_j"] is None  # type: ignore[index]
    _strict(tmp_path / "a.json")


def test_data_loss_the_demo_never_replaces_a_measured_file_under_one_of_its_names(tmp_path, monkeypatch):
    from fingrav_native.app import _demo

    def refuse(*a, **k):
        raise AssertionError("the demo profiled before its outputs were checked")

    monkeypatch.setattr(_demo, "profile", refuse)
    measured = tmp_path / "overview.png"  # a campaign manifest under a figure's name
    measured.write_text(json.dumps({"format": "fingrav-campaign", "version": 1}))
    with pytest.raises(ValueError, match="overview.png: holds a campaign's manifest"):
        _demo.run_demo(str(tmp_path))
    assert json.loads(measured.read_text())["format"] == "fingrav-campaign"
