"""The joint fit's unknowns: where each column sits (curve bins, the launch gap, the gaps' steps, the overlay),
the priors over them and the maps to what is reported (:mod:`fingrav_native.method._joint` builds the tiles
that draw them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

#: Gap power steps by time since the last kernel ended (ns): launch gaps, host gaps, pauses.
GAP_EDGES_NS = (0.0, 10_000.0, 40_000.0, 150_000.0, 500_000.0, 2_000_000.0, math.inf)


@dataclass(frozen=True)
class Columns:
    """Where each unknown sits: curve offsets per class, the launch-gap level, the gap steps, the count."""

    offsets: np.ndarray
    K: np.ndarray
    launch: int
    gap: np.ndarray  # (classes + 1, n_steps): the column of each step of a longer gap after each class
    n_steps: int  # steps of GAP_EDGES_NS
    n_col: int
    overlay: int = -1  # the additive level of the overlay intervals (communication), -1 for none

    def step(self, prev: np.ndarray, m: int) -> np.ndarray:
        """The column of step ``m`` of a longer gap after a kernel of class ``prev`` (the excluded row: n_cls)."""
        return np.asarray(self.gap[prev, m])

    @property
    def gap_cols(self) -> np.ndarray:
        """The column of every reported gap level: the launch gap's, then each class's steps (row by row)."""
        return np.concatenate([[self.launch], self.gap.ravel()]).astype(np.int64)


def columns(K: np.ndarray, overlay: bool = False, shared: Optional[np.ndarray] = None) -> Columns:
    """The columns: each class's bins, the launch gap, each class's gap steps, the overlay.

    ``shared`` (``(classes + 1, steps)``, default none) marks the gap steps that draw one level per step shared
    with every other marked step of that step.
    """
    offsets = np.concatenate([[0], np.cumsum(K)[:-1]]).astype(np.int64)
    n_steps = len(GAP_EDGES_NS) - 1
    launch = int(K.sum())
    pool = np.zeros((len(K) + 1, n_steps), dtype=bool) if shared is None else np.asarray(shared, dtype=bool)
    # Columns in the order their steps first come (class by class, step by step): a shared step where its first
    # class would have had its own, so a timeline that shares none, or shares only steps no log sees, has the
    # columns in the order of one that shares nothing (the same sums, in the same order).
    gap = np.full(pool.shape, -1, dtype=np.int64)
    shared_col = np.full(n_steps, -1, dtype=np.int64)
    n_col = launch + 1
    for c, m in np.ndindex(*pool.shape):
        if pool[c, m] and shared_col[m] >= 0:
            gap[c, m] = shared_col[m]
            continue
        gap[c, m] = n_col
        if pool[c, m]:
            shared_col[m] = n_col
        n_col += 1
    return Columns(offsets, K, launch, gap, n_steps, n_col + int(overlay), n_col if overlay else -1)


def penalties(cols: Columns, continuity: float,
               seen: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Second differences of each curve (smoothing, chosen by cross-validation) and the gaps' continuity (fixed).

    Without continuity a long-gap step seen by few logs is nearly collinear
    with the kernel before it and took 2.5 kW on a simulated loop. A class's
    chain links only the steps a log sees (``seen``, default all): a step no
    log sees holds no power to relax through, and sharing a column must not
    chain one class's gaps to another's through it.
    """
    P = cols.n_col
    R = np.zeros((P, P))
    for c in range(len(cols.K)):
        k = int(cols.K[c])
        if k >= 3:
            D = np.diff(np.eye(k), 2, axis=0)
            o = int(cols.offsets[c])
            R[o:o + k, o:o + k] += D.T @ D
    F = np.zeros((P, P))
    links: set[tuple[int, int]] = set()
    for c in range(len(cols.K) + 1):
        # Step 0 stays out of the chain: it holds the fall from the kernel's end, not a slow relaxation
        # (chained, a 200 -> 150 W step at 10 us came out 174/166 W on the closed-form timeline).
        for m in range(1, cols.n_steps - 1):
            u, v = int(cols.gap[c, m]), int(cols.gap[c, m + 1])
            # A link between shared steps is one prior however many classes' gaps pass through it.
            if u == v or (u, v) in links or (seen is not None and not (seen[c, m] and seen[c, m + 1])):
                continue
            links.add((u, v))
            F[u, u] += continuity
            F[v, v] += continuity
            F[u, v] -= continuity
            F[v, u] -= continuity
    return R, F


def column_maps(cols: Columns, counts: np.ndarray, durations: np.ndarray) -> dict[str, np.ndarray]:
    """What is reported: each class's energy, the curves (all classes' bins), the gaps' columns."""
    P = cols.n_col
    n_cls = len(cols.K)
    H = np.zeros((n_cls, P))
    curves = np.zeros((int(cols.K.sum()), P))
    for c in range(n_cls):
        o, k = int(cols.offsets[c]), int(cols.K[c])
        # A class with no execution modelled has zero maps here and NaN results (_timeline_fit).
        H[c, o:o + k] = durations[c] * 1e-9 / k if counts[c] and math.isfinite(durations[c]) else 0.0
        curves[o:o + k, o:o + k] = np.eye(k) if counts[c] else 0.0
    gap_cols = cols.gap_cols
    gaps = np.zeros((len(gap_cols), P))
    gaps[np.arange(len(gap_cols)), gap_cols] = 1.0
    out = {"energy": H, "curves": curves, "gaps": gaps}
    if cols.overlay >= 0:
        out["overlay"] = np.eye(P)[cols.overlay:cols.overlay + 1]
    return out
