"""The energy interval of instantaneous logs includes what their placement error against the kernels moves.

Closed form: a 30 us kernel at 400 W between gaps at 100 W, logged at instants of exact power; the clock
map puts every log 6 us later than it was taken and states a bound of 8 us. The logs of interest then
cover 6 us of the gap before each execution and miss its last 6 us: every golden run is off the same way,
so the statistical interval (tiny: the power is constant) cannot cover it; the map's own bound can.
"""

from __future__ import annotations

import numpy as np

from fingrav_native import profile_trace
from fingrav_native.insitu import KernelTrace
from fingrav_native.records import SAMPLE_DTYPE


class _LateMap:
    """A map from bracketed reads that stamps each log ``late_ns`` late, within its stated ``bound_ns``."""

    def __init__(self, late_ns: float, bound_ns: float) -> None:
        self.late_ns, self.bound_ns = late_ns, bound_ns

    def to_host(self, ticks: object) -> np.ndarray:
        return np.asarray(ticks, dtype=np.float64) + self.late_ns

    def error_bound_at(self, host_ns: object) -> np.ndarray:
        return np.full(np.shape(host_ns), self.bound_ns)


def test_silently_wrong_interval_covers_the_logs_placement_error_within_the_maps_bound() -> None:
    rng = np.random.default_rng(7)
    n, dur = 2000, 30_000
    starts = np.cumsum(rng.uniform(200_000, 400_000, n)).astype(np.int64)
    ends = starts + dur
    kt = KernelTrace.from_rows(starts, ends, ["k"] * n, [(1, 1, 1)] * n, [(1, 1, 1)] * n, clock="CLOCK_BOOTTIME",
                               source="test", err_ns=0.0)
    t = np.sort(rng.uniform(starts[0] - 1e6, ends[-1] + 1e6, 30_000)).astype(np.int64)
    inside = np.searchsorted(starts, t, side="right") - 1
    busy = (inside >= 0) & (t < ends[np.clip(inside, 0, None)])
    samples = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    samples["source_ts"] = t
    samples["host_ns"] = t
    samples["seq"] = np.arange(len(t))
    for ch in ("compute", "io", "memory"):
        samples[ch] = np.nan
    samples["total"] = np.where(busy, 400.0, 100.0)
    truth_j = 400.0 * dur * 1e-9
    tp = profile_trace(kt, samples, _LateMap(6_000.0, 8_000.0), align=False)
    row = tp.kernels[0]
    off = abs(float(row["energy_j"]) - truth_j)
    # First order: 6 us x (400 - 100) W = 1.8 mJ low; the interval holds it, and from the bound: 8 us x 300 W.
    assert 0.13 * truth_j < off < 0.16 * truth_j
    assert off <= float(row["energy_half_width_j"]) <= off + 0.05 * truth_j + 2.4e-3
    assert "placement error" in tp.profiles[0].energy["total"].note
