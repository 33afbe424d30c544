"""Many GPUs: one profile per rank of a collective, merged onto one timeline (paper Section V-D).

The paper profiles all-gather and all-reduce on an 8-GPU node with the same
method as a single kernel: golden runs over the collective's execution time
as each GPU sees it, and, for collectives, SSE and SSP coincide. Here:

* every rank profiles its own GPU with :func:`~fingrav_native.profile`
  (its own sampler, clock sync and markers), the campaign decisions taken
  once for all ranks through an :class:`~fingrav_native.method.Agreement`
  so that every rank runs the same runs;
* each rank's host clock is placed on the root's
  (:mod:`fingrav_native.clocks`, bracketed exchanges before and after
  the campaign) with an error bound, or taken as the root's when they share
  a clock (same host, same boot);
* :func:`merge_ranks` puts every rank's executions, logs and LOIs on the
  root's host timeline, adds the alignment bound to each rank's error
  budget, sums the ranks' stitched curves into the node's power, and checks
  per rank whether SSE and SSP coincide (detected, not assumed).

Drivers: :func:`profile_node` (one process driving several local GPUs, one
thread per GPU) and :func:`profile_distributed` (one process per GPU, as
torchrun starts them, over ``torch.distributed``).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import fraction, instance_of, integer_in, positive_number, short_repr
from fingrav_native.clocks._host import HostAlignment
from fingrav_native.method._results import CampaignTimeline, ExecutionProfile, Profile
from fingrav_native.multi._results import CHANNELS, NodeProfile, NodeView, SteadyCheck


def check_steady_states(prof: Profile, *, z: float = 3.0, tolerance: float = 0.02) -> Optional[SteadyCheck]:
    """Detect whether SSE and SSP coincide for a profile made with ``mode="both"``.

    Parameters
    ----------
    prof : Profile
        A profile holding both ``"sse"`` and ``"ssp"`` (else None is returned).
    z : float
        Standard errors within which the two mean powers count as equal.
    tolerance : float
        Relative difference below which they count as equal even when the
        LOIs are many enough to resolve it (a 1 % step is not a new state).

    Returns
    -------
    SteadyCheck or None

    Notes
    -----
    Section IV-A defines SSE (execution time settled, the fourth
    execution) and SSP (power settled, found by the binary search); Section
    V-D observes that for collectives they coincide. A profiler should show
    that rather than assume it: a collective on a busy fabric, or a reduction
    heavy enough to heat the dies, may not.
    """
    instance_of(prof, "prof", Profile, "a Profile")
    positive_number(z, "z")
    fraction(tolerance, "tolerance")
    if not {"sse", "ssp"} <= set(prof.profiles):
        return None
    sse, ssp = prof.profiles["sse"], prof.profiles["ssp"]
    if ssp.execution_index == sse.execution_index:
        w = float(np.mean(sse.lois["total"])) if len(sse.lois) else math.nan
        return SteadyCheck(True, w, w, 0.0, int(ssp.execution_index),
                           "the SSP search settled on the SSE execution itself")
    a, b = sse.lois["total"].astype(np.float64), ssp.lois["total"].astype(np.float64)
    if len(a) < 2 or len(b) < 2:
        return SteadyCheck(False, math.nan, math.nan, math.inf, int(ssp.execution_index),
                           "too few LOIs to compare SSE and SSP")
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    diff = float(b.mean() - a.mean())
    same = abs(diff) <= z * se or abs(diff) <= tolerance * abs(float(a.mean()))
    reason = (f"SSP - SSE = {diff:+.1f} W, {abs(diff) / se if se > 0 else math.inf:.1f} standard errors "
              f"({100 * diff / float(a.mean()):+.1f} %): " + ("the same state" if same else "different states"))
    return SteadyCheck(bool(same), float(a.mean()), float(b.mean()), se, int(ssp.execution_index), reason)


def _curve(ep: ExecutionProfile, channel: str, grid: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    ch = next((c for c in ep.stitched.channels if c.name == channel), None)
    if ch is None:
        return np.full(len(grid), np.nan)
    if ch.fit_kind is not None and len(ch.fit_x):
        x, y = np.asarray(ch.fit_x, dtype=np.float64), np.asarray(ch.fit_y, dtype=np.float64)
    else:
        ok = np.isfinite(ch.mean)
        x, y = np.asarray(ch.bin_centres, dtype=np.float64)[ok], np.asarray(ch.mean, dtype=np.float64)[ok]
    if len(x) < 2:
        return np.full(len(grid), np.nan)
    if ch.x == "time":
        x = x / ep.duration_ns
    return np.interp(grid, x, y, left=np.nan, right=np.nan)


def _node_view(label: str, eps: Sequence[ExecutionProfile], grid: npt.NDArray[np.float64]) -> NodeView:
    per_rank = {ch: np.stack([_curve(ep, ch, grid) for ep in eps]) for ch in CHANNELS}
    # Channels no rank's logger reports are left out, not summed into zeros.
    per_rank = {ch: v for ch, v in per_rank.items() if np.isfinite(v).any()}
    total = {ch: v.sum(axis=0) for ch, v in per_rank.items()}
    energy, unc = {}, {}
    for ch in per_rank:
        parts = [ep.energy[ch] for ep in eps if ch in ep.energy]
        if len(parts) == len(eps):
            energy[ch] = float(math.fsum(p.energy_j for p in parts))
            unc[ch] = float(math.sqrt(math.fsum(p.uncertainty_j ** 2 for p in parts)))
    return NodeView(label, grid, per_rank, total, np.array([ep.duration_ns for ep in eps]), energy, unc)


def _on_root(tl: CampaignTimeline, al: HostAlignment) -> CampaignTimeline:
    ex = tl.executions.copy()
    for end in ("start", "end"):
        local = tl.executions[f"{end}_ns"]
        ex[f"{end}_ns"] = al.to_root_ns(local)
        ex[f"{end}_err_ns"] = tl.executions[f"{end}_err_ns"] + al.error_bound_ns(local)
    logs = tl.logs.copy()
    logs["host_ns"] = al.to_root(tl.logs["host_ns"])
    return CampaignTimeline(executions=ex, logs=logs, golden_runs=tl.golden_runs.copy())


def _alignment_of(prof: Profile, rank: int) -> HostAlignment:
    d = prof.settings.get("host_alignment")
    if d is None:
        raise ValueError(f"alignments: not given, and rank {rank}'s profile carries no settings['host_alignment'] "
                         "(profile_distributed records it); pass the ranks' HostAlignment objects")
    return HostAlignment.from_dict(d)


def merge_ranks(
    profiles: Sequence[Profile],
    alignments: Optional[Sequence[HostAlignment]] = None,
    *,
    root: int = 0,
    grid_points: int = 201,
) -> NodeProfile:
    """Merge one profile per rank into a node profile on the root's host timeline.

    Parameters
    ----------
    profiles : sequence of Profile
        Rank ``r``'s profile at position ``r``, all of the same kernel and
        mode (made with :func:`profile_distributed` or :func:`profile_node`,
        or saved per rank and loaded back).
    alignments : sequence of HostAlignment, optional
        Rank ``r``'s host clock against the root's; default: each profile's
        ``settings["host_alignment"]``.
    root : int
        The rank whose host clock is the timeline.
    grid_points : int
        Points of the node view's progress grid.

    Returns
    -------
    NodeProfile

    Notes
    -----
    Section V-D: the node's collectives profiled per GPU with the same
    methodology. Each rank keeps its own golden runs (the collective's
    execution time as that rank sees it, arrival skew included); the
    merged timeline and LOIs carry each rank's alignment bound on top of its
    own error budget, so a feature is compared across ranks only to within
    the sum of their bounds.
    """
    if isinstance(profiles, (str, bytes, dict, Profile)) or not hasattr(profiles, "__iter__"):
        raise ValueError(f"profiles={short_repr(profiles)}: must be a sequence of Profile, one per rank")
    profs = list(profiles)
    if not profs:
        raise ValueError("profiles: at least one rank's profile is needed")
    if not all(isinstance(p, Profile) for p in profs):
        raise ValueError("profiles: every entry must be a Profile")
    integer_in(root, "root", 0, len(profs) - 1)
    kernels = {p.kernel for p in profs}
    if len(kernels) != 1:
        raise ValueError(f"profiles: ranks profiled different kernels {sorted(kernels)}")
    labels = [set(p.profiles) for p in profs]
    if any(ls != labels[0] for ls in labels):
        raise ValueError("profiles: ranks profiled different executions of interest (modes differ)")
    if alignments is None:
        als = [_alignment_of(p, r) for r, p in enumerate(profs)]
    else:
        if isinstance(alignments, (str, bytes, dict)) or not hasattr(alignments, "__iter__"):
            raise ValueError(f"alignments={short_repr(alignments)}: must be a sequence of HostAlignment, one per rank")
        als = list(alignments)
        if len(als) != len(profs):
            raise ValueError(f"alignments: {len(als)} given for {len(profs)} ranks")
        if not all(isinstance(a, HostAlignment) for a in als):
            raise ValueError("alignments: every entry must be a HostAlignment")
    integer_in(grid_points, "grid_points", 2, 1_000_000)
    timelines, lois, bounds = [], [], []
    for r, (p, al) in enumerate(zip(profs, als)):
        if p.timeline is None:
            raise ValueError(f"profiles: rank {r}'s profile carries no timeline (saved by an older version?)")
        tl = _on_root(p.timeline, al)
        timelines.append(tl)
        span = np.array([p.timeline.executions["start_ns"].min(), p.timeline.executions["end_ns"].max()])
        bounds.append(float(np.max(al.error_bound_ns(span))))
        all_lois = []
        for ep in p.profiles.values():
            lo = ep.lois.copy()
            lo["uncert_ns"] = lo["uncert_ns"] + al.error_bound_ns(ep.lois["host_ns"])
            lo["host_ns"] = al.to_root_ns(ep.lois["host_ns"])
            all_lois.append(lo)
        lois.append(np.concatenate(all_lois))
    grid = np.linspace(0.0, 1.0, grid_points)
    node = {label: _node_view(label, [p.profiles[label] for p in profs], grid) for label in profs[0].profiles}
    return NodeProfile(
        kernel=profs[0].kernel, root=int(root), ranks=tuple(profs), alignments=tuple(al.as_dict() for al in als),
        shares_host_clock=tuple(bool(al.shares_host_clock) for al in als), timelines=tuple(timelines),
        lois=tuple(lois), alignment_bound_ns=np.array(bounds), node=node,
        steady=tuple(check_steady_states(p) for p in profs),
    )
