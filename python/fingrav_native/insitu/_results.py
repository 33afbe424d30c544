"""Result types of in-situ profiling: what :func:`~fingrav_native.profile_trace` returns.

They sit below the orchestrator and the file layer (as
:mod:`fingrav_native.method` does for campaigns), so the Perfetto
writer and the plots can use them without importing the method.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from typing import Optional

import numpy as np

from fingrav_native.insitu._align import LogAlignment
from fingrav_native.insitu._closure import EnergyClosure
from fingrav_native.insitu._concurrent import ConcurrentEnergy
from fingrav_native.insitu._trace import NATIVE_LAUNCH_SOURCE, KernelTrace
from fingrav_native.method._results import ExecutionProfile
from fingrav_native.records._log_layouts import ITERATION_DTYPE as ITERATION_DTYPE  # re-exported (the face)
from fingrav_native.records._log_layouts import KERNEL_TABLE_DTYPE as KERNEL_TABLE_DTYPE
from fingrav_native.records._log_layouts import TRACE_LOG_DTYPE as TRACE_LOG_DTYPE

#: How a coarse row's energy was found (the start of its estimate's note, and what marks it ``[c]`` in the printout):
#: a signature the stitch cannot profile (too few executions, or no log inside its golden ones).
COARSE_NOTE = ("coarse attribution: no stitched curve; one level (its power while it runs) fitted jointly from every "
               "log in or across its executions, its energy the level x its own durations")

#: What marks the joint row ``[g]`` (its estimate's note, after :data:`COARSE_NOTE`): the signatures no row of
#: their own can hold, attributed together.
JOINT_GROUP_NOTE = ("joint attribution of the signatures without a row of their own: one level over all their "
                    "executions together (the mean of the instantaneous logs inside them, which weighs each by its "
                    "duration), its energy the level x their summed durations; no energy per signature")

#: How a signature in the joint row starts its reason in :attr:`TraceProfile.skipped`.
IN_JOINT_ROW = "in the joint row [g]"


def kernel_table_dtype(width: int) -> np.dtype:
    """:data:`KERNEL_TABLE_DTYPE` with names ``width`` characters wide (at least 256): a name is never cut."""
    rest = [(name, KERNEL_TABLE_DTYPE[name]) for name in _TABLE_FIELDS[1:]]
    return np.dtype([("name", f"U{max(int(width), 256)}"), *rest])


_TABLE_FIELDS: tuple[str, ...] = tuple(KERNEL_TABLE_DTYPE.names or ())


#: The widest line of a printed profile: longer sentences wrap (the table's names are cut to their column).
PRINT_WIDTH = 160

#: Characters of a name the printed table shows; the whole name is in ``kernels["name"]`` and kernels.json.
NAME_COLUMN = 40

#: Example names a printed group of signatures not profiled shows, and the characters of each.
_EXAMPLES, _EXAMPLE_WIDTH = 3, 32

#: Lines a printed warning takes at most; the whole text is in ``warnings`` (and kernels.json).
_WARNING_LINES = 4


def shown_name(name: str, width: int = NAME_COLUMN) -> str:
    """A kernel name cut to ``width`` characters for display, ending in ``...`` where it was cut.

    Parameters
    ----------
    name : str
        The whole name (as :attr:`TraceProfile.kernels` and the saved and exported files keep it).
    width : int
        Characters shown, the marker included (at least 4).

    Returns
    -------
    str
        ``name`` itself when it fits, else its first ``width - 3`` characters and ``...``.
    """
    text, width = str(name), max(int(width), 4)
    return text if len(text) <= width else text[:width - 3] + "..."


def _cell(x: float, spec: str) -> str:
    """``x`` formatted by ``spec`` (``"9.1f"``), or ``n/a`` as wide where it is not a number."""
    return format(x, spec) if math.isfinite(x) else f"{'n/a':>{int(spec.split('.')[0])}s}"


def _mj(j: float, spec: str = ".2f") -> str:
    """An energy in mJ, or ``n/a`` where it is not a number."""
    return format(1e3 * j, spec) if math.isfinite(j) else "n/a"


def _us(ns: float) -> str:
    """A signed time in us, or ``n/a`` where it is not a number."""
    return f"{ns / 1e3:+.1f}" if math.isfinite(ns) else "n/a"


#: The reasons profile_trace gives for leaving a signature out, in a group's words (the first match wins).
_SKIP_GROUPS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^" + re.escape(IN_JOINT_ROW)),
     IN_JOINT_ROW + " (no row of their own: their executions' energy is given together, none per signature)"),
    (re.compile(r"its level \(its power while it runs\) is not determined"),
     "without a stitched curve whose level no log determines (none falls in or across their executions)"),
    (re.compile(r"fewer than min_executions=(\d+)"),
     "with fewer than {0} executions alone on the device (min_executions={0})"),
    (re.compile(r"^a communication kernel beside compute kernels, and no log fell"),
     "communication kernels beside compute whose level no log determines (none fell while one ran)"),
    (re.compile(r"no power log landed"), "with no power log inside any of their golden executions"),
    (re.compile(r"^no execution on the power logs' device"), "only on other devices than the power logs'"),
    (re.compile(r"^every execution has zero recorded duration"),
     "whose every execution has zero recorded duration (below the trace's resolution)"),
)


def skip_group(label: str, why: str) -> tuple[str, str]:
    """The group of a signature left out: a key (numbers elided) and the group's words.

    Parameters
    ----------
    label : str
        The signature in words (a key of :attr:`TraceProfile.skipped`).
    why : str
        Why it was left out (its value).

    Returns
    -------
    tuple of str
        Signatures with one key share one reason; the words say it once for the group.
    """
    for pattern, words in _SKIP_GROUPS:
        m = pattern.search(why)
        if m is not None:
            text = words.format(*m.groups())
            return text, text
    # A reason of its own: its first clause, without the label the method's errors start with.
    own = why[len(label) + 2:] if why.startswith(label + ": ") else why
    first = own.split("; ")[0]
    return re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "#", first), shown_name(first, 100)






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
    comm_exposed_ns, comm_overlapped_ns : float
        Communication kernels' time per steady iteration with no compute
        kernel running beside them (exposed) and with one (overlapped),
        CompPow's accounting of concurrent execution (Li et al. 2024); NaN
        without communication kernels.
    comm_exposed_j, comm_overlapped_j : float
        Their energy per iteration over that time: a communication kernel
        beside compute draws its additive level (the compute's draw is in
        the compute kernels' rows), one alone its row's energy; NaN where a
        communication signature has no energy (skipped), and said in ``note``.
    comm_exposed_half_width_j, comm_overlapped_half_width_j : float
        Half-widths of their 95 % intervals: the rows' intervals scaled to
        the time, added (the rows come from one fit, so their errors are
        not taken as independent).
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
    comm_exposed_ns: float = math.nan
    comm_overlapped_ns: float = math.nan
    comm_exposed_j: float = math.nan
    comm_exposed_half_width_j: float = math.nan
    comm_overlapped_j: float = math.nan
    comm_overlapped_half_width_j: float = math.nan

    def _communication(self) -> str:
        """The communication's exposed and overlapped time and energy, or nothing without communication."""
        if not math.isfinite(self.comm_exposed_ns):
            return ""
        return (f"; communication {self.comm_exposed_ns / 1e3:.1f} us exposed ({_mj(self.comm_exposed_j)} +- "
                f"{_mj(self.comm_exposed_half_width_j)} mJ) and {self.comm_overlapped_ns / 1e3:.1f} us overlapped "
                f"with compute ({_mj(self.comm_overlapped_j)} +- {_mj(self.comm_overlapped_half_width_j)} mJ, "
                "what it adds) each")

    def __str__(self) -> str:
        # A figure not determined reads n/a; the note or the profile's warnings say why.
        between = (f"{_mj(self.between_kernels_j)} mJ ({100 * self.between_share:.1f} %) between them"
                   if math.isfinite(self.between_kernels_j) and math.isfinite(self.between_share)
                   else "the energy between them not reported (the warnings say why)")
        duration = f"{self.duration_ns / 1e6:.3f} ms" if math.isfinite(self.duration_ns) else "n/a ms"
        out = (f"{self.iterations} steady iterations of {duration}: "
               f"{_mj(self.energy_j)} +- {_mj(self.energy_half_width_j)} mJ each, "
               f"{_mj(self.kernel_energy_j)} mJ in kernels, {between}")
        if self.unattributed_busy_share > 0:
            out += (f" (including {100 * self.unattributed_busy_share:.0f} % of the kernels' busy time, in "
                    "signatures without an energy)")
        return out + self._communication() + (f"; {self.note}" if self.note else "")


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
        hw = _mj(self.energy_half_width_j, ".3f")
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
        Executions left out of the signatures' fits because another kernel
        ran beside them on the same device (their power cannot be told
        apart); compute kernels beside compute kernels are attributed
        jointly in :attr:`concurrency`.
    skipped : dict
        Signatures not profiled and why (too few executions or logs).
    iterations : numpy.ndarray
        ITERATION_DTYPE, one row per ``ProfilerStep#N`` of the trace (empty
        when the loop did not call ``prof.step()``).
    summary : IterationSummary or None
        Energy per iteration and between kernels; None without iterations.
    signature_rows : numpy.ndarray
        Per row of :attr:`kernels`, the signature id in ``trace.signatures``; -1 for the joint row ``[g]``,
        which holds several (:meth:`joint_members`).
    logs : numpy.ndarray
        TRACE_LOG_DTYPE: every power log on the trace's timeline.
    sensor : str
        What the logs measure, in words (for the export's metadata).
    alignment : LogAlignment or None
        The logs' offset against the kernels as measured (instantaneous
        logs; an averaging sensor's through its windows, ``window_ns`` > 0,
        reported and applied only inside a clock map's bound wider than the
        fine search); None when not measured.
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
        signature could be profiled and no energy per iteration has an
        interval (a trace of a few kernels, marking no iteration or too few
        for one); None otherwise.
    concurrency : ConcurrentEnergy or None
        Compute kernels that ran beside one another (several streams): what
        share of the executions and time, and their spans' energy attributed
        jointly, split among the rows by fitted power; None where no compute
        kernel overlapped another.
    device_executions : int
        Executions of the logs' device with a duration (0 where not counted).
    zero_duration : int
        Executions of zero recorded duration (below the trace's resolution, a trace artefact): they carry
        no energy to attribute, and count neither as used nor as left out.
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
    concurrency: Optional[ConcurrentEnergy] = None
    device_executions: int = 0
    zero_duration: int = 0

    def used_executions(self) -> tuple[int, int]:
        """Executions of the device whose energy the result gives with an interval, and the device's executions.

        Returns
        -------
        tuple of int
            Used: every one where the kernel span's energy has an interval (:attr:`span`); else those the
            table and the concurrent spans account for (:attr:`concurrency`); else those of rows with an
            interval, past their warm-up (stitched rows, coarse ``[c]`` ones and the joint row ``[g]``, whose
            count is the executions it holds, alike). Then
            :attr:`device_executions` (zero-duration ones, :attr:`zero_duration`, in neither).
        """
        n = self.device_executions
        sp = self.span
        if sp is not None and math.isfinite(sp.energy_j) and math.isfinite(sp.energy_half_width_j):
            return n, n
        if self.concurrency is not None:
            return int(self.concurrency.used), n
        k = self.kernels
        if not len(k):
            return 0, n
        ok = np.isfinite(k["energy_j"]) & np.isfinite(k["energy_half_width_j"])
        return int(np.sum((k["count"] - k["warmup"])[ok])), n

    def _used_line(self) -> Optional[str]:
        """The share of the device's executions used, on one line (None where not counted)."""
        used, n = self.used_executions()
        if n <= 0:
            return None
        coarse = sum(int(r["count"]) for i, r in enumerate(self.kernels) if self._coarse(i) and not self._group(i))
        group = sum(int(r["count"]) for i, r in enumerate(self.kernels) if self._group(i))
        zero = (f"; {self.zero_duration} more of zero recorded duration (a trace artefact: no energy to attribute, "
                "counted neither as used nor as left out)" if self.zero_duration else "")
        return (f"executions used: {used} of {n} on this device ({100 * used / n:.0f} %, each one's energy given with "
                f"an interval), {coarse} of them in coarse rows [c]"
                + (f", {group} in the joint row [g]" if group else "") + zero)

    def profile(self, i: int) -> ExecutionProfile:
        """The stitched profile of row ``i`` of :attr:`kernels`."""
        return self.profiles[int(i)]

    def skipped_by_reason(self) -> list[tuple[str, list[str]]]:
        """The signatures not profiled, grouped by why, the largest group first.

        Returns
        -------
        list of (str, list of str)
            Each reason in words and the labels (keys of :attr:`skipped`, whose
            values say it for each signature in full) it holds.
        """
        groups: dict[str, tuple[str, list[str]]] = {}
        for label, why in self.skipped.items():
            key, words = skip_group(label, why)
            groups.setdefault(key, (words, []))[1].append(label)
        return sorted(groups.values(), key=lambda g: -len(g[1]))

    def _coarse(self, i: int) -> bool:
        """Whether row ``i`` is a coarse attribution (one level, no stitched curve)."""
        est = self.profiles[i].energy.get("total") if i < len(self.profiles) else None
        return est is not None and est.note.startswith(COARSE_NOTE)

    def _group(self, i: int) -> bool:
        """Whether row ``i`` is the joint row of the signatures without a row of their own."""
        est = self.profiles[i].energy.get("total") if i < len(self.profiles) else None
        return est is not None and JOINT_GROUP_NOTE in est.note

    def joint_members(self) -> list[str]:
        """The signatures whose executions the joint row ``[g]`` holds (keys of :attr:`skipped`).

        Returns
        -------
        list of str
            Their labels; empty without a joint row. Each one's energy is not given: the row's is theirs
            together (CompPow's accounting of a joint draw, Li et al. 2024).
        """
        return [label for label, why in self.skipped.items() if why.startswith(IN_JOINT_ROW)]

    def _no_interval(self, i: int) -> str:
        """Why row ``i``'s energy has no interval, in a few words (its estimate's note says it in full)."""
        est = self.profiles[i].energy.get("total") if i < len(self.profiles) else None
        note = est.note if est is not None else ""
        if "every LOI is in one bin" in note:
            return "every log fell in one bin of the curve"
        if "no bin has 2 LOIs" in note:
            return "no bin of the curve holds two logs"
        return "not determined"

    def _table_lines(self) -> list[str]:
        """The kernel table, names cut to their column and marked, and footnotes for what it cannot show."""
        if not len(self.kernels):
            return ["no kernel signature profiled (why: below)"]
        lines = [f"{'#':>3s} {'kernel':{NAME_COLUMN}s} {'grid':>14s} {'count':>7s} {'golden':>7s} {'us':>9s} "
                 f"{'W':>7s} {'mJ/exec':>16s} {'share':>6s}"]
        cut, marks, no_interval = False, set[str](), dict[str, list[int]]()
        for i, r in enumerate(self.kernels):
            name = str(r["name"])
            flagged = "joint" in (r.dtype.names or ()) and bool(r["joint"])
            mark = ("[g] " if self._group(i) else "[c] " if self._coarse(i) else "[j] ") if flagged else ""
            shown = shown_name(name, NAME_COLUMN - len(mark))
            cut |= shown != name
            marks.add(mark)
            shown = mark + shown
            grid = "x".join(str(int(g)) for g in r["grid"]) if np.all(r["grid"] >= 0) else "-"
            if not np.isfinite(r["energy_j"]):
                energy = f"{'not resolved':>16s}"
            elif np.isfinite(r["energy_half_width_j"]):
                energy = f"{1e3 * r['energy_j']:8.3f} +-{1e3 * r['energy_half_width_j']:6.3f}"
            else:
                energy = f"{1e3 * r['energy_j']:8.3f} +-{'n/a':>6s}"
                no_interval.setdefault(self._no_interval(i), []).append(i)
            share = f"{100 * r['share']:5.1f}%" if np.isfinite(r["share"]) else f"{'n/a':>6s}"
            lines.append(f"{i:3d} {shown:{NAME_COLUMN}s} {grid:>14s} {r['count']:7d} {r['golden']:7d} "
                         f"{_cell(r['duration_ns'] / 1e3, '9.1f')} {_cell(r['power_w'], '7.1f')} {energy} {share}")
        if np.any(self.kernels["golden"] < self.kernels["count"]):
            # FinGraV's figure is the execution of interest over the golden runs (paper Section IV-B, step 5);
            # a reader takes "per execution" for the mean over all of them, which differs where durations spread.
            lines.append("us, W, mJ/exec: per execution of the golden duration class (the 'golden' executions, the "
                         "fullest execution-time bin past the warm-up), not the mean over all 'count' executions: "
                         "the two differ where a kernel's durations spread (throttling, clocks ramping)")
        if cut:
            lines.append('names ending in "..." are cut to fit; row #\'s whole name: kernels["name"][#] '
                         '(kernels.json: "kernels"[#])')
        if "[c] " in marks:
            lines.append("[c]: a coarse attribution, a signature too rare to stitch (or with no log inside its golden "
                         "executions): no curve, one level (its power while it runs) fitted jointly from the logs in or "
                         "across its executions, its energy the level x its own durations, with the fit's interval")
        if "[g] " in marks:
            lines.append("[g]: a joint attribution of the signatures without a row of their own (too rare, or too "
                         "short, for a log to give each a level with an interval): one level over all their "
                         "executions, the mean of the instantaneous logs inside them (which weighs each by its "
                         "duration), its energy the level x their summed durations, with a cluster-robust interval "
                         "over executions; no energy per signature (they are listed in skipped, 'in the joint row')")
        if "[j] " in marks:
            lines.append("[j]: a joint attribution, a communication kernel beside compute: its energy is the additive "
                         "level it draws over whatever runs beside it x its duration (the compute's draw is in the "
                         "compute kernels' rows)")
        if no_interval:
            lines.append("+- n/a: no interval, " + "; ".join(
                f"{why} (row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:8]))}"
                f"{', ...' if len(rows) > 8 else ''})" for why, rows in no_interval.items()))
        return lines

    def _alignment_line(self) -> Optional[str]:
        """How the logs were placed against the kernels, or None when not measured."""
        a = self.alignment
        if a is None:
            return None
        span = f"{_us(a.offset_ns)} us (95 % {_us(a.low_ns)} to {_us(a.high_ns)}"
        if a.window_ns > 0:
            return (f"logs placed {span}) from their clock map, measured through their {a.window_ns / 1e6:.3g} ms "
                    "responses against the kernels: " + ("not determined" if a.at_edge else
                                                        "applied (inside a clock map's bound wider than the fine "
                                                        "search)" if self.alignment_applied else
                                                        "reported, not applied (an averaging sensor's offset trades "
                                                        "with its delay)"))
        pooled = f"; {a.pooled} signatures share one group of columns" if a.pooled else ""
        lag = f"{a.lag_ns / 1e3:.0f} us" if math.isfinite(a.lag_ns) else "n/a"
        return (f"logs placed {span}; power lag {lag}{pooled}) from their clock map, measured against the kernels: "
                + ("applied" if self.alignment_applied else
                   "at the search edge, not applied" if a.at_edge else
                   "a clock mismatch beyond the fine search, not applied (align=True applies it)" if a.far else
                   "not applied (the map comes from bracketed reads, not a one-sided fit)"))

    def _iteration_line(self) -> str:
        """The energy per iteration, or why there is none."""
        if self.summary is not None:
            return str(self.summary)
        if len(self.trace.steps):
            return (f"no energy per iteration: of the trace's {len(self.trace.steps)} ProfilerStep#N, "
                    f"{len(self.iterations)} launched kernels on this device, and no power log falls inside "
                    "one the capture covers whole")
        if self.trace.source.startswith(NATIVE_LAUNCH_SOURCE):
            # fingrav run's own launch records: one per kernel dispatch, with no iteration marks.
            return (f"no iterations: {self.trace.source}'s records are kernel dispatches only and mark none "
                    "(the energy per iteration needs a trace that marks them: torch.profiler's prof.step())")
        if self.trace.clock == "CLOCK_BOOTTIME":
            return "no iterations: a rocprofv3 kernel trace marks none (torch.profiler's prof.step() does)"
        return "no iterations: the trace has no ProfilerStep#N (call prof.step() once per iteration)"

    def _skipped_lines(self) -> list[str]:
        """The signatures not profiled, by reason with counts and a few names each (every one: :attr:`skipped`)."""
        if not self.skipped:
            return []
        n = len(self.skipped)
        lines = [f"{n} signature{'s' if n > 1 else ''} not profiled, by reason (each one's reason: "
                 'TraceProfile.skipped, kernels.json "skipped"):']
        for words, labels in self.skipped_by_reason():
            line = f"  {len(labels)} {words}"
            names = [shown_name(label, _EXAMPLE_WIDTH) for label in labels[:_EXAMPLES]]
            while names and len(line) + len(", e.g. ") + len(", ".join(names)) + 5 > PRINT_WIDTH:
                names.pop()
            if names:
                line += ", e.g. " + ", ".join(names) + (", ..." if len(labels) > len(names) else "")
            lines.append(line)
        return lines

    def __str__(self) -> str:
        lines = self._table_lines()
        used = self._used_line()
        lines += [used] if used is not None else []
        placed = self._alignment_line()
        lines += [placed] if placed is not None else []
        lines.append(self._iteration_line())
        if self.span is not None:
            lines.append(str(self.span))
        if self.concurrency is not None:
            lines.append(str(self.concurrency))
        elif self.concurrent:
            lines.append(f"{self.concurrent} executions overlapped another kernel on their device: left out")
        lines += self._skipped_lines()
        if self.closure is not None:
            lines.append(str(self.closure))
        out = [part for line in lines for part in _wrapped(line)]
        for w in self.warnings:
            parts = _wrapped(f"warning: {w}")
            if len(parts) > _WARNING_LINES:
                parts = parts[:_WARNING_LINES - 1] + [
                    f"    ... ({len(parts) - _WARNING_LINES + 1} more lines: the whole warning is in TraceProfile.warnings "
                    'and kernels.json "warnings")']
            out += parts
        return "\n".join(out)


def _wrapped(line: str) -> list[str]:
    """A line of the printout wrapped to :data:`PRINT_WIDTH` (a word longer than the width, a name, is broken)."""
    if len(line) <= PRINT_WIDTH:
        return [line]
    return textwrap.wrap(line, PRINT_WIDTH, subsequent_indent="    ", break_on_hyphens=False)
