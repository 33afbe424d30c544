"""Trim the public GPU power records of Yang, Adamek and Armour (SC'24) into the real-data folder.

Source: https://github.com/JimZeyuYang/GPU_Power_Benchmark (MIT License), ``plotting/data/``. Each record
there holds nvidia-smi's polls of its power fields (``gpudata.csv``, local time strings), an external PMD
meter's samples (``PMD_data.bin``, ~4.8 kHz) and the load's on/off instants (``timestamps.csv``, epoch us).
This script decodes them as that repository's ``plotting/figure_plotting.py`` does (``convert_pmd_data``:
18-byte samples, a 16-bit tick counter at 2933.5 ticks per ms, the start stamp less 50 ms; nvidia-smi's
strings one hour ahead of UTC; every second distinct load instant turns the load on, the last one ends the
record) and writes, per record, in the format ``fingrav characterize --logs --load`` reads:

* ``<field>.csv.gz``: ``t_ns,power_w`` per nvidia-smi poll (host epoch ns, UTC), one file per power field;
* ``load.csv``: ``start_ns,end_ns`` per on-interval (records with a load);
* ``meter.csv.gz``: ``t_ns,power_w``, the meter's total (PCIe slot + cables) (records with a meter);
* ``meta.json``: the GPU, the source path and commit, and what was done to the data.

Everything is trimmed to the load's span plus a second either side. The A100 records are left out: they
are kept back for an independent check of this work.

The output is real data others recorded: it is never committed to this repository. It goes into
``yang_sc24/`` of the real-data folder the tests and benches read (``$FINGRAV_REAL_DATA``, tests/real_data.py).

Usage: ``python bench/realdata/vendor_yang_sc24.py /path/to/GPU_Power_Benchmark --out "$FINGRAV_REAL_DATA/yang_sc24"``
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import subprocess
from datetime import datetime, timezone

import numpy as np

#: (record name, directory under plotting/data, GPU, kind). No A100: held out.
RECORDS = (
    ("3090_5050", "5050/3090", "NVIDIA GeForce RTX 3090", "square wave"),
    ("3090_transient", "Transient_Response/3090_TR", "NVIDIA GeForce RTX 3090", "transient response"),
    ("4090_transient", "Transient_Response/4090_TR", "NVIDIA GeForce RTX 4090", "transient response"),
    ("A5000_transient", "Transient_Response/A5000_TR", "NVIDIA RTX A5000", "transient response"),
    ("K40m_transient", "Transient_Response/K40m_TR", "NVIDIA Tesla K40m", "transient response"),
    ("V100_update_freq", "pwr_update_freq/V100_gpudata.csv", "NVIDIA Tesla V100-SXM2-16GB", "update period"),
    ("3090_update_freq", "pwr_update_freq/3090_gpudata.csv", "NVIDIA GeForce RTX 3090", "update period"),
)
FIELDS = ("power.draw", "power.draw.instant", "power.draw.average")
TICKS_PER_MS = 2933.5
PMD_START_LESS_US = 50_000
SMI_UTC_OFFSET_NS = 3600 * 10**9  # the strings are BST (UTC+1)


def read_smi(path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """nvidia-smi's CSV: per power field present, (epoch ns UTC, W)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = [h.strip() for h in rows[0]]
    cols = {name: head.index(f"{name} [W]") for name in FIELDS if f"{name} [W]" in head}
    t = np.array([int(datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
                      .timestamp() * 1e3) * 1_000_000 for r in rows[1:]], dtype=np.int64) - SMI_UTC_OFFSET_NS
    out = {}
    for name, j in cols.items():
        v = np.array([float(r[j]) if r[j].strip() not in ("", "[N/A]") else np.nan for r in rows[1:]])
        out[name] = (t, v)
    return out


