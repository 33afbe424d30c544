"""Ctrl-C while ``fingrav`` starts: one line and exit code 130 (docs/reference/exit-codes.md), never a traceback.

The package's analysis (scipy, matplotlib) takes seconds to import on a
loaded machine; a command holds SIGINT only once its own code runs. So the
entry module is light, ``main`` holds Ctrl-C from its first line, and the
command's modules load after that. The real-signal sweep runs the command as
a user does, in a subprocess, at delays across the whole start.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

#: Libraries that make a start slow; none may load before ``main`` holds SIGINT.
HEAVY = ("numpy", "scipy", "matplotlib", "pyarrow", "torch")

#: Delays (after the bare interpreter's own start) at which the sweep sends SIGINT: from the entry module's import
#: through the command's modules loading to the campaign under way.
DELAYS_S = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0)


def _env() -> dict[str, str]:
    # The package as this interpreter finds it (installed, editable, or on an inherited PYTHONPATH): a source
    # folder put first would hide an installed package's compiled core.
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_traceback_window_the_entry_module_imports_nothing_heavy():
    # What runs before main can hold SIGINT: the package and the console script's entry module.
    loaded = _modules_after("import fingrav_native\nimport fingrav_native.app._cli")
    assert not [m for m in loaded if m.split(".")[0] in HEAVY], sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    ours = {m for m in loaded if m.startswith("fingrav_native")}
    assert ours <= {"fingrav_native", "fingrav_native._lazy", "fingrav_native.app", "fingrav_native.app._cli",
                    "fingrav_native.app._cli_common", "fingrav_native.app._cli_ranges"}, sorted(ours)


def test_slow_help_fingrav_and_each_command_help_import_nothing_heavy():
    # --help only lists options: numpy and scipy (a second of a start) are for the work, not its usage. Every
    # command's usage in one interpreter: what any of them loads stays loaded.
    commands = [[], ["profile"], ["trace"], ["characterize"], ["export"], ["plot"], ["demo"], ["sync"], ["devices"]]
    loaded = _modules_after("import contextlib, io\nfrom fingrav_native.app._cli import main\n"
                            f"for command in {commands!r}:\n"
                            "    with contextlib.redirect_stdout(io.StringIO()):\n"  # the usage names torch.profiler
                            "        try:\n            main([*command, '--help'])\n        except SystemExit:\n"
                            "            pass")
    assert not [m for m in loaded if m.split(".")[0] in HEAVY], sorted(m for m in loaded if m.split(".")[0] in HEAVY)


def test_traceback_window_import_fingrav_native_imports_none_of_its_modules():
    # PEP 562: every public name loads on first use (tests/test_public_api.py reaches each one).
    assert {m for m in _modules_after("import fingrav_native") if m.startswith("fingrav_native")} == {"fingrav_native"}
    loaded = _modules_after("import fingrav_native as fg\nfrom fingrav_native import make_executions\n"
                            "assert fg.make_executions is make_executions")
    assert "fingrav_native.records._layouts" in loaded and "fingrav_native.method" not in loaded


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _main_in_subprocess(start: str) -> subprocess.CompletedProcess[str]:
    """``fingrav profile --resume x`` whose start (the parser's build) runs ``start`` instead."""
    script = textwrap.dedent("""
        import os, signal, sys
        from fingrav_native.app import _cli

        def build():
        {start}

        _cli.build_parser = build
        sys.argv = ["fingrav", "profile", "--resume", "x"]
        raise SystemExit(_cli.main())
    """).replace("{start}", textwrap.indent(textwrap.dedent(start), "    "))
    # The child starts with Ctrl-C at its default disposition whatever this process inherited (a test run started
    # in the background of a shell ignores SIGINT, and Python then installs no KeyboardInterrupt handler).
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=60,
                          preexec_fn=_default_sigint)


def test_silently_wrong_exit_code_ctrl_c_inside_exec_during_start_is_130_not_a_signal_death():
    # scipy and numpy run exec'd strings while they import; CPython marks a KeyboardInterrupt raised there as
    # unhandled even when caught and ends the process by SIGINT (-2) after the command's own line.
    done = _main_in_subprocess("""
        exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**7): pass")
        raise AssertionError("SIGINT did not arrive")
    """)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.splitlines() == ["fingrav profile: interrupted before it started; nothing was written"]


def test_traceback_ctrl_c_turned_into_import_error_during_start_is_an_interrupt():
    # numpy reports a Ctrl-C during its compiled modules' start as "ImportError: ... initialization failed".
    done = _main_in_subprocess("""
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**7): pass
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None
        raise AssertionError("SIGINT did not arrive")
    """)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == ["fingrav profile: interrupted before it started; nothing was written"]


def test_traceback_an_import_error_without_ctrl_c_is_still_reported():
    # Only an ImportError that a Ctrl-C caused is an interrupt: a missing module stays the failure it is.
    done = _main_in_subprocess("""
        raise ImportError("No module named 'nothere'")
    """)
    assert done.returncode != 130 and "nothere" in done.stderr


def _interpreter_start_s() -> float:
    """The bare interpreter's start here (the median of three): the package cannot hold SIGINT before it."""
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=_env(), timeout=60)
        times.append(time.monotonic() - t0)
    return sorted(times)[1]


@pytest.fixture(scope="module")
def long_campaign(tmp_path_factory) -> str:
    """A campaign folder interrupted after its first run, with 100,000 runs to go: every resume runs past 2 s."""
    out = str(tmp_path_factory.mktemp("start") / "camp")
    proc = subprocess.Popen([sys.executable, "-m", "fingrav_native", "profile", "cb-4k-gemm", "--mode", "sse",
                             "--runs", "100000", "--out", out, "--quiet"], stderr=subprocess.PIPE, text=True,
                            env=_env())
    deadline = time.monotonic() + 120
    while not (os.path.isdir(os.path.join(out, "runs")) and os.listdir(os.path.join(out, "runs"))):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    return out


def _forms() -> list[list[str]]:
    forms = [[sys.executable, "-m", "fingrav_native"]]
    script = Path(sys.executable).parent / "fingrav"
    if script.exists():
        forms.append([str(script)])
    return forms


@pytest.mark.slow
@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
                    reason="SIGINT ignored here (a background job): children would inherit it")
@pytest.mark.parametrize("form", _forms(), ids=lambda f: "script" if len(f) == 1 else "python -m")
def test_traceback_ctrl_c_at_any_moment_of_the_start_is_one_line_and_130(form, long_campaign):
    base = _interpreter_start_s()
    for delay in DELAYS_S:
        proc = subprocess.Popen([*form, "profile", "--resume", long_campaign, "--quiet"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=_env())
        try:
            time.sleep(base + delay)
            assert proc.poll() is None, f"{delay} s: ended before the signal: {proc.communicate()}"
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:  # a resume that missed its signal would run its 100,000 runs beside the tests that follow
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, f"{delay} s: exit {proc.returncode}: {err}"
        assert "Traceback" not in err, f"{delay} s: {err}"
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("fingrav profile: interrupted"), f"{delay} s: {err}"
