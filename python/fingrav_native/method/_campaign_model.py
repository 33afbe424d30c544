"""A controlled campaign's timeline as the attribution engine's tiles: what each stretch of a run draws.

The campaign (paper Section IV-A) runs one kernel back to back, run after
run, with the GPU idle in between. :func:`campaign_designs` cuts that
timeline into the tiles of :mod:`fingrav_native.method._engine_design`:

* each execution of the kernel of interest: ``bins`` steps of one curve over
  execution progress, plus a level per execution index (an offset: power
  creeps towards the SSP, paper Figure 7), none for the execution of interest
  itself;
* warm-up executions (before the SSE, Section IV-A): their own coarser curve
  each, where cross-validation prefers it;
* executions before the execution of interest: at their index's power, or
  (the other candidate, where their durations vary) at their index's
  energy, a longer one drawing less power (:func:`_energy_scale`);
* executions of other kernels: a level per execution index;
* a launch gap inside a run: a level of its own (compute units idle while
  clocks stay up: on real GPUs power falls within microseconds). The other
  candidate holds it at the end of the execution before it (the paper's
  implicit assumption; right where gaps are a microsecond or two);
* after a run, the cooling, by time since its last execution ended, in
  geometric steps of the execution's duration (:data:`TAIL_EDGES`), the
  last step the idle level that also precedes every run;
* executions of runs that are not golden: excluded (a log that reaches one
  is left out).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from fingrav_native.method._engine_design import TILE_EXECUTION, TILE_GAP, TILE_IDLE, Design, Tiling
from fingrav_native.method._forward_model import warm_bins

#: Tail steps after an execution, in multiples of the execution of interest's duration: geometric
#: (cooling is exponential-like: fast first, slow later), eight per octave (four left a window that ends
#: inside a step a little off the truth: on a 2 ms cooling after a 366 us kernel the energy came out
#: 0.2 % low through a 1 ms average and 0.7 % high through a 5 ms one, noise-free, as large as the
#: scatter, so intervals covered 70-85 %; eight leave under 0.1 %), the last (beyond 64 durations) the
#: idle level.
TAIL_EDGES = (0.0, *np.geomspace(1.0 / 32.0, 64.0, 89))


@dataclass(frozen=True)
class CampaignColumns:
    """Where each unknown sits: curve, levels per execution index, warm-up curves, the tail (last: idle)."""

    K: int
    n_max: int
    warm: int
    Kw: int
    T: int

    @property
    def level0(self) -> int:
        return self.K

    @property
    def warm0(self) -> int:
        return self.K + self.n_max

    @property
    def tail0(self) -> int:
        return self.K + self.n_max + self.warm * self.Kw

    @property
    def idle(self) -> int:
        return self.tail0 + self.T - 1

    @property
    def launch(self) -> int:
        return self.tail0 + self.T

    @property
    def n_col(self) -> int:
        return self.tail0 + self.T + 1

    def names(self) -> list[str]:
        tail = [f"tail_{a:.3g}-{b:.3g}x" for a, b in zip(TAIL_EDGES, (*TAIL_EDGES[1:], math.inf))]
        return ([f"curve_{j}" for j in range(self.K)] + [f"execution_{i}" for i in range(self.n_max)]
                + [f"warmup_{i}_bin_{j}" for i in range(self.warm) for j in range(self.Kw)] + tail + ["launch_gap"])


@dataclass(frozen=True)
class CampaignRuns:
    """All runs' executions in start order, with what each one is in the model."""

    s: np.ndarray
    e: np.ndarray
    index: np.ndarray
    run: np.ndarray
    golden: np.ndarray  # in a golden run
    same: np.ndarray  # of the kernel of interest
    eoi: np.ndarray  # the execution of interest of its run
    last_in_run: np.ndarray


def campaign_runs(executions: np.ndarray, golden_runs: np.ndarray, eoi_rows: dict[int, int],
                  by_run: dict[int, np.ndarray], kernel_id: int) -> CampaignRuns:
    """The executions of every run in start order, marked (golden, kernel of interest, execution of interest)."""
    ex = executions[np.argsort(executions["start_ns"], kind="stable")]
    run = ex["run"].astype(np.int64)
    golden = np.isin(run, golden_runs)
    eoi = np.zeros(len(ex), dtype=bool)
    for r, row in eoi_rows.items():
        idx = int(by_run[r]["index"][row])
        eoi |= (run == r) & (ex["index"] == idx)
    last = np.append(run[1:] != run[:-1], True)
    return CampaignRuns(ex["start_ns"].astype(np.float64), ex["end_ns"].astype(np.float64),
                        ex["index"].astype(np.int64), run, golden, ex["kernel_id"] == kernel_id, eoi, last)


