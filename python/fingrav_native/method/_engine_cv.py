"""The attribution engine's cross-validation: each fold's prediction error, solving no more than the choice needs.

Step 3 of :mod:`fingrav_native.method._engine`: a candidate model (a
*variant*: a design with its penalties) is scored at each smoothing by the
squared error it predicts for each fold of blocks it did not see (Arlot and
Celisse, Statistics Surveys 2010). Each score is one Cholesky factorisation
of the other folds' penalised normal equations; this module forms them
(in place, in arrays kept across calls), shares the factor of a drift
variant with its twin held without the drift (Golub and Van Loan 2013,
Section 4.2), and prunes smoothings that cannot be the least (branch and
bound on non-negative partial sums).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from fingrav_native.method._engine_solve import POTRF, POTRS


@dataclass(frozen=True)
class Variant:
    """A design with or without its drift: the penalties the solve adds, and the scale they are relative to."""

    design: int
    drift: bool
    name: str
    R: np.ndarray  # the smoothing penalty, already relative (multiplied by lam)
    F: np.ndarray  # everything fixed: prior, pins, ridge, the drift's zeroing
    lower: np.ndarray
    # The variant "without the drift" is its drift twin (the variant before it) with a ridge added to the last
    # columns only: its Cholesky factor is the twin's with the trailing block refactored (:func:`_twin_factor`).
    n_col: int = 0
    ridge: float = 0.0


@dataclass(frozen=True)
class FoldStats:
    """One design's normal equations per cross-validation fold under one weighting of the blocks.

    ``G`` (folds, P, P) and ``b`` (folds, P) of the channel cross-validation scores, ``yy`` (folds,),
    and which folds hold any weight.
    """

    G: np.ndarray
    b: np.ndarray
    yy: np.ndarray
    present: np.ndarray


def _twin_factor(c: np.ndarray, n: int, ridge: float) -> Optional[np.ndarray]:
    """The upper Cholesky factor of a system that differs from the one ``c`` factors by ``ridge`` added to the
    diagonal of its columns from ``n`` on, written over ``c``; None where that system is not positive definite.

    With ``M = U'U``, ``U = [[U11, U12], [0, U22]]``, the trailing block's Schur
    complement is ``U22'U22``; the ridge adds to it alone, so the leading rows of
    the factor stay and only the ``(P - n)``-square trailing block is factored
    again (Golub and Van Loan 2013, Section 4.2): a drift variant and the same
    design held without its drift share all but their drift columns' work.
    """
    U22 = np.triu(c[n:, n:])
    S = U22.T @ U22
    S[np.diag_indices(len(S))] += ridge
    cS, info = POTRF(S, lower=0, overwrite_a=1, clean=0)
    if info != 0:
        return None
    # In place: each factor left for a twin is read by it once.
    c[n:, n:] = cS
    return c


class Scratch:
    """The systems cross-validation forms, in arrays kept from one call to the next.

    A fresh array of a system's size (a hundred kilobytes and more) comes
    from the operating system a page at a time, a fault at each first write,
    which cost as much as forming the system: the bootstrap forms tens of
    thousands. ``fixed(slot, P)``: one ``P``-square array per slot (a fold's
    system without the fold, the system being factored); ``take(P)`` and
    ``give(a)``: arrays a factor left for a twin is written into, handed back
    once the twin has read it.
    """

    def __init__(self) -> None:
        self._fixed: dict[tuple[int, int], np.ndarray] = {}
        self._pool: dict[int, list[np.ndarray]] = {}

    def fixed(self, slot: int, P: int) -> np.ndarray:
        """The array of ``slot`` for ``P`` unknowns (column order, as LAPACK factors it)."""
        a = self._fixed.get((slot, P))
        if a is None:
            a = self._fixed[(slot, P)] = np.empty((P, P), order="F")
        return a

    def take(self, P: int) -> np.ndarray:
        """An array no one else holds."""
        free = self._pool.get(P)
        return free.pop() if free else np.empty((P, P), order="F")

    def give(self, a: np.ndarray) -> None:
        """``a`` back, for a later :meth:`take`."""
        self._pool.setdefault(a.shape[0], []).append(a)


class _FoldSystems:
    """One variant's cross-validation systems under one weighting of the blocks: a fold's error at a smoothing.

    Each system is the fold's rest (the other folds' normal matrix, formed
    once per fold), plus the smoothing's penalty and the fixed terms, formed
    in place in the column order LAPACK factors (no copy per solve), from
    terms in that order too: the same sums, added along memory. ``shared``,
    ``lams`` and the twin's reuse as in :func:`cv_fold_scores`.
    """

    def __init__(self, v: Variant, fs: FoldStats, lam_R: Sequence[np.ndarray],
                 shared: Optional[dict[tuple[int, float], np.ndarray]], lams: Sequence[float] | np.ndarray,
                 scratch: Scratch) -> None:
        self.v, self.fs, self.lams, self.work = v, fs, lams, scratch
        self.Gw, self.Bw = fs.G.sum(axis=0), fs.b.sum(axis=0)
        self.P = len(self.Gw)
        self.lam_R = [np.asfortranarray(r) for r in lam_R]
        self.F = np.asfortranarray(v.F)
        self.twin = shared if v.ridge > 0 else None
        self.keep = shared if v.ridge == 0 else None
        self._rests: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _rest(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """The system without fold ``f`` (scratch slot ``f``) and its right-hand side."""
        if f not in self._rests:
            rest = self.work.fixed(f, self.P)
            np.subtract(self.Gw, self.fs.G[f], out=rest)
            self._rests[f] = (rest, self.Bw - self.fs.b[f])
        return self._rests[f]

    def _factor(self, rest: np.ndarray, f: int, i: int) -> Optional[np.ndarray]:
        """The upper Cholesky factor of fold ``f``'s system at smoothing ``i`` (None: not positive definite)."""
        # A factor left for the twin is written into an array of its own (no copy of the factor); any other
        # into scratch slot -1.
        M = self.work.take(self.P) if self.keep is not None else self.work.fixed(-1, self.P)
        np.add(rest, self.lam_R[i], out=M)
        M += self.F
        c, info = POTRF(M, lower=0, overwrite_a=1, clean=0)
        if info != 0:
            if self.keep is not None:
                self.work.give(M)
            return None
        if self.keep is not None:
            self.keep[(f, float(self.lams[i]))] = c
        return np.asarray(c)

    def score(self, f: int, i: int) -> float:
        """Fold ``f``'s squared prediction error at smoothing ``i`` (inf: singular)."""
        rest, rhs = self._rest(f)
        got = self.twin.pop((f, float(self.lams[i])), None) if self.twin is not None else None
        c = _twin_factor(got, self.v.n_col, self.v.ridge) if got is not None else self._factor(rest, f, i)
        err = math.inf
        if c is not None:
            x, info = POTRS(c, rhs, lower=0)
            if info == 0:
                Gf, Bf = self.fs.G[f], self.fs.b[f]
                err = max(float(self.fs.yy[f]) - 2.0 * float(x @ Bf) + float(x @ Gf @ x), 0.0)
        if got is not None:
            # The drift variant's factor (written over by the twin's) is read once.
            self.work.give(got)
        return err

    def release(self) -> None:
        """Hand back the drift variant's factors the twin never reached."""
        if self.twin is not None:
            for c in self.twin.values():
                self.work.give(c)
            self.twin.clear()


