#!/usr/bin/env python3
"""Cut one ProfilerStep#N window out of a Kineto/Chrome JSON trace (plain json/gzip only).

Makes the trimmed real traces (kept outside the repository, in ``traces/`` of
the real-data folder, tests/real_data.py) from their upstream originals (that
folder's README.md gives the exact upstream paths and commits):

    python3 trim.py UPSTREAM.json.gz OUT.json.gz 'ProfilerStep#5'

Rule (the same for every trimmed file):
  * window = [ts, ts + dur) of the CPU-side ProfilerStep#N annotation
    (cat 'user_annotation' in the new schema, 'Operator' in the old one);
  * every metadata event (ph 'M') is kept, whatever its ts;
  * every other non-flow event is kept iff window_start <= ts < window_end
    (so a kernel launched near the end of the step and still running is kept
    only if it *started* inside the window; kernels of the previous step that
    started inside it are kept too);
  * flow events (ph 's', 't', 'f') are grouped by (cat, id) and a group is kept
    only if all of its events lie in the window (no dangling flow halves);
  * event objects, their order, and all top-level keys other than traceEvents
    are kept unchanged; the JSON is re-serialised with Python's json module
    (compact separators) and gzipped with mtime 0.
"""

import gzip
import json
import sys
from collections import defaultdict


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def trim(doc, step):
    ev = doc["traceEvents"]
    cpu_steps = [e for e in ev if e.get("name") == step and e.get("cat") in ("user_annotation", "Operator")]
    if len(cpu_steps) != 1:
        raise SystemExit(f"expected one CPU {step} annotation, found {len(cpu_steps)}")
    t0 = cpu_steps[0]["ts"]
    t1 = t0 + cpu_steps[0]["dur"]

    def inside(e):
        return isinstance(e.get("ts"), (int, float)) and t0 <= e["ts"] < t1

    flows = defaultdict(list)
    for e in ev:
        if e.get("ph") in ("s", "t", "f"):
            flows[(e.get("cat"), e.get("id"))].append(e)
    good_flow = {k for k, grp in flows.items() if all(inside(e) for e in grp)}
    kept = []
    for e in ev:
        ph = e.get("ph")
        if ph == "M":
            kept.append(e)
        elif ph in ("s", "t", "f"):
            if (e.get("cat"), e.get("id")) in good_flow:
                kept.append(e)
        elif inside(e):
            kept.append(e)
    out = {k: v for k, v in doc.items()}
    out["traceEvents"] = kept
    return out, (t0, t1), len(ev), len(kept)


def main():
    src, dst, step = sys.argv[1:4]
    out, (t0, t1), n_in, n_out = trim(load(src), step)
    data = json.dumps(out, separators=(",", ":")).encode("utf-8")
    with open(dst, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(data)
    print(f"{dst}: window [{t0}, {t1}) kept {n_out} of {n_in} events, {len(data)} bytes uncompressed")


if __name__ == "__main__":
    main()