def _exec_tiles(cr: CampaignRuns, cols: CampaignColumns, fixed_energy: bool) -> tuple[np.ndarray, ...]:
    """Executions cut into their columns' tiles; excluded (non-golden) executions one tile of column -1."""
    warm = cr.golden & cr.same & ~cr.eoi & (cr.index < cols.warm)
    curve = cr.golden & cr.same & ~warm
    n = np.where(curve, cols.K, np.where(warm, cols.Kw, 1))
    reps = np.repeat(np.arange(len(cr.s)), n)
    k = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    d = (cr.e - cr.s)[reps]
    a = cr.s[reps] + d * k / n[reps]
    b = cr.s[reps] + d * (k + 1) / n[reps]
    col = np.full(len(a), -1, dtype=np.int64)
    col2 = np.full(len(a), -1, dtype=np.int64)
    c_rep, w_rep, g_rep = curve[reps], warm[reps], cr.golden[reps]
    col[c_rep] = k[c_rep]
    offset = c_rep & ~cr.eoi[reps]
    col2[offset] = cols.level0 + cr.index[reps][offset]
    col[w_rep] = cols.warm0 + cr.index[reps][w_rep] * cols.Kw + k[w_rep]
    other = g_rep & ~c_rep & ~w_rep
    col[other] = cols.level0 + cr.index[reps][other]
    scale = _energy_scale(cr)[reps] if fixed_energy else np.ones(len(a))
    return a, b, col, col2, np.full(len(a), TILE_EXECUTION), scale


def _energy_scale(cr: CampaignRuns) -> np.ndarray:
    """Per execution, its index's median duration over its own: the power of an execution of fixed energy.

    Before the execution of interest a GPU still warming up runs each
    execution at a clock of its own: a cold execution lasts longer at lower
    power, for nearly the same energy (on the simulator a warm-up
    execution's duration varies 11-14 % over runs, its energy 2-3 %). A
    model whose power per execution index is shared makes such an
    execution's energy grow with its duration; where the launch phase is
    steered, the window edges' place in the execution of interest follows
    the durations before it, and the error lands in its energy. The
    execution of interest keeps its shared power (1): its duration barely
    varies, and its curve is what is reported.
    """
    d = cr.e - cr.s
    out = np.ones(len(d))
    sel = cr.golden & ~cr.eoi & (d > 0)
    for i in np.unique(cr.index[sel]):
        m = sel & (cr.index == i) & (cr.same == cr.same[sel & (cr.index == i)][0])
        out[m] = float(np.median(d[m])) / d[m]
    return out


def _last_tile_cols(cr: CampaignRuns, cols: CampaignColumns) -> tuple[np.ndarray, np.ndarray]:
    """The columns of each execution's last tile (what a held launch gap draws)."""
    warm = cr.golden & cr.same & ~cr.eoi & (cr.index < cols.warm)
    curve = cr.golden & cr.same & ~warm
    col = np.where(curve, cols.K - 1, np.where(warm, cols.warm0 + cr.index * cols.Kw + cols.Kw - 1,
                                               np.where(cr.golden, cols.level0 + cr.index, -1)))
    col2 = np.where(curve & ~cr.eoi, cols.level0 + cr.index, -1)
    return col.astype(np.int64), col2.astype(np.int64)


def _gap_tiles(cr: CampaignRuns, cols: CampaignColumns, dur: float, hi: float, hold: bool) -> tuple[np.ndarray, ...]:
    """The gap after each execution (to the next start) in tail steps, or held at the execution's end."""
    g0 = cr.e
    g1 = np.append(np.maximum(cr.s[1:], cr.e[:-1]), max(hi, float(cr.e[-1])))
    edges = np.append(np.asarray(TAIL_EDGES) * dur, math.inf)
    inside = ~cr.last_in_run
    held_col, held_col2 = _last_tile_cols(cr, cols)
    parts: list[tuple[np.ndarray, ...]] = []
    if hold:
        sel = inside & (g1 > g0)
        parts.append((g0[sel], g1[sel], held_col[sel], held_col2[sel], np.full(int(sel.sum()), TILE_GAP),
                      np.ones(int(sel.sum()))))
    else:
        # A launch gap's own level (compute idle, clocks up); excluded inside a run that is not golden.
        sel = inside & (g1 > g0)
        col = np.where(cr.golden[sel], cols.launch, -1)
        parts.append((g0[sel], g1[sel], col, np.full(int(sel.sum()), -1), np.full(int(sel.sum()), TILE_GAP),
                      np.ones(int(sel.sum()))))
    # After a run: the tail, by time since its last execution ended.
    stepped = ~inside
    for m in range(cols.T):
        lo = g0 + edges[m]
        up = np.minimum(g1, g0 + edges[m + 1])
        sel = stepped & (up > lo)
        col = np.full(int(sel.sum()), cols.tail0 + m)
        parts.append((lo[sel], up[sel], col, np.full(int(sel.sum()), -1),
                      np.full(int(sel.sum()), TILE_IDLE if m == cols.T - 1 else TILE_GAP), np.ones(int(sel.sum()))))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(6))


