"""The documentation runs: every code block of the README and docs/**/*.md, and the figures they quote.

Each fenced ``python``, ``bash`` or ``console`` block of the README or a docs page is run here, a page's blocks in order in
one fresh folder (a page's later blocks use what its earlier ones made). A block that cannot run on this
machine says why in an HTML comment on the line before its fence, which the page does not show::

    <!-- docs-test: skip needs an NVIDIA GPU -->      never run here; the reason is the rest of the line
    <!-- docs-test: needs torch -->                   run where torch imports, else skipped saying so
    <!-- docs-test: needs real-data -->               run where FINGRAV_REAL_DATA is given (tests/real_data.py)
    <!-- docs-test: slow -->                          the page's run is marked slow
    <!-- docs-test: exit=1 -->                        the block's commands are expected to exit 1
    <!-- docs-test: compare rel=0.02 -->              a console session's output is compared with the page's,
                                                      every number within the relative tolerance

A page's blocks run in the default test run only where every block is marked ``fast``; the rest are marked
slow. A table that quotes a bench's figures is preceded by ``<!-- docs-figures: FILE -->`` and each of its rows
must be a row of FILE, the bench's committed output.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shlex
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: Pages written at build time from the code (docs/_ext/fingrav_docs.py): not hand-written, not tested here.
GENERATED = {DOCS / "reference" / "cli.md"}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w{}-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
_MARK = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")
_RUNNABLE = ("python", "bash", "console")


@dataclass
class Block:
    """One fenced code block of a page, with the marks of the comment before it."""

    page: Path
    line: int
    lang: str
    text: str
    marks: list[str] = field(default_factory=list)

    def mark(self, key: str) -> str | None:
        """The rest of the first mark that starts with ``key`` ("" when nothing follows it), else None."""
        for m in self.marks:
            if m == key or m.startswith(key + " ") or m.startswith(key + "="):
                return m[len(key):].lstrip(" =")
        return None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The hand-written pages: the README (the front page) and docs/**/*.md."""
    return [README] + sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and p not in GENERATED)


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order, each with the docs-test marks on the line before its fence."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marks = [x.strip() for x in _MARK.findall(before)]
        body = "\n".join(line[len(m.group("indent")):] for line in m.group("body").splitlines())
        out.append(Block(page, text.count("\n", 0, m.start()) + 1, m.group("lang"), body, marks))
    return out


def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in _RUNNABLE]


# ---------------------------------------------------------------- what every block must say (fast)


def test_unclear_every_docs_code_block_has_a_language_and_runs_or_says_why() -> None:
    problems = []
    for page in pages():
        for b in blocks(page):
            if not b.lang:
                problems.append(f"{b.where}: a fence without a language (python, bash, console or text)")
            elif b.lang in _RUNNABLE and b.mark("skip") == "":
                problems.append(f"{b.where}: 'skip' without the reason")
            elif b.lang in ("bash", "console") and b.mark("skip") is None:
                bad = [c for c in _commands(b) if not re.match(r"([A-Z_]+=\S* )*(fingrav|python)\b", c)]
                if bad:
                    problems.append(f"{b.where}: runs {bad[0]!r}, which the tests cannot: mark it skip with why")
    assert not problems, "\n".join(problems)


def test_the_docs_run_more_than_they_skip() -> None:
    # A rewrite that marked everything skip would make the runs below vacuous.
    runnable = [b for p in pages() for b in _runnable(p)]
    skipped = [b for b in runnable if b.mark("skip") is not None]
    assert len(runnable) >= 15 and len(skipped) <= len(runnable) // 2, (len(runnable), len(skipped))


def test_silently_wrong_every_quoted_bench_table_row_is_in_the_committed_results() -> None:
    problems = []
    checked = 0
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = re.search(r"<!--\s*docs-figures:\s*(\S+)\s*-->", line)
            if not m:
                continue
            source = (ROOT / m.group(1)).read_text(encoding="utf-8").splitlines()
            rows = {r.strip() for r in source}
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("|"):
                row = lines[j].strip()
                checked += 1
                if row not in rows:
                    problems.append(f"{page.relative_to(ROOT)}:{j + 1}: not a row of {m.group(1)}: {row[:120]}")
                j += 1
    assert checked >= 20 and not problems, "\n".join(problems)


# ---------------------------------------------------------------- running the blocks


def _commands(b: Block) -> list[str]:
    """The command lines of a bash or console block (a console block's are its ``$`` lines)."""
    lines = b.text.splitlines()
    if b.lang == "console":
        return [ln[2:].strip() for ln in lines if ln.startswith("$ ")]
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def _shims(folder: Path) -> dict[str, str]:
    """An environment whose ``fingrav`` and ``python`` are this interpreter's, as an installed package has them."""
    bin_dir = folder / ".docs-bin"
    bin_dir.mkdir()
    for name, body in (("fingrav", f'exec "{sys.executable}" -m fingrav_native "$@"\n'),
                       ("python", f'exec "{sys.executable}" "$@"\n')):
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir() and "site-packages" not in p)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])[-+]?\d+(?:\.\d+)?", text.replace(",", ""))]


