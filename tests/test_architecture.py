"""The package's architecture, checked against docs/ARCHITECTURE.md.

* every module of the package sits in exactly one layer of the document's
  layer table, and no import (module level or inside a function) runs from a
  layer up to a higher one;
* the analysis layers (records, sensors, clocks, method, insitu, multi)
  import nothing of backends/, sim/, files/ or app/;
* files/ imports nothing of backends/ (the layouts both need live in
  records/), and sim/ imports nothing of backends/ (the simulator is a
  device below the simulated backend that drives it), outside the
  allowance below (empty);
* no import circle between the package's modules;
* no module takes another module's private name;
* implementation modules are private (``_x.py``) behind the subpackage faces;
* no function has more than 80 lines of code (its docstring not counted)
  outside the short allowance below, and the document's table says the same;
* no module has more than 800 lines, and at most five functions have more
  than 60 lines of code (docstring, comment and blank lines not counted),
  outside the temporary allowance below; each check is fed a synthetic
  violation.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import io
import re
import tokenize
from pathlib import Path

import pytest

import fingrav_native

PACKAGE_DIR = Path(fingrav_native.__file__).resolve().parent
# The repository holding this test (the package may be installed elsewhere, as CI installs it).
REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
PKG = "fingrav_native"
ANALYSIS = ("records", "sensors", "clocks", "method", "insitu", "multi")
ABOVE_ANALYSIS = ("backends", "sim", "files", "app")
SUBPACKAGES = ANALYSIS + ABOVE_ANALYSIS

#: Functions allowed more than 80 lines of code, with the reason. Keep it short: cut a function
#: along its seams instead of adding it here.
LONG_FUNCTIONS: dict[str, str] = {}
MAX_FUNCTION_LINES = 80

#: A module longer than this is cut along its seams.
MAX_MODULE_LINES = 800
#: At most MAX_LONG_FUNCTIONS functions have more than LONG_FUNCTION_CODE_LINES lines of code.
LONG_FUNCTION_CODE_LINES = 60
MAX_LONG_FUNCTIONS = 5

#: Imports between peers that must not know each other: (importing subpackage, imported subpackage).
FORBIDDEN_CROSSINGS = {("files", "backends"), ("sim", "backends")}

#: Crossings still in the tree, with the reason; each goes when its module is cut along the seam.
KNOWN_CROSSINGS: dict[str, str] = {}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.lru_cache(maxsize=None)
def _modules() -> dict[str, Path]:
    mods = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    # The compiled extension (_core) is a module too; its stub stands for it and imports nothing of ours.
    for stub in PACKAGE_DIR.rglob("*.pyi"):
        mods.setdefault(_module_name(stub), stub)
    return mods


@functools.lru_cache(maxsize=None)
def _parsed_imports(path: Path) -> frozenset[tuple[str, str]]:
    """(module, name) pairs this file imports from the package, wherever the import statement is."""
    return _imports_in(_module_name(path), path.read_text(), is_pkg=path.name == "__init__.py")


def _imports_in(me: str, source: str, *, is_pkg: bool = False) -> frozenset[tuple[str, str]]:
    """(module, name) pairs module ``me``'s source imports from the package, wherever the import statement is."""
    out: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PKG or a.name.startswith(PKG + "."):
                    out.add((a.name, ""))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if is_pkg else me.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            if src != PKG and not src.startswith(PKG + "."):
                continue
            for a in node.names:
                out.add((src, a.name))
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def _graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    return {name: _dependencies(name, _parsed_imports(path), modules) for name, path in modules.items()}


def _dependencies(name: str, imports: frozenset[tuple[str, str]], modules) -> frozenset[str]:
    deps: set[str] = set()
    for src, imported in imports:
        sub = f"{src}.{imported}" if imported else ""
        # A name taken from a module needs the module; a submodule taken from a
        # package needs the submodule only.
        deps.add(sub if sub in modules else src)
    deps.discard(name)
    return frozenset(deps)


