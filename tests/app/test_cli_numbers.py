"""Every numeric option of `fingrav` refuses bad numbers at parse time, and Ctrl-C in `fingrav demo`.

Property-based (hypothesis): for each numeric option of each command, bad
values (NaN, infinities, out of range, huge, floats for integers, text)
end in ``SystemExit(2)`` with one error line naming the option and its
range, never another exception. Values in range parse to themselves (only
the parser runs: nothing long starts). Ctrl-C in the demos exits 130 with
one line saying what was written, keeps only whole files, and removes a
folder the demo created and left empty.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_profile as cli_profile
from fingrav_native.app import _demo as demo_module
from fingrav_native.method import NoLogsInExecutionsError

SUBPROCESS_TIMEOUT_S = 300  # bounds a hang only
#: The exit-code and range tables, in the documentation's reference.
EXIT_CODES = Path(__file__).resolve().parents[2] / "docs" / "reference" / "exit-codes.md"

# Parsing only, so examples are fast; no database: nothing worth replaying.
NUMBERS = settings(max_examples=20, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])

#: What each command needs besides the option, so only the option can be wrong.
PREFIX = {"plot": ["p.fgprof"], "export": ["p.fgprof"], "trace": ["t.json", "--power", "c.npz"],
          "profile": ["cb-4k-gemm"], "record": ["--device", "sim-live", "--out", "p.npz"]}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subs) == 1
    return dict(subs[0].choices)


def _numeric_options() -> list[tuple[str, str, str, object]]:
    """(command, option, dest, type) of every option whose type is a range."""
    found = []
    for command, sub in _subcommands().items():
        for action in sub._actions:
            if isinstance(action.type, (cli.IntRange, cli.FloatRange)):
                found.append((command, action.option_strings[-1], action.dest, action.type))
    return found


OPTIONS = _numeric_options()
IDS = [f"{c} {o}" for c, o, _, _ in OPTIONS]


def test_no_option_takes_a_bare_int_or_float():
    # A bare int/float type accepts nan, inf and any size: every number needs a range.
    bare = [f"{command} {action.option_strings}" for command, sub in _subcommands().items()
            for action in sub._actions if action.type in (int, float)]
    assert bare == []
    # The options the issue named are among those checked.
    names = {(c, o) for c, o, _, _ in OPTIONS}
    assert {("profile", "--executions"), ("sync", "--seconds"), ("sync", "--burst"), ("sync", "--interval-ms"),
            ("demo", "--period-us")} <= names
    assert len(OPTIONS) >= 20


def _bad_values(kind: object) -> st.SearchStrategy[str]:
    """Strings the option must refuse."""
    not_finite = st.sampled_from(["nan", "NaN", "-nan", "inf", "+inf", "-inf", "Infinity", "-Infinity", "1e400",
                                  "-1e400"])
    words = st.sampled_from(["", " ", "abc", "1,5", "0x10", "1e", "--", "None", "true", "½", "1 2"])
    if isinstance(kind, cli.IntRange):
        low, high = kind.low, kind.high

        def not_an_int(t: str) -> bool:
            try:
                int(t)
            except ValueError:
                return True
            return False

        out_of_range = st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1),
                                 st.integers(min_value=10**20, max_value=10**40)).map(str)
        floats = st.one_of(
            st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x != int(x)).map(repr),
            st.integers(min_value=low, max_value=high).map(lambda i: f"{i}.0"),
            st.integers(min_value=max(low, 1), max_value=min(high, 99)).map(lambda i: f"{i}e0"))
        return st.one_of(out_of_range, floats, not_finite, words, st.text(max_size=12).filter(not_an_int))
    assert isinstance(kind, cli.FloatRange)
    low, high = kind.low, kind.high

    def not_a_number(t: str) -> bool:
        try:
            float(t)
        except ValueError:
            return True
        return False

    below = st.floats(max_value=low, exclude_max=not kind.low_open, allow_nan=False, allow_infinity=False)
    above = st.floats(min_value=high, exclude_min=not kind.high_open, allow_nan=False, allow_infinity=False)
    huge = st.floats(min_value=1e12, max_value=1e300)
    return st.one_of(st.one_of(below, above, huge).map(repr), not_finite, words,
                     st.text(max_size=12).filter(not_a_number))


def _run_main(argv: list[str]) -> tuple[object, str]:
    """``cli.main(argv)``'s SystemExit code (or return value) and its stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code: object = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