#: Relative margin by which a partial error must exceed the bound to prune: partial sums taken over the folds in
#: another order than the totals the choice compares differ from them by a few units in the last place.
_PRUNE_MARGIN = 1e-12


def cv_fold_scores(v: Variant, fs: FoldStats, lam_R: Sequence[np.ndarray],
                    bound: float = math.inf, shared: Optional[dict[tuple[int, float], np.ndarray]] = None,
                    lams: Sequence[float] | np.ndarray = (), start: Optional[int] = None,
                    fold_order: Sequence[int] = (), scratch: Optional[Scratch] = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(folds, smoothings)``: each fold's squared prediction error (inf: singular); and which smoothings were scored.

    ``lam_R`` holds the variant's penalty at each smoothing (``lam * R``),
    formed once per grid. A smoothing whose error over the folds scored so far
    already exceeds ``bound`` (the least total found elsewhere) cannot be the
    least: the errors are non-negative, and a rounded sum of non-negative
    terms never falls as terms are added. Its remaining folds are not solved
    and it is marked not scored.

    ``start``: where only the least total matters (a model choice, not a
    table), the smoothings are solved one at a time from this one (the
    likeliest least) outwards, and each one's complete total bounds the
    others as ``bound`` does, their folds then taken largest error first
    (branch and bound: the sooner the partial errors of a smoothing that
    cannot win pass the bound, the fewer of its folds are solved).
    ``fold_order``: the order to take the folds in until then (the largest
    errors of the least total so far first). Every score solved is the same
    whatever the order: each system is formed from the same terms (a twin's
    from its drift variant's factor wherever that variant solved it).

    ``shared`` holds factors by (fold, smoothing): a drift variant given it
    puts its own there, and its twin without the drift (``v.ridge > 0``)
    takes them, refactoring only their trailing block
    (:func:`_twin_factor`); what is missing is factored in full. ``lams``: the smoothings ``lam_R`` was formed
    at (needed with ``shared``). ``scratch``: where the systems are formed (:class:`Scratch`; by default
    fresh arrays).
    """
    systems = _FoldSystems(v, fs, lam_R, shared, lams, scratch if scratch is not None else Scratch())
    n_lam = len(lam_R)
    scores = np.zeros((len(fs.G), n_lam))
    alive = np.ones(n_lam, dtype=bool)
    folds = [int(f) for f in (fold_order if len(fold_order) else range(len(fs.G))) if fs.present[f]]
    for i in range(n_lam) if start is None else sorted(range(n_lam), key=lambda j: (abs(j - start), j)):
        total = 0.0
        for f in folds:
            scores[f, i] = systems.score(f, i)
            total += scores[f, i]
            if total > bound * (1.0 + _PRUNE_MARGIN):
                alive[i] = False
                break
        else:
            if start is not None and total < bound:
                bound = total
                folds.sort(key=lambda f: -scores[f, i])
    systems.release()
    return scores, alive


class Twins:
    """Factors a drift variant leaves for its twin without the drift, in the order the variants are scored."""

    def __init__(self, variants: Sequence[Variant], order: Sequence[int]) -> None:
        self._variants = variants
        self._pending = set(order)
        self._factors: dict[int, dict[tuple[int, float], np.ndarray]] = {}

    def before(self, i: int) -> Optional[dict[tuple[int, float], np.ndarray]]:
        """The factors variant ``i`` is scored with: a drift variant whose twin is still to come leaves its own
        there, a twin takes them; None for any other."""
        self._pending.discard(i)
        v = self._variants[i]
        if v.ridge > 0:
            return self._factors.pop(v.design, None)
        nxt = i + 1
        if v.drift and nxt in self._pending and self._variants[nxt].ridge > 0 \
                and self._variants[nxt].design == v.design:
            return self._factors.setdefault(v.design, {})
        return None
