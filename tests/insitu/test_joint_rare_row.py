"""The joint row [g]: the signatures no row of their own can hold, attributed together under instantaneous logs.

A signature too rare or too short for the logs inside its executions to give it a level with an interval has
no row; together, the logs inside any of those executions sample the group's power weighted by duration
(a log at a phase independent of the kernels lands in an execution with probability proportional to its
duration), so their mean x the group's summed duration is its energy. The simulations break the coarse row's
assumption of one power per signature: each rare signature draws a power of its own, known in closed form
(80 W idle plus its own extra, constant while it runs).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.files import read_trace
from fingrav_native.insitu import ClockMismatchWarning, KernelTrace
from fingrav_native.insitu._rare import MIN_JOINT_CLUSTERS, group_level
from fingrav_native.records import EXECUTION_DTYPE
from fingrav_native.sim import EpochIdentity, Identity
from real_data import require

PERIOD_NS = 100_000


def _loop(seed: int, n_rare: int = 150, locked: bool = False, tied: float = 0.0, longest_ns: float = 15e3
          ) -> tuple[KernelTrace, np.ndarray, np.ndarray]:
    """A timeline of a steady GEMM (40 executions, a stitched row) and ``n_rare`` rare signatures (1-4 executions
    each, 2-15 us, each its own extra power of 50-300 W), and instantaneous logs every 100 us at a random phase.

    ``tied``: the share of each extra power set by the signature's duration (0: independent of it; 1: the longest
    draw the most), so that a sample that favours short or long signatures shows as a bias.

    ``locked``: the loop lasts exactly 20 logger periods and every kernel starts at the same offset in every one
    of 12 iterations (the rare ones, one execution each, at 40 offsets with a power and duration each), so the
    logs land at the same instants of the loop every iteration.
    Returns the trace, the logs and each execution's true power (W).
    """
    rng = np.random.default_rng([seed, 7])
    dur = rng.uniform(2e3, longest_ns, n_rare)
    extra = (1.0 - tied) * rng.uniform(50.0, 300.0, n_rare) + tied * (50.0 + 250.0 * (dur - 2e3) / (longest_ns - 2e3))
    if locked:
        # Slot j of every iteration runs a kernel of its own (a signature that runs once), of slot j's duration
        # and power, at slot j's offset.
        n_slot = min(n_rare, 40)
        offsets = 450_000 + np.sort(rng.choice(43, size=n_slot, replace=False)) * 35_000
        it = np.repeat(np.arange(12), n_slot + 1)
        slot = np.tile(np.arange(-1, n_slot), 12)
        start = it * 20 * PERIOD_NS + np.where(slot < 0, 0, np.tile(np.r_[0, offsets], 12))
        dur, extra = dur[np.maximum(slot, 0)], extra[np.maximum(slot, 0)]
        sig = np.where(slot < 0, -1, np.arange(len(slot)))
    else:
        sig = rng.permutation(np.r_[np.full(40, -1), np.repeat(np.arange(n_rare), rng.integers(1, 5, n_rare))])
        d = np.where(sig < 0, 400e3, dur[np.maximum(sig, 0)])
        start = np.cumsum(np.r_[0.0, (d + rng.uniform(5e3, 60e3, len(sig)))[:-1]])
    d = np.where(sig < 0, 400e3, dur[np.maximum(sig, 0)])
    ex = np.zeros(len(sig), dtype=EXECUTION_DTYPE)
    ex["start_ns"] = np.round(start).astype(np.int64)
    ex["end_ns"] = ex["start_ns"] + np.round(d).astype(np.int64)
    ex["run"] = ex["index"] = np.arange(len(ex))
    names = ["gemm_bf16_main" if s < 0 else f"rare_kernel_{s}" for s in sig]
    kt = KernelTrace.from_executions(ex, names)
    power_ex = 80.0 + np.where(sig < 0, 150.0, extra[np.maximum(sig, 0)])
    t = np.arange(-1_000_000, int(ex["end_ns"].max()) + 1_000_000, PERIOD_NS) + rng.uniform(0, PERIOD_NS)
    k = np.searchsorted(ex["start_ns"], t, side="right") - 1
    inside = (k >= 0) & (t < ex["end_ns"][np.clip(k, 0, None)])
    logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    logs["source_ts"] = np.round(t).astype(np.int64)
    logs["total"] = np.where(inside, power_ex[np.clip(k, 0, None)], 80.0) + rng.normal(0.0, 1.0, len(t))
    for ch in ("compute", "io", "memory"):
        logs[ch] = np.nan
    return kt, logs, power_ex


def _truth(kt: KernelTrace, power_w: np.ndarray, rows: np.ndarray) -> float:
    """The true energy (J) of the executions ``rows``: each one's power x its duration."""
    ex = kt.executions[rows]
    return float(np.sum(power_w[rows] * (ex["end_ns"] - ex["start_ns"]))) * 1e-9