def _compare(expected: str, got: str, rel: float, where: str) -> None:
    """A console session's output against the page's: the same lines, every number within ``rel``."""
    drop_wall = re.compile(r",\s*[\d.]+ s$")  # the wall time of a run is the machine's, not the method's
    want = [drop_wall.sub("", ln.rstrip()) for ln in expected.splitlines() if ln.strip()]
    have = [drop_wall.sub("", ln.rstrip()) for ln in got.splitlines() if ln.strip()]
    assert len(want) == len(have), f"{where}: {len(have)} lines of output, the page shows {len(want)}:\n{got}"
    for w, h in zip(want, have):
        assert re.sub(r"[-+]?\d+(?:\.\d+)?", "#", w) == re.sub(r"[-+]?\d+(?:\.\d+)?", "#", h), \
            f"{where}: the page shows\n  {w}\nthe command printed\n  {h}"
        for a, x in zip(_numbers(w), _numbers(h)):
            assert math.isclose(a, x, rel_tol=rel, abs_tol=0.011), \
                f"{where}: {a} on the page, {x} printed (beyond {rel:.0%}):\n  {w}\n  {h}"


def _why_not_here(b: Block) -> str | None:
    """Why block ``b`` cannot run on this machine, or None."""
    skip = b.mark("skip")
    if skip is not None:
        return skip
    needs = b.mark("needs") or ""
    if "torch" in needs and importlib.util.find_spec("torch") is None:
        return "needs torch (the distributed or test-full extra)"
    if "real-data" in needs:
        sys.path.insert(0, str(Path(__file__).parent))
        import real_data

        if real_data.root() is None:
            return real_data.why_missing("traces")
    return None


def _run_shell(b: Block, cwd: Path, env: dict[str, str]) -> None:
    expected_exit = int(b.mark("exit") or 0)
    for cmd in _commands(b):
        proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == expected_exit, (f"{b.where}: `{cmd}` exited {proc.returncode}, not "
                                                  f"{expected_exit}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        assert "Traceback" not in proc.stderr, f"{b.where}: `{cmd}`:\n{proc.stderr[-3000:]}"
        rel = b.mark("compare")
        if rel is not None and b.lang == "console":
            shown = b.text.split("$ " + cmd, 1)[1].split("\n$ ", 1)[0]
            _compare(shown, proc.stdout, float(rel.split("=")[-1]) if rel else 0.0, b.where)


def _run_page(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _shims(tmp_path)
    monkeypatch.chdir(tmp_path)
    real = None
    namespace: dict[str, object] = {"__name__": "__docs__"}
    not_here = []
    for b in _runnable(page):
        why = _why_not_here(b)
        if why is not None:
            not_here.append(f"{b.where}: {why}")
            continue
        if b.mark("needs") and "real-data" in (b.mark("needs") or ""):
            import real_data

            real = real_data.root()
            monkeypatch.setenv("FINGRAV_REAL_DATA", str(real))
        if b.lang == "python":
            exec(compile(b.text, b.where, "exec"), namespace)  # noqa: S102 - the page's own example
        else:
            _run_shell(b, tmp_path, env)
    if not_here:
        # Every block that could run did; the rest are named.
        pytest.skip("; ".join(not_here)) if len(not_here) == len(_runnable(page)) else None


def _page_params() -> list[object]:
    out = []
    for page in pages():
        run = [b for b in _runnable(page) if b.mark("skip") is None]
        if not run:
            continue
        fast = all(b.mark("fast") is not None for b in run)
        out.append(pytest.param(page, id=str(page.relative_to(ROOT)), marks=() if fast else pytest.mark.slow))
    return out


@pytest.mark.parametrize("page", _page_params())
def test_unclear_every_docs_page_runs_as_written(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run_page(page, tmp_path, monkeypatch)


def test_the_docs_test_marks_are_the_documented_ones() -> None:
    known = ("skip", "needs", "slow", "fast", "exit", "compare")
    bad = [f"{b.where}: {m}" for p in pages() for b in blocks(p) for m in b.marks
           if not any(m == k or m.startswith(k + " ") or m.startswith(k + "=") for k in known)]
    assert not bad, "\n".join(bad)


def test_the_commands_of_the_docs_parse(capsys: pytest.CaptureFixture[str]) -> None:
    # Every `fingrav ...` line of the docs, skipped ones included, is one the parser accepts: a renamed option
    # fails here even for the blocks that need a GPU to run.
    from fingrav_native.app._cli_parser import build_parser

    parser = build_parser()
    problems = []
    for page in pages():
        for b in blocks(page):
            if b.lang not in ("bash", "console"):
                continue
            for cmd in _commands(b):
                if not cmd.startswith("fingrav "):
                    continue
                argv = shlex.split(cmd.split("  #")[0], comments=True)[1:]
                try:
                    parser.parse_args(argv)
                except SystemExit as exc:
                    if exc.code:
                        problems.append(f"{b.where}: {cmd}: {capsys.readouterr().err.strip()[-300:]}")
    assert not problems, "\n".join(problems)


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` (outside its code blocks) whose file does not exist."""
    problems = []
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        full = (page.parent / path).resolve()
        if full in GENERATED or (DOCS / "reference" / "api") in full.parents:
            continue  # written at build time; the build (nitpicky, -W) checks these
        if path and not full.exists():
            problems.append(f"{page.relative_to(ROOT)}: {target}")
    return problems


def test_unclear_every_relative_link_of_the_docs_leads_somewhere() -> None:
    # The Sphinx build checks these too (nitpicky, -W); this holds them in the default test run, and on GitHub.
    problems = [p for page in pages() for p in broken_links(page)]
    assert not problems, "\n".join(problems)
