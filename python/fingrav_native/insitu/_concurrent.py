"""Compute kernels that run at once on several streams: each fitted alone, their overlapped spans attributed jointly.

A log taken while two compute kernels run measures both, in proportions no log can tell apart. Each
signature is therefore profiled from the executions it has alone (paper Section IV-B's steps over
those runs), and the executions that overlap another compute kernel are merged into spans (the union
of each group of executions that overlap one another). The logs that fall in the spans measure their
sum: the spans' energy, with its interval, is what those logs give (a ratio estimator over the
spans for instantaneous logs, Cochran 1977, *Sampling Techniques*, Section 6.9; one more class of the
joint timeline fit for an averaging sensor's). Each span's energy is then split among the executions
it holds in proportion to each one's fitted power alone x its duration, CompPow's accounting of
concurrent execution by the components' own draw (Li et al. 2024); a span holding a signature that
has no fitted power is reported whole, not split, and said so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from fingrav_native.method._joint import merged_intervals


@dataclass(frozen=True)
class ConcurrentEnergy:
    """Compute executions that ran beside another compute kernel (several streams), attributed jointly.

    Attributes
    ----------
    executions : int
        Compute executions of the device that overlapped another compute
        kernel.
    compute_executions : int
        Compute executions of the device in all.
    spans : int
        Spans attributed: each the union of a group of executions that
        overlap one another (the warm-up's left out).
    span_ns : float
        Their total time (ns).
    busy_share : float
        Of the time some compute kernel of the device ran, the share in
        spans where two or more did.
    power_w, power_half_width_w : float
        The mean power over the spans (W) and the half-width of its 95 %
        interval; NaN where the logs do not determine it (``note``).
    energy_j, energy_half_width_j : float
        The spans' energy over the trace (``power_w`` x ``span_ns``) and its
        interval.
    logs : int
        Logs behind it (that fall in a span, or whose response reaches one).
    row_executions : numpy.ndarray
        Per row of :attr:`TraceProfile.kernels`, its executions in the
        spans attributed.
    row_energy_j, row_half_width_j : numpy.ndarray
        Per row, the mean energy of those executions from the split (each
        span's energy in proportion to its executions' fitted power x
        duration) and the interval's half-width (the span's, split alike);
        NaN for a row without one.
    unsplit_spans : int
        Spans holding a signature without a fitted power: their energy is in
        ``energy_j``, not split among the rows.
    used, device_executions : int
        Executions of the device the table and the spans account for (those
        profiled alone past their warm-up, those attributed here, and
        communication kernels with a row), and the device's executions in
        all.
    how : str
        How the spans' energy was measured, in words.
    note : str
        What limits it; empty if nothing.
    """

    executions: int
    compute_executions: int
    spans: int
    span_ns: float
    busy_share: float
    power_w: float
    power_half_width_w: float
    energy_j: float
    energy_half_width_j: float
    logs: int
    row_executions: np.ndarray
    row_energy_j: np.ndarray
    row_half_width_j: np.ndarray
    unsplit_spans: int
    used: int
    device_executions: int
    how: str = ""
    note: str = ""

    @property
    def used_share(self) -> float:
        """Of the device's executions, the share the table and the spans account for."""
        return self.used / self.device_executions if self.device_executions else math.nan

    def __str__(self) -> str:
        n = max(self.compute_executions, 1)
        head = (f"{self.executions} of {self.compute_executions} compute executions ({100 * self.executions / n:.1f} %; "
                f"{100 * self.busy_share:.1f} % of the compute time) ran beside another compute kernel (several "
                f"streams): each signature is fitted from its executions alone")
        if math.isfinite(self.energy_j):
            m = max(self.spans, 1)
            half = (f" +- {1e3 * self.energy_half_width_j / m:.3f} mJ" if math.isfinite(self.energy_half_width_j)
                    else " mJ (no interval: fewer than two logs in the spans)")
            body = (f"; {_spans(self.spans)} past the warm-up ({self.span_ns / 1e6:.3f} ms) attributed jointly: "
                    f"{1e3 * self.energy_j / m:.3f}{half} per span ({self.power_w:.1f} W, {self.how})")
            split = int(np.sum(self.row_executions[np.isfinite(self.row_energy_j)]))
            body += (f", split among {split} executions by each one's fitted power alone x its duration"
                     if split else ", not split (no signature in them has a fitted power)")
            if self.unsplit_spans and split:
                body += f"; {self.unsplit_spans} spans not split (a signature in them has no fitted power)"
        else:
            body = (f"; the energy of {_spans(self.spans)} past the warm-up is not determined "
                    f"({self.note or 'no log measures them'})")
        used = (f"; {self.used} of {self.device_executions} executions of the device "
                f"({100 * self.used_share:.0f} %) accounted for")
        tail = f"; {self.note}" if self.note and math.isfinite(self.energy_j) else ""
        return head + body + used + tail


