#!/usr/bin/env python3
"""What ``fingrav trace --annotate`` costs against the json round trip it replaces, as the trace grows.

``fg.files.annotate_trace`` writes a Kineto trace again with energies in the
kernels' args and power counter tracks, copying the input's text in chunks
and decoding one event at a time. The baseline, measured in the same run on
the same trace and profile, is the obvious alternative: ``json.load`` the
whole document (numbers as Decimal, as the reader needs for exact times),
add the same args and counters (found by the bench's own ``Plan`` from the
profile's public tables, and checked equal to ``annotate_trace``'s after the
timings), ``json.dump`` it. Per row: wall time of
each (best of ``--repeat``) and their ratio, and the peak of Python
allocations of each (``tracemalloc``, a separate run) and their ratio;
``read_trace`` of the same file for scale (what the profile needed first).

The traces: a loop of five kernel signatures with real-length names (300
characters), each kernel with its ``cudaLaunchKernel`` runtime event and a
``ProfilerStep#N`` per iteration (``files.write_kineto_trace``), logs of
instantaneous power every 100 us (synthetic: idle plus a draw per kernel).

Run:  python bench/annotate_bench.py            (20 and 80 MB of JSON; about two minutes on 2 cores)
      python bench/annotate_bench.py --quick --json F   (5 MB only; writes only F)
Writes bench/results/annotate.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable, Iterator

import numpy as np

import fingrav_native as fg
from fingrav_native.files import annotate_trace, read_trace, write_kineto_trace
from fingrav_native.records import SAMPLE_DTYPE

# The identity clock map for logs stamped on the trace's epoch clock is where the tests take it.
from fingrav_native.sim import EpochIdentity

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
BASE_NS = 1_763_900_000_000_000_000


def make_trace(path: str, kernels: int) -> None:
    """A Kineto trace of ``kernels`` kernels: five signatures, launches, one ProfilerStep per five kernels."""
    rng = np.random.default_rng(1)
    names = [f"void kernel_{k}<" + "at::native::Functor<float>, " * 10 + ">" for k in range(5)]
    sig = np.tile(np.arange(5), kernels // 5 + 1)[:kernels]
    dur = np.array([40_000, 120_000, 15_000, 300_000, 60_000])[sig] + rng.integers(0, 2_000, kernels)
    gap = rng.integers(3_000, 9_000, kernels)
    start = BASE_NS + 10_000_000 + np.concatenate([[0], np.cumsum(dur + gap)[:-1]])
    end = start + dur
    steps = np.column_stack([start[::5], np.append(start[5::5], end[-1])])
    write_kineto_trace(path, [names[s] for s in sig], [(64 * (s + 1), 1, 1) for s in sig], [(256, 1, 1)] * kernels,
                       start, end, base_time_ns=BASE_NS, launch_ns=start - 5_000, steps=steps)


def logs_for(kt: Any) -> np.ndarray:
    ex = kt.executions
    t = np.arange(int(ex["start_ns"].min()) - 1_000_000, int(ex["end_ns"].max()) + 1_000_000, 100_000)
    s, e = np.sort(ex["start_ns"]), np.sort(ex["end_ns"])
    running = np.searchsorted(s, t, side="right") - np.searchsorted(e, t, side="right")
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = t + kt.origin_ns
    logs["total"] = 90.0 + 200.0 * running + np.random.default_rng(0).normal(0, 1.0, len(t))
    for ch in ("compute", "io", "memory"):
        logs[ch] = np.nan
    return logs


def _finite(v: Any) -> Any:
    v = float(v)
    return v if math.isfinite(v) else None


class Plan:
    """The args ``annotate_trace`` adds to each kernel event, found from the profile's public tables alone.

    Each kernel event's execution is the one with its times (the trace's clock), device, stream and
    correlation id; its args are its signature's row of the profile's kernel table (energy, its
    half-width, power, the row), with the warm-up executions (the first ``warmup`` of each signature)
    and those overlapping another marked. The bench's traces hold one device, whose logs the profile's
    are; a kernel of a signature the profile skipped gets the same note as in ``annotate_trace``.
    """

    def __init__(self, tp: Any, base_ns: int) -> None:
        kt, ex = tp.trace, tp.trace.executions
        self.tp, self.base_ns, self.origin = tp, int(base_ns), int(kt.origin_ns)
        self.row_of = np.full(len(kt.signatures), -1, dtype=np.int64)
        self.row_of[np.asarray(tp.signature_rows, dtype=np.int64)] = np.arange(len(tp.signature_rows))
        self.conc = kt.concurrent()
        self.warm = np.zeros(len(ex), dtype=bool)
        for row, sid in enumerate(tp.signature_rows):
            mine = np.flatnonzero((ex["kernel_id"] == sid) & ~self.conc)
            mine = mine[np.argsort(ex["start_ns"][mine], kind="stable")]
            self.warm[mine[:int(tp.kernels["warmup"][row])]] = True
        self.order = np.argsort(ex["start_ns"], kind="stable")
        self.starts = np.asarray(ex["start_ns"][self.order], dtype=np.int64)
        self.ends = np.ascontiguousarray(ex["end_ns"], dtype=np.int64)
        self.ids = np.column_stack([kt.device, kt.stream, kt.correlation]).astype(np.int64)
        self.used = np.zeros(len(ex), dtype=bool)
        self.pid: Any = None

    def args_for(self, ev: dict[str, Any]) -> Any:
        """The args to add to kernel event ``ev`` (None when no execution of the profile has it)."""
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        ts, dur = int(Decimal(ev["ts"]) * 1000), int(Decimal(ev["dur"]) * 1000)
        rel = self.base_ns + ts - self.origin
        key = [int(args.get(k, -1)) for k in ("device", "stream", "correlation")]
        i, j = int(self.starts.searchsorted(rel)), -1
        while i < len(self.starts) and self.starts[i] == rel:
            c = int(self.order[i])
            if not self.used[c] and self.ends[c] == rel + dur and self.ids[c].tolist() == key:
                j = c
                break
            i += 1
        if j < 0:
            return None
        self.used[j] = True
        if self.pid is None:
            self.pid = ev.get("pid")
        row = int(self.row_of[self.tp.trace.executions["kernel_id"][j]])
        if row < 0:
            return {"fingrav_note": "not profiled (see the profile's skipped signatures)"}
        r = self.tp.kernels[row]
        out = {"fingrav_energy_j": _finite(r["energy_j"]), "fingrav_energy_half_width_j": _finite(r["energy_half_width_j"]),
               "fingrav_power_w": _finite(r["power_w"]), "fingrav_row": row}
        if self.warm[j]:
            out["fingrav_warmup"] = True
        if self.conc[j]:
            out["fingrav_concurrent"] = True
        return out

    def counter_events(self) -> Iterator[str]:
        """The power logs as Chrome-trace counter events (JSON text) under the GPU's pid, ``ts`` in exact us."""
        logs = self.tp.logs
        pid = json.dumps(self.pid if self.pid is not None else int(self.tp.trace.device[0]))
        shift = self.origin - self.base_ns
        for ch in ("total", "compute", "io", "memory"):
            v = np.asarray(logs[ch], dtype=np.float64)
            ok = np.isfinite(v) & np.isfinite(logs["t_ns"])
            name = json.dumps(f"fingrav power {ch} (W)")
            ts = shift + np.rint(np.asarray(logs["t_ns"], dtype=np.float64)[ok]).astype(np.int64)
            w = v[ok]
            for k in range(0, len(ts), 8192):  # Python numbers a block at a time, as annotate_trace makes them
                for t, x in zip(ts[k:k + 8192].tolist(), w[k:k + 8192].tolist()):
                    q, r = divmod(abs(t), 1000)
                    yield (f'{{"ph": "C", "cat": "fingrav_power", "name": {name}, "pid": {pid}, "tid": 0, '
                           f'"ts": {"-" if t < 0 else ""}{q}.{r:03d}, "args": {{"power_w": {x!r}}}}}')