def _members(kt: KernelTrace, logs: np.ndarray) -> np.ndarray:
    """The rows of the rare signatures no coarse row holds: fewer than two logs strictly inside their executions."""
    ex, t = kt.executions, np.sort(logs["source_ts"].astype(np.float64))
    inside = np.searchsorted(t, ex["end_ns"], side="left") - np.searchsorted(t, ex["start_ns"], side="right")
    per_sig = np.bincount(ex["kernel_id"], weights=inside, minlength=len(kt.signatures))
    rare = ~np.char.startswith(kt.signatures["name"].astype(str), "gemm")
    return np.flatnonzero((rare & (per_sig < 2))[ex["kernel_id"]])


def _group_energy(kt: KernelTrace, logs: np.ndarray, rows: np.ndarray) -> tuple[float, float, float]:
    """The group's energy and its interval's ends (J) from group_level over ``rows``."""
    ex = kt.executions[rows]
    t = logs["source_ts"].astype(np.float64)
    order = np.argsort(t)
    lvl, lo, hi, _, _ = group_level(t[order], logs["total"][order], ex["start_ns"], ex["end_ns"])
    total = float(np.sum(ex["end_ns"] - ex["start_ns"])) * 1e-9
    return lvl * total, lo * total, hi * total


def _coverage(seeds: range, **kw: Any) -> float:
    held = []
    for seed in seeds:
        kt, logs, power_w = _loop(seed, **kw)
        rows = _members(kt, logs)
        _, lo, hi = _group_energy(kt, logs, rows)
        held.append(lo <= _truth(kt, power_w, rows) <= hi)
    return float(np.mean(held))


@pytest.mark.parametrize("kw", [{}, {"tied": 1.0, "longest_ns": 60e3}], ids=["independent", "longest-draw-most"])
def test_silently_wrong_joint_energy_interval_holds_the_truth_when_each_signature_draws_its_own_power(
        kw: dict[str, Any]) -> None:
    # The members are those with fewer than two logs inside (the coarse rows take the rest), as the attribution
    # picks them. Measured: 98.0 % (independent) and 94.0 % (the
    # longest draw the most: the members' selection by their logs favours short ones, a -2 % bias) of 200 seeds.
    assert _coverage(range(200), **kw) >= 0.93


def _joint_row(tp: Any) -> Any:
    rows = [i for i, n in enumerate(tp.kernels["name"]) if str(n).startswith("[joint] ")]
    assert len(rows) <= 1
    return rows[0] if rows else None


def test_data_loss_rare_signatures_without_rows_share_one_joint_row_holding_their_energy() -> None:
    kt, logs, power_w = _loop(3)
    tp = profile_trace(kt, logs, Identity(), align=False)
    i = _joint_row(tp)
    assert i is not None, tp.warnings
    r = tp.kernels[i]
    # Its executions, counted once each; its energy per execution x count is the group's.
    members = tp.joint_members()
    in_row = np.isin(kt.signatures["name"][kt.executions["kernel_id"]], [m.split(" grid=")[0] for m in members])
    assert r["joint"] and int(r["count"]) == int(in_row.sum()) and tp.signature_rows[i] == -1
    assert np.array_equal(np.flatnonzero(in_row), _members(kt, logs))
    half = r["energy_half_width_j"] * r["count"]
    assert abs(r["energy_j"] * r["count"] - _truth(kt, power_w, np.flatnonzero(in_row))) <= half
    # Every member stays listed, said to be in the joint row; none gets an energy of its own.
    assert len(members) >= 2 and all(tp.skipped[m].startswith("in the joint row [g]") for m in members)
    assert not set(m.split(" grid=")[0] for m in members) & set(tp.kernels["name"].tolist())
    used, n = tp.used_executions()
    assert used == n == len(kt.executions)
    text = str(tp)
    assert "[g] [joint] " in text and "[g]: a joint attribution" in text and "in the joint row [g]" in text


def test_silently_wrong_joint_row_refused_when_logs_are_phase_locked_to_the_loop() -> None:
    # The loop lasts 20 logger periods exactly: the logs land at the same instants of the loop every iteration,
    # so the rare kernels they sample are those of a fixed few offsets, not a duration-weighted draw. Without the
    # check (PHASE_LOCK_P = 0) the row's interval held the truth on 5 of these 10 seeds (errors up to 27 % against
    # half-widths of 5-8 %); with it, no row, and the warning says why.
    for seed in range(10):
        kt, logs, _ = _loop(seed, locked=True)
        with warnings.catch_warnings():
            # Logs locked to the loop place every kernel at the same phase: the offset check finds a comb of
            # equally good offsets and may report one as a mismatch (align=False: not applied).
            warnings.simplefilter("ignore", ClockMismatchWarning)
            tp = profile_trace(kt, logs, Identity(), align=False)
        assert _joint_row(tp) is None
        assert any("same phase of the logger" in w for w in tp.warnings), tp.warnings


