"""Live sampling demos: a simulated GPU running GEMMs (default), or the synthetic test source."""

from __future__ import annotations

import time

import numpy as np

from ._core import Sampler, SyntheticSource
from .sim import SimGPU

#: The sequence the simulated-GPU demo runs: the paper's heavy and light
#: GEMMs and a memory-bound GEMV (Section V-A), each as one run.
SIM_DEMO_SEQUENCE: tuple[tuple[str, int], ...] = (
    ("cb-8k-gemm", 12),
    ("cb-4k-gemm", 40),
    ("mb-8k-gemv", 120),
    ("cb-2k-gemm", 150),
)


def run_sim_demo(
    seed: int = 0,
    period_ns: int = 250_000,
    idle_ns: int = 30_000_000,
    sequence: tuple[tuple[str, int], ...] = SIM_DEMO_SEQUENCE,
    out=print,
) -> dict:
    """Poll a live simulated GPU's power logger while it runs a GEMM sequence.

    The simulated device runs in real time; the C++ sampler thread polls its
    1 ms power logger (Section III: the logger is agnostic of kernels) at
    ``period_ns``, and each kernel runs as one run of back-to-back
    executions (Section IV-B step 4). Nothing is profiled yet: the report
    shows how many logs landed inside each run, how their mean compares with
    the device's true mean power over the same executions, and what the
    sampling cost.

    Parameters
    ----------
    seed : int
        Seed of the simulated device.
    period_ns : int
        Sampler period in nanoseconds (20 us to 1 s).
    idle_ns : int
        Idle time before each run, so each starts from a cool, parked device.
    sequence : tuple of (kernel, executions)
        Kernels to run, one run each.
    out : callable
        Where lines of the report go (``print`` by default).

    Returns
    -------
    dict
        ``samples`` (SAMPLE_DTYPE), ``runs`` (one dict per run: kernel,
        executions, logs, logged_mean_w, true_mean_w, exec_time_us) and
        ``stats`` (the sampler's counters).
    """
    gpu = SimGPU(seed=seed, realtime=True)
    source = gpu.power_source(depth=4)
    chunks = []
    results = []
    with Sampler(source, period_ns=period_ns) as sampler:
        for kernel, count in sequence:
            gpu.idle(idle_ns)
            chunks.append(sampler.drain())
            results.append((kernel, gpu.run(kernel, count)))
        gpu.idle(5_000_000)  # let the last logs be published
    if sampler.available:
        chunks.append(sampler.drain())
    samples = np.concatenate(chunks)
    stats = sampler.stats()
    out(f"fingrav demo: simulated MI300X-class GPU in real time (seed {seed}); "
        f"the sampler polls its {source.info.native_period_ns / 1e6:g} ms power logger every {period_ns / 1e3:g} us")
    out(f"  {'kernel':<12} {'execs':>5} {'exec us':>8} {'logs':>5} {'logged W':>9} {'true W':>7}")
    runs = []
    for kernel, run in results:
        ex = run.executions
        # Logs are stamped by the device clock; without clock sync (next
        # step) the demo places them with the device's own markers, which
        # share that clock.
        inside = (samples["source_ts"] >= ex["begin_marker_ticks"][0]) & (
            samples["source_ts"] <= ex["end_marker_ticks"][-1])
        logged = samples["total"][inside]
        dur_ns = (ex["end_ns"] - ex["start_ns"]).astype(np.float64)
        true_mean = float(np.sum(ex["mean_total_w"] * dur_ns) / np.sum(dur_ns))
        row = {
            "kernel": kernel,
            "executions": len(ex),
            "exec_time_us": float(np.median(dur_ns) / 1e3),
            "logs": int(inside.sum()),
            "logged_mean_w": float(logged.mean()) if len(logged) else float("nan"),
            "true_mean_w": true_mean,
        }
        runs.append(row)
        out(f"  {kernel:<12} {row['executions']:>5} {row['exec_time_us']:>8.1f} {row['logs']:>5} "
            f"{row['logged_mean_w']:>9.1f} {true_mean:>7.1f}")
    out(f"  sampler: polls {stats.polls}, new logs {stats.samples}, duplicates {stats.duplicates}, "
        f"drops {stats.drops}, logs missed {stats.source_missed}, jitter p99 {stats.jitter_p99_ns / 1e3:.1f} us, "
        f"CPU {100 * stats.cpu_fraction:.1f}% of a core (simulating the device included)")
    out("  a sub-ms execution gets at most one 1 ms log; FinGraV places logs on the kernel's timeline "
        "and stitches many runs into one profile")
    return {"samples": samples, "runs": runs, "stats": stats.as_dict()}


def run_synthetic_demo(
    seconds: float = 1.0,
    period_ns: int = 250_000,
    source_period_ns: int = 1_000_000,
    out=print,
) -> dict:
    """Sample the synthetic source live and report what arrived.

    The sampler thread polls faster than the source produces readings (as one
    polls a 1 ms hardware logger), keeps only new readings, and the consumer
    drains every 100 ms, as the profiler will between runs.

    Parameters
    ----------
    seconds : float
        How long to sample; must be positive.
    period_ns : int
        Sampler period in nanoseconds (20 us to 1 s).
    source_period_ns : int
        How often the synthetic source produces a new reading.
    out : callable
        Where lines of the report go (``print`` by default).

    Returns
    -------
    dict
        ``samples`` (the drained structured array) and ``stats`` (the
        sampler's counters as a dict).
    """
    if not seconds > 0:
        raise ValueError(f"seconds={seconds}: must be positive")
    source = SyntheticSource(period_ns=source_period_ns, depth=1)
    chunks = []
    with Sampler(source, period_ns=period_ns) as sampler:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))
            chunks.append(sampler.drain())
    # The last poll at stop() may have brought nothing new, and drain() on a
    # stopped, empty sampler raises; after stop() `available` is exact.
    if sampler.available:
        chunks.append(sampler.drain())
    samples = np.concatenate(chunks)
    stats = sampler.stats()
    seqs = samples["source_seq"].astype(np.int64)
    gaps = int(np.count_nonzero(np.diff(seqs) != 1)) if len(seqs) > 1 else 0
    out(f"fingrav demo: synthetic source, a reading every {source_period_ns / 1e3:g} us, "
        f"sampler period {period_ns / 1e3:g} us, {seconds:g} s")
    out(f"  polls {stats.polls}, new readings {stats.samples}, duplicates skipped {stats.duplicates}, "
        f"drops {stats.drops}, source readings missed {stats.source_missed}")
    out(f"  achieved period {stats.mean_period_ns / 1e3:.1f} us, jitter p50 {stats.jitter_p50_ns / 1e3:.1f} us, "
        f"p99 {stats.jitter_p99_ns / 1e3:.1f} us, deadline misses {stats.deadline_misses}")
    out(f"  sampler thread CPU {100 * stats.cpu_fraction:.2f}% of one core")
    if len(samples):
        out(f"  total power: mean {np.nanmean(samples['total']):.1f} W, "
            f"min {np.nanmin(samples['total']):.1f} W, max {np.nanmax(samples['total']):.1f} W; "
            f"sequence gaps {gaps}")
    return {"samples": samples, "stats": stats.as_dict()}