def round_trip(path: str, tp: Any, out: str) -> None:
    """The baseline: the whole document in memory, the same args and counters added, dumped."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f, parse_float=Decimal)
    plan = Plan(tp, int(doc.get("baseTimeNanoseconds", 0)))
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and str(ev.get("cat", "")).lower() == "kernel":
            add = plan.args_for(ev)
            if add:
                ev.setdefault("args", {}).update(add)
    doc["traceEvents"] += [json.loads(c, parse_float=Decimal) for c in plan.counter_events()]

    def decimal(o: Any) -> Any:
        if isinstance(o, Decimal):
            return float(o)  # json cannot write Decimal: the round trip rounds ts to float64 here
        raise TypeError(type(o).__name__)

    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, default=decimal)


def same_annotations(streamed: str, baseline: str) -> None:
    """Refuse a baseline whose kernel args or counters differ from ``annotate_trace``'s (times to float64)."""
    def kernels_and_counters(path: str) -> tuple[list[Any], list[Any]]:
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
        kernels = [ev.get("args") for ev in events if ev.get("ph") == "X" and ev.get("cat") == "kernel"]
        counters = [(ev["name"], ev["pid"], ev["ts"], ev["args"]) for ev in events if ev.get("ph") == "C"]
        return kernels, counters

    assert kernels_and_counters(streamed) == kernels_and_counters(baseline), "the baseline's annotations differ"


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def peak_mb(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def row(folder: str, kernels: int, repeat: int) -> dict[str, Any]:
    path = os.path.join(folder, f"trace_{kernels}.json")
    make_trace(path, kernels)
    mb = os.path.getsize(path) / 2**20
    t0 = time.perf_counter()
    kt = read_trace(path)
    read_s = time.perf_counter() - t0
    tp = fg.profile_trace(kt, logs_for(kt), EpochIdentity(), align=False)
    out_s, out_b = os.path.join(folder, "stream.json"), os.path.join(folder, "baseline.json")

    def stream() -> None:
        annotate_trace(path, tp, out_s, overwrite=True)

    def baseline() -> None:
        round_trip(path, tp, out_b)

    ts, tb = best(stream, repeat), best(baseline, repeat)
    ms, mbase = peak_mb(stream), peak_mb(baseline)
    with open(out_s, encoding="utf-8") as f:
        events = len(json.load(f)["traceEvents"])
    same_annotations(out_s, out_b)
    r = {"kernels": kernels, "json_mb": round(mb, 1), "events_out": events, "read_trace_s": round(read_s, 2),
         "stream_s": round(ts, 2), "round_trip_s": round(tb, 2), "time_ratio": round(ts / tb, 2),
         "stream_peak_mb": round(ms, 1), "round_trip_peak_mb": round(mbase, 1),
         "memory_ratio": round(ms / mbase, 4)}
    print(json.dumps(r), flush=True)
    for p in (path, out_s, out_b):
        os.unlink(p)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one small trace (5 MB)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=os.path.join(RESULTS, "annotate.json"), help="where the rows go")
    args = ap.parse_args()
    sizes = [12_000] if args.quick else [50_000, 200_000]
    with tempfile.TemporaryDirectory() as folder:
        rows = [row(folder, k, args.repeat) for k in sizes]
    doc = {"bench": "annotate", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                       "cpus": os.cpu_count()}, "fingrav_native": fg.__version__, "rows": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    print(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
