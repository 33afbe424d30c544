"""The attribution engine's design: the host timeline cut into tiles, and each log's row over them.

What every averaging log sees, before anything is solved: the timeline's
tiles and the unknown (column) each draws (:class:`Tiling`), a candidate
model over them (:class:`Design`), and each log's row, the weight of every
tile its sensor's response covers (:func:`design_rows`, sparse, after
:meth:`~fingrav_native.sensors.SensorModel.interval_weights`), with the
blocks of logs cross-validation and the bootstrap resample
(:func:`time_blocks`). The campaign path (:mod:`fingrav_native.method._campaign_model`)
and the in-situ path (:mod:`fingrav_native.method._joint`) build designs;
:mod:`fingrav_native.method._engine` solves them; the model check
(:mod:`fingrav_native.method._engine_check`) reads the rows again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import sparse

from fingrav_native._errors import FingravError
from fingrav_native.sensors._model import SensorModel

#: Kinds of tile, for grouping residuals by where a window's edges fall.
TILE_EXECUTION, TILE_GAP, TILE_IDLE = 0, 1, 2

#: Most blocks kept (memory: blocks x unknowns^2 per design).
MAX_BLOCKS = 64


#: Memory the normal equations of one fit may hold at once (bytes); :func:`normal_equations_bytes` counts it.
MEMORY_BYTES = 2 << 30

#: Fewest blocks a fit keeps when memory asks for fewer (two per cross-validation fold).
MIN_BLOCKS = 10


class FitTooLargeError(MemoryError, FingravError):
    """The fit's normal equations would not fit in :data:`MEMORY_BYTES`, even over :data:`MIN_BLOCKS` blocks."""


def normal_equations_bytes(unknowns: Sequence[int], n_blocks: int, n_folds: int = 5) -> int:
    """Bytes of the normal matrices a fit holds at once: per candidate design, unknowns^2 floats for each block
    (the bootstrap's units), each fold, a bootstrap batch's folds, and its penalties and solves (four)."""
    return 8 * sum(int(p) ** 2 for p in unknowns) * (n_blocks + 2 * n_folds + 4)


def _size(n_bytes: int) -> str:
    """A memory size in words: GiB from one up, MiB below."""
    return f"{n_bytes / 2 ** 30:.1f} GiB" if n_bytes >= 2 ** 30 else f"{n_bytes / 2 ** 20:.1f} MiB"


def blocks_within_memory(unknowns: Sequence[int], blocks: np.ndarray, n_blocks: int,
                          n_folds: int) -> tuple[np.ndarray, int, str]:
    """Neighbouring blocks merged until the normal matrices fit in :data:`MEMORY_BYTES` (the sums stay exact).

    Every block's normal matrix is kept for cross-validation and the
    bootstrap; merging neighbours (as :data:`MAX_BLOCKS` already does) leaves
    the whole record's equations as they are and makes the resampled units
    longer (Kuensch 1989: longer blocks, still a valid block bootstrap; the
    interval's Student's t follows the count). Below :data:`MIN_BLOCKS` a fit
    is refused: a :class:`FitTooLargeError` that says what it needs. Returns
    the blocks, their count, and why they were merged (empty: they were not).
    """
    if normal_equations_bytes(unknowns, n_blocks, n_folds) <= MEMORY_BYTES:
        return blocks, n_blocks, ""
    per_block = normal_equations_bytes(unknowns, 1, n_folds) - normal_equations_bytes(unknowns, 0, n_folds)
    fit = (MEMORY_BYTES - normal_equations_bytes(unknowns, 0, n_folds)) // max(per_block, 1)
    if fit < min(MIN_BLOCKS, n_blocks):
        need = normal_equations_bytes(unknowns, min(MIN_BLOCKS, n_blocks), n_folds)
        raise FitTooLargeError(
            f"samples: the fit has {max(unknowns)} unknowns (columns) in each of {len(unknowns)} candidate models; "
            f"their normal matrices over {min(MIN_BLOCKS, n_blocks)} blocks of logs need {_size(need)}, "
            f"more than the {_size(MEMORY_BYTES)} budget")
    n_fit = int(fit)
    note = (f"the record's {n_blocks} blocks of logs merged into {n_fit} so that the normal matrices of "
            f"{max(unknowns)} unknowns fit the {_size(MEMORY_BYTES)} budget: the bootstrap resamples "
            "fewer, longer blocks (the fit itself is the same)")
    return blocks * n_fit // n_blocks, n_fit, note