def test_unclear_no_joint_row_with_logs_in_fewer_executions_than_the_minimum() -> None:
    kt, logs, _ = _loop(5)
    ex = kt.executions[_members(kt, logs)]
    t = logs["source_ts"].astype(np.float64)
    hit = np.flatnonzero(np.any((t[:, None] > ex["start_ns"]) & (t[:, None] < ex["end_ns"]), axis=1))
    # Keep logs inside MIN_JOINT_CLUSTERS - 1 executions only.
    keep_hits = hit[:MIN_JOINT_CLUSTERS - 1]
    drop = np.setdiff1d(hit, keep_hits)
    tp = profile_trace(kt, np.delete(logs, drop), Identity(), align=False)
    assert _joint_row(tp) is None
    assert any(f"fewer than {MIN_JOINT_CLUSTERS} for a joint row's interval" in w for w in tp.warnings), tp.warnings
    assert not any(v.startswith("in the joint row") for v in tp.skipped.values())


@pytest.mark.slow
def test_silently_wrong_joint_row_interval_holds_the_truth_through_profile_trace_on_100_seeds() -> None:
    held = 0
    for seed in range(100):
        kt, logs, power_w = _loop(seed, tied=1.0, longest_ns=60e3)
        tp = profile_trace(kt, logs, Identity(), align=False)
        i = _joint_row(tp)
        assert i is not None
        r = tp.kernels[i]
        rows = np.flatnonzero(np.isin(kt.signatures["name"][kt.executions["kernel_id"]],
                                      [m.split(" grid=")[0] for m in tp.joint_members()]))
        held += abs(r["energy_j"] * r["count"] - _truth(kt, power_w, rows)) <= r["energy_half_width_j"] * r["count"]
    # Measured: 95 of 100 (97 with powers independent of the durations).
    assert held >= 93


@pytest.mark.slow
def test_silently_wrong_joint_row_on_a_real_timeline_holds_the_truth_when_each_signature_draws_its_own_power() -> None:
    # HTA's DDP trace (rank 0 of 128): 277 signatures short or rare enough to have no row of their own under
    # 100 us logs. Each compute signature draws its own power (100-300 W over 80 W idle) and communication adds
    # 60 W whatever runs beside it (taken off the logs, as CompPow's accounting puts it in its own row).
    kt = read_trace(require("traces/hta/sampled_rank-0.json.gz"))
    ex = kt.executions
    comm = np.array(["nccl" in str(n).lower() for n in kt.signatures["name"]])[ex["kernel_id"]]
    held = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        draw = rng.uniform(100.0, 300.0, len(kt.signatures))
        t = np.arange(int(ex["start_ns"].min()) - 2_000_000, int(ex["end_ns"].max()) + 2_000_000, PERIOD_NS)
        t = t + int(rng.integers(0, PERIOD_NS))
        p = np.full(len(t), 80.0)
        for i, extra in zip(range(len(ex)), np.where(comm, 60.0, draw[ex["kernel_id"]])):
            a, b = np.searchsorted(t, [ex["start_ns"][i], ex["end_ns"][i]])
            p[a:b] += extra
        logs = np.zeros(len(t), dtype=SAMPLE_DTYPE)
        logs["source_ts"] = t + kt.origin_ns
        logs["total"] = p + rng.normal(0.0, 1.0, len(t))
        for ch in ("compute", "io", "memory"):
            logs[ch] = np.nan
        tp = profile_trace(kt, logs, EpochIdentity(), align=False)
        i = _joint_row(tp)
        assert i is not None, tp.warnings
        r, ep = tp.kernels[i], tp.profiles[i]
        rows = np.flatnonzero(np.isin(ex["run"], np.asarray(ep.golden.run_ids)))
        truth = float(np.sum((80.0 + draw[ex["kernel_id"][rows]]) * (ex["end_ns"][rows] - ex["start_ns"][rows]))) * 1e-9
        held += abs(r["energy_j"] * r["count"] - truth) <= r["energy_half_width_j"] * r["count"]
    # Measured: 10 of 10 (errors -0.7 % to +2.9 % against half-widths of about 4 %); 18 of 20 over seeds 0-19.
    assert held >= 9