@functools.lru_cache(maxsize=None)
def _layer_table() -> dict[str, int]:
    """Module (without the package prefix) -> layer number, read from the document's layer table."""
    table: dict[str, int] = {}
    text = ARCHITECTURE.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        m = re.match(r"^\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|", line)
        if not m:
            continue
        for item in re.findall(r"`([^`]+)`", m.group(2)):
            assert item not in table, f"{item} is listed twice in the layer table"
            table[item] = int(m.group(1))
    return table


def _layer_of(module: str) -> int:
    rel = module[len(PKG) + 1:] if module != PKG else PKG
    return _layer_table()[rel]


def test_every_module_is_in_the_layer_table_and_nothing_else():
    table = _layer_table()
    mods = {m[len(PKG) + 1:] if m != PKG else PKG for m in _modules()}
    assert sorted(mods - set(table)) == [], "modules missing from docs/ARCHITECTURE.md's layer table"
    assert sorted(set(table) - mods) == [], "the layer table names modules that do not exist"


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) >= 3 else ""


def _wrong_way_imports(graph: dict[str, frozenset[str]], layer_of) -> list[str]:
    """Every import in ``graph`` that runs up a layer or crosses between peers (FORBIDDEN_CROSSINGS)."""
    offenders = []
    for name, deps in graph.items():
        for d in deps:
            if d not in graph:
                continue
            if layer_of(d) > layer_of(name):
                offenders.append(f"{name} (layer {layer_of(name)}) imports {d} (layer {layer_of(d)})")
            elif (_subpackage(name), _subpackage(d)) in FORBIDDEN_CROSSINGS:
                offenders.append(f"{name} -> {d}")
    return sorted(offenders)


def test_no_import_runs_back_up_a_layer():
    offenders = [o for o in _wrong_way_imports(_graph(), _layer_of) if o not in KNOWN_CROSSINGS]
    assert not offenders, "\n".join(offenders)
    stale = sorted(set(KNOWN_CROSSINGS) - set(_wrong_way_imports(_graph(), _layer_of)))
    assert not stale, f"allowances no longer needed: {stale}"


def test_the_upward_check_catches_an_upward_import():
    # The check is only as good as its ability to fail: a record importing the app must be caught.
    assert _layer_of(f"{PKG}.records._layouts") < _layer_of(f"{PKG}.app._profile")


# Synthetic modules fed to the checker, one per kind of wrong-way import (inside a function too), and the
# layer each would sit in: a record that imports the app; a file format that takes a backend's layout;
# the simulator importing a backend (by absolute and by relative import).
_SYNTHETIC = {
    f"{PKG}.records._upward": (1, "def f():\n    from fingrav_native.app._profile import profile\n"),
    f"{PKG}.files._uses_backend": (7, "from fingrav_native.backends._base import KernelSpec\n"),
    f"{PKG}.sim._uses_backend_relative": (5, "from ..backends import _base\n"),
    f"{PKG}.sim._uses_backend": (5, "import fingrav_native.backends._workloads\n"),
}


@pytest.mark.parametrize("module", sorted(_SYNTHETIC))
def test_the_upward_check_reports_a_synthetic_wrong_way_import(module):
    layer, source = _SYNTHETIC[module]
    graph = dict(_graph())
    graph[module] = _dependencies(module, _imports_in(module, source), {**_modules(), module: Path()})
    assert graph[module], "the synthetic import was not parsed"

    def layer_of(m: str) -> int:
        return layer if m == module else _layer_of(m)

    found = [o for o in _wrong_way_imports(graph, layer_of) if o.startswith(module + " ")]
    assert len(found) == 1, found
    assert not [o for o in _wrong_way_imports(_graph(), _layer_of) if o.startswith(module + " ")]


def test_the_analysis_layers_import_no_device_file_or_driver():
    offenders = []
    for name, deps in _graph().items():
        parts = name.split(".")
        if len(parts) < 3 or parts[1] not in ANALYSIS:
            continue
        for d in deps:
            dparts = d.split(".")
            if len(dparts) >= 2 and dparts[1] in ABOVE_ANALYSIS:
                offenders.append(f"{name} imports {d}")
    assert not offenders, offenders


