"""What live power capture costs an application: the PowerRecorder's CPU and the slowdown it causes.

In-situ profiling records power beside a running training loop
(``fg.record``, a ``fg.app.PowerRecorder``: a C++ Sampler thread
polling the power source, one Python thread draining it and taking epoch
brackets every ``brackets_every_s``). The paper's Section IV-A protocol needs
the application undisturbed: each kernel execution is one run at a random
phase, and a recorder that slowed the loop would change what it measures.
Two figures, each against a baseline measured in the same run:

* **recorder CPU**: the sampler thread's CPU time (``SamplerStats.cpu_time_ns``)
  plus the Python drain thread's (``time.thread_time_ns`` inside it), per
  second of wall time, while the main thread sleeps; against a thread that
  only sleeps to absolute deadlines at the same period: the C++
  ``bench/sleep_floor`` when built (the kernel's floor for periodic
  wake-ups, the same timer slack as the sampler), else a Python thread
  sleeping with ``time.sleep`` (a weaker floor: the interpreter's wake-up
  costs more). Target: at most 1.3x the floor.
* **slowdown**: wall time of a fixed CPU-bound Python loop (sha256 rounds)
  with a recorder running against without one, the two conditions
  alternating over several repetitions; medians.

The source is a ``SyntheticSource`` with a 1 ms logger (``--source sim``: the
real-time simulated GPU's, whose poll also advances the simulation and so
costs more). Only ratios measured side by side mean anything across
machines. Run ``python bench/insitu_overhead.py --help``.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

try:
    import fingrav_native as fg
    import fingrav_native.native  # fg.native: the C++ core's sources and period limits
except ImportError as exc:  # pragma: no cover - a usage error, said plainly
    raise SystemExit(f"insitu_overhead: cannot import fingrav_native ({exc}); install it first") from exc

REPO = Path(__file__).resolve().parents[1]
#: The recorder's CPU over the sleep floor's, at most: a recorder must not cost much more than waking up.
TARGET_CPU_RATIO = 1.3
#: How many times each loop condition runs (alternating with the other).
LOOP_REPS = 15


def find_sleep_floor(explicit: Optional[str] = None) -> Optional[str]:
    """The built ``sleep_floor`` executable: the given path, else one under build/ (bench/CMakeLists.txt)."""
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SystemExit(f"insitu_overhead: --sleep-floor {explicit}: not an executable")
        return explicit
    found = sorted(glob.glob(str(REPO / "build" / "**" / "sleep_floor"), recursive=True))
    return next((p for p in found if os.access(p, os.X_OK) and os.path.isfile(p)), None)


def make_source(kind: str) -> fg.native.PowerSource:
    """A fresh power source with a 1 ms logger (a source is polled by one sampler at a time)."""
    if kind == "synthetic":
        return fg.native.SyntheticSource(period_ns=1_000_000)
    if kind == "sim":
        return fg.sim.SimGPU(realtime=True, seed=0).power_source(depth=8)
    raise ValueError(f"source={kind!r}: must be 'synthetic' or 'sim'")


def recorder_cpu(seconds: float, period_ns: int, source: str) -> dict[str, Any]:
    """CPU of a recorder left running for ``seconds`` while this thread sleeps."""
    proc0 = time.process_time_ns()
    main0 = time.thread_time_ns()
    with fg.record(make_source(source), period_ns=period_ns) as rec:
        time.sleep(seconds)
    proc = time.process_time_ns() - proc0 - (time.thread_time_ns() - main0)
    st = rec.capture.stats
    wall = st["wall_time_ns"]
    cpu = st["cpu_time_ns"] + st["drain_thread_cpu_ns"]
    return {
        "wall_ns": wall,
        "sampler_cpu_ns": st["cpu_time_ns"],
        "drain_thread_cpu_ns": st["drain_thread_cpu_ns"],
        "cpu_fraction": cpu / wall,
        # Cross-check: every thread but this one (the sampler, the drain thread, anything else).
        "process_cpu_fraction_other_threads": proc / wall,
        "samples": len(rec.capture),
        "drops": st["drops"],
        "source_missed": st["source_missed"],
        "epoch_brackets": st["epoch_bracket_reads"],
        "mean_period_ns": st["mean_period_ns"],
    }


def floor_cpu(seconds: float, period_ns: int, exe: Optional[str]) -> dict[str, Any]:
    """CPU of a thread that only sleeps to absolute deadlines every ``period_ns``."""
    if exe is not None:
        out = subprocess.run([exe, "--period-ns", str(period_ns), "--seconds", str(seconds)],
                             check=True, capture_output=True, text=True).stdout
        res = json.loads(out)
        return {"kind": "cpp-sleep_floor", "cpu_fraction": float(res["cpu_fraction"]), "wakeups": res["wakeups"]}
    result: dict[str, Any] = {}

    def sleeper() -> None:
        cpu0, t0 = time.thread_time_ns(), time.monotonic_ns()
        deadline, end, wakeups = t0 + period_ns, t0 + int(seconds * 1e9), 0
        while deadline <= end:
            delay = deadline - time.monotonic_ns()
            if delay > 0:
                time.sleep(delay / 1e9)
            wakeups += 1
            deadline += period_ns
        result.update(cpu=time.thread_time_ns() - cpu0, wall=time.monotonic_ns() - t0, wakeups=wakeups)

    t = threading.Thread(target=sleeper, name="sleep-floor")
    t.start()
    t.join()
    return {"kind": "python-sleep", "cpu_fraction": result["cpu"] / result["wall"], "wakeups": result["wakeups"]}


def cpu_loop(rounds: int) -> float:
    """Wall seconds of a fixed CPU-bound Python loop (sha256 chained ``rounds`` times)."""
    h = b"fingrav"
    t0 = time.perf_counter()
    for _ in range(rounds):
        h = hashlib.sha256(h).digest()
    return time.perf_counter() - t0


def calibrate(target_s: float) -> int:
    """Rounds of :func:`cpu_loop` that take about ``target_s`` here."""
    rounds = 20_000
    while True:
        took = cpu_loop(rounds)
        if took >= 0.1:
            return max(1, int(rounds * target_s / took))
        rounds *= 4


def loop_slowdown(seconds: float, period_ns: int, source: str) -> dict[str, Any]:
    """The CPU-bound loop with a recorder running vs without, alternating; medians of ``LOOP_REPS`` each."""
    rounds = calibrate(seconds / LOOP_REPS)
    without: list[float] = []
    with_rec: list[float] = []
    for rep in range(LOOP_REPS):
        # Alternate which condition goes first, so a drift in machine load falls on both.
        for recording in ((False, True) if rep % 2 == 0 else (True, False)):
            if recording:
                with fg.record(make_source(source), period_ns=period_ns):
                    with_rec.append(cpu_loop(rounds))
            else:
                without.append(cpu_loop(rounds))
    med_with, med_without = statistics.median(with_rec), statistics.median(without)
    # The fastest repetition of each is the one least disturbed by other load
    # (a VM's steal time): its ratio is the cleaner estimate on a noisy machine.
    return {"rounds": rounds, "with_recorder_s": with_rec, "without_s": without,
            "median_with_s": med_with, "median_without_s": med_without, "slowdown": med_with / med_without,
            "slowdown_of_fastest": min(with_rec) / min(without)}


def run_overhead(seconds: float, period_ns: int, *, source: str = "synthetic",
                 sleep_floor: Optional[str] = None) -> dict[str, Any]:
    """Measure the recorder's CPU against the sleep floor and the slowdown of a CPU-bound loop.

    Parameters
    ----------
    seconds : float
        Length of each condition (recorder idle, floor, loop with, loop without).
    period_ns : int
        The recorder's sampler period (and the floor's wake-up period).
    source : {"synthetic", "sim"}
        The power source recorded (a 1 ms logger either way).
    sleep_floor : str, optional
        The ``sleep_floor`` executable; found under build/ when not given,
        else a Python sleeping thread is the floor.

    Returns
    -------
    dict
        ``recorder``, ``floor``, ``cpu_ratio`` (recorder / floor CPU),
        ``loop`` (with ``slowdown``), ``targets``.
    """
    if not seconds > 0:
        raise ValueError(f"seconds={seconds!r}: must be > 0")
    if not fg.native.MIN_PERIOD_NS <= period_ns <= fg.native.MAX_PERIOD_NS:
        raise ValueError(f"period_ns={period_ns!r}: must be in [{fg.native.MIN_PERIOD_NS}, {fg.native.MAX_PERIOD_NS}]")
    exe = find_sleep_floor(sleep_floor)
    # Floor and recorder back to back, twice in alternating order: medians.
    recs, floors = [], []
    for order in ((True, False), (False, True)):
        for is_rec in order:
            if is_rec:
                recs.append(recorder_cpu(seconds / 2, period_ns, source))
            else:
                floors.append(floor_cpu(seconds / 2, period_ns, exe))
    rec_cpu = statistics.median(r["cpu_fraction"] for r in recs)
    floor = statistics.median(f["cpu_fraction"] for f in floors)
    loop = loop_slowdown(seconds, period_ns, source)
    ratio = rec_cpu / floor if floor > 0 else float("inf")
    return {
        "seconds": seconds,
        "period_ns": period_ns,
        "source": source,
        "nproc": os.cpu_count(),
        "recorder": {"cpu_fraction": rec_cpu, "runs": recs},
        "floor": {"kind": floors[0]["kind"], "cpu_fraction": floor, "runs": floors},
        "cpu_ratio": ratio,
        "loop": loop,
        "targets": {"cpu_ratio": {"target": f"<= {TARGET_CPU_RATIO}", "value": ratio,
                                  "met": ratio <= TARGET_CPU_RATIO},
                    "drops": {"target": "== 0", "value": sum(r["drops"] for r in recs),
                              "met": sum(r["drops"] for r in recs) == 0}},
    }


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each condition (default 5)")
    ap.add_argument("--period-ns", type=int, default=1_000_000, help="sampler period (default 1 ms)")
    ap.add_argument("--source", choices=("synthetic", "sim"), default="synthetic", help="power source")
    ap.add_argument("--sleep-floor", help="path of the built bench/sleep_floor (default: found under build/)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    if not args.seconds > 0:
        ap.error(f"--seconds={args.seconds}: must be > 0")
    res = run_overhead(args.seconds, args.period_ns, source=args.source, sleep_floor=args.sleep_floor)
    print(f"recorder CPU {res['recorder']['cpu_fraction'] * 100:.3f}% of a core vs {res['floor']['kind']} "
          f"{res['floor']['cpu_fraction'] * 100:.3f}%: ratio {res['cpu_ratio']:.2f} (target <= {TARGET_CPU_RATIO})")
    print(f"CPU-bound loop: {res['loop']['median_with_s']:.3f} s with the recorder, "
          f"{res['loop']['median_without_s']:.3f} s without (medians): slowdown {res['loop']['slowdown']:.3f}x "
          f"(fastest runs: {res['loop']['slowdown_of_fastest']:.3f}x)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
