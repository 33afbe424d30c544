"""Every argument that is a fraction (a bin margin, a tolerance, a confidence level) is checked by one function.

A margin, a tolerance or a confidence is a number strictly between 0 and 1;
each entry point names its argument the same way when it is not one, and a
string or a bool is refused as a wrong type rather than compared (``"0.5" < 1``
raises TypeError from the comparison, not an error that names the argument).
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Callable

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.app._cli_profile import _check_request
from fingrav_native.backends import SimBackend
from fingrav_native.method import find_ssp_executions, select_golden_runs
from fingrav_native.sim import steady_state_index
from package_sources import package_sources

#: Entry points with a fraction argument, each called with the value under test (checked before any work).
ENTRIES: dict[str, tuple[str, Callable[[Any], object]]] = {
    "select_golden_runs": ("margin", lambda x: select_golden_runs([100.0, 101.0, 102.0], x)),
    "find_ssp_executions": ("tolerance", lambda x: find_ssp_executions(lambda n: None, tolerance=x)),
    "steady_state_index": ("tolerance", lambda x: steady_state_index(np.full(20, 100.0), tolerance=x)),
    "profile margin": ("margin", lambda x: fg.profile("cb-4k-gemm", margin=x)),
    "profile ssp_tolerance": ("ssp_tolerance", lambda x: fg.profile("cb-4k-gemm", ssp_tolerance=x)),
    "SimBackend": ("idle_tolerance", lambda x: SimBackend(idle_tolerance=x)),
    "fingrav profile --margin": ("--margin", lambda x: _check_request({"runs": None, "margin": x, "executions": None})),
}

NOT_FRACTIONS = [0, 0.0, 1, 1.0, 1.5, -0.25, math.nan, math.inf, "0.5", True, [0.5]]


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("value", NOT_FRACTIONS, ids=repr)
def test_unclear_every_fraction_argument_is_refused_in_the_same_words(entry: str, value: Any) -> None:
    name, call = ENTRIES[entry]
    with pytest.raises(ValueError, match=rf"^{name}=.*: must be (a fraction in \(0, 1\)|a number)"):
        call(value)


def test_a_fraction_is_returned_as_a_float() -> None:
    from fingrav_native._checks import fraction

    assert fraction(np.float32(0.25), "margin") == 0.25
    assert type(fraction(np.float64(0.5), "margin")) is float


def _open_interval_checks(tree: ast.AST) -> list[int]:
    """Lines comparing a value as ``0 < x < 1`` (the check :func:`fraction` makes)."""
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and len(node.ops) == 2 and all(isinstance(o, ast.Lt) for o in node.ops)
                and isinstance(node.left, ast.Constant) and node.left.value == 0
                and isinstance(node.comparators[1], ast.Constant) and node.comparators[1].value == 1):
            lines.append(node.lineno)
    return lines


def test_unclear_the_fraction_check_is_written_once() -> None:
    found = {path: lines for path, text in package_sources().items()
             if re.search(r"\b0(\.0)? <", text) and (lines := _open_interval_checks(ast.parse(text)))}
    assert list(found) == ["_checks.py"], found