def _tiling(cr: CampaignRuns, cols: CampaignColumns, dur: float, lo: float, hi: float, hold: bool,
            fixed_energy: bool) -> Tiling:
    """The whole campaign from ``lo`` to ``hi``: idle before the first run, executions, gaps and tails."""
    parts = [_exec_tiles(cr, cols, fixed_energy), _gap_tiles(cr, cols, dur, hi, hold)]
    if lo < cr.s[0]:
        parts.append((np.array([lo]), np.array([float(cr.s[0])]), np.array([cols.idle]), np.array([-1]),
                      np.array([TILE_IDLE]), np.ones(1)))
    a, b, col, col2, kind, scale = (np.concatenate([p[i] for p in parts]) for i in range(6))
    order = np.lexsort((b, a))
    return Tiling(a[order], b[order], col[order].astype(np.int64), col2[order].astype(np.int64), kind[order],
                  scale[order])


def _smoothness(cols: CampaignColumns) -> np.ndarray:
    """Second differences of the curve, of each warm-up curve and of the tail; none on the levels."""
    P = cols.n_col
    R = np.zeros((P, P))
    blocks = [(0, cols.K), (cols.tail0, cols.T)] + [(cols.warm0 + j * cols.Kw, cols.Kw) for j in range(cols.warm)]
    for lo, m in blocks:
        if m >= 3:
            D = np.diff(np.eye(m), n=2, axis=0)
            R[lo:lo + m, lo:lo + m] += D.T @ D
    return R


def campaign_designs(cr: CampaignRuns, *, K: int, n_max: int, warms: list[int], dur: float, lo: float, hi: float,
                     floor_w: float, absolute_levels: np.ndarray) -> list[Design]:
    """Every candidate model of a campaign: each warm-up choice, with gaps at their own level or held.

    Parameters
    ----------
    cr : CampaignRuns
    K : int
        Curve bins.
    n_max : int
        Level columns (more than the largest execution index).
    warms : list of int
        Warm-up models: executions before this index draw their own curve.
    dur : float
        The execution of interest's duration (scales the tail's steps).
    lo, hi : float
        The span the logs' responses cover.
    floor_w : float
        Lower bound of every power (levels of the kernel's own executions
        are offsets, unbounded).
    absolute_levels : numpy.ndarray
        Per execution index, whether its level is a power (another kernel's
        execution) rather than an offset.

    Returns
    -------
    list of Design
    """
    out = []
    for warm in warms:
        cols = CampaignColumns(K, n_max, warm, warm_bins(K), len(TAIL_EDGES))
        lower = np.full(cols.n_col, float(floor_w))
        lower[cols.level0:cols.level0 + n_max] = np.where(absolute_levels, floor_w, -np.inf)
        maps = {"curve": np.eye(cols.n_col)[:K], "energy": np.full((1, cols.n_col), 0.0),
                "levels": np.eye(cols.n_col)[K:]}
        maps["energy"][0, :K] = dur * 1e-9 / K
        warm_txt = f"the first {warm} executions (warm-up) each draw their own curve" if warm else "no warm-up curves"
        for (hold, gap_txt), (fixed, energy_txt) in itertools.product(
                ((False, "launch gaps at their own level (time since the execution ended)"),
                 (True, "launch gaps at the power of the end of the execution before them")),
                ((False, ""), (True, "; executions before the one of interest at their index's energy (a longer "
                                     "one at lower power)"))):
            if fixed and not _durations_vary(cr):
                continue  # the same model: every scale is 1
            out.append(Design(f"{gap_txt}; {warm_txt}{energy_txt}", _tiling(cr, cols, dur, lo, hi, hold, fixed),
                              cols.names(), lower, _smoothness(cols), np.zeros((cols.n_col, cols.n_col)), maps,
                              "energy"))
    return out


def _durations_vary(cr: CampaignRuns) -> bool:
    """Whether any execution before the one of interest lasts other than its index's median (by 0.1 %)."""
    return bool(np.any(np.abs(_energy_scale(cr) - 1.0) > 1e-3))
