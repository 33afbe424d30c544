"""Imports that keep their promise (docs/ARCHITECTURE.md, "The tree"): the package loads what is used.

``import fingrav_native`` loads none of the package's modules (PEP 562 faces), so scipy and the
analysis (seconds of import) wait until a name that needs them is used; ``fingrav_native.records``
loads the value types without the method, the devices or the files. Each check runs in a fresh
interpreter: the test process has imported most of the package already.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

#: Subpackages whose modules ``import fingrav_native`` must not load (the analysis and what sits above it).
_HEAVY_SUBPACKAGES = ("method", "insitu", "sensors", "clocks", "multi", "backends", "sim", "files", "app")

#: The package's own import-time budget, in seconds (numpy, which it needs for any work, not counted).
IMPORT_BUDGET_S = 0.3

_CHILD = """
import json, sys
import fingrav_native
bare = sorted(sys.modules)
import fingrav_native.records as records
records.Recording, records.RunRecord, records.Capabilities, records.EXECUTION_DTYPE, records.LOI_DTYPE
print(json.dumps([bare, sorted(sys.modules)]))
"""


def _run_child(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=True)


def _package_modules(loaded: list[str], subpackage: str) -> list[str]:
    return [m for m in loaded if m == f"fingrav_native.{subpackage}" or m.startswith(f"fingrav_native.{subpackage}.")]


@pytest.fixture(scope="module")
def loaded() -> tuple[list[str], list[str]]:
    bare, with_records = json.loads(_run_child(_CHILD).stdout)
    return bare, with_records


def test_slow_start_import_fingrav_native_loads_no_scipy_and_no_analysis(loaded):
    bare, _ = loaded
    assert "scipy" not in bare and "matplotlib" not in bare
    heavy = [m for sub in _HEAVY_SUBPACKAGES for m in _package_modules(bare, sub)]
    assert not heavy, f"import fingrav_native loaded {heavy}"


def test_slow_start_records_loads_the_value_types_only(loaded):
    _, after = loaded
    assert "scipy" not in after
    # The value types stand on the foundation and the sensor model a recording carries; nothing above.
    above = [m for sub in ("method", "insitu", "clocks", "multi", "backends", "sim", "files", "app")
             for m in _package_modules(after, sub)]
    assert not above, f"fingrav_native.records loaded {above}"
    ours = [m for m in after if m.startswith("fingrav_native")]
    assert len(ours) <= 15, ours


def own_import_seconds(importtime_log: str) -> float:
    """The package's own import time from ``python -X importtime``'s log, numpy's excluded.

    The cumulative time of each import of a ``fingrav_native`` module that no other of its modules
    started (the outermost ones), less the cumulative time of ``numpy`` imported inside them.
    """
    rows = []
    for line in importtime_log.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), len(m.group(3)), m.group(4)))
    # importtime prints a module after the ones it imported, indented two spaces deeper per level.
    total_us, numpy_us = 0, 0
    for i, (cumulative, depth, name) in enumerate(rows):
        parent = next((n for c, d, n in rows[i + 1:] if d < depth), None)
        ours = name.split(".")[0] == "fingrav_native"
        parent_ours = parent is not None and parent.split(".")[0] == "fingrav_native"
        if ours and not parent_ours:
            total_us += cumulative
        elif name == "numpy" and parent_ours:
            numpy_us += cumulative
    return (total_us - numpy_us) / 1e6


def test_slow_start_own_import_time_measure_counts_ours_less_numpy():
    log = "\n".join([
        "import time:       100 |        100 | typing",
        "import time:      1000 |     300000 |     numpy",
        "import time:       500 |     301000 |   fingrav_native._core",
        "import time:      2000 |     303500 | fingrav_native",
        "import time:        50 |         50 | json",
    ])
    assert own_import_seconds(log) == pytest.approx(0.0035)


@pytest.mark.slow  # a fresh interpreter, three times: about a second
def test_slow_start_import_fingrav_native_within_its_budget():
    best = min(own_import_seconds(_run_child("import fingrav_native", "-X", "importtime").stderr)
               for _ in range(3))
    assert best <= IMPORT_BUDGET_S, f"import fingrav_native took {best:.3f} s of its own"
