"""A clock-sync report for one backend: how well its device clock maps onto host time.

``fingrav sync`` prints it. It takes bursts of bracketed device-clock reads
at a fixed interval (the paper's Section IV-A sync, repeated over time so
drift shows), summarises the read latency (whose best half round trip is
the floor no calibration removes), fits the single linear map and, when the
reads span long enough, the piecewise one that follows a wandering skew,
and says how far apart the two are at the end. On the simulated device the
truth is known, so the report also gives the map's actual error and how
often the reported bound covers it.

Beside the device clock, the same bursts read the launch capture's record clocks
(``CLOCK_BOOTTIME``, rocprofiler-sdk's; ``CLOCK_REALTIME``, CUPTI's) between two reads of the
sampler's ``CLOCK_MONOTONIC_RAW``, exactly as the native tools do at each flush, and report each
one's bracket width and offset stability (:func:`fingrav_native.clocks.record_clock_error`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from fingrav_native._checks import integer_in, positive_number, short_repr
from fingrav_native.backends._base import Backend, can_advance
from fingrav_native.clocks._latency import ReadLatency, summarize_read_latency
from fingrav_native.clocks._maps import ClockMap, PiecewiseClockMap
from fingrav_native.clocks._piecewise import fit_piecewise_clock_map
from fingrav_native.clocks._record_clocks import RecordClockError, record_clock_error
from fingrav_native.clocks._twosided import fit_clock_map


@dataclass(frozen=True)
class SyncReport:
    """What :func:`sync_report` measured.

    Attributes
    ----------
    backend : str
        Backend name (``Capabilities.name``).
    device : str
        Device description.
    tick_ns : float
        Nominal device tick, ns.
    brackets : numpy.ndarray
        (n, 3) int64 reads ``(host_before, device_ticks, host_after)``.
    latency : ReadLatency
        Round-trip statistics of the reads.
    linear : ClockMap
        One offset-and-skew map over every read.
    piecewise : PiecewiseClockMap or None
        The drift-following map, when the reads span more than two knots.
    bound_end_ns : float
        The linear map's error bound at the last read.
    piecewise_gap_ns : float
        Largest distance between the linear and piecewise maps over the
        reads (NaN without a piecewise map): how much drift a single fit
        would miss.
    truth : dict or None
        Simulated device only: ``median_error_ns``, ``max_error_ns`` of the
        linear map at every read against the device's true clock, and
        ``covered`` (share of reads whose true error is within the bound).
    record_clocks : tuple of RecordClockError
        The launch record clocks against ``CLOCK_MONOTONIC_RAW``, one per clock read.
    """

    backend: str
    device: str
    tick_ns: float
    brackets: np.ndarray
    latency: ReadLatency
    linear: ClockMap
    piecewise: Optional[PiecewiseClockMap]
    bound_end_ns: float
    piecewise_gap_ns: float
    truth: Optional[dict[str, float]]
    record_clocks: tuple[RecordClockError, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON (the reads themselves left out)."""
        import dataclasses

        return {
            "backend": self.backend, "device": self.device, "tick_ns": self.tick_ns,
            "reads": int(len(self.brackets)), "latency": dataclasses.asdict(self.latency),
            "linear": self.linear.as_dict(),
            "piecewise": self.piecewise.as_dict() if self.piecewise is not None else None,
            "bound_end_ns": self.bound_end_ns,
            "piecewise_gap_ns": None if math.isnan(self.piecewise_gap_ns) else self.piecewise_gap_ns,
            "truth": self.truth,
            "record_clocks": [r.as_dict() for r in self.record_clocks],
        }

    def format(self) -> str:
        """The human-readable report."""
        lat, m = self.latency, self.linear
        span_s = m.span_ns / 1e9
        lines = [
            f"clock sync: {self.backend} ({self.device}), tick {self.tick_ns:g} ns",
            f"  reads: {lat.n} over {span_s:.2f} s; round trip min {lat.min_ns / 1e3:.2f} us, "
            f"median {lat.p50_ns / 1e3:.2f} us, p99 {lat.p99_ns / 1e3:.2f} us, max {lat.max_ns / 1e3:.2f} us",
            f"  floor (half the best round trip): {m.floor_ns:.0f} ns: where inside its round trip the device "
            "read its clock is invisible, so no bound can be tighter",
            f"  linear map: skew {m.skew_ppm:+.3f} ppm (+-{m.skew_bound_ppm:.3f}), {m.n_used}/{m.n_total} reads "
            f"used, residual {m.residual_ns:.0f} ns, bound at the last read {self.bound_end_ns:.0f} ns",
        ]
        if self.piecewise is not None:
            lines.append(f"  piecewise map: {len(self.piecewise.knots_host_ns)} knots, skew "
                         f"{np.min(self.piecewise.skew_ppm):+.3f} to {np.max(self.piecewise.skew_ppm):+.3f} ppm; "
                         f"differs from the linear map by up to {self.piecewise_gap_ns:.0f} ns (drift a single "
                         "fit misses)")
        if self.truth is not None:
            t = self.truth
            lines.append(f"  against the simulator's truth: median error {t['median_error_ns']:.0f} ns, "
                         f"max {t['max_error_ns']:.0f} ns, within the bound for {100 * t['covered']:.1f}% of reads")
        # 1 ppm of skew is 1 us of error per second of campaign.
        drift_us_per_s = abs(m.skew_ppm)
        lines.append(f"  a single offset without skew would drift {drift_us_per_s:.2f} us per second of campaign")
        if self.record_clocks:
            lines.append("  launch record clocks against CLOCK_MONOTONIC_RAW (the sampler's), read as the launch "
                         "capture reads them:")
            lines.extend(f"    {r.format()}" for r in self.record_clocks)
        return "\n".join(lines)