def read_pmd(directory: str) -> tuple[np.ndarray, np.ndarray]:
    """The PMD meter's total power (W) at epoch ns, decoded as figure_plotting.convert_pmd_data does."""
    with open(os.path.join(directory, "PMD_start_ts.txt")) as f:
        start_us = int(f.readline()) - PMD_START_LESS_US
    raw = np.fromfile(os.path.join(directory, "PMD_data.bin"), dtype="<u2")
    raw = raw[: len(raw) // 9 * 9].reshape(-1, 9)
    ticks = raw[:, 0].astype(np.int64)
    steps = np.diff(ticks)
    steps[steps < 0] += 65536  # the 16-bit counter wraps
    t_ms = np.concatenate([[0], np.cumsum(steps)]) / TICKS_PER_MS
    v = ((raw[:, 1:].astype(np.int16) >> 4) & 0x0FFF).astype(np.float64)
    v[v >= 2048] = 0.0  # a set bit 11 marks an invalid reading there
    pair = lambda a, b: v[:, a] * 0.007568 * v[:, b] * 0.0488  # noqa: E731 (volts x amps per rail)
    total = pair(0, 1) + pair(2, 3) + pair(6, 7) + pair(4, 5)
    t_ns = (start_us * 1000 + np.round(t_ms * 1e6)).astype(np.int64)
    return t_ns, total


def read_load(path: str) -> tuple[np.ndarray, int]:
    """On-intervals from the load's instants: each distinct instant toggles it, the first on; the last ends."""
    us = np.unique(np.loadtxt(path, skiprows=1, dtype=np.int64))
    ns = us * 1000
    n_on = (len(ns) - 1) // 2
    return np.stack([ns[0:2 * n_on:2], ns[1:2 * n_on:2]], axis=1), int(ns[-1])


def write_csv(path: str, header: str, cols: tuple[np.ndarray, ...], fmt: tuple[str, ...]) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", newline="") as f:  # type: ignore[operator]
        f.write(header + "\n")
        for row in zip(*cols):
            f.write(",".join(fm % x for fm, x in zip(fmt, row)) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="a clone of JimZeyuYang/GPU_Power_Benchmark")
    ap.add_argument("--out", required=True,
                    help="the folder to write the records into: yang_sc24/ of the real-data folder, outside the "
                         "repository (real data is never committed)")
    args = ap.parse_args()
    try:
        commit = subprocess.run(["git", "-C", args.source, "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    data = os.path.join(args.source, "plotting", "data")
    for name, rel, gpu, kind in RECORDS:
        src = os.path.join(data, rel)
        out = os.path.join(args.out, name)
        os.makedirs(out, exist_ok=True)
        smi = read_smi(src if rel.endswith(".csv") else os.path.join(src, "gpudata.csv"))
        meta = {"gpu": gpu, "kind": kind, "source": f"JimZeyuYang/GPU_Power_Benchmark plotting/data/{rel}",
                "commit": commit, "license": "MIT (see ../LICENSE)", "fields": sorted(smi),
                "clock": "host epoch ns (UTC); nvidia-smi's local (UTC+1) strings shifted by -1 h"}
        lo, hi = -np.inf, np.inf
        if not rel.endswith(".csv"):
            on, end = read_load(os.path.join(src, "timestamps.csv"))
            lo, hi = float(on[0, 0]) - 1e9, float(max(end, on[-1, 1])) + 1e9
            write_csv(os.path.join(out, "load.csv"), "start_ns,end_ns", (on[:, 0], on[:, 1]), ("%d", "%d"))
            tm, pm = read_pmd(src)
            keep = (tm >= lo) & (tm <= hi)
            write_csv(os.path.join(out, "meter.csv.gz"), "t_ns,power_w", (tm[keep], pm[keep]), ("%d", "%.3f"))
            meta.update(on_intervals=int(len(on)), meter_samples=int(keep.sum()),
                        meter="PMD (ElmorLabs) at ~4.8 kHz, total of PCIe slot and cables; decoded as "
                              "figure_plotting.convert_pmd_data (start stamp less 50 ms)")
        for field, (t, v) in smi.items():
            keep = (t >= lo) & (t <= hi) & np.isfinite(v)
            write_csv(os.path.join(out, f"{field}.csv.gz"), "t_ns,power_w", (t[keep], v[keep]), ("%d", "%.2f"))
            meta[f"{field}_polls"] = int(keep.sum())
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(name, meta)


if __name__ == "__main__":
    main()