@dataclass(frozen=True)
class Tiling:
    """The host timeline cut into contiguous tiles, each drawing the power of one or two columns.

    Attributes
    ----------
    a, b : numpy.ndarray
        Tile starts and ends (ns, on the logs' timeline), sorted, each tile
        ending where the next starts.
    col : numpy.ndarray
        The column each tile draws; -1: excluded (a log whose response
        reaches it is left out).
    col2 : numpy.ndarray
        A second column added to the first (a level offset), -1 for none.
    kind : numpy.ndarray
        :data:`TILE_EXECUTION`, :data:`TILE_GAP` or :data:`TILE_IDLE`.
    scale : numpy.ndarray, optional
        Per tile, the factor its columns' power is drawn at (default 1): an
        execution of a fixed energy drawn over a longer time draws less power.
    """

    a: np.ndarray
    b: np.ndarray
    col: np.ndarray
    col2: np.ndarray
    kind: np.ndarray
    scale: Optional[np.ndarray] = None


@dataclass(frozen=True)
class Design:
    """One candidate model of what the windows cover: its tiling, its unknowns' bounds and prior, what is reported.

    Attributes
    ----------
    name : str
        What this model assumes, in words (reported with the choice).
    tiling : Tiling
    names : list of str
        Each column's name.
    lower : numpy.ndarray
        Lower bound per column (0 for a power; ``-inf`` for an offset).
    smooth : numpy.ndarray
        The penalty scaled by the chosen smoothing (second differences of
        each curve).
    fixed : numpy.ndarray
        A fixed prior on differences of columns (rows summing to zero: the
        continuity of the gaps' steps), relative to the data's scale; zeros
        for none.
    maps : dict of str to numpy.ndarray
        Linear maps from the columns to what is reported (``(rows, columns)``):
        curves, energies.
    energies : str
        The key of ``maps`` whose rows are energies (checked for identifiability).
    drift_ns : float
        Knot spacing of a slow drift shared by every column (0: none); the
        engine adds its columns and a variant without it.
    offset_maps : tuple of str
        Keys of ``maps`` whose rows are offsets added on top of a level (a
        tiling's ``col2``): reported without the drift's mean, which the
        level under them already holds.
    """

    name: str
    tiling: Tiling
    names: list[str]
    lower: np.ndarray
    smooth: np.ndarray
    fixed: np.ndarray
    maps: dict[str, np.ndarray]
    energies: str
    drift_ns: float = 0.0
    offset_maps: tuple[str, ...] = ()

    @property
    def n_col(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class Rows:
    """A design's rows for the logs it can use: the sparse matrix, which logs, their responses and blocks."""

    A: sparse.csr_matrix
    used: np.ndarray  # indices of the logs used
    lo: np.ndarray  # each used log's response [lo, hi]
    hi: np.ndarray
    drift_mean: np.ndarray  # the drift columns' mean over the logs (added back to every level)
    n_model: int  # columns before the drift's


def response_span(sensor: SensorModel, t: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each log's response lies on the timeline: ``[lo, hi]`` (ns)."""
    hi = t - sensor.delay_ns
    return hi - np.asarray(sensor.memory_ns(w), dtype=np.float64), hi


def effective_width(sensor: SensorModel, w: np.ndarray) -> np.ndarray:
    """Each log's response as long as the boxcar with the same noise-equivalent width (ns).

    A boxcar's is its window; a first-order filter's is ``2 tau`` (its
    weights' squared integral equals a boxcar's of that length), so that
    logs further apart than a few of these have nearly independent errors
    (autocorrelation ``exp(-lag / tau)``), while its support runs to
    ``tau ln(1e4)``.
    """
    if sensor.shape == "first_order":
        return np.full(len(w), 2.0 * sensor.tau_ns)
    return np.asarray(sensor.memory_ns(w), dtype=np.float64)


def tile_rows(sensor: SensorModel, t: np.ndarray, w: np.ndarray, til: Tiling,
               ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (log, tile, weight) a usable log's response covers, and which logs are usable."""
    a, b, col = til.a, til.b, til.col
    lo, hi = response_span(sensor, t, w)
    inside = ok & (lo >= a[0]) & (hi <= b[-1])
    j0 = np.searchsorted(b, lo, side="right")
    j1 = np.searchsorted(a, hi, side="left")
    cnt = np.where(inside, np.maximum(j1 - j0, 0), 0)
    rows = np.repeat(np.arange(len(t)), cnt)
    tile = np.repeat(j0, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    wt = sensor.interval_weights(t[rows], a[tile], b[tile], window_ns=w[rows])
    bad = np.zeros(len(t), dtype=bool)
    bad[rows[(col[tile] < 0) & (wt > 0)]] = True
    use = inside & ~bad & (cnt > 0)
    keep = use[rows] & (wt > 0)
    return rows[keep], tile[keep], wt[keep], use


def _drift_columns(mid: np.ndarray, drift_ns: float) -> Optional[sparse.csr_matrix]:
    """Hat functions of a piecewise-linear drift at each log's response midpoint, the first hat dropped.

    The columns of every tiling sum to one over a log's response (the tiles
    partition it), so a constant drift is already there; dropping the first
    hat makes the drift zero at the first knot (an exact reparametrisation).
    None when the logs span fewer than three knots: too short to tell a drift
    from the signal.
    """
    if not drift_ns > 0 or len(mid) < 2:
        return None
    nk = int(min(max(2, math.ceil((mid.max() - mid.min()) / drift_ns) + 1), 200))
    if nk < 3:
        return None
    n = len(mid)
    step = (mid.max() - mid.min()) / (nk - 1)
    u = (mid - mid.min()) / step
    j = np.minimum(np.floor(u).astype(np.int64), nk - 2)
    f = u - j
    r_ = np.concatenate([np.arange(n), np.arange(n)])
    c_ = np.concatenate([j, j + 1])
    v_ = np.concatenate([1.0 - f, f])
    keep = c_ > 0
    return sparse.csr_matrix((v_[keep], (r_[keep], c_[keep] - 1)), shape=(n, nk - 1))


def design_rows(design: Design, sensor: SensorModel, t: np.ndarray, w: np.ndarray, ok: np.ndarray) -> Rows:
    """The rows of the logs a design can use (sparse), with the drift's columns when the record is long enough.

    Parameters
    ----------
    design : Design
    sensor : SensorModel
        The response (window or filter, delay); gain and offset are undone on
        the values, not here.
    t, w : numpy.ndarray
        Each log's stamp on the timeline and its boxcar window (ns).
    ok : numpy.ndarray
        Logs with finite stamps and values.

    Returns
    -------
    Rows
    """
    til = design.tiling
    rows, tile, wt, use = tile_rows(sensor, t, w, til, ok)
    if til.scale is not None:
        wt = wt * til.scale[tile]
    used = np.flatnonzero(use)
    new_row = np.full(len(t), -1)
    new_row[used] = np.arange(len(used))
    r = new_row[rows]
    c2 = til.col2[tile]
    has2 = c2 >= 0
    P = design.n_col
    A = sparse.csr_matrix((np.concatenate([wt, wt[has2]]), (np.concatenate([r, r[has2]]),
                                                            np.concatenate([til.col[tile], c2[has2]]))),
                          shape=(len(used), P))
    lo, hi = response_span(sensor, t[used], w[used])
    D = _drift_columns(0.5 * (lo + hi), design.drift_ns)
    if D is None:
        return Rows(A, used, lo, hi, np.zeros(0), P)
    return Rows(sparse.hstack([A, D], format="csr"), used, lo, hi, np.asarray(D.mean(axis=0)).ravel(), P)


def time_blocks(lo: np.ndarray, hi: np.ndarray, windows: float = 10.0, max_blocks: int = MAX_BLOCKS,
                width_ns: Optional[np.ndarray] = None) -> np.ndarray:
    """Blocks of consecutive logs spanning at least ``windows`` responses (at most ``max_blocks``): per log, its block.

    A sliding average's errors are shared by overlapping windows, and a
    kernel's departures from its shared curve by every log over it: blocks
    long against a response are nearly independent, which cross-validation
    and the bootstrap need (the moving-block idea, Kuensch 1989). A
    response's length is ``width_ns`` where given (a first-order filter's
    effective width, far shorter than the support ``[lo, hi]`` its tail is
    cut at), else ``hi - lo``.
    """
    mid = 0.5 * (lo + hi)
    if len(mid) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(mid, kind="stable")
    width = hi - lo if width_ns is None else np.asarray(width_ns, dtype=np.float64)
    span = max(float(np.median(width)), float(np.median(np.diff(mid[order]))) if len(mid) > 1 else 1.0, 1.0)
    length = max(windows * span, (float(mid.max() - mid.min()) + 1.0) / max_blocks)
    blk = np.floor((mid - mid.min()) / length).astype(np.int64)
    return np.asarray(np.unique(blk, return_inverse=True)[1], dtype=np.int64).ravel()


def full_map(design: Design, rows: Rows, key: str) -> np.ndarray:
    """A map over every column, the drift's columns at their mean over the logs (the reported level)."""
    m = design.maps[key]
    P = rows.A.shape[1]
    full = np.zeros((m.shape[0], P))
    full[:, :design.n_col] = m
    if P > design.n_col and key not in design.offset_maps:
        # A curve or level is at the drift's mean: each row's weight on the columns times the drift's mean.
        full[:, design.n_col:] = m.sum(axis=1)[:, None] * rows.drift_mean[None, :]
    return full
