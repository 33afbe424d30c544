"""The type stub python/fingrav_native/_core.pyi cannot drift from the module.

Two checks, because one is not enough for a pybind11 module:

1. ``mypy.stubtest`` (the standard check): every name, class, property,
   enum member and constant type in the stub matches the runtime, and nothing
   public is missing. It cannot see the parameters of pybind11 callables
   (they have no ``__text_signature__``), so:
2. every function, method and property in the stub is compared with the
   signature pybind11 writes on the first line of its docstring: parameter
   names, kinds (positional-only, keyword-only), defaults and types.

mypy is a test dependency (the ``test`` extra): a missing mypy is a failure,
not a skip.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import mypy.stubtest  # noqa: F401  - fail here, not skip, when mypy is missing
import pytest

import fingrav_native._core as core

REPO = Path(__file__).resolve().parents[2]
STUB = REPO / "python" / "fingrav_native" / "_core.pyi"
ALLOWLIST = Path(__file__).resolve().parents[1] / "stubtest_allowlist.txt"

POS_ONLY, POS_OR_KW, KW_ONLY = "positional-only", "positional-or-keyword", "keyword-only"
NO_DEFAULT = object()


def test_stub_file_exists():
    assert STUB.is_file(), f"missing {STUB}"
    assert (STUB.parent / "py.typed").is_file()


@pytest.mark.slow
def test_stubtest_passes(tmp_path):
    # The stub is taken from the source tree (MYPYPATH), the module from the
    # installed package, so the check is of the stub that gets committed.
    env = dict(os.environ, MYPYPATH=str(STUB.parent.parent), MYPY_CACHE_DIR=str(tmp_path / "mypy-cache"))
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "fingrav_native._core",
            "--allowlist",
            str(ALLOWLIST),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"stubtest failed:\n{proc.stdout}\n{proc.stderr}"


# ---------------------------------------------------------------- signatures


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: object  # NO_DEFAULT, or the literal value
    annotation: str  # the stub's text, or pybind11's normalised to the stub's spelling


@dataclass(frozen=True)
class Signature:
    params: tuple[Param, ...]
    returns: str


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


# How pybind11 spells a type, and how the stub spells the same type.
_RUNTIME_TYPE_SPELLING = [
    (r"typing\.Annotated\[(.*?), [\w.]+\]", r"\1"),  # array_t<T>: ArrayLike annotated with T
    (r"typing\.SupportsInt \| typing\.SupportsIndex", "SupportsIndex"),
    (r"typing\.SupportsFloat \| typing\.SupportsIndex", "float | SupportsIndex"),
    (r"numpy\.typing\.", "npt."),
    (r"numpy\.ndarray", "npt.NDArray[np.void]"),  # every untyped py::array here is a record array
    (r"numpy\.", "np."),
    (r"fingrav_native\._core\.", ""),
]


def _refines(runtime: str, stub: str) -> bool:
    """Whether the stub's type says the runtime's type, or more where pybind11 cannot."""
    if runtime == stub or runtime == "object":  # object: pybind11 knows nothing (py::object, py::vectorize)
        return True
    if runtime == "dict":  # a py::dict: element types, or a TypedDict of its fixed keys
        return re.fullmatch(r"dict\[.+\]|_\w+Dict", stub) is not None
    if runtime == "list":  # a py::list: element types
        return re.fullmatch(r"list\[.+\]", stub) is not None
    return (runtime, stub) == ("bool", "Literal[False]")  # __exit__ never swallows an exception


def _normalise_runtime_type(text: str) -> str:
    for pattern, replacement in _RUNTIME_TYPE_SPELLING:
        text = re.sub(pattern, replacement, text)
    return text.strip()


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pytest.fail(f"default {text!r} in a pybind11 signature is not a literal; compare it by hand")


def _runtime_signature(obj: object, name: str, *, is_method: bool) -> Signature:
    doc = getattr(obj, "__doc__", None) or ""
    first = doc.lstrip().splitlines()[0] if doc.strip() else ""
    if "Overloaded function" in doc:
        pytest.fail(f"{name}: overloaded pybind11 functions need @overload in the stub and a check here")
    m = re.match(r"^(?:\w+)?\((.*)\)\s*->\s*(.+)$", first)
    assert m, f"{name}: no pybind11 signature in the docstring: {first!r}"
    params: list[Param] = []
    kind = POS_OR_KW
    for i, token in enumerate(_split_top_level(m.group(1))):
        if token == "*":
            kind = KW_ONLY
            continue
        if token == "/":
            params = [Param(p.name, POS_ONLY, p.default, p.annotation) for p in params]
            continue
        head, _, default = token.partition(" = ")
        pname, _, ptype = head.partition(": ")
        # pybind11 names arguments without py::arg "argN" and they cannot be
        # passed by keyword; the self of a property getter is "arg0" too.
        pkind = POS_ONLY if re.fullmatch(r"arg\d+", pname) else kind
        if is_method and i == 0:
            continue  # self (pybind11 may call it arg0 or type it object)
        annotation = _normalise_runtime_type(ptype)
        params.append(Param(pname, pkind, _literal(default) if default else NO_DEFAULT, annotation))
    return Signature(tuple(params), _normalise_runtime_type(m.group(2)))


def _stub_signature(fn: ast.FunctionDef, is_method: bool) -> Signature:
    a = fn.args
    assert a.vararg is None and a.kwarg is None, f"{fn.name}: *args/**kwargs in the stub"
    positional = [(p, POS_ONLY) for p in a.posonlyargs] + [(p, POS_OR_KW) for p in a.args]
    defaults: list[object] = [NO_DEFAULT] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults
    ]
    params = []
    for i, ((p, kind), default) in enumerate(zip(positional, defaults)):
        if is_method and i == 0:
            assert p.arg == "self", f"{fn.name}: first parameter {p.arg!r}, expected self"
            continue
        params.append(Param(p.arg, kind, default, ast.unparse(p.annotation) if p.annotation else ""))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        default = NO_DEFAULT if d is None else ast.literal_eval(d)
        params.append(Param(p.arg, KW_ONLY, default, ast.unparse(p.annotation) if p.annotation else ""))
    assert fn.returns is not None, f"{fn.name}: no return annotation in the stub"
    return Signature(tuple(params), ast.unparse(fn.returns))


def _decorated(fn: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(d, ast.Name) and d.id == name for d in fn.decorator_list)


def _stub_callables() -> list[tuple[str, ast.FunctionDef, Optional[str]]]:
    """(qualified name, definition, class name or None) for every def in the stub."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    found: list[tuple[str, ast.FunctionDef, Optional[str]]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found.append((node.name, node, None))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    found.append((f"{node.name}.{item.name}", item, node.name))
    return found


