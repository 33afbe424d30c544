#!/usr/bin/env python3
"""Where one BLAS thread stops beating the default: the crossover behind ``fingrav_native._threads.LARGE_SIZE``.

Times, best of three, the dense work the package's solves are made of, at one
BLAS thread and at two (``threadpool_limits(k, "blas")``): the aligners'
batched Gram products and eigendecompositions (blocks x logs x columns, at
most a few dozen columns), and square matrix products, symmetric
eigendecompositions, Cholesky solves and least squares from n = 32 to 1024
(the attribution engine's systems are a few hundred unknowns). Run it quiet
and again beside other work (e.g. ``bench/busy_host_bench.py``'s busy
processes): the policy's table in ``_threads.py`` holds both.

Run:  python bench/blas_crossover.py          (a minute or two quiet; much longer on a busy host)
Prints one line per shape; writes nothing.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits


def best(f: Callable[[], Any], reps: int) -> float:
    """Best of three means over ``reps`` calls (seconds)."""
    out = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        out = min(out, (time.perf_counter() - t0) / reps)
    return float(out)


def both(f: Callable[[], Any], reps: int) -> str:
    t = []
    for k in (1, 2):
        with threadpool_limits(limits=k, user_api="blas"):
            t.append(best(f, reps))
    return f"{t[0] * 1e3:.3f} / {t[1] * 1e3:.3f} ms (x{t[1] / t[0]:.2f})"


def main() -> None:
    rng = np.random.default_rng(0)
    print("one thread / two threads (two over one)")
    for b, n, p in [(20, 1000, 37), (200, 100, 37), (20, 1000, 13)]:
        X = rng.standard_normal((b, n, p))
        G = X.transpose(0, 2, 1) @ X
        print(f"batched {b}x{n}x{p}: Gram {both(lambda: X.transpose(0, 2, 1) @ X, 5)}, "
              f"eigh {both(lambda: np.linalg.eigh(G), 5)}", flush=True)
    for n in (32, 64, 128, 256, 512, 1024):
        A = rng.standard_normal((n, n))
        S = A @ A.T + n * np.eye(n)
        B = rng.standard_normal((4 * n, n))
        y = rng.standard_normal(4 * n)
        reps = max(1, int(2e7 / n**3))
        print(f"n={n}: matmul {both(lambda: A @ A, reps)}, eigh {both(lambda: np.linalg.eigh(S), reps)}, "
              f"cholesky solve {both(lambda: scipy.linalg.cho_solve(scipy.linalg.cho_factor(S), y[:n]), reps)}, "
              f"lstsq {4 * n}x{n} {both(lambda: scipy.linalg.lstsq(B, y), reps)}", flush=True)


if __name__ == "__main__":
    main()
