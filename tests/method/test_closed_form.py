"""stitch_logs against closed-form truth, not the simulator: a linear ramp of known energy."""

from __future__ import annotations

import numpy as np

import fingrav_native as fg

T_NS = 100_000   # 100 us executions
GAP_NS = 20_000  # 20 us gaps


class Identity:
    def to_host(self, t):
        return np.asarray(t, dtype=np.float64)

    def error_bound_at(self, h):
        return np.zeros_like(np.asarray(h, dtype=np.float64))


def test_a_ramp_of_known_energy_is_recovered_within_its_interval():
    # 300 W rising linearly to 500 W over each execution: 40 mJ exactly; logs at random instants with 5 W noise.
    rng = np.random.default_rng(0)
    period, runs, execs = T_NS + GAP_NS, 300, 20
    rows, ts, into = [], [], []
    for r in range(runs):
        t0 = r * 50_000_000 + int(rng.integers(0, 1000))
        rows += [(r, i, 0, t0 + i * period, t0 + i * period + T_NS) for i in range(execs)]
        offsets = rng.integers(0, execs * period, 6)
        ts += list(t0 + offsets)
        into += list(offsets % period)
    run, index, kernel, start, end = map(np.array, zip(*rows))
    ex = fg.make_executions(run, index, kernel, start, end)
    ts = np.array(ts, dtype=np.int64)
    u = np.array(into) / T_NS  # where in its execution each log falls (> 1: in the gap after it)
    power = np.where(u <= 1, 300.0 + 200.0 * np.clip(u, 0, 1), 120.0) + rng.normal(0, 5.0, len(ts))
    logs = np.zeros(len(ts), dtype=[("source_ts", "<i8"), ("total", "<f4")])
    logs["source_ts"], logs["total"] = ts, power
    p = fg.stitch_logs(logs, ex, Identity(), execution_of_interest=10)
    e = p.energy["total"]
    assert abs(e.energy_j - 0.040) <= 3 * e.uncertainty_j + 1e-4, (e.energy_j, e.uncertainty_j)
    ch = next(c for c in p.stitched.channels if c.name == "total")
    x = ch.fit_x / T_NS if ch.fit_x.max() > 2 else ch.fit_x
    rmse = float(np.sqrt(np.mean((ch.fit_y - (300.0 + 200.0 * np.clip(x, 0, 1))) ** 2)))
    assert rmse < 5.0, rmse  # below the logs' own noise