def test_the_package_has_no_import_circle_not_even_inside_functions():
    graph = {k: set(v) for k, v in _graph().items()}
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_the_circle_check_catches_a_circle():
    graph = {k: set(v) for k, v in _graph().items()}
    graph[f"{PKG}.records._layouts"].add(f"{PKG}.app._profile")
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(graph).static_order())


def test_no_module_takes_another_modules_private_name():
    modules = _modules()
    offenders = []
    for name, path in modules.items():
        for src, imported in _parsed_imports(path):
            private = imported.startswith("_") and not imported.startswith("__")
            if private and f"{src}.{imported}" not in modules and src != name:
                offenders.append(f"{name} imports {imported} from {src}")
    assert not offenders, offenders


def test_implementation_modules_are_private_behind_their_faces():
    public = []
    for name in _modules():
        parts = name.split(".")
        if len(parts) == 3 and parts[1] in SUBPACKAGES and not parts[2].startswith("_"):
            public.append(name)
    assert not public, f"implementation modules must be private (_x.py): {public}"
    flat = sorted(p.stem for p in PACKAGE_DIR.glob("*.py") if not p.name.startswith("_"))
    assert flat == ["native"], flat


def _functions() -> list[tuple[str, int]]:
    out = []
    for name, path in _modules().items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                        and isinstance(first.value.value, str):
                    lines -= first.end_lineno - first.lineno + 1
                out.append((f"{name}.{node.name}", lines))
    return out


def test_no_function_is_longer_than_80_lines_of_code():
    long = sorted(f"{n} ({k} lines)" for n, k in _functions() if k > MAX_FUNCTION_LINES and n not in LONG_FUNCTIONS)
    assert not long, long
    stale = sorted(n for n in LONG_FUNCTIONS if n not in {f for f, k in _functions() if k > MAX_FUNCTION_LINES})
    assert not stale, f"allowances no longer needed: {stale}"


def test_the_document_states_the_length_bound():
    assert f"{MAX_FUNCTION_LINES} lines" in ARCHITECTURE.read_text()