def _spans(n: int) -> str:
    return f"their {n} span{'' if n == 1 else 's'}"


def concurrent_spans(start: np.ndarray, end: np.ndarray, among: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spans of executions that overlap one another: each group's union, and each execution's span.

    Parameters
    ----------
    start, end : numpy.ndarray
        Per execution of the trace (ns).
    among : numpy.ndarray of bool
        The executions considered (the compute kernels of one device).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        The spans' starts and ends (float64 ns, in start order) and, per
        execution, its span's index (-1 for one that overlaps none).
    """
    member = np.full(len(start), -1, dtype=np.int64)
    idx = np.flatnonzero(among)
    if not len(idx):
        return np.zeros(0), np.zeros(0), member
    idx = idx[np.argsort(start[idx], kind="stable")]
    s, e = start[idx].astype(np.float64), end[idx].astype(np.float64)
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] >= reach[:-1]
    group = np.cumsum(new) - 1
    size = np.bincount(group)
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    shared = size >= 2
    span_of = np.cumsum(shared) - 1
    member[idx[shared[group]]] = span_of[group[shared[group]]]
    return s[first[shared]], reach[last[shared]], member


def instant_span_power(t: np.ndarray, power: np.ndarray, span_start: np.ndarray, span_end: np.ndarray,
                       confidence: float = 0.95) -> tuple[float, float, int]:
    """The mean power over the spans from instantaneous logs, its interval's half-width and the logs in them.

    Parameters
    ----------
    t, power : numpy.ndarray
        The logs on the trace's timeline (ns) and their power (W).
    span_start, span_end : numpy.ndarray
        Disjoint spans in start order (ns).
    confidence : float
        Of the interval.

    Returns
    -------
    (float, float, int)
        The ratio estimator ``sum(power in spans) / logs in spans``: logs at
        a random phase sample the spans' time uniformly, so it is their time
        average whatever each span holds. Its variance by spans as clusters
        (Cochran 1977, Section 6.9: logs of one span are not independent),
        with Student's t over the spans that hold logs; over the logs where
        one span holds them all, NaN where fewer than two logs fall in spans.
    """
    if not len(span_start):
        return math.nan, math.nan, 0
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(power, dtype=np.float64)
    ok = np.isfinite(t) & np.isfinite(y)
    t, y = t[ok], y[ok]
    k = np.searchsorted(span_start, t, side="right") - 1
    inside = (k >= 0) & (t < span_end[np.clip(k, 0, None)])
    n = int(inside.sum())
    if not n:
        return math.nan, math.nan, 0
    cnt = np.bincount(k[inside], minlength=len(span_start)).astype(np.float64)
    tot = np.bincount(k[inside], weights=y[inside], minlength=len(span_start))
    r = float(tot.sum() / cnt.sum())
    m = int(np.sum(cnt > 0))
    if m < 2:
        # One span: its logs sample its time (Student's t over them); none without two.
        if n < 2:
            return r, math.nan, n
        sd = float(np.std(y[inside], ddof=1))
        return r, float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n), n
    resid = (tot - r * cnt)[cnt > 0]
    se = math.sqrt(float(np.sum(resid ** 2)) * m / (m - 1)) / float(cnt.sum())
    return r, float(stats.t.ppf(0.5 + confidence / 2, m - 1)) * se, n


def split_by_power(member: np.ndarray, duration_ns: np.ndarray, power_w: np.ndarray, span_ns: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Each execution's share of its span's energy: its fitted power alone x its duration, over the span's sum.

    Parameters
    ----------
    member : numpy.ndarray
        Per execution, its span's index, -1 for none.
    duration_ns, power_w : numpy.ndarray
        Per execution, its duration and its signature's fitted power alone (NaN: none).
    span_ns : numpy.ndarray
        Per span, its duration.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Per execution, its share (NaN outside a span and in a span not
        split), and per span whether it is split (every execution in it has
        a fitted power).
    """
    inside = member >= 0
    if not len(span_ns):
        return np.full(len(member), math.nan), np.zeros(0, dtype=bool)
    w = np.where(inside, power_w * duration_ns, 0.0)
    bad = np.bincount(member[inside], weights=~np.isfinite(w[inside]), minlength=len(span_ns)) > 0
    total = np.bincount(member[inside], weights=np.nan_to_num(w[inside]), minlength=len(span_ns))
    split = ~bad & (total > 0)
    share = np.full(len(member), math.nan)
    mine = inside & split[np.clip(member, 0, None)]
    share[mine] = w[mine] / total[member[mine]]
    return share, split


def busy_time(start: np.ndarray, end: np.ndarray) -> float:
    """Time (ns) some of the intervals ``[start, end)`` cover."""
    if not len(start):
        return 0.0
    a, b = merged_intervals(np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64))
    return float(np.sum(b - a))