def _native_record_clock(clock: str, n: int) -> np.ndarray:
    from fingrav_native import _core

    return np.asarray(_core.launch_clock_brackets(clock, n), dtype=np.int64)


def _checked_record_clocks(record_clocks: Sequence[str]) -> tuple[str, ...]:
    """The launch record clocks asked for, each one a launch record can stamp on."""
    clocks = tuple(record_clocks)
    for c in clocks:
        if c not in ("CLOCK_BOOTTIME", "CLOCK_REALTIME"):
            raise ValueError(f"record_clocks: {short_repr(c)} is not a launch record clock; "
                             "use 'CLOCK_BOOTTIME' or 'CLOCK_REALTIME'")
    return clocks


def _against_truth(backend: Backend, brackets: np.ndarray, linear: ClockMap) -> Optional[dict[str, float]]:
    """The linear map's error against the simulator's true clock (None: a device without one)."""
    truth = None
    gpu = getattr(backend, "gpu", None)
    if gpu is not None and hasattr(gpu, "host_at_device_ticks"):
        true_host = np.asarray(gpu.host_at_device_ticks(brackets[:, 1]), dtype=np.float64)
        mapped = np.asarray(linear.to_host(brackets[:, 1]), dtype=np.float64)
        err = np.abs(mapped - true_host)
        bound = np.asarray(linear.error_bound_at(mapped), dtype=np.float64)
        truth = {"median_error_ns": float(np.median(err)), "max_error_ns": float(err.max()),
                 "covered": float(np.mean(err <= bound))}
    return truth


