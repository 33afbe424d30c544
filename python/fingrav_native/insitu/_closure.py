"""Energy closure: the kernel table and the gaps between kernels against an energy counter, over the trace.

An in-situ profile splits the energy of a stretch of an application into
kernels (the table's energy per execution, times the executions) and what
lies between them (launch gaps, host pauses, kernels the table has no energy
for). An energy counter (AMD's ``energy_accumulator``, NVML's total energy)
integrates the same power in the firmware: over the trace the two must add
up to one figure, within their uncertainties. Where they do not, one of them
is wrong, and a user meets a counter that disagrees with integrated power
without a way to tell which to trust; :func:`energy_closure`
(in ``_closure_fit``) says which side reads what, by how much beyond the
uncertainty, and which of the common causes fits (a gain, an offset such as a counter of a wider
scope, a clock offset at the span's ends).

The gaps' energy comes from the power logs: each log measures the mean power
over its interval (a point for an instantaneous sensor, a window for an
averaging one), which is the table's kernels' known power over the part of
the interval they ran, plus unknown levels over the rest: a level for
kernels without a table energy and one per step of time since the last
kernel ended (the steps of :data:`~fingrav_native.method.GAP_EDGES_NS`, as
the joint fit models gaps). The levels are fitted by least squares over every
log inside the trace's kernel span.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fingrav_native._errors import FingravWarning
from fingrav_native.sensors._energy_counter import joules_text

#: z of a two-sided 95 % interval: the table's half-widths are 95 %, and the closure's is too.
Z95 = 1.959963984540054


class EnergyClosureWarning(FingravWarning):
    """An in-situ profile's kernels and gaps do not add up to the energy counter's reading over the trace.

    Raised (as a warning) by :func:`~fingrav_native.profile_trace` when the
    two differ by more than their combined 95 % uncertainty; the message
    names both figures, which side is which, and the causes that fit.
    The figures are in ``TraceProfile.closure``.
    """


@dataclass(frozen=True)
class EnergyClosure:
    """The energy closure of an in-situ profile over the trace, against an energy counter.

    Attributes
    ----------
    counter : str
        The counter, in words (name, scope, quantum).
    start_ns, end_ns : float
        The span compared: two counter readings inside the trace's kernel
        span and the logs' coverage, on the trace's timeline (ns from its
        origin). Where the counter broke (a reset, a clock that went back or
        jumped) the figures are summed over the segments of its readings
        inside the span, none taken across a break, and ``note`` says where
        and what.
    counter_j : float
        The counter's energy over the span.
    kernels_j : float
        The table's kernels over the span: each execution of a signature with
        an energy (past its warm-up, alone on the device) counts its
        signature's energy per execution (the share of it inside the span,
        spread over its own duration): the table's ``count * energy_j``.
    other_kernels_j : float
        Executions without a table energy (skipped or unresolved
        signatures, concurrent kernels, the warm-up), at a level fitted to
        the logs.
    gaps_j : float
        Between kernels, at levels fitted to the logs by time since the last
        kernel ended.
    model_j : float
        ``kernels_j + other_kernels_j + gaps_j``: the profile's side.
    difference_j, relative : float
        ``model_j - counter_j`` and that over ``counter_j``.
    half_width_j, relative_half_width : float
        The 95 % half-width of the difference (and relative): the table's
        intervals, the fitted levels' standard errors, the counter's quantum,
        and the counter readings' timing (staleness and clock-map error, at
        the logs' 99th-percentile power).
    model_half_width_j, counter_half_width_j : float
        The two sides' shares of it.
    gain, gain_se, offset_w, offset_w_se : float
        Counter energy per interval between its readings regressed on the
        profile's (``counter / dt = gain * model / dt + offset``): a gain
        other than 1 is a calibration, an offset a scope or a baseline. NaN
        when the power hardly varies between readings (the two cannot be
        told apart).
    intervals : int
        Counter intervals in that regression.
    agrees : bool
        ``|difference_j| <= half_width_j``.
    note : str
        What limits the figures (levels not fitted, too few intervals).
    """

    counter: str
    start_ns: float
    end_ns: float
    counter_j: float
    kernels_j: float
    other_kernels_j: float
    gaps_j: float
    model_j: float
    difference_j: float
    relative: float
    half_width_j: float
    relative_half_width: float
    model_half_width_j: float
    counter_half_width_j: float
    gain: float
    gain_se: float
    offset_w: float
    offset_w_se: float
    intervals: int
    agrees: bool
    note: str = ""

    def __str__(self) -> str:
        verdict = "agree" if self.agrees else "DISAGREE beyond their uncertainty"
        return (f"energy closure over {(self.end_ns - self.start_ns) / 1e9:.4g} s of the trace: counter "
                f"({self.counter}) {joules_text(self.counter_j)}; from the power logs: kernel table "
                f"{joules_text(self.kernels_j)} + other kernels {joules_text(self.other_kernels_j)} + gaps "
                f"{joules_text(self.gaps_j)} = {joules_text(self.model_j)}, {100 * self.relative:+.2f} % "
                f"+- {100 * self.relative_half_width:.2f} % ({verdict})" + (f"; {self.note}" if self.note else ""))

    def explain(self) -> str:
        """Which side reads what, and the causes that fit (the text of :class:`EnergyClosureWarning`)."""
        more = "more" if self.difference_j > 0 else "less"
        out = (f"the profile's kernels and gaps (from the power logs) add up to {joules_text(self.model_j)} where the "
               f"energy counter ({self.counter}) reads {joules_text(self.counter_j)} over the same "
               f"{(self.end_ns - self.start_ns) / 1e9:.4g} s of the trace: {100 * abs(self.relative):.2f} % {more} "
               f"than the counter, beyond the 95 % uncertainty of +-{100 * self.relative_half_width:.2f} %")
        if math.isfinite(self.gain):
            out += (f". Between the counter's readings (interval by interval, {self.intervals} of them) the counter "
                    f"reads {self.gain:.4f} +- {Z95 * self.gain_se:.4f} x the logs' energy "
                    f"{self.offset_w:+.2f} +- {Z95 * self.offset_w_se:.2f} W")
            causes = []
            if abs(self.gain - 1.0) > Z95 * self.gain_se:
                causes.append(f"a gain: one sensor reads {100 * abs(self.gain - 1.0):.1f} % off the other (a "
                              "calibration; vendors document power readings to a few percent)")
            if abs(self.offset_w) > Z95 * self.offset_w_se:
                causes.append(f"an offset of {self.offset_w:+.1f} W: the counter and the logs measure different "
                              "scopes (a module or socket counter includes the CPU, memory or board; the logs the "
                              "GPU alone), or one has a baseline error")
            if causes:
                out += ": " + "; and ".join(causes)
        else:
            out += (". The power hardly varies between the counter's readings here, so a gain (a calibration: one "
                    "sensor reads a few percent off the other) cannot be told from an offset (the counter and the "
                    "logs measure different scopes, e.g. a module or socket counter with the CPU or memory in "
                    "it); a trace with idle stretches separates them")
        if "the counter broke" in self.note:
            out += f". {self.note.split('; closed over')[0].capitalize()}: the figures are over the segments either side"
        return (out + ". A clock offset between the counter's readings and the trace moves energy across the span's "
                "ends; a sensor model that does not fit the logs (a wrong window or delay) moves it between kernels "
                "and gaps, not in total")
