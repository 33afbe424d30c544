"""What a deconvolution of windowed logs yields, and the same as a stitched profile.

:func:`~fingrav_native.method.deconvolve` returns a :class:`Deconvolution`
(one :class:`DeconvolvedChannel` per power channel); :func:`as_stitched`
gives it the shape of a stitched profile with its energies, which is what
every consumer of a profile (files, plots, the CLI) reads. The joint fit of
an application's timeline fills the same types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import choice, instance_of, positive_number
from fingrav_native.method._engine_check import ModelCheck
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile, XAxis
from fingrav_native.sensors._model import SensorModel


@dataclass(frozen=True)
class DeconvolvedChannel:
    """One channel's recovered curve of the execution of interest.

    Attributes
    ----------
    name : str
        The channel.
    curve : numpy.ndarray
        Power (W) in each bin of execution progress.
    low, high : numpy.ndarray
        Bootstrap percentile band at ``confidence``.
    sd : numpy.ndarray
        Bootstrap standard deviation per bin.
    lam : float
        Smoothing parameter chosen by GCV (relative to the data's scale).
    edf : float
        Effective degrees of freedom of the fit (trace of the hat matrix).
    residual_w : float
        RMS residual of the logs (W): the sensor's noise plus model error.
    energy_j, energy_half_width_j : float
        Energy per execution (J) and the half-width of its bootstrap interval.
    idle_w : float
        The idle level before the runs (a nuisance term).
    levels_w : dict
        Level of each other execution index relative to the curve's mean
        (same kernel) or absolute (other kernels), and the cooling tail.
    floor_sd : numpy.ndarray
        Per bin, the standard error an unbiased, unsmoothed estimate would
        have at these bins from these logs (the Cramer-Rao bound for white
        noise): what the logs can resolve. A band far below it is the
        smoothing's doing (bias traded for variance); ``inf`` where the
        logs do not determine a bin.
    """

    name: str
    curve: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sd: np.ndarray
    lam: float
    edf: float
    residual_w: float
    energy_j: float
    energy_half_width_j: float
    idle_w: float
    levels_w: dict[str, float]
    floor_sd: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True)
class Deconvolution:
    """The curve of an execution of interest recovered from windowed logs.

    Attributes
    ----------
    bin_edges : numpy.ndarray
        Edges of the curve's bins as fractions of the execution (0 to 1).
    duration_ns : float
        Median duration of the execution of interest in the golden runs.
    channels : tuple of DeconvolvedChannel
    resolution_ns : float
        Median equivalent width of the resolution kernel's rows: the finest
        feature the data resolve (a bin width when they resolve every bin).
    resolution_ns_per_bin : numpy.ndarray
        The same, per bin.
    n_logs : int
        Logs whose response reaches a golden run (used).
    logs_per_bin : numpy.ndarray
        Logs whose response reaches each bin of the curve (in any execution
        of the kernel).
    n_runs : int
        Golden runs that contributed a log.
    run_ids : numpy.ndarray
        Their ids.
    edge_logs : int
        Logs with a window edge (or a filter's end) inside an execution of
        the kernel: where the curve's shape comes from (assumption 1).
    dropped_logs : int
        Logs left out because their response also covers another run.
    confidence : float
    confidence_note : str
        How the band was made.
    assumptions : tuple of str
    warnings : tuple of str
        What the data could not support (resolution coarser than asked, too
        few edges, an energy the logs do not determine) and the assumptions
        the model check rejects, empty when none.
    sensor : SensorModel
    model : str
        The model cross-validation chose (gaps, warm-up), in words.
    check : ModelCheck or None
        What the residuals say about the assumptions.
    bins_asked : int
        The bins asked for (the curve has fewer where the logs hold too few
        window edges).
    info_share : float
        The share of the energy's precision the logs supply (below 0.1: the
        energy is not determined by them).
    """

    bin_edges: npt.NDArray[np.float64]
    duration_ns: float
    channels: tuple[DeconvolvedChannel, ...]
    resolution_ns: float
    resolution_ns_per_bin: np.ndarray
    n_logs: int
    logs_per_bin: np.ndarray
    n_runs: int
    run_ids: np.ndarray
    edge_logs: int
    dropped_logs: int
    confidence: float
    confidence_note: str
    assumptions: tuple[str, ...]
    warnings: tuple[str, ...]
    sensor: SensorModel
    model: str = ""
    check: Optional[ModelCheck] = None
    bins_asked: int = 0
    info_share: float = math.nan

    def channel(self, name: str) -> DeconvolvedChannel:
        """The channel called ``name``."""
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(f"name: no channel {name!r}; deconvolved: {[c.name for c in self.channels]}")

    def __getitem__(self, name: str) -> DeconvolvedChannel:
        return self.channel(name)

    @property
    def bin_centres(self) -> np.ndarray:
        """Bin centres as fractions of the execution."""
        return 0.5 * (self.bin_edges[:-1] + self.bin_edges[1:])



def as_stitched(dec: Deconvolution, *, x: XAxis = "time", uncert_ns_median: float = math.nan,
                uncert_ns_max: float = math.nan) -> tuple[StitchedProfile, dict[str, EnergyEstimate]]:
    """A deconvolution as the stitched profile and energies every consumer of a profile reads.

    Parameters
    ----------
    dec : Deconvolution
    x : {"time", "fraction"}
        Bin positions in ns from the execution's start, or as fractions.
    uncert_ns_median, uncert_ns_max : float
        The profile's TOI placement budget (clock map and markers).

    Returns
    -------
    (StitchedProfile, dict of EnergyEstimate)
        Each channel's bins hold the recovered curve (``mean``), the
        bootstrap band (``ci_low``, ``ci_high``) and standard deviation
        (``sd``), and ``count`` the logs whose response reaches the bin;
        ``fit_kind`` is ``"deconvolution"`` with the curve as the fit.
        Energies carry the bootstrap half-width.
    """
    instance_of(dec, "dec", Deconvolution, "a Deconvolution (from deconvolve)")
    choice(x, "x", ("time", "fraction"))
    for name, v in (("uncert_ns_median", uncert_ns_median), ("uncert_ns_max", uncert_ns_max)):
        if not (isinstance(v, float) and math.isnan(v)):  # NaN: not known
            positive_number(v, name, allow_zero=True)
    scale = dec.duration_ns if x == "time" else 1.0
    edges = np.asarray(dec.bin_edges, dtype=np.float64) * scale
    centres = 0.5 * (edges[:-1] + edges[1:])
    chans = []
    energy: dict[str, EnergyEstimate] = {}
    for c in dec.channels:
        chans.append(StitchedChannel(
            name=c.name, x=x, bin_edges=edges, bin_centres=centres, count=np.asarray(dec.logs_per_bin, np.int64),
            mean=c.curve, sd=c.sd, ci_low=c.low, ci_high=c.high, confidence=dec.confidence,
            fit_kind="deconvolution", fit_x=centres, fit_y=c.curve, n_lois=dec.n_logs))
        energy[c.name] = EnergyEstimate(
            energy_j=c.energy_j, uncertainty_j=c.energy_half_width_j, duration_ns=dec.duration_ns, channel=c.name,
            confidence=dec.confidence, interpolated_share=0.0, pooled_share=0.0,
            note=f"deconvolution of windowed logs; {dec.confidence_note}")
    prof = StitchedProfile(
        x=x, x_unit="ns" if x == "time" else "fraction", bin_width=float(edges[1] - edges[0]),
        channels=tuple(chans), n_lois=dec.n_logs, runs=dec.run_ids, duration_ns=dec.duration_ns,
        smoother="deconvolution", span=math.nan, weighted=False, uncert_ns_median=uncert_ns_median,
        uncert_ns_max=uncert_ns_max)
    return prof, energy