def sync_report(
    backend: Backend,
    *,
    seconds: float = 2.0,
    burst: int = 32,
    interval_s: float = 0.1,
    sleep: Callable[[float], None] = time.sleep,
    record_clocks: Sequence[str] = ("CLOCK_BOOTTIME", "CLOCK_REALTIME"),
    read_record_clock: Optional[Callable[[str, int], Any]] = None,
) -> SyncReport:
    """Measure a backend's device-clock sync over ``seconds`` (paper Section IV-A).

    Parameters
    ----------
    backend : Backend
        Any backend (``read_clocks``); a virtual-time one is advanced
        instead of slept.
    seconds : float
        How long to take reads for (> 0).
    burst : int
        Reads per burst (>= 2); bursts are ``interval_s`` apart.
    interval_s : float
        Time between bursts (> 0).
    sleep : callable
        How to wait on a real-time backend (tests pass a fake).
    record_clocks : sequence of str
        Launch record clocks to bracket against ``CLOCK_MONOTONIC_RAW`` in each burst (empty: none).
    read_record_clock : callable or None
        ``(clock, n) -> (n, 3) int64`` brackets; None: the native capture's own reads
        (``_core.launch_clock_brackets``). Tests pass synthetic ones.

    Returns
    -------
    SyncReport
    """
    seconds = positive_number(seconds, "seconds", upper=3_600.0)
    burst = integer_in(burst, "burst", 2, 10_000)
    interval_s = positive_number(interval_s, "interval_s", upper=3_600.0)
    if seconds / interval_s > 1e6:
        raise ValueError(f"seconds={seconds:g}, interval_s={interval_s:g}: more than a million bursts")
    if not callable(getattr(backend, "read_clocks", None)) or not hasattr(backend, "capabilities"):
        raise ValueError(f"backend: must be a backend (with read_clocks and capabilities); got a "
                         f"{type(backend).__name__}")
    if not callable(sleep):
        raise ValueError(f"sleep={short_repr(sleep)}: must be a callable taking seconds")
    clocks = _checked_record_clocks(record_clocks)
    if read_record_clock is not None and not callable(read_record_clock):
        raise ValueError(f"read_record_clock={short_repr(read_record_clock)}: must be a callable (clock, n)")
    reader = read_record_clock if read_record_clock is not None else _native_record_clock
    caps = backend.capabilities
    bursts = max(2, int(seconds / interval_s) + 1)
    record_chunks: dict[str, list[np.ndarray]] = {c: [] for c in clocks}
    advance = backend.advance_to if caps.virtual_time and can_advance(backend) else None
    chunks = []
    for i in range(bursts):
        chunks.append(np.asarray(backend.read_clocks(burst), dtype=np.int64))
        for c in clocks:
            record_chunks[c].append(np.asarray(reader(c, burst), dtype=np.int64))
        if i + 1 < bursts:
            if advance is not None:
                advance(int(chunks[-1][-1, 2] + interval_s * 1e9))
            else:
                sleep(interval_s)
    brackets = np.concatenate(chunks)
    tick = caps.device_tick_ns
    step = caps.device_resolution_ticks  # the clock's update step, ticks
    linear = fit_clock_map(brackets, tick_ns=tick, resolution_ticks=step)
    piecewise: Optional[PiecewiseClockMap] = None
    gap = float("nan")
    span = float(brackets[-1, 0] - brackets[0, 0])
    # A piecewise map needs at least two knots' worth of reads to say anything a line does not.
    segment = max(span / 4, 0.25e9)
    if span >= 2 * segment:
        piecewise = fit_piecewise_clock_map(brackets, tick_ns=tick, segment_ns=segment, resolution_ticks=step)
        ticks = brackets[:, 1]
        gap = float(np.max(np.abs(np.asarray(piecewise.to_host(ticks), dtype=np.float64)
                                  - np.asarray(linear.to_host(ticks), dtype=np.float64))))
    bound_end = float(linear.error_bound_at(brackets[-1, 0]))
    truth = _against_truth(backend, brackets, linear)
    record = tuple(record_clock_error(np.concatenate(record_chunks[c]), c) for c in clocks)
    return SyncReport(backend=caps.name, device=caps.device, tick_ns=tick, brackets=brackets,
                      latency=summarize_read_latency(brackets), linear=linear, piecewise=piecewise,
                      bound_end_ns=bound_end, piecewise_gap_ns=gap, truth=truth, record_clocks=record)
