"""Per-kernel power and energy inside a running application: FinGraV over its profiler trace.

A training or inference loop is FinGraV's protocol for free (paper Section
IV-A): every execution of a kernel is a run, at a random phase against the
free-running power logger, thousands of times. :func:`profile_trace` groups
the executions of an application's trace by signature (name, grid, block),
keeps the golden executions of each (execution-time binning, Section IV-B
step 5), leaves out the warm-up (the SSP idea applied to a loop: the first
iterations, while power still climbs), and stitches each signature's logs of
interest into a profile with its energy per execution.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from fingrav_native.insitu.kineto import KernelTrace, read_kineto_trace
from fingrav_native.method.align import place_logs
from fingrav_native.method.profile import stitch_logs
from fingrav_native.method.records import validate_executions
from fingrav_native.method.results import ExecutionProfile
from fingrav_native.sensors.model import SensorModel

__all__ = ["KERNEL_TABLE_DTYPE", "TraceProfile", "profile_trace"]

#: One row per kernel signature, in descending order of total energy.
KERNEL_TABLE_DTYPE = np.dtype([
    ("name", "U256"),
    ("grid", "<i8", (3,)),
    ("block", "<i8", (3,)),
    ("count", "<i8"),              # executions in the trace
    ("golden", "<i8"),             # golden executions the profile used
    ("warmup", "<i8"),             # executions left out as warm-up
    ("duration_ns", "<f8"),        # median of the golden executions
    ("power_w", "<f8"),            # mean power over an execution
    ("energy_j", "<f8"),           # per execution
    ("energy_half_width_j", "<f8"),  # 95 % interval half-width
    ("share", "<f8"),              # of all kernels' energy (count x energy_j)
])


@dataclass(frozen=True)
class TraceProfile:
    """Every kernel signature of a trace, profiled.

    Attributes
    ----------
    kernels : numpy.ndarray
        KERNEL_TABLE_DTYPE, descending total energy (``count * energy_j``).
    profiles : tuple of ExecutionProfile
        ``profiles[i]`` belongs to ``kernels[i]``.
    trace : KernelTrace
        The executions read.
    concurrent : int
        Executions left out because another kernel ran beside them on the
        same device (their power cannot be told apart).
    skipped : dict
        Signatures not profiled and why (too few executions or logs).
    """

    kernels: np.ndarray
    profiles: tuple[ExecutionProfile, ...]
    trace: KernelTrace
    concurrent: int
    skipped: dict[str, str]

    def profile(self, i: int) -> ExecutionProfile:
        """The stitched profile of row ``i`` of :attr:`kernels`."""
        return self.profiles[int(i)]

    def __str__(self) -> str:
        lines = [f"{'kernel':40s} {'grid':>14s} {'count':>7s} {'golden':>7s} {'us':>9s} {'W':>7s} "
                 f"{'mJ/exec':>16s} {'share':>6s}"]
        for r in self.kernels:
            grid = "x".join(str(int(g)) for g in r["grid"])
            lines.append(f"{r['name'][:40]:40s} {grid:>14s} {r['count']:7d} {r['golden']:7d} "
                         f"{r['duration_ns'] / 1e3:9.1f} {r['power_w']:7.1f} "
                         f"{1e3 * r['energy_j']:8.3f} +-{1e3 * r['energy_half_width_j']:6.3f} {100 * r['share']:5.1f}%")
        return "\n".join(lines)


class _Shifted:
    """A clock map onto the trace's clock, shifted to the trace's origin (keeps float64 times small)."""

    def __init__(self, inner: Any, origin_ns: int) -> None:
        self.inner, self.origin = inner, int(origin_ns)

    def to_host(self, ticks: Any) -> np.ndarray:
        return np.asarray(self.inner.to_host(ticks), dtype=np.float64) - float(self.origin)

    def error_bound_at(self, host_ns: Any) -> np.ndarray:
        return np.asarray(self.inner.error_bound_at(np.asarray(host_ns, dtype=np.float64) + float(self.origin)),
                          dtype=np.float64)


def _warmup(samples: np.ndarray, ex: np.ndarray, logger_map: Any, tolerance: float) -> int:
    """Executions (in start order) before power is steady across iterations.

    The logs of interest of the signature's executions, in ten chunks of
    consecutive executions: warm-up lasts until the first chunk whose mean
    power is within ``tolerance`` (or two standard errors) of the mean of the
    last half of the executions (paper Section IV-A's steady-state power,
    found here along the loop instead of by a search).
    """
    try:
        lois = place_logs(samples, ex, logger_map)
    except ValueError:
        return 0
    if len(lois) < 20:
        return 0
    # Each log of interest's execution, by its rank in start order (no per-log Python loop).
    by_run = np.argsort(ex["run"], kind="stable")
    rank_in_start = np.empty(len(ex), dtype=np.int64)
    rank_in_start[np.argsort(ex["start_ns"], kind="stable")] = np.arange(len(ex))
    pos = rank_in_start[by_run[np.searchsorted(ex["run"][by_run], lois["run"])]]
    values = np.asarray(lois["total"], dtype=np.float64)
    late = values[pos >= len(ex) // 2]
    if len(late) < 5:
        return 0
    ref, se_ref = float(np.mean(late)), float(np.std(late, ddof=1) / math.sqrt(len(late)))
    edges = np.linspace(0, len(ex), 11).astype(int)
    for c in range(10):
        sel = (pos >= edges[c]) & (pos < edges[c + 1])
        if sel.sum() < 3:
            continue
        m = float(np.mean(values[sel]))
        se = float(np.std(values[sel], ddof=1) / math.sqrt(sel.sum()))
        if abs(m - ref) <= max(tolerance * abs(ref), 2 * math.hypot(se, se_ref)):
            return int(edges[c])
    return 0


def profile_trace(
    trace: Union[str, os.PathLike[str], KernelTrace],
    samples: np.ndarray,
    logger_map: Any,
    *,
    margin: float = 0.02,
    min_executions: int = 20,
    warmup_tolerance: float = 0.02,
    sensor: Union[SensorModel, str, None] = None,
    attribution: str = "auto",
) -> TraceProfile:
    """Per-kernel power and energy of a running application, from its profiler trace and power logs.

    Parameters
    ----------
    trace : str, path or KernelTrace
        A torch.profiler (Kineto) Chrome trace (``.json`` or ``.json.gz``,
        :func:`~fingrav_native.insitu.kineto.read_kineto_trace`) or the
        executions already read.
    samples : numpy.ndarray
        Power logs taken while the application ran (SAMPLE_DTYPE-compatible:
        ``source_ts`` in the logger's clock, one field per channel).
    logger_map : clock map
        ``to_host`` maps ``source_ts`` onto the trace's clock (Unix-epoch ns
        for Kineto), ``error_bound_at`` its error there. Epoch times pass
        through a float64 once here (about 0.1 us of rounding, below the
        trace's microsecond timestamps); everything after is relative to the
        trace's first kernel.
    margin : float
        Golden-execution bin margin (paper Table I: 2 % for kernels of
        200 us to 1 ms).
    min_executions : int
        Signatures with fewer executions are listed in ``skipped``.
    warmup_tolerance : float
        Relative power difference from the loop's steady state below which
        executions count as past the warm-up.
    sensor, attribution
        As for :func:`~fingrav_native.method.profile.stitch_logs` (windowed
        logs are deconvolved).

    Returns
    -------
    TraceProfile

    Raises
    ------
    ValueError
        Bad arguments (named); a trace without kernels
        (:class:`~fingrav_native.insitu.kineto.TraceFormatError`); no
        signature that could be profiled.

    Notes
    -----
    Paper Section IV-A/B on an application's own executions: each execution
    is a run of one (``execution_of_interest=0``); golden executions by
    execution-time binning (step 5), logs of interest through the clock map
    (step 6), stitching and energy (step 8). Executions that overlap another
    kernel on the same device are left out and counted, not mis-attributed.
    """
    if not 0 < margin < 1:
        raise ValueError(f"margin={margin!r}: must be in (0, 1)")
    if not isinstance(min_executions, int) or min_executions < 2:
        raise ValueError(f"min_executions={min_executions!r}: must be an integer >= 2")
    if not 0 < warmup_tolerance < 1:
        raise ValueError(f"warmup_tolerance={warmup_tolerance!r}: must be in (0, 1)")
    kt = trace if isinstance(trace, KernelTrace) else read_kineto_trace(trace)
    validate_executions(kt.executions)
    lmap = _Shifted(logger_map, kt.origin_ns)
    conc = kt.concurrent()
    rows: list[tuple[Any, ...]] = []
    profiles: list[ExecutionProfile] = []
    skipped: dict[str, str] = {}
    for sig in kt.signatures:
        label = f"{sig['name']} grid={tuple(int(g) for g in sig['grid'])} block={tuple(int(b) for b in sig['block'])}"
        mine = kt.executions["kernel_id"] == sig["id"]
        ex = kt.executions[mine & ~conc]
        ex = ex[np.argsort(ex["start_ns"], kind="stable")]
        if len(ex) < min_executions:
            skipped[label] = f"{len(ex)} executions (of {int(mine.sum())}) without a concurrent kernel, " \
                             f"fewer than min_executions={min_executions}"
            continue
        warm = _warmup(samples, ex, lmap, warmup_tolerance)
        kept = ex[warm:]
        try:
            ep = stitch_logs(samples, kept, lmap, execution_of_interest=0, margin=margin, label=label,
                             sensor=sensor, attribution=attribution)
        except ValueError as exc:
            skipped[label] = str(exc)
            continue
        e = ep.energy["total"]
        rows.append((str(sig["name"]), sig["grid"], sig["block"], int(mine.sum()), int(ep.golden.count), warm,
                     float(ep.duration_ns), float(e.energy_j / (ep.duration_ns * 1e-9)) if ep.duration_ns > 0
                     else math.nan, float(e.energy_j), float(e.uncertainty_j), 0.0))
        profiles.append(ep)
    if not rows:
        raise ValueError(f"trace: no kernel signature could be profiled ({skipped})")
    table = np.array(rows, dtype=KERNEL_TABLE_DTYPE)
    total = table["count"] * table["energy_j"]
    table["share"] = total / total.sum() if total.sum() > 0 else np.nan
    order = np.argsort(-total, kind="stable")
    return TraceProfile(kernels=table[order], profiles=tuple(profiles[i] for i in order), trace=kt,
                        concurrent=int(conc.sum()), skipped=skipped)

