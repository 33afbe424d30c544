"""The memory / rest split of a profile where the device reports memory power but no other component.

An NVIDIA GPU reports its total power and, where NVML has ``NVML_POWER_SCOPE_MEMORY`` (Hopper), its
memory's, in one poll; it has no compute or IO rail of its own. The profile's per-component curves then
carry ``"memory"`` and ``"rest"`` (total minus memory): the compute / memory split CompPow makes of a
kernel's power, read from the sensors instead of modelled. A device that splits its power itself (the
simulator, AMD's compute and IO channels) keeps its own channels and gets no ``"rest"``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from fingrav_native._checks import readonly
from fingrav_native.method._stitched import EnergyEstimate, StitchedChannel, StitchedProfile

#: The derived channel: total minus memory.
REST = "rest"

#: What the rest's intervals are, for its energy's note.
REST_NOTE = ("total minus memory; its interval runs from the total's low end minus the memory's high end to the "
             "total's high end minus the memory's low end, so it covers whenever both do")


def _finite(ch: Optional[StitchedChannel]) -> bool:
    return ch is not None and bool(np.isfinite(np.asarray(ch.mean, dtype=np.float64)).any())


def _named(stitched: StitchedProfile, name: str) -> Optional[StitchedChannel]:
    return next((c for c in stitched.channels if c.name == name), None)


def splits_memory(stitched: StitchedProfile) -> bool:
    """Whether ``stitched`` has total and memory power and no other component (no ``"rest"`` yet)."""
    total, memory = _named(stitched, "total"), _named(stitched, "memory")
    others = any(_finite(_named(stitched, n)) for n in ("compute", "io"))
    return _finite(total) and _finite(memory) and not others and _named(stitched, REST) is None


def _difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return readonly(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))


def rest_channel(total: StitchedChannel, memory: StitchedChannel) -> Optional[StitchedChannel]:
    """Total minus memory, bin by bin and on the fit's grid; None where the two are not on one axis.

    Parameters
    ----------
    total, memory : StitchedChannel
        The two channels of one stitched profile (paper Section IV-B step 8), on the same bins.

    Returns
    -------
    StitchedChannel or None
        ``"rest"``: each bin's mean and the fit the total's minus the memory's, so memory plus rest is
        the total to rounding. Its interval spans ``total.ci_low - memory.ci_high`` to ``total.ci_high -
        memory.ci_low`` (it covers whenever both intervals do; the two are not independent, memory being
        part of the total); its ``sd`` is ``sqrt(sd_total**2 + sd_memory**2)``, the spread of a difference
        of two readings that do not vary against each other. A bin counts the LOIs both channels have.
    """
    same_bins = np.array_equal(np.asarray(total.bin_edges), np.asarray(memory.bin_edges))
    same_fit = np.array_equal(np.asarray(total.fit_x), np.asarray(memory.fit_x))
    if total.x != memory.x or not same_bins:
        return None
    fit = same_fit and total.fit_kind is not None and memory.fit_kind is not None
    band = fit and len(total.fit_low) == len(total.fit_x) and len(memory.fit_high) == len(memory.fit_x)
    empty = readonly(np.empty(0))
    return StitchedChannel(
        name=REST, x=total.x, bin_edges=total.bin_edges, bin_centres=total.bin_centres,
        count=readonly(np.minimum(np.asarray(total.count), np.asarray(memory.count))),
        mean=_difference(total.mean, memory.mean),
        sd=readonly(np.hypot(np.asarray(total.sd, dtype=np.float64), np.asarray(memory.sd, dtype=np.float64))),
        ci_low=_difference(total.ci_low, memory.ci_high), ci_high=_difference(total.ci_high, memory.ci_low),
        confidence=total.confidence, fit_kind=total.fit_kind if fit else None,
        fit_x=total.fit_x if fit else empty, fit_y=_difference(total.fit_y, memory.fit_y) if fit else empty,
        n_lois=min(total.n_lois, memory.n_lois),
        fit_low=_difference(total.fit_low, memory.fit_high) if band else empty,
        fit_high=_difference(total.fit_high, memory.fit_low) if band else empty,
        fit_span=total.fit_span if fit else math.nan)


def rest_energy(total: EnergyEstimate, memory: EnergyEstimate) -> EnergyEstimate:
    """The rest's energy per execution: the total's minus the memory's, the half-widths added (covers when both do).

    Parameters
    ----------
    total, memory : EnergyEstimate
        The two channels' energies of one execution of interest (paper Section IV-B step 8).

    Returns
    -------
    EnergyEstimate
        Channel ``"rest"``.
    """
    notes = "; ".join(n for n in (REST_NOTE, total.note, memory.note) if n)
    return EnergyEstimate(
        energy_j=total.energy_j - memory.energy_j, uncertainty_j=total.uncertainty_j + memory.uncertainty_j,
        duration_ns=total.duration_ns, channel=REST, confidence=total.confidence,
        interpolated_share=max(total.interpolated_share, memory.interpolated_share),
        pooled_share=max(total.pooled_share, memory.pooled_share), note=notes)


def with_rest(stitched: StitchedProfile,
              energy: dict[str, EnergyEstimate]) -> tuple[StitchedProfile, dict[str, EnergyEstimate]]:
    """``stitched`` and ``energy`` with the ``"rest"`` channel where the device reports memory and nothing else.

    Parameters
    ----------
    stitched : StitchedProfile
        A stitched (or deconvolved) profile (paper Section IV-B step 8).
    energy : dict of str to EnergyEstimate
        Its energy per execution, by channel.

    Returns
    -------
    (StitchedProfile, dict)
        Unchanged unless :func:`splits_memory`; then with ``"rest"`` (total minus memory) after the other
        channels and, where both energies are there, its energy.
    """
    if not splits_memory(stitched):
        return stitched, energy
    total, memory = _named(stitched, "total"), _named(stitched, "memory")
    assert total is not None and memory is not None  # splits_memory found both
    rest = rest_channel(total, memory)
    if rest is None:
        return stitched, energy
    out = dataclasses.replace(stitched, channels=stitched.channels + (rest,))
    if "total" in energy and "memory" in energy:
        energy = {**energy, REST: rest_energy(energy["total"], energy["memory"])}
    return out, energy