def row_split(member: np.ndarray, share: np.ndarray, kernel_id: np.ndarray, span_ns: np.ndarray, power_w: float,
              half_w: float, sig_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of the kernel table: its executions in the spans, and their mean energy and half-width by the split.

    Parameters
    ----------
    member, share : numpy.ndarray
        Per execution, its span (-1: none) and its share of the span's energy (:func:`split_by_power`).
    kernel_id : numpy.ndarray
        Per execution, its signature id.
    span_ns : numpy.ndarray
        Per span, its duration.
    power_w, half_w : float
        The spans' mean power and its interval's half-width.
    sig_rows : numpy.ndarray
        Per row, its signature id.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Executions, mean energy (J) and half-width per row; NaN where a row
        has none split.
    """
    n_sig = int(max(int(kernel_id.max(initial=0)), int(sig_rows.max(initial=0)))) + 1
    inside = member >= 0
    count = np.bincount(kernel_id[inside], minlength=n_sig)
    ok = inside & np.isfinite(share)
    e = share[ok] * span_ns[member[ok]] * 1e-9
    n_split = np.bincount(kernel_id[ok], minlength=n_sig).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        energy = np.where(n_split > 0, np.bincount(kernel_id[ok], weights=e * power_w, minlength=n_sig) / n_split,
                          math.nan)
        half = np.where(n_split > 0, np.bincount(kernel_id[ok], weights=e * half_w, minlength=n_sig) / n_split,
                        math.nan)
    # The joint row [g] (signature -1) has no executions of its own in the spans.
    own = np.asarray(sig_rows) >= 0
    pick = np.where(own, sig_rows, 0)
    return (np.where(own, count[pick], 0), np.where(own, energy[pick], math.nan),
            np.where(own, half[pick], math.nan))


def span_power_from_class(energy_j: float, half_j: float, duration_ns: float) -> tuple[float, float]:
    """The spans' mean power and half-width from the joint fit's class of spans (energy over its mean duration)."""
    if not duration_ns > 0:
        return math.nan, math.nan
    return energy_j / (duration_ns * 1e-9), half_j / (duration_ns * 1e-9)


@dataclass(frozen=True)
class Spans:
    """The spans attributed (steady: past every signature's warm-up) and each execution's span in them."""

    start: np.ndarray
    end: np.ndarray
    member: np.ndarray
    #: Compute executions that overlapped another compute kernel, the warm-up's included.
    overlapped: np.ndarray

    def none(self) -> Spans:
        """These spans, none attributed (the executions that overlapped kept, for the counts)."""
        return Spans(self.start[:0], self.end[:0], np.full(len(self.member), -1, dtype=np.int64), self.overlapped)

    @property
    def duration_ns(self) -> np.ndarray:
        """Per span, its duration (ns)."""
        return np.asarray(self.end - self.start, dtype=np.float64)


def steady_spans(start: np.ndarray, end: np.ndarray, compute: np.ndarray, step_of: np.ndarray,
                 first_steady: int) -> Spans:
    """The spans of compute executions that overlap one another, those that hold a warm-up execution left out.

    Parameters
    ----------
    start, end : numpy.ndarray
        Per execution of the trace (ns).
    compute : numpy.ndarray of bool
        The compute executions of the device.
    step_of : numpy.ndarray
        Per execution, its iteration's step number (-1 outside one).
    first_steady : int
        The first step past every signature's warm-up (the int64 minimum: none).

    Returns
    -------
    Spans
    """
    s, e, member = concurrent_spans(start, end, compute)
    inside = member >= 0
    if not inside.any():
        return Spans(s, e, member, inside)
    early = np.bincount(member[inside], weights=step_of[inside] < first_steady, minlength=len(s)) > 0
    keep = np.flatnonzero(~early)
    remap = np.full(len(s), -1, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    out = np.where(inside, remap[np.clip(member, 0, None)], -1)
    return Spans(s[keep], e[keep], out, inside)


def concurrent_energy(spans: Spans, kernel_id: np.ndarray, start: np.ndarray, end: np.ndarray,
                      fit: tuple[float, float, int],
                      table_power_w: np.ndarray, sig_rows: np.ndarray, used: np.ndarray, on_device: np.ndarray,
                      compute: np.ndarray, how: str, note: str) -> ConcurrentEnergy:
    """The spans' energy, split among their executions by fitted power, with the counts the printout gives.

    Parameters
    ----------
    spans : Spans
    kernel_id, start, end : numpy.ndarray
        Per execution of the trace (ns).
    fit : (float, float, int)
        The spans' mean power (W), its interval's half-width and the logs behind it.
    table_power_w, sig_rows : numpy.ndarray
        Per row of the kernel table, its fitted power alone and its signature id.
    used : numpy.ndarray of bool
        Per execution, accounted for by a row (profiled alone past its warm-up, or a communication row).
    on_device, compute : numpy.ndarray of bool
        The device's executions, and its compute ones.
    how, note : str
        How the power was measured; what limits it.

    Returns
    -------
    ConcurrentEnergy
    """
    power, half, logs = fit
    p_sig = np.full(int(max(int(kernel_id.max(initial=0)), int(sig_rows.max(initial=0)))) + 1, math.nan)
    own = np.asarray(sig_rows) >= 0  # the joint row [g] has no signature of its own
    p_sig[sig_rows[own]] = np.asarray(table_power_w)[own]
    d = spans.duration_ns
    share, split = split_by_power(spans.member, (end - start).astype(np.float64), p_sig[kernel_id], d)
    rows = row_split(spans.member, share, kernel_id, d, power, half, sig_rows)
    total = float(np.sum(d))
    attributed = (spans.member >= 0) if math.isfinite(power) else np.zeros(len(kernel_id), dtype=bool)
    busy = busy_time(start[compute], end[compute])
    # The spans' share of the compute time: the warm-up's spans are compute time too, but not attributed.
    over = busy_time(start[spans.overlapped], end[spans.overlapped])
    return ConcurrentEnergy(
        executions=int(spans.overlapped.sum()), compute_executions=int(compute.sum()), spans=len(d), span_ns=total,
        busy_share=over / busy if busy > 0 else math.nan, power_w=power, power_half_width_w=half, energy_j=power * total * 1e-9,
        energy_half_width_j=half * total * 1e-9, logs=int(logs), row_executions=rows[0], row_energy_j=rows[1],
        row_half_width_j=rows[2], unsplit_spans=int(np.sum(~split)) if math.isfinite(power) else 0,
        used=int(np.sum((used | attributed) & on_device)), device_executions=int(on_device.sum()), how=how, note=note)