STUB_CALLABLES = _stub_callables()
# Classes pybind11 gives no constructor: the stub declares none (see the allowlist).
NO_CONSTRUCTOR = {"HostClockInfo", "SourceInfo", "PowerSource", "SamplerStats", "TimestampSource", "ClockSyncStats",
                  "SharedSimDevice"}


def test_every_runtime_callable_is_in_the_stub():
    in_stub = {name for name, _, _ in STUB_CALLABLES}
    missing = []
    for cname, cls in vars(core).items():
        if not isinstance(cls, type) or cname.startswith("_") or issubclass(cls, BaseException):
            continue
        if issubclass(cls, int):  # MarkerKind: an enum, checked by stubtest
            continue
        for attr, value in vars(cls).items():
            if attr.startswith("_") and attr not in ("__init__", "__enter__", "__exit__", "__len__"):
                continue
            if attr == "__init__" and cname in NO_CONSTRUCTOR:
                continue
            if f"{cname}.{attr}" not in in_stub:
                missing.append(f"{cname}.{attr}")
    assert not missing, f"not in the stub: {missing}"


@pytest.mark.parametrize("qualname, fn, cls", STUB_CALLABLES, ids=[q for q, _, _ in STUB_CALLABLES])
def test_stub_signature_matches_pybind11(qualname, fn, cls):
    owner = core if cls is None else getattr(core, cls)
    runtime = vars(owner)[fn.name] if cls is not None else getattr(core, fn.name)
    # A static method (pybind11's def_static) takes no self, in the stub as at runtime.
    bound = cls is not None and not _decorated(fn, "staticmethod")
    stub = _stub_signature(fn, is_method=bound)
    if _decorated(fn, "property"):
        assert isinstance(runtime, property), f"{qualname} is a property in the stub only"
        rt = _runtime_signature(runtime.fget, qualname, is_method=True)
        assert rt.params == () and stub.params == ()
        assert _refines(rt.returns, stub.returns), (
            f"{qualname}: property type {stub.returns!r} in the stub, {rt.returns!r} at runtime"
        )
        return
    assert not isinstance(runtime, property), f"{qualname} is a property at runtime, a method in the stub"
    if isinstance(runtime, staticmethod):
        runtime = runtime.__func__
    rt = _runtime_signature(runtime, qualname, is_method=bound)
    overloaded = _decorated(fn, "overload")
    assert [p.kind for p in stub.params] == [p.kind for p in rt.params], (
        f"{qualname}: parameter kinds differ\n stub:    {stub.params}\n runtime: {rt.params}"
    )
    for s, r in zip(stub.params, rt.params):
        if r.kind != POS_ONLY:  # names of positional-only parameters are free
            assert s.name == r.name, f"{qualname}: parameter {s.name!r} in the stub, {r.name!r} at runtime"
        assert (s.default is NO_DEFAULT) == (r.default is NO_DEFAULT) and (
            s.default is NO_DEFAULT or (s.default == r.default and type(s.default) is type(r.default))
        ), f"{qualname}({r.name}): default {s.default!r} in the stub, {r.default!r} at runtime"
        # An @overload narrows types per call form; names, kinds and defaults still match.
        if not overloaded:
            assert _refines(r.annotation, s.annotation), (
                f"{qualname}({r.name}): type {s.annotation!r} in the stub, {r.annotation!r} at runtime"
            )
    assert overloaded or _refines(rt.returns, stub.returns), (
        f"{qualname}: returns {stub.returns!r} in the stub, {rt.returns!r} at runtime"
    )


