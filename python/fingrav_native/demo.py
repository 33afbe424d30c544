"""A short live sampling demo on the built-in synthetic source."""

from __future__ import annotations

import time

import numpy as np

from ._core import Sampler, SyntheticSource


def run_demo(
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
