"""Check that the attribution engine gives the same Solution as before a change, on recorded calls.

Record ``attribute()`` calls from tests with the pytest plugin this script writes
(``--write-plugin DIR``: a ``recplug.py`` that pickles each test's first calls, inputs and
the Solution, to ``$ENGREC_DIR``), then re-run them on the code in hand and compare (each case names the
engine's entry point by reference, so the replay calls the one of the code in hand, resolved when the case
is loaded: this script imports nothing of the package itself):

    python bench/engine_equivalence.py --write-plugin /tmp/engrec
    ENGREC_DIR=/tmp/engrec/cases PYTHONPATH=python:/tmp/engrec python -m pytest -p recplug tests/method/test_engine.py
    # ... change the engine ...
    PYTHONPATH=python python bench/engine_equivalence.py /tmp/engrec/cases/*.pkl

Per call: the chosen design, variant and smoothing must be identical; the unknowns, every map's
value, bootstrap draws, smoothing span and 95 % interval ends within ``--rtol`` (default 1e-6)
of the map's scale (its largest absolute value). Prints the CPU time of each call before and after.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from typing import Any

import numpy as np

_PLUGIN = '''"""pytest plugin: pickle attribute() inputs and Solution (ENGREC_DIR; ENGREC_MAX calls per test)."""
import os, pickle, time
import pytest
from fingrav_native.method import _engine

_DIR = os.environ.get("ENGREC_DIR", "engrec_cases")
_MAX = int(os.environ.get("ENGREC_MAX", "2"))
_state = {"test": "none", "n": 0, "k": 0}
_orig = _engine._attribute


def _rec(designs, sensor, t, w, y, block_of, **kw):
    t0 = time.process_time()
    sol = _orig(designs, sensor, t, w, y, block_of, **kw)
    dt = time.process_time() - t0
    _state["k"] += 1
    if _state["n"] < _MAX and (kw.get("bootstrap", 0) > 0 or _state["k"] == 1):
        _state["n"] += 1
        name = _state["test"].replace("/", "_").replace("::", "__").replace("[", "_").replace("]", "")
        os.makedirs(_DIR, exist_ok=True)
        with open(os.path.join(_DIR, f"{name}__{_state['n']}.pkl"), "wb") as f:
            # The entry point by reference (pickle stores its module and name): the replay calls the one
            # of the code in hand.
            pickle.dump({"fn": _engine.attribute, "args": (designs, sensor, t, w, y, block_of), "kw": kw,
                         "sol": sol, "cpu": dt}, f)
    return sol


_engine._attribute = _rec


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _state.update(test=item.nodeid, n=0, k=0)
    yield
'''


def _rel(a: np.ndarray, b: np.ndarray, scale: float) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return np.inf
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    d = np.where(both_nan | same_inf, 0.0, np.abs(a - b))
    return float(np.max(d, initial=0.0)) / max(scale, 1e-300)


def compare(old: Any, new: Any) -> tuple[list[str], float]:
    """What differs between two Solutions beyond rounding: choices exactly, arrays relative to each map's scale."""
    bad = []
    for f in ("design", "model", "lam", "n_blocks", "n_folds", "n_boot"):
        if getattr(old, f) != getattr(new, f):
            bad.append(f"{f}: {getattr(old, f)!r} != {getattr(new, f)!r}")
    worst = _rel(old.x, new.x, float(np.max(np.abs(old.x), initial=0.0)))
    for k, v in old.values.items():
        scale = float(np.max(np.abs(v), initial=0.0))
        parts = [_rel(v, new.values[k], scale), _rel(old.draws[k], new.draws[k], scale)]
        if k in old.smoothing_span:
            parts += [_rel(a, b, scale) for a, b in zip(old.smoothing_span[k], new.smoothing_span[k])]
        try:
            band_old = old.interval(k, 0.95)[:2]
        except ValueError as e:  # a Solution whose draws do not fit its values (compare that both refuse)
            band_old = e
        try:
            band_new = new.interval(k, 0.95)[:2]
        except ValueError as e:
            band_new = e
        if isinstance(band_old, tuple) and isinstance(band_new, tuple):
            parts += [_rel(a, b, scale) for a, b in zip(band_old, band_new)]
        elif type(band_old) is not type(band_new):
            bad.append(f"interval {k}: {band_old!r} against {band_new!r}")
        worst = max(worst, *parts)
    for name, sc in old.cv_scores.items():
        s2 = new.cv_scores.get(name, np.nan)
        if not (sc == s2 or abs(sc - s2) <= 1e-6 * max(abs(sc), 1e-300)):
            bad.append(f"cv score {name}: {sc} != {s2}")
    if not np.array_equal(old.rows.used, new.rows.used):
        bad.append("logs used differ")
    return bad, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help="pickled calls recorded by the plugin")
    ap.add_argument("--write-plugin", metavar="DIR", help="write recplug.py into DIR and exit")
    ap.add_argument("--rtol", type=float, default=1e-6)
    a = ap.parse_args()
    if a.write_plugin:
        os.makedirs(a.write_plugin, exist_ok=True)
        with open(os.path.join(a.write_plugin, "recplug.py"), "w") as f:
            f.write(_PLUGIN)
        return 0
    failures = 0
    before = after = 0.0
    for path in a.cases:
        with open(path, "rb") as f:
            rec = pickle.load(f)
        designs, sensor, t, w, y, block_of = rec["args"]
        t0 = time.process_time()
        if "fn" not in rec:
            sys.exit(f"{path}: a case without its entry point; record it again with this script's plugin")
        sol = rec["fn"](designs, sensor, t, w, y, block_of, **rec["kw"])
        dt = time.process_time() - t0
        bad, worst = compare(rec["sol"], sol)
        ok = not bad and worst < a.rtol
        failures += not ok
        before += rec["cpu"]
        after += dt
        print(f"{'ok  ' if ok else 'FAIL'} cpu {rec['cpu']:6.2f} s -> {dt:6.2f} s  max rel diff {worst:.1e}  "
              f"{os.path.basename(path)[:80]}" + "".join(f"\n      {b}" for b in bad))
    print(f"{len(a.cases) - failures}/{len(a.cases)} identical to rounding; CPU {before:.1f} s -> {after:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
