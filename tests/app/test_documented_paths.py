"""Documented paths that failed for a new user: each runs as the README and the docs say, from a plain install.

The commands of the README and of the docs pages a new user reads first are run here as a user types them:
through the installed ``fingrav`` console script (not ``python -m``, which puts the current folder on
``sys.path`` itself), in a clean folder, with the optional libraries absent where the plain install lacks them.
"""

from __future__ import annotations

import importlib.abc
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fingrav_native.app import _cli as cli

ROOT = Path(__file__).resolve().parents[2]
#: The front page and the docs pages that hold the commands a new user types first.
DOCUMENTED = [ROOT / "README.md"] + [ROOT / "docs" / page for page in (
    "tutorials/first-profile.md", "tutorials/first-insitu.md", "howto/profile-your-kernel.md",
    "howto/torch-profiler.md", "howto/rocprofv3.md", "reference/commands.md")]
SCRIPT = Path(sys.executable).parent / "fingrav"


class _NoPyarrow(importlib.abc.MetaPathFinder):
    """An interpreter without pyarrow (the plain install): any import of it fails as a missing module does."""

    def find_spec(self, name, path=None, target=None):  # noqa: ARG002
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.fixture
def without_pyarrow(monkeypatch):
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoPyarrow(), *sys.meta_path])


@pytest.fixture(scope="module")
def saved_profile(tmp_path_factory) -> str:
    from fingrav_native import profile
    from fingrav_native.backends import SimBackend
    from fingrav_native.files import save_profile

    path = tmp_path_factory.mktemp("prof") / "small.fgprof"
    save_profile(profile("cb-4k-gemm", SimBackend(seed=3), mode="sse", runs=8, top_up=False), path)
    return str(path)


def test_unclear_export_parquet_without_pyarrow_names_the_extra_and_writes_nothing(
        saved_profile, tmp_path, capsys, without_pyarrow) -> None:
    # The plain install has no pyarrow: the command wrote the trace, then died in a 30-line traceback.
    outs = {"--trace": tmp_path / "t.json", "--parquet": tmp_path / "pq", "--summary": tmp_path / "s.json"}
    argv = ["export", saved_profile] + [str(x) for kv in outs.items() for x in kv]
    assert cli.main(argv) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "--parquet" in err and "pip install 'fingrav-native[parquet]'" in err
    assert not any(p.exists() for p in outs.values())  # none of the outputs, not some


def test_unclear_a_workload_module_beside_the_user_is_found_as_the_console_script_runs(
        tmp_path, monkeypatch, capsys) -> None:
    # "Profile your own kernel": mywork.py in the current folder, `fingrav profile mywork:gemm`. The console
    # script's sys.path starts with its own folder, not the current one: the module was "not found".
    (tmp_path / "mywork_beside.py").write_text(
        "import fingrav_native as fg\n\nCALLS = []\n\ndef gemm():\n    CALLS.append(1)\n    return 3\n")
    monkeypatch.chdir(tmp_path)
    here = {str(tmp_path), "", "."}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in here and os.path.abspath(p) != str(tmp_path)])
    assert cli.main(["profile", "mywork_beside:gemm", "--backend", "amd", "--out", "w"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    # Found and called: what it returned is the error now, not a missing module.
    assert "no module named" not in err and "gemm() returned int, not a Workload" in err, err
    monkeypatch.delitem(sys.modules, "mywork_beside")


def test_unclear_a_workload_module_that_is_nowhere_names_the_folders_searched(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["profile", "no_such_module_here:gemm", "--backend", "amd", "--out", "w"]) == cli.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "no module named 'no_such_module_here'" in err and str(tmp_path) in err


# --- the README's commands, as typed, through the console script -------------------------------------------

#: Commands of the README that need hardware or a tool this machine lacks: what each must say instead of a
#: traceback (they run, and must fail cleanly with exit 1 naming what is missing).
_NEEDS = {
    "rocprofv3 ": None,  # another tool's command line, not ours
    "<host>": None,  # a placeholder path
    "mymodels.layers": None,  # a module the reader writes
    "--backend amd": "torch",  # mywork's gemm builds a torch workload before any AMD device is opened
    "fingrav devices": "unavailable",  # exits 0 only where real hardware is usable, as the README says
    "./my_app": None,  # a program of the reader's
    "train.py": None,  # a script of the reader's
    "run1/": None,  # the folder a run on a GPU writes
    "$(": None,  # a shell's command substitution (tests/test_docs.py runs that block in bash)
    "simrun/": None,  # the folder that block writes
}


def _readme_commands() -> list[str]:
    """Every `fingrav ...` and `python -c "...fingrav_native..."` line in the documented pages' fenced blocks."""
    return [cmd for page in DOCUMENTED for cmd in _page_commands(page)]


def _page_commands(page: Path) -> list[str]:
    """The commands of one page, in order (a page's later commands read what its earlier ones wrote)."""
    text = page.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        prompted = any(ln.startswith("$ ") for ln in block.splitlines())
        for line in block.splitlines():
            line = line.strip()
            if prompted:  # a session shown with its output: only the prompted lines are typed
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if line.startswith("fingrav ") or (line.startswith("python -c") and "fingrav_native" in line):
                out.append(line.split("  #")[0].strip())
    return out


def test_the_readme_lists_the_commands_this_test_runs() -> None:
    cmds = _readme_commands()
    # A README rewrite that drops its command blocks would make the slow test below vacuous.
    assert any(c.startswith("fingrav demo") for c in cmds) and any(c.startswith("fingrav trace") for c in cmds)
    assert any("mywork:gemm" in c for c in cmds)


@pytest.mark.slow
def test_unclear_every_readme_command_runs_as_written_through_the_console_script(tmp_path) -> None:
    if not SCRIPT.exists():
        pytest.skip(f"no installed console script at {SCRIPT}: the package is imported from a source folder")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = f"{SCRIPT.parent}{os.pathsep}{env.get('PATH', '')}"
    ran = 0
    # Each page in a folder of its own, as a reader follows one page.
    for i, page in enumerate(DOCUMENTED):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "mywork.py").write_text(
            "import fingrav_native as fg\n\ndef gemm():\n    return fg.backends.torch_gemm(4096, 4096, 4096)\n")
        ran += _run_page_commands(page, folder, env)
    assert ran >= 8


def _run_page_commands(page: Path, folder: Path, env: dict[str, str]) -> int:
    """Run the commands of ``page`` in ``folder``; how many ran."""
    ran = 0
    for cmd in _page_commands(page):
        need = next((v for k, v in _NEEDS.items() if k in cmd), "")
        if need is None:
            continue
        argv = shlex.split(cmd)
        if argv[0] == "python":
            argv[0] = sys.executable
        proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        assert "Traceback" not in proc.stderr, f"{cmd}\n{proc.stderr}"
        if need:
            # Needs what this machine lacks: one clean failure (exit 1) that names it.
            assert proc.returncode == 1 and need in (proc.stdout + proc.stderr).lower(), f"{cmd}\n{proc.stderr}"
        else:
            assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stderr[-2000:]}"
        ran += 1
    return ran