def _typed_dict_fields(name: str) -> dict[str, ast.expr]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return {
        item.target.id: item.annotation
        for item in cls.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
    }


def _check_value(value: object, annotation: ast.expr, where: str) -> None:
    """Whether `value` is of the stub type `annotation` (the few forms the stub uses)."""
    if isinstance(annotation, ast.Name):
        expected = {"int": int, "float": float, "str": str, "bool": bool}[annotation.id]
        assert type(value) is expected, f"{where}: {type(value).__name__}, stub says {annotation.id}"
        return
    assert isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name), ast.unparse(annotation)
    container = annotation.value.id
    args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if container == "list":
        assert type(value) is list, f"{where}: {type(value).__name__}, stub says list"
        for i, item in enumerate(value):
            _check_value(item, args[0], f"{where}[{i}]")
    elif container == "tuple":
        assert type(value) is tuple and len(value) == len(args), f"{where}: {value!r}, stub says {ast.unparse(annotation)}"
        for i, (item, arg) in enumerate(zip(value, args)):
            _check_value(item, arg, f"{where}[{i}]")
    else:  # pragma: no cover - extend when the stub grows a new form
        pytest.fail(f"{where}: cannot check {ast.unparse(annotation)}")


def test_as_dict_matches_the_stub_typed_dict():
    declared = _typed_dict_fields("_SamplerStatsDict")
    sampler = core.Sampler(core.SyntheticSource(), period_ns=100_000)
    with sampler:
        pass
    stats = sampler.stats()
    d = stats.as_dict()
    assert list(d) == list(declared)
    for key, value in d.items():
        _check_value(value, declared[key], f"as_dict()[{key!r}]")
        assert value == getattr(stats, key)


def test_sim_parameters_and_params_match_the_stub():
    # sim_parameters() -> list[tuple[str, float, str]]; SimDevice.params -> dict[str, float]
    (fn,) = [f for q, f, _ in STUB_CALLABLES if q == "sim_parameters"]
    assert fn.returns is not None
    table = core.sim_parameters()
    _check_value(table, fn.returns, "sim_parameters()")
    params = core.SimDevice().params
    assert list(params) == [name for name, _, _ in table]
    for name, value in params.items():
        assert type(value) is float, name
