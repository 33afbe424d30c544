"""Result types of in-situ profiling: what :func:`~fingrav_native.insitu.profile_trace` returns.

They sit below the orchestrator and the file layer (as
:mod:`fingrav_native.method` does for campaigns), so the Perfetto
writer and the plots can use them without importing the method.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from fingrav_native.insitu._align import LogAlignment
from fingrav_native.insitu._closure import EnergyClosure
from fingrav_native.insitu._trace import KernelTrace
from fingrav_native.method._results import ExecutionProfile

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


def kernel_table_dtype(width: int) -> np.dtype:
    """:data:`KERNEL_TABLE_DTYPE` with names ``width`` characters wide (at least 256): a name is never cut."""
    rest = [(name, KERNEL_TABLE_DTYPE[name]) for name in _TABLE_FIELDS[1:]]
    return np.dtype([("name", f"U{max(int(width), 256)}"), *rest])


_TABLE_FIELDS: tuple[str, ...] = tuple(KERNEL_TABLE_DTYPE.names or ())


#: One iteration of the loop (``ProfilerStep#N``) on the GPU's timeline.
ITERATION_DTYPE = np.dtype([
    ("step", "<i8"),
    ("start_ns", "<i8"),          # first kernel it launched starts (relative to the trace's origin)
    ("end_ns", "<i8"),            # the next iteration's first kernel starts (the last: its last kernel ends)
    ("kernels", "<i8"),           # executions it launched
    ("busy_ns", "<i8"),           # time with a kernel running
    ("logs", "<i8"),              # power logs attributed to it (by the middle of what each log measures)
    ("energy_j", "<f8"),          # mean of its logs x its duration (NaN without a log; noisy alone)
    ("kernel_energy_j", "<f8"),   # its executions x their signature's energy per execution
    ("steady", "?"),              # past every signature's warm-up
])


#: The power logs on the trace's timeline (what the Perfetto export draws as counter tracks).
TRACE_LOG_DTYPE = np.dtype([
    ("t_ns", "<f8"),       # middle of what the log measures, relative to the trace's origin
    ("total", "<f4"),
    ("compute", "<f4"),
    ("io", "<f4"),
    ("memory", "<f4"),
])


@dataclass(frozen=True)
class IterationSummary:
    """Energy per iteration of the loop, and the part spent between kernels.

    Attributes
    ----------
    iterations : int
        Steady iterations used.
    duration_ns : float
        Their mean duration on the GPU's timeline.
    energy_j, energy_half_width_j : float
        Energy per iteration: the mean power of every log over the steady
        iterations (each log is a sample of power at a random phase, so the
        mean is the time average) times the mean duration; a 95 % bootstrap
        interval over iterations. Under windows longer than the
        iterations (a 1 s average), each disjoint window's energy over the
        steady iterations it overlaps (each counted by the share of it the
        window covers), with a Student's t interval over the windows.
    kernel_energy_j : float
        Mean energy of the kernels an iteration runs (the table's energies).
    between_kernels_j : float
        ``energy_j - kernel_energy_j``: idle and launch gaps, the host's
        work, data loading.
    between_share : float
        Of ``energy_j``.
    unattributed_busy_share : float
        Of the kernels' busy time in these iterations, the share of
        signatures without an energy (skipped or not resolved): their energy
        is in ``between_kernels_j``, not ``kernel_energy_j``.
    note : str
        What limits the figure (iterations outside the capture left out, too
        few for an interval, no iteration past the warm-up); empty if nothing.
    """

    iterations: int
    duration_ns: float
    energy_j: float
    energy_half_width_j: float
    kernel_energy_j: float
    between_kernels_j: float
    between_share: float
    unattributed_busy_share: float = 0.0
    note: str = ""

    def __str__(self) -> str:
        hw = f"{1e3 * self.energy_half_width_j:.2f}" if math.isfinite(self.energy_half_width_j) else "?"
        out = (f"{self.iterations} steady iterations of {self.duration_ns / 1e6:.3f} ms: "
               f"{1e3 * self.energy_j:.2f} +- {hw} mJ each, "
               f"{1e3 * self.kernel_energy_j:.2f} mJ in kernels, {1e3 * self.between_kernels_j:.2f} mJ "
               f"({100 * self.between_share:.1f} %) between them")
        if self.unattributed_busy_share > 0:
            out += (f" (including {100 * self.unattributed_busy_share:.0f} % of the kernels' busy time, in "
                    "signatures without an energy)")
        return out + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class SpanEnergy:
    """The energy over the trace's kernel span on the device, from the power logs alone.

    What a trace too small to profile any signature still gives (no
    ``ProfilerStep#N``, no signature with ``min_executions`` executions): the
    logs that measure inside the span (an instant in it, or a response
    wholly in it) give its mean power, times its duration.

    Attributes
    ----------
    start_ns, end_ns : float
        The span: the device's first kernel start and last kernel end (ns
        from the trace's origin).
    logs : int
        Logs inside it.
    mean_power_w : float
        Their mean (NaN with none).
    energy_j : float
        ``mean_power_w`` x the span's duration (NaN with no log inside).
    energy_half_width_j : float
        Half-width of its 95 % Student t interval over the logs (NaN with fewer than two).
    note : str
        What limits the figure; empty if nothing.
    """

    start_ns: float
    end_ns: float
    logs: int
    mean_power_w: float
    energy_j: float
    energy_half_width_j: float
    note: str = ""

    @property
    def duration_ns(self) -> float:
        """The span's length."""
        return self.end_ns - self.start_ns

    def __str__(self) -> str:
        head = f"the trace's {self.duration_ns / 1e6:.3f} ms of kernels on this device"
        if not math.isfinite(self.energy_j):
            return f"{head}: energy not determined ({self.note})"
        hw = f"{1e3 * self.energy_half_width_j:.3f}" if math.isfinite(self.energy_half_width_j) else "?"
        return (f"{head}: {1e3 * self.energy_j:.3f} +- {hw} mJ (mean {self.mean_power_w:.1f} W over {self.logs} logs)"
                + (f"; {self.note}" if self.note else ""))


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
    iterations : numpy.ndarray
        ITERATION_DTYPE, one row per ``ProfilerStep#N`` of the trace (empty
        when the loop did not call ``prof.step()``).
    summary : IterationSummary or None
        Energy per iteration and between kernels; None without iterations.
    signature_rows : numpy.ndarray
        Per row of :attr:`kernels`, the signature id in ``trace.signatures``.
    logs : numpy.ndarray
        TRACE_LOG_DTYPE: every power log on the trace's timeline.
    sensor : str
        What the logs measure, in words (for the export's metadata).
    alignment : LogAlignment or None
        The logs' offset against the kernels as measured (instantaneous
        logs; an averaging sensor's through its windows, ``window_ns`` > 0,
        reported and never applied); None when not measured.
    alignment_applied : bool
        Whether the logs were moved by it.
    warnings : tuple of str
        What the logs cannot resolve (kernels they confound, curves coarser
        than asked), the assumptions the model check rejects, and powers
        above what the board can draw.
    closure : EnergyClosure or None
        The kernels and gaps against an energy counter over the trace (when
        the capture holds one, or ``energy_counter=`` was given).
    span : SpanEnergy or None
        The energy over the trace's kernel span from the logs alone, when no
        signature could be profiled and the trace marks no iteration (a
        trace of a few kernels); None otherwise.
    """

    kernels: np.ndarray
    profiles: tuple[ExecutionProfile, ...]
    trace: KernelTrace
    concurrent: int
    skipped: dict[str, str]
    iterations: np.ndarray
    summary: Optional[IterationSummary]
    signature_rows: np.ndarray
    logs: np.ndarray
    sensor: str
    alignment: Optional[LogAlignment] = None
    alignment_applied: bool = False
    warnings: tuple[str, ...] = ()
    closure: Optional[EnergyClosure] = None
    span: Optional[SpanEnergy] = None

    def profile(self, i: int) -> ExecutionProfile:
        """The stitched profile of row ``i`` of :attr:`kernels`."""
        return self.profiles[int(i)]

    def __str__(self) -> str:
        lines = [f"{'kernel':40s} {'grid':>14s} {'count':>7s} {'golden':>7s} {'us':>9s} {'W':>7s} "
                 f"{'mJ/exec':>16s} {'share':>6s}"]
        for r in self.kernels:
            grid = "x".join(str(int(g)) for g in r["grid"])
            energy = (f"{1e3 * r['energy_j']:8.3f} +-{1e3 * r['energy_half_width_j']:6.3f}"
                      if np.isfinite(r["energy_j"]) else f"{'not resolved':>16s}")
            lines.append(f"{r['name'][:40]:40s} {grid:>14s} {r['count']:7d} {r['golden']:7d} "
                         f"{r['duration_ns'] / 1e3:9.1f} {r['power_w']:7.1f} {energy} {100 * r['share']:5.1f}%")
        if self.alignment is not None and self.alignment.window_ns > 0:
            a = self.alignment
            lines.append(f"logs placed {a.offset_ns / 1e3:+.1f} us (95 % {a.low_ns / 1e3:+.1f} to {a.high_ns / 1e3:+.1f}) "
                         f"from their clock map, measured through their {a.window_ns / 1e6:.3g} ms responses against "
                         "the kernels: " + ("not determined" if a.at_edge else "reported, not applied (an averaging "
                                            "sensor's offset trades with its delay)"))
        elif self.alignment is not None:
            a = self.alignment
            pooled = f"; {a.pooled} signatures share one group of columns" if a.pooled else ""
            lines.append(f"logs placed {a.offset_ns / 1e3:+.1f} us (95 % {a.low_ns / 1e3:+.1f} to {a.high_ns / 1e3:+.1f}; "
                         f"power lag {a.lag_ns / 1e3:.0f} us{pooled}) from their clock map, measured against the kernels: "
                         + ("applied" if self.alignment_applied else
                            "at the search edge, not applied" if a.at_edge else
                            "a clock mismatch beyond the fine search, not applied (align=True applies it)" if a.far else
                            "not applied (the map comes from bracketed reads, not a one-sided fit)"))
        if self.summary is not None:
            lines.append(str(self.summary))
        elif len(self.trace.steps):
            lines.append(f"no energy per iteration: of the trace's {len(self.trace.steps)} ProfilerStep#N, "
                         f"{len(self.iterations)} launched kernels on this device, and no power log falls inside "
                         "one the capture covers whole")
        elif self.trace.clock == "CLOCK_BOOTTIME":
            lines.append("no iterations: a rocprofv3 kernel trace marks none (torch.profiler's prof.step() does)")
        else:
            lines.append("no iterations: the trace has no ProfilerStep#N (call prof.step() once per iteration)")
        if self.span is not None:
            lines.append(str(self.span))
        if self.concurrent:
            lines.append(f"{self.concurrent} executions overlapped another kernel on their device: left out")
        for label, why in self.skipped.items():
            lines.append(f"not profiled: {label}: {why}")
        if self.closure is not None:
            lines.append(str(self.closure))
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)