@pytest.mark.parametrize("command, option, dest, kind", OPTIONS, ids=IDS)
def test_bad_numbers_exit_2_naming_the_option_and_its_range(command, option, dest, kind):
    @NUMBERS
    @given(value=_bad_values(kind))
    def check(value: str) -> None:
        # --opt=VALUE: argparse takes "-inf" after a space for an option, which is a usage error too.
        code, err = _run_main([command, *PREFIX.get(command, []), f"{option}={value}"])
        assert code == cli.EXIT_USAGE == 2, (value, err)
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert lines[0].startswith(f"usage: fingrav {command}")
        # The one error line: the command, the option, and the range.
        assert lines[-1].startswith(f"fingrav {command}: error: argument {option}: ")
        assert str(kind) in lines[-1]

    check()


@pytest.mark.parametrize("command, option, dest, kind", OPTIONS, ids=IDS)
def test_numbers_in_range_parse_to_themselves(command, option, dest, kind):
    parser = cli.build_parser()
    if isinstance(kind, cli.IntRange):
        values = st.integers(min_value=kind.low, max_value=kind.high)
    else:
        values = st.floats(min_value=kind.low, max_value=kind.high, exclude_min=kind.low_open,
                           exclude_max=kind.high_open)

    @NUMBERS
    @given(value=values)
    def check(value: float) -> None:
        # Only the parser: a value in range must not start a campaign here.
        args = parser.parse_args([command, *PREFIX.get(command, []), f"{option}={value!r}"])
        assert getattr(args, dest) == value and type(getattr(args, dest)) is type(value)

    check()


@settings(max_examples=100, deadline=None, database=None)
@given(text=st.one_of(st.text(max_size=30), st.from_regex(r"[-+]?[0-9_]{0,25}(\.[0-9]*)?([eE][-+]?[0-9]{1,4})?",
                                                           fullmatch=True)))
def test_the_range_types_return_a_value_in_range_or_an_argparse_error_only(text):
    kinds = [cli.IntRange(2, 100_000), cli.IntRange(0, 2**32 - 1), cli.FloatRange(0, 1, high_open=True),
             cli.FloatRange(20, 1e6, low_open=False, unit="us")]
    for kind in kinds:
        try:
            value = kind(text)
        except argparse.ArgumentTypeError as exc:
            message = str(exc)
            assert "\n" not in message and message.endswith(f"must be {kind}")
            continue
        if isinstance(kind, cli.IntRange):
            assert type(value) is int and kind.low <= value <= kind.high
        else:
            assert type(value) is float and math.isfinite(value)
            assert (kind.low < value if kind.low_open else kind.low <= value)
            assert (value < kind.high if kind.high_open else value <= kind.high)


def test_range_texts():
    assert str(cli.IntRange(2, 100_000)) == "an integer in [2, 100000]"
    assert str(cli.FloatRange(0, 1, high_open=True)) == "a number in (0, 1)"
    assert str(cli.FloatRange(20, 1e6, low_open=False, unit="us")) == "a number in [20, 1000000] us"
    assert str(cli.FloatRange(0, 0.5)) == "a number in (0, 0.5]"
    with pytest.raises(argparse.ArgumentTypeError, match=r"^'9{37}'\.\.\. is not an integer"):
        cli.IntRange(0, 1)("9" * 5000)  # past Python's 4300-digit limit: refused, and not echoed whole
    with pytest.raises(ValueError):
        cli.IntRange(3, 2)
    with pytest.raises(ValueError):
        cli.FloatRange(0, math.inf)