def _code_lines(source: str) -> set[int]:
    """The lines of ``source`` that hold code: no comment, blank or continuation-only line."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


def _function_code_lines(source: str) -> list[tuple[str, int]]:
    """(function, lines of code) for every function of ``source``, nested ones too; docstrings not counted."""
    code = _code_lines(source)
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = set(range(node.lineno, node.end_lineno + 1))
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                span -= set(range(first.lineno, first.end_lineno + 1))
            out.append((node.name, len(span & code)))
    return out


def _sources() -> dict[str, str]:
    return {name: path.read_text() for name, path in _modules().items() if path.suffix == ".py"}


def _long_modules(sources: dict[str, str]) -> list[str]:
    """Every module over MAX_MODULE_LINES lines, with its length."""
    return sorted(f"{name} ({n} lines)" for name, src in sources.items()
                  if (n := len(src.splitlines())) > MAX_MODULE_LINES)


def _long_functions(sources: dict[str, str]) -> list[str]:
    """Every function over LONG_FUNCTION_CODE_LINES lines of code, longest first."""
    found = [(n, f"{name}.{fn}") for name, src in sources.items()
             for fn, n in _function_code_lines(src) if n > LONG_FUNCTION_CODE_LINES]
    return [f"{f} ({n} lines of code)" for n, f in sorted(found, key=lambda x: (-x[0], x[1]))]


def _too_many_long_functions(sources: dict[str, str]) -> str:
    """The complaint when more than MAX_LONG_FUNCTIONS functions are long (empty when not)."""
    long = _long_functions(sources)
    if len(long) <= MAX_LONG_FUNCTIONS:
        return ""
    return (f"{len(long)} functions over {LONG_FUNCTION_CODE_LINES} lines of code (at most {MAX_LONG_FUNCTIONS}); "
            "cut the longest along their seams:\n" + "\n".join(long))


def test_no_module_is_longer_than_800_lines():
    long = _long_modules(_sources())
    assert not long, f"modules over {MAX_MODULE_LINES} lines; cut them along their seams: {long}"


def test_at_most_five_functions_have_over_60_lines_of_code():
    problem = _too_many_long_functions(_sources())
    assert not problem, problem


def test_the_module_length_check_catches_a_long_module():
    sources = {f"{PKG}.records._long": "x = 1\n" * (MAX_MODULE_LINES + 1), f"{PKG}.records._short": "x = 1\n" * 800}
    assert _long_modules(sources) == [f"{PKG}.records._long ({MAX_MODULE_LINES + 1} lines)"]


def _function(name: str, code: int, padding: int = 0) -> str:
    """A function with ``code`` lines of code, a long docstring and ``padding`` comment and blank lines."""
    body = '    """Doc.\n\n    More doc.\n    """\n' + "    # why\n\n" * padding
    return f"def {name}():\n" + body + "    x = 0\n" * (code - 2) + "    return x\n\n\n"


def test_the_long_function_check_counts_code_lines_only():
    assert _function_code_lines(_function("f", 61, padding=30)) == [("f", 61)]
    # 60 lines of code with comments and blank lines around them is not long.
    assert _long_functions({f"{PKG}.records._x": _function("f", 60, padding=30)}) == []


def test_the_long_function_check_catches_a_sixth_long_function():
    five = {f"{PKG}.records._five": "".join(_function(f"f{i}", 61) for i in range(MAX_LONG_FUNCTIONS))}
    assert _too_many_long_functions(five) == ""
    six = {**five, f"{PKG}.records._six": _function("g", 62)}
    problem = _too_many_long_functions(six)
    assert problem.startswith(f"{MAX_LONG_FUNCTIONS + 1} functions over {LONG_FUNCTION_CODE_LINES} lines of code")
    # The offenders are named, longest first.
    assert problem.splitlines()[1] == f"{PKG}.records._six.g (62 lines of code)"
    assert f"{PKG}.records._five.f4 (61 lines of code)" in problem
# ---------------------------------------------------------------- the benches

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"

#: Bench scripts that import a private module, each with why (empty: every bench reads the package through its
#: faces; a bench that needs an internal step computes its own baseline, or the step gets a public name). Stale
#: entries fail too.
BENCH_PRIVATE_IMPORTS: dict[tuple[str, str], str] = {}


def _private_modules_imported(source: str) -> set[str]:
    """The package's private modules (a dotted part starting with ``_``) a script's source imports, wherever
    the import statement is: ``from fingrav_native.x._y import z``, ``import fingrav_native.x._y`` and
    ``from fingrav_native.x import _y`` alike."""
    out = set()
    for src, name in _imports_in("bench_script", source):
        if any(part.startswith("_") for part in src.split(".")[1:]):
            out.add(src)
        elif name.startswith("_") and not name.startswith("__"):
            out.add(f"{src}.{name}")
    return out


def _bench_private_imports(scripts: dict[str, str]) -> set[tuple[str, str]]:
    return {(name, mod) for name, source in scripts.items() for mod in _private_modules_imported(source)}


def test_no_bench_script_imports_a_private_module():
    # A bench reads the package as a user does: through its faces (docs/ARCHITECTURE.md), so a private module
    # cut or renamed never breaks a committed figure's script unseen.
    scripts = {p.name: p.read_text() for p in sorted(BENCH_DIR.glob("*.py"))}
    assert scripts, BENCH_DIR
    found = _bench_private_imports(scripts)
    assert sorted(found - set(BENCH_PRIVATE_IMPORTS)) == [], "bench scripts importing private modules"
    assert sorted(set(BENCH_PRIVATE_IMPORTS) - found) == [], "allowances no longer needed"


@pytest.mark.parametrize("source", [
    "from fingrav_native.sim._analytic import Identity\n",
    "def run():\n    from fingrav_native.insitu._profile import attribute_trace\n",
    "import fingrav_native.method._stitch as stitch_module\n",
    "from fingrav_native.insitu import _signatures\n",
])
def test_the_bench_check_catches_a_private_import(source):
    # Fed a violation of each form, beside a clean script: the check is not vacuous.
    clean = "import fingrav_native as fg\nfrom fingrav_native.sim import Identity, logged_loop\n"
    found = _bench_private_imports({"clean.py": clean, "bad.py": source})
    assert len(found) == 1 and next(iter(found))[0] == "bad.py", found
