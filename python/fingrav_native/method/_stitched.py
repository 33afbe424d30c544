"""The stitched profile of step 8 and the energy per execution integrated from it.

:func:`~fingrav_native.method` returns a :class:`StitchedProfile`,
one :class:`StitchedChannel` per power channel (binned means with their
intervals, and a smooth fit with its band); the deconvolution of windowed
logs returns the same types, so every consumer of a profile reads one shape.
:func:`energy_per_execution` integrates a channel over one execution (paper
Section IV-B step 8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterator, Literal, Optional, Union

import numpy as np
import scipy.stats

from fingrav_native._checks import positive_number, real_number
from fingrav_native._checks import readonly as _readonly
from fingrav_native._errors import FingravWarning

#: Where a profile places an LOI: ns from its execution's start, or a fraction of the execution's duration.
XAxis = Literal["time", "fraction"]


class LogQualityWarning(FingravWarning):
    """The logs are not independent measurements of a varying power (logs given twice, one value throughout)."""


#: The smooth fits :func:`~fingrav_native.method` makes (None: bins only).
Smoother = Literal["local", "poly4"]


#: The share of the LOIs in each local fit, or "auto" (chosen by generalised cross-validation).
Span = Union[float, Literal["auto"]]


@dataclass(frozen=True)
class StitchedChannel:
    """The stitched profile of one power channel.

    Attributes
    ----------
    name : str
        The channel (``"total"``, ``"compute"``, ``"io"``, ``"memory"``).
    x : str
        ``"time"`` (positions in ns from execution start) or ``"fraction"``
        (of the execution's duration).
    bin_edges : numpy.ndarray
        ``len(count) + 1`` bin edges.
    bin_centres : numpy.ndarray
        Bin centres.
    count : numpy.ndarray of int64
        LOIs with a finite value in each bin; empty bins are kept (count 0,
        mean NaN).
    mean, sd : numpy.ndarray
        Per-bin mean and sample standard deviation (NaN below 2 LOIs).
    ci_low, ci_high : numpy.ndarray
        Student-t confidence interval of each bin's mean at ``confidence``;
        NaN for bins with fewer than 2 LOIs.
    confidence : float
        Confidence level of the intervals.
    fit_kind : str or None
        ``"local"``, ``"poly4"`` (``"poly<d>"`` when fewer than 5 distinct
        positions forced a lower degree), or None when no fit was made.
    fit_x, fit_y : numpy.ndarray
        The smooth fit evaluated on a fine grid (empty when ``fit_kind`` is
        None).
    n_lois : int
        LOIs with a finite value in this channel.
    fit_low, fit_high : numpy.ndarray
        Simultaneous confidence band of the fit on ``fit_x`` at
        ``confidence``: it holds the whole curve at once, so a bump that
        fits inside it is not supported by the LOIs. NaN where the LOIs
        leave no degrees of freedom; empty without a fit (and in files
        written before the band existed).
    fit_span : float
        Share of the LOIs in each local window the fit used (chosen from
        the data with ``span="auto"``); NaN for a polynomial or no fit.
    """

    name: str
    x: str
    bin_edges: np.ndarray
    bin_centres: np.ndarray
    count: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    confidence: float
    fit_kind: Optional[str]
    fit_x: np.ndarray
    fit_y: np.ndarray
    n_lois: int
    fit_low: np.ndarray = field(default_factory=lambda: _readonly(np.empty(0)))
    fit_high: np.ndarray = field(default_factory=lambda: _readonly(np.empty(0)))
    fit_span: float = math.nan


@dataclass(frozen=True)
class StitchedProfile:
    """A stitched FinGraV profile: one :class:`StitchedChannel` per channel.

    Attributes
    ----------
    x : str
        ``"time"`` or ``"fraction"``.
    x_unit : str
        ``"ns"`` or ``"fraction"``.
    bin_width : float
        Bin width in ``x_unit``.
    channels : tuple of StitchedChannel
        In the order asked for.
    n_lois : int
        LOIs stitched.
    runs : numpy.ndarray
        Distinct run ids the LOIs came from.
    duration_ns : float
        Median duration of the executions the LOIs lie in.
    smoother : str or None
        The smoother asked for.
    span : float or str
        The span asked for: a share of the LOIs in each local fit, or
        ``"auto"`` (each channel's is in its ``fit_span``).
    weighted : bool
        Whether fits weighted LOIs by ``1 / uncertainty**2``.
    uncert_ns_median, uncert_ns_max : float
        Median and largest TOI placement uncertainty (the error budget).
    """

    x: str
    x_unit: str
    bin_width: float
    channels: tuple[StitchedChannel, ...]
    n_lois: int
    runs: np.ndarray
    duration_ns: float
    smoother: Optional[str]
    span: float | str
    weighted: bool
    uncert_ns_median: float
    uncert_ns_max: float

    def channel(self, name: str) -> StitchedChannel:
        """The channel called ``name``."""
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(f"name: no channel {name!r}; stitched: {[c.name for c in self.channels]}")

    def __getitem__(self, name: str) -> StitchedChannel:
        return self.channel(name)

    @property
    def channel_names(self) -> tuple[str, ...]:
        """Names of the stitched channels."""
        return tuple(c.name for c in self.channels)


@dataclass(frozen=True)
class EnergyEstimate:
    """Energy of one execution from a stitched profile.

    Unpacks as ``energy_j, uncertainty_j = energy_per_execution(...)``.

    Attributes
    ----------
    energy_j : float
        Energy of the execution (J).
    uncertainty_j : float
        Approximate half-width of its confidence interval (J), at the
        profile's confidence, widened by the bound on what interpolating
        empty bins may miss; NaN when no bin has 2 LOIs, or when one bin
        holds every LOI and others are empty.
    duration_ns : float
        The duration integrated over.
    channel : str
        The channel integrated.
    confidence : float
        Confidence level of ``uncertainty_j``.
    interpolated_share : float
        Share of the duration with no LOI (empty bins, or beyond the
        profile), whose power was interpolated from neighbouring bins.
    pooled_share : float
        Share of the duration whose interval used the pooled standard
        deviation (bins with fewer than 2 LOIs).
    note : str
        Empty, or what was interpolated or pooled.
    """

    energy_j: float
    uncertainty_j: float
    duration_ns: float
    channel: str
    confidence: float
    interpolated_share: float
    pooled_share: float
    note: str

    def __iter__(self) -> Iterator[float]:
        yield self.energy_j
        yield self.uncertainty_j


#: The longest execution a profile describes: a day, ns.
MAX_DURATION_NS = 86_400e9


def _interpolation_bound(power: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Per segment, the most an interpolated power can be off (W): 0 where a bin has LOIs.

    Between two bins with LOIs the power is taken to stay within their means (a monotone stretch: a step or
    a ramp anywhere in the gap); beyond the outermost bins with LOIs, within the range of every bin's mean.
    A bump that no LOI touches is outside any bound the LOIs can give.
    """
    idx = np.flatnonzero(has)
    seg = np.arange(len(power))
    # Nearest bin with LOIs on each side of every segment (-1 / len(idx): none that side).
    right = np.searchsorted(idx, seg)
    left = right - 1
    inner = (left >= 0) & (right < len(idx))
    a = power[idx[np.clip(left, 0, len(idx) - 1)]]
    b = power[idx[np.clip(right, 0, len(idx) - 1)]]
    lo = np.where(inner, np.minimum(a, b), float(np.min(power[idx])))
    hi = np.where(inner, np.maximum(a, b), float(np.max(power[idx])))
    return np.where(has, 0.0, np.maximum(power - lo, hi - power))


def _half_widths(ch: StitchedChannel, count: np.ndarray, half_bin: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Each segment's interval half-width (its bin's; the pooled sd's where it holds fewer than 2 LOIs), the pooled
    degrees of freedom, and which segments use the pooled sd."""
    sd = np.asarray(ch.sd, dtype=np.float64)
    multi = np.asarray(ch.count) >= 2
    dof = int(np.sum(np.asarray(ch.count)[multi] - 1))
    pooled = count < 2
    if dof > 0:
        s_p = math.sqrt(float(np.sum((np.asarray(ch.count)[multi] - 1) * sd[multi] ** 2)) / dof)
        t = float(scipy.stats.t.ppf(0.5 * (1.0 + ch.confidence), dof))
        half = np.where(pooled, t * s_p / np.sqrt(np.maximum(count, 1)), half_bin)
    else:
        half = np.full(count.shape, np.nan)
    return half, dof, pooled


def energy_per_execution(stitched_channel: StitchedChannel, duration_ns: float, *,
                         duration_err_ns: float = 0.0) -> EnergyEstimate:
    """Integrate a stitched channel's binned mean power over one execution.

    Parameters
    ----------
    stitched_channel : StitchedChannel
        One channel of :func:`~fingrav_native.method`'s result (watts).
    duration_ns : float
        The execution's duration (ns), e.g. the golden bin's centre.
    duration_err_ns : float
        Half-width of that duration's own error (ns, 0 to a day): the
        execution markers' start plus end error. Default 0 (a duration
        known exactly).

    Returns
    -------
    EnergyEstimate
        Energy (J) and its uncertainty (J); unpacks as a pair.

    Raises
    ------
    ValueError
        ``stitched_channel`` is not a StitchedChannel or has no LOI;
        ``duration_ns`` is not positive and finite.

    Notes
    -----
    1. Cut ``[0, duration_ns]`` at the bin edges (fraction edges are scaled
       by ``duration_ns``); a part beyond the last edge is one more,
       empty, segment.
    2. Each segment's power is its bin's mean; an empty bin's is
       interpolated linearly between the nearest non-empty bin centres
       (held constant beyond the outermost ones), and its share reported.
       What interpolation may miss is bounded by taking the power of an
       empty bin to lie between the means of the bins with LOIs either
       side of it (a step or a ramp anywhere in the gap), and beyond the
       outermost ones within the range of all bins' means: per segment,
       ``b = max(P - lo, hi - P)``.
    3. Each segment's interval half-width is its bin's (``(ci_high -
       ci_low) / 2``); for bins with fewer than 2 LOIs, ``t * s_p /
       sqrt(max(n, 1))`` with ``s_p`` the standard deviation pooled over
       the bins with 2 or more (``t`` at the pooled degrees of freedom).
    4. ``energy = sum(P_b * L_b)`` and ``uncertainty = sqrt(sum((h_b *
       L_b)**2)) + sum(b_b * L_b)`` over segment lengths ``L_b`` (bins are
       independent samples; an interpolation's error has one sign across
       a gap, so its bound adds linearly), plus ``max|P| *
       duration_err_ns`` (the markers' error, the same in every run),
       converted from W*ns to J. It leaves out the logger's own error and
       a bump that no LOI touches. Coverage is measured, not assumed:
       ``tests/method/test_interval_coverage.py`` (closed-form curves, LOIs
       at random phases, most of the execution interpolated or none).

    Examples
    --------
    >>> import numpy as np
    >>> from fingrav_native.method import stitch
    >>> from fingrav_native.records import LOI_DTYPE
    >>> lois = np.zeros(4, dtype=LOI_DTYPE)
    >>> lois["toi_ns"] = [1_000, 3_000, 12_000, 14_000]
    >>> lois["duration_ns"] = 20_000
    >>> lois["total"] = [100, 100, 200, 200]
    >>> ch = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)["total"]
    >>> e, u = energy_per_execution(ch, 20_000)   # 100 W * 10 us + 200 W * 10 us
    >>> round(e * 1e3, 9), u
    (3.0, 0.0)
    """
    if not isinstance(stitched_channel, StitchedChannel):
        raise ValueError(
            f"stitched_channel: must be a StitchedChannel (one channel of stitch()), got {type(stitched_channel).__name__}"
        )
    # An execution of more than a day is no kernel's (and its energy would overflow).
    dur = positive_number(duration_ns, "duration_ns", upper=MAX_DURATION_NS)
    dur_err = real_number(duration_err_ns, "duration_err_ns", low=0.0, high=MAX_DURATION_NS)
    ch = stitched_channel
    edges = np.asarray(ch.bin_edges, dtype=np.float64) * (dur if ch.x == "fraction" else 1.0)
    count = np.asarray(ch.count, dtype=np.int64)
    mean = np.asarray(ch.mean, dtype=np.float64)
    has = (count > 0) & np.isfinite(mean)
    if not has.any():
        raise ValueError(f"stitched_channel: channel {ch.name!r} has no LOI; no power to integrate")
    lo, hi = edges[:-1], edges[1:]
    centres = 0.5 * (lo + hi)
    if edges[-1] < dur:  # the profile ends before the execution does
        lo, hi = np.append(lo, edges[-1]), np.append(hi, dur)
        centres = np.append(centres, 0.5 * (edges[-1] + dur))
        count, mean, has = np.append(count, 0), np.append(mean, np.nan), np.append(has, False)
        half_bin = np.append(0.5 * (ch.ci_high - ch.ci_low), np.nan)
    else:
        half_bin = 0.5 * (np.asarray(ch.ci_high, dtype=np.float64) - np.asarray(ch.ci_low, dtype=np.float64))
    length = np.clip(np.minimum(hi, dur) - np.maximum(lo, 0.0), 0.0, None)
    power = np.where(has, mean, np.interp(centres, centres[has], mean[has]))

    half, dof, pooled = _half_widths(ch, count, half_bin)
    energy = float(np.sum(power * length)) * 1e-9
    interp_bound = float(np.sum(_interpolation_bound(power, has) * length)) * 1e-9
    # The statistical half-width covers the noise of the bin means; what interpolation misses is a bias
    # (the same sign across a gap), so its bound adds to the interval, not in quadrature.
    # A duration too long or too short by the markers' error adds or drops that much of the execution's power;
    # the error is the same in every golden run, so it adds linearly too.
    duration_bound = float(np.max(np.abs(power[length > 0]))) * dur_err * 1e-9
    uncertainty = float(np.sqrt(np.sum((half * length) ** 2))) * 1e-9 + interp_bound + duration_bound
    interp_share = float(np.sum(length[~has]) / dur)
    pooled_share = float(np.sum(length[pooled & (length > 0)]) / dur)
    notes = []
    if interp_share > 0:
        notes.append(f"{interp_share:.1%} of the execution has no LOI; its power was interpolated, and the "
                     f"interval adds {interp_bound * 1e3:.4g} mJ for it (the power there taken to lie between the "
                     "neighbouring bins' means; beyond the outermost LOIs, in their range)")
    if duration_bound > 0:
        notes.append(f"the interval adds {duration_bound * 1e3:.4g} mJ for the duration's marker error "
                     f"(+-{dur_err:.4g} ns)")
    if interp_share > 0 and int(np.count_nonzero(has)) < 2:
        # One bin's LOIs say nothing of how the power varies elsewhere: no range bounds the interpolation.
        uncertainty = math.nan
        notes.append("every LOI is in one bin, so nothing bounds the power of the rest: uncertainty_j is NaN")
    if dof == 0:
        notes.append("no bin has 2 LOIs, so there is no interval: uncertainty_j is NaN")
    elif pooled_share > 0:
        notes.append(f"{pooled_share:.1%} of the execution is in bins with < 2 LOIs; their interval uses the pooled sd")
    return EnergyEstimate(
        energy_j=energy,
        uncertainty_j=uncertainty,
        duration_ns=dur,
        channel=ch.name,
        confidence=ch.confidence,
        interpolated_share=interp_share,
        pooled_share=pooled_share,
        note="; ".join(notes),
    )