@pytest.mark.parametrize("argv, message", [
    # Each in range, but together more reads than the documented maximum.
    (["sync", "--seconds", "3600", "--interval-ms", "1"], "3,600,001 bursts of 32 reads is more than 10,000,000"),
    (["sync", "--seconds", "3600", "--burst", "10000"], "more than 10,000,000"),
    (["characterize", "--cycles", "1000", "--half-period-ms", "1000"], "runs of 33.3 minutes"),
])
def test_options_in_range_that_together_ask_too_much_exit_2(capsys, argv, message):
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"fingrav {argv[0]}: --") and message in err and err.count("\n") == 1


def test_a_campaign_that_gave_no_logs_exits_1(tmp_path, monkeypatch, capsys):
    # A failure of the run, not bad usage (the exit-code table).
    def no_logs(*args: object, **kwargs: object) -> None:
        raise NoLogsInExecutionsError("samples: no log overlaps an execution of interest")

    monkeypatch.setattr(cli_profile, "profile", no_logs)
    argv = ["profile", "cb-4k-gemm", "--runs", "2", "--executions", "4", "--out", str(tmp_path / "c"), "--quiet"]
    assert cli.main(argv) == cli.EXIT_FAILURE == 1
    assert "fingrav profile: samples: no log overlaps" in capsys.readouterr().err


def test_the_exit_code_page_documents_every_exit_code_and_every_range():
    text = EXIT_CODES.read_text()
    section = text[text.index("# Exit codes"):]
    header = next(line for line in section.splitlines() if line.startswith("| command |"))
    assert [c.strip().split(":")[0] for c in header.strip("|").split("|")] == ["command", "0", "1", "2", "130"]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for command in _subcommands():
        assert any(re.search(rf"`{command}`", row.split("|")[1]) for row in rows), command
    # Every range as the parser has it (its text without the article).
    for command, option, _, kind in OPTIONS:
        wanted = str(kind).split(" ", 1)[1]
        assert any(f"`{option}`" in row and command in row and wanted in row for row in rows), (command, option)


# ---------------------------------------------------------------- Ctrl-C


def _interrupt_here() -> None:
    """Ctrl-C, delivered to this (main) thread now, as the terminal would."""
    signal.raise_signal(signal.SIGINT)


@pytest.fixture
def sigint_default():
    # The demo installs its handler only over Python's own, as in a real process.
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is not Python's default handler here")
    yield
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def _fake_demo_work(monkeypatch, interrupt_in: str) -> list[str]:
    """The demo's profiling and writers replaced by quick fakes; Ctrl-C comes in ``interrupt_in``."""
    calls: list[str] = []

    def fake(name: str, payload: bytes):
        def write(obj: object, path: str) -> str:
            calls.append(name)
            with open(path, "wb") as f:
                f.write(payload)
                if name == interrupt_in:
                    f.flush()
                    _interrupt_here()  # mid-file: this one must not survive
            return path
        return write

    def profiled(*args: object, **kwargs: object) -> object:
        calls.append("profile")
        if interrupt_in == "profile":
            _interrupt_here()
        return object()

    monkeypatch.setattr(demo_module, "profile", profiled)
    monkeypatch.setattr(demo_module, "profile_interleaved", lambda *a, **k: object())
    monkeypatch.setattr(demo_module, "save_profile", fake("save_profile", b"whole profile"))
    monkeypatch.setattr(demo_module, "export_trace", fake("export_trace", b"half a tra"))
    return calls


def test_ctrl_c_in_the_demo_before_any_file_removes_the_folder_it_made(tmp_path, monkeypatch, capsys,
                                                                       sigint_default):
    _fake_demo_work(monkeypatch, interrupt_in="profile")
    out = tmp_path / "new" / "demo"
    assert cli.main(["demo", "--out", str(out)]) == cli.EXIT_INTERRUPTED == 130
    err = capsys.readouterr().err
    assert err == f"fingrav demo: interrupted before any file was written; removed the folder {out} it had created\n"
    assert not (tmp_path / "new").exists()  # the parent it made too
    # A folder that was there before stays, as it was.
    out.mkdir(parents=True)
    (out / "mine.txt").write_text("keep")
    assert cli.main(["demo", "--out", str(out)]) == cli.EXIT_INTERRUPTED
    assert "holds nothing new" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]


