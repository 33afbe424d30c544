"""Every file the package writes goes through one writer: written beside, flushed, renamed (``files/_outputs.py``).

A second writer is where a half-written file comes back: a ``open(path,
"w")`` cut short by a full disk leaves a truncated profile under its name,
and a rename without the flush before it leaves an empty one after a power
cut. So the rename, the temporary file and every open for writing live in
``files/_outputs.py`` alone, and every value type is written by
``fingrav_native.save`` through it (none writes itself). Two files are not written whole, by design, and are opened with
``os.open`` flags this test does not look for: the recorder's journal (an
append-only log read back record by record) and a campaign's lock file.
"""

from __future__ import annotations

import ast
import re

from package_sources import package_sources

#: Calls that put a file in place or make a temporary one: the atomic writer's own steps.
_RENAMES = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move"), ("tempfile", "mkstemp"),
            ("tempfile", "NamedTemporaryFile")}


#: What a module that writes must spell somewhere (parsing only those keeps the test fast).
_MAYBE = re.compile(r"os\.(replace|renames?)\b|shutil\.move|mkstemp|NamedTemporaryFile|[\"'][wax][bt+]?[\"']")


def _mode(call: ast.Call) -> str:
    """The mode an ``open``-like call names (positional or ``mode=``), '' when none is a string."""
    args = [a for a in call.args[1:2] if isinstance(a, ast.Constant)]
    args += [k.value for k in call.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
    return next((str(a.value) for a in args if isinstance(a.value, str)), "")


def _writes(tree: ast.AST) -> list[str]:
    """What in a module writes a file other than through the writer: renames, temporaries, opens to write."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in _RENAMES:
            found.append(f"{f.value.id}.{f.attr} at line {node.lineno}")
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        layer = any(k.arg == "fileobj" for k in node.keywords)  # a gzip layer over a file already open
        if name in ("open", "fdopen", "GzipFile") and not layer and any(c in _mode(node) for c in "wax+"):
            found.append(f"{name}(..., {_mode(node)!r}) at line {node.lineno}")
    return found


def test_data_loss_every_file_is_written_by_the_one_atomic_writer() -> None:
    found = {path: writes for path, text in package_sources().items()
             if _MAYBE.search(text) and (writes := _writes(ast.parse(text)))}
    assert set(found) == {"files/_outputs.py"}, found
