"""Result types of a many-GPU campaign: the merged node profile and its parts.

Below both the drivers (:mod:`fingrav_native.multi`) and the file layer
(:mod:`fingrav_native.files`), so a node profile is saved and loaded without
importing the drivers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from fingrav_native.clocks._host import HostAlignment
from fingrav_native.method._results import CampaignTimeline, Profile

CHANNELS = ("total", "compute", "io", "memory")


@dataclass(frozen=True)
class SteadyCheck:
    """Whether a rank's SSE and SSP profiles coincide (paper Section V-D found they do for collectives).

    Attributes
    ----------
    coincide : bool
        True when the SSP search stopped at the SSE execution, or when the
        two executions' mean total power differ by less than ``z`` standard
        errors and less than ``tolerance`` of the SSE power.
    sse_w, ssp_w : float
        Mean total power of the two executions' LOIs, W.
    stderr_w : float
        Standard error of their difference, W.
    ssp_execution : int
        Index of the SSP execution within a run.
    reason : str
        One line saying why.
    """

    coincide: bool
    sse_w: float
    ssp_w: float
    stderr_w: float
    ssp_execution: int
    reason: str


@dataclass(frozen=True)
class NodeView:
    """The node's power over one execution of interest: every rank's stitched curve, and their sum.

    Attributes
    ----------
    label : str
        ``"sse"`` or ``"ssp"``.
    fraction : numpy.ndarray
        Grid of execution progress, 0 to 1 (ranks' executions differ in
        length by their arrival skew, so they are compared by progress).
    per_rank : dict of str to numpy.ndarray
        Per channel, a ``(ranks, len(fraction))`` array of each rank's
        smooth fit (NaN where a rank has none).
    total : dict of str to numpy.ndarray
        Per channel, the sum over ranks (NaN where any rank is unknown: a
        node sum with a rank missing would look like a power drop).
    duration_ns : numpy.ndarray
        Each rank's golden-bin median duration of the execution.
    energy_j, energy_uncertainty_j : dict of str to float
        Per channel, the node's energy per execution (sum over ranks) and
        its uncertainty (ranks' uncertainties in quadrature).
    """

    label: str
    fraction: np.ndarray
    per_rank: dict[str, np.ndarray]
    total: dict[str, np.ndarray]
    duration_ns: np.ndarray
    energy_j: dict[str, float]
    energy_uncertainty_j: dict[str, float]


@dataclass(frozen=True)
class NodeProfile:
    """Every rank's profile of one kernel, on the root's host timeline (paper Section V-D).

    Attributes
    ----------
    kernel : str
        The kernel (collective) profiled.
    root : int
        The rank whose host clock is the timeline.
    ranks : tuple of Profile
        Each rank's own profile, on its own host clock, as it made it.
    alignments : tuple of dict
        Each rank's :class:`~fingrav_native.clocks.HostAlignment`
        (``as_dict()``; see :meth:`alignment`).
    shares_host_clock : tuple of bool
        Whether each rank reads the root's very clock (same host and boot).
    timelines : tuple of CampaignTimeline
        Each rank's executions and logs placed on the root's host clock;
        execution start/end errors include the alignment bound.
    lois : tuple of numpy.ndarray
        Each rank's LOIs (LOI_DTYPE) of every execution of interest with
        ``host_ns`` on the root's clock and ``uncert_ns`` grown by the
        alignment bound; field ``execution`` as in the rank's profile.
    alignment_bound_ns : numpy.ndarray
        Per rank, the largest alignment bound over its campaign, ns.
    node : dict of str to NodeView
        The node's power per execution of interest.
    steady : tuple of SteadyCheck or None
        Per rank, whether SSE and SSP coincide (None without both).
    """

    kernel: str
    root: int
    ranks: tuple[Profile, ...]
    alignments: tuple[dict[str, Any], ...]
    shares_host_clock: tuple[bool, ...]
    timelines: tuple[CampaignTimeline, ...]
    lois: tuple[np.ndarray, ...]
    alignment_bound_ns: np.ndarray
    node: dict[str, NodeView]
    steady: tuple[Optional[SteadyCheck], ...]

    def alignment(self, rank: int) -> HostAlignment:
        """Rank ``rank``'s host alignment as an object."""
        return HostAlignment.from_dict(self.alignments[rank])

    def __repr__(self) -> str:
        n = len(self.ranks)
        shared = sum(bool(s) for s in self.shares_host_clock)
        clocks = ("one host clock" if shared == n else
                  f"{n - shared} of {n} ranks on other host clocks, aligned within "
                  f"{float(np.max(self.alignment_bound_ns)) / 1e3:.1f} us")
        lines = [f"NodeProfile({self.kernel!r} on {n} ranks, root {self.root}: {clocks})"]
        for label, view in self.node.items():
            e, u = view.energy_j.get("total", math.nan), view.energy_uncertainty_j.get("total", math.nan)
            lines.append(f"  node {label}: {len(view.duration_ns)} ranks, duration "
                         f"{np.min(view.duration_ns) / 1e3:.1f}-{np.max(view.duration_ns) / 1e3:.1f} us, "
                         f"node energy {e * 1e3:.3f} +- {u * 1e3:.3f} mJ per execution")
        for r, chk in enumerate(self.steady):
            if chk is not None:
                lines.append(f"  rank {r}: SSE {'=' if chk.coincide else '!='} SSP ({chk.reason})")
        return "\n".join(lines)