def test_ctrl_c_in_the_demo_keeps_the_whole_files_only(tmp_path, monkeypatch, capsys, sigint_default):
    calls = _fake_demo_work(monkeypatch, interrupt_in="export_trace")
    out = tmp_path / "demo"
    assert cli.main(["demo", "--out", str(out)]) == cli.EXIT_INTERRUPTED
    err = capsys.readouterr().err
    kept = ["cb-4k-gemm.fgprof", "mb-4k-gemv_then_cb-2k-gemm.fgprof"]
    assert err == f"fingrav demo: interrupted; kept the 2 files it had completed in {out}/: {', '.join(kept)}\n"
    assert calls == ["profile", "save_profile", "save_profile", "export_trace"]
    # The trace under way is gone (no partial file, no temporary one).
    assert sorted(p.name for p in out.iterdir()) == kept
    assert all((out / name).read_bytes() == b"whole profile" for name in kept)


def test_run_demo_raises_demo_interrupted_a_keyboard_interrupt(tmp_path, monkeypatch, sigint_default):
    _fake_demo_work(monkeypatch, interrupt_in="export_trace")
    with pytest.raises(KeyboardInterrupt) as excinfo:
        demo_module.run_demo(str(tmp_path / "d"))
    exc = excinfo.value
    assert isinstance(exc, demo_module.DemoInterrupted)
    assert list(exc.files) == ["cb-4k-gemm.fgprof", "mb-4k-gemv_then_cb-2k-gemm.fgprof"]
    assert exc.out_dir == str(tmp_path / "d") and not exc.removed_folder


def test_ctrl_c_in_the_live_demos_exits_130(monkeypatch, capsys, sigint_default):
    real_sleep = demo_module.time.sleep
    sleeps = []

    class Clock:
        # run_synthetic_demo sleeps between drains; Ctrl-C comes on the third.
        monotonic = staticmethod(time.monotonic)
        perf_counter = staticmethod(time.perf_counter)

        @staticmethod
        def sleep(s: float) -> None:
            sleeps.append(s)
            if len(sleeps) == 3:
                _interrupt_here()
            real_sleep(s)

    monkeypatch.setattr(demo_module, "time", Clock)
    argv = ["demo", "--live", "--source", "synthetic", "--seconds", "60", "--period-us", "100"]
    assert cli.main(argv) == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "fingrav demo: interrupted; the live demo writes no files\n"
    assert len(sleeps) == 3

    class InterruptedGPU(demo_module.SimGPU):
        def run(self, *args: object, **kwargs: object) -> object:
            _interrupt_here()
            return super().run(*args, **kwargs)

    monkeypatch.setattr(demo_module, "SimGPU", InterruptedGPU)
    assert cli.main(["demo", "--live"]) == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "fingrav demo: interrupted; the live demo writes no files\n"


def _start_demo(out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "fingrav_native", "demo", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_in_python_dash_m_fingrav_demo_exits_130_without_a_traceback(tmp_path, presses):
    # A real SIGINT to a real process, once the demo has made its folder (the
    # profiling that follows takes seconds); twice in quick succession too.
    out = tmp_path / "demo"
    proc = _start_demo(out)
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None and not out.is_dir():
        time.sleep(0.01)
    assert proc.poll() is None, "the demo ended before it could be interrupted"
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.02)
    _, stderr = proc.communicate(timeout=SUBPROCESS_TIMEOUT_S)
    assert proc.returncode == cli.EXIT_INTERRUPTED == 130, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fingrav demo: interrupted"), stderr
    if out.exists():
        # Only whole files, each named in the line; no temporary ones.
        names = sorted(p.name for p in out.iterdir())
        assert names and all(name in lines[0] and ".partial" not in name for name in names), (names, stderr)
    else:
        assert f"removed the folder {out} it had created" in lines[0]