def test_unclear_kernels_json_marks_the_joint_row_and_names_its_members(tmp_path, monkeypatch) -> None:
    # fingrav trace's kernels.json: the joint row is a row like the others, marked joint, naming the signatures it
    # holds (each also in "skipped", in the joint row); the figures and the Perfetto export are not its concern.
    import argparse
    import json
    from types import SimpleNamespace

    from matplotlib.figure import Figure

    from fingrav_native.app import _cli_files

    kt, logs, _ = _loop(3)
    tp = profile_trace(kt, logs, Identity(), align=False)
    fig = Figure()
    monkeypatch.setattr(_cli_files, "export_trace", lambda tp, path: path)
    monkeypatch.setattr(_cli_files, "write_atomically", lambda path, write: None)
    monkeypatch.setattr(_cli_files, "fplot", SimpleNamespace(plot_kernel_energy=lambda tp: SimpleNamespace(figure=fig),
                                                            figure_trace_profiles=lambda tp, top: fig))
    args = argparse.Namespace(out=str(tmp_path), format="png", top=5, trace="trace.json", power="power.npz", device=0,
                              force=False)
    _cli_files._trace_outputs(args, tp, None, SimpleNamespace(phase=lambda words: None))
    doc = json.loads((tmp_path / "kernels.json").read_text())
    joint = [r for r in doc["kernels"] if r["name"].startswith("[joint] ")]
    assert len(joint) == 1 and joint[0]["joint"] and joint[0]["energy_half_width_j"] is not None
    assert sorted(joint[0]["members"]) == sorted(tp.joint_members()) and len(joint[0]["members"]) >= 2
    assert all(doc["skipped"][m].startswith("in the joint row [g]") for m in joint[0]["members"])
    assert not any("members" in r for r in doc["kernels"] if not r["name"].startswith("[joint] "))


def test_silently_wrong_joint_interval_carries_the_communication_levels_error() -> None:
    # Closed form: half of the logs inside the members fell while a communication kernel ran and had its fitted
    # level (+-10 W standard error) taken off; one error of that level moves all of them alike, so the mean of
    # the members' logs moves by half of it: 0.5 x 1.96 x 10 W, added to the interval.
    from fingrav_native.insitu._instant_attribution import Overlap, _level_term_w
    from fingrav_native.insitu._overlap import CommunicationLevel

    ex = np.zeros(3, dtype=EXECUTION_DTYPE)
    # Members a and b; a communication kernel beside b, over both of b's logs.
    ex["start_ns"], ex["end_ns"] = [0, 100, 105], [50, 150, 130]
    ex["run"] = ex["index"] = np.arange(3)
    kt = KernelTrace.from_executions(ex, ["a", "b", "ncclKernel_AllReduce"], stream=[0, 0, 1])
    t = np.array([10.0, 20.0, 110.0, 120.0])  # inside the members
    members = kt.executions[:2]
    comm = np.array([False, False, True])
    overlap = Overlap(comm=comm, over=np.zeros(3, bool), compute_conc=np.zeros(3, bool), overlay=np.zeros(3, bool),
                      level=CommunicationLevel(level_w=60.0, se_w=10.0, logs_during=100))
    assert _level_term_w(t, members, kt, overlap) == pytest.approx(0.5 * 1.959964 * 10.0, rel=1e-5)
    assert _level_term_w(t, members, kt, dataclasses.replace(overlap, level=None)) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hta/nccl_data.ProfilerStep5.json.gz", "hta/sampled_rank-0.json.gz",
                                  "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz"])
def test_data_loss_real_trace_with_short_rare_kernels_uses_90_percent_with_the_joint_row_holding_the_truth(
        name: str) -> None:
    # Excerpts of one or two ProfilerSteps whose signatures mostly run a few times, shorter than the logs' period:
    # without the joint row 54 %, 36 % and 53 % of their executions were used (bench/realtrace_speed.py).
    from test_real_traces import _profiled

    tp = _profiled(name)
    used, n = tp.used_executions()
    assert used >= 0.9 * n
    i = _joint_row(tp)
    assert i is not None
    r, ep = tp.kernels[i], tp.profiles[i]
    ex = tp.trace.executions[np.isin(tp.trace.executions["run"], np.asarray(ep.golden.run_ids))]
    # The synthetic logs' truth: 230 W (80 W idle + 150 W for the kernel) while a compute kernel runs, the
    # communication's additive level taken off the logs (CompPow's accounting gives it to its own row).
    truth = 230.0 * float(np.sum(ex["end_ns"] - ex["start_ns"])) * 1e-9
    assert abs(r["energy_j"] * r["count"] - truth) <= r["energy_half_width_j"] * r["count"]
