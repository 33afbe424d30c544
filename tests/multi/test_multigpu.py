"""Many GPUs: per-rank profiles of collectives merged on one timeline.

Scored against the simulated node's truth: every collective execution ends
at the same true time on every device, so after merging, each rank's end,
placed on the root's host clock, must lie within its reported bound of the
truth on that clock. The torch.distributed test runs 2 ranks as processes
over gloo, each with its own replica of the simulated node (deterministic:
every replica is the same node) and a deliberately different host clock.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fingrav_native as fn
import fingrav_native.native
from conftest import free_port, torch_or_skip
from fingrav_native.app import profile_node
from fingrav_native.backends import SimBackend
from fingrav_native.clocks import HostAlignment
from fingrav_native.files import export_trace, load_profile, node_trace_events, save_profile
from fingrav_native.method import LocalAgreement, PowerMeasurement, ThreadAgreement
from fingrav_native.multi import NodeProfile, check_steady_states, merge_ranks
from fingrav_native.sim import SimNode

MB = 2 ** 20
CAMPAIGN = dict(mode="both", runs=40, top_up=False)


def _check_against_truth(node: SimNode, merged: NodeProfile) -> dict[str, float]:
    """Every merged collective end vs the truth on the root's clock; returns the worst figures."""
    truth = node.collective_truth()
    worst_ratio, worst_err = 0.0, 0.0
    ends_by_exec: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for rank, tl in enumerate(merged.timelines):
        t = truth[truth["rank"] == rank]
        key = {(int(r), int(i)): float(e) for r, i, e in zip(t["run"], t["index"], t["end_true_ns"])}
        ex = tl.executions
        assert len(ex) > 0
        for e in ex:
            true_end = node.host_from_true(merged.root, key[(int(e["run"]), int(e["index"]))])
            err = abs(float(e["end_ns"]) - true_end)
            worst_err = max(worst_err, err)
            worst_ratio = max(worst_ratio, err / float(e["end_err_ns"]))
            ends_by_exec.setdefault((int(e["run"]), int(e["index"])), []).append(
                (float(e["end_ns"]), float(e["end_err_ns"])))
    # Across ranks: the same execution's merged ends agree within their bounds.
    for ends in ends_by_exec.values():
        v = np.array(ends)
        assert np.ptp(v[:, 0]) <= 2 * v[:, 1].max()
    return {"worst_ratio": worst_ratio, "worst_err_ns": worst_err}


@pytest.mark.slow
def test_profile_node_aligns_ranks_with_different_host_clocks_within_the_bound():
    node = SimNode(devices=4, seed=3)
    assert len(set(np.round(node.host_offsets_ns))) == 4  # deliberately different clocks
    kernel = node.collective("allreduce", 512 * MB)
    merged = profile_node(kernel, node.node_backends(), exchange=node.exchange_brackets, **CAMPAIGN)
    assert isinstance(merged, NodeProfile) and len(merged.ranks) == 4
    assert merged.shares_host_clock == (True, False, False, False)
    assert merged.alignment_bound_ns[0] == 0 and np.all(merged.alignment_bound_ns[1:] > 0)
    # Tens of us: the simulated host-to-host message latency's floor, not ms.
    assert np.all(merged.alignment_bound_ns < 200_000)
    scores = _check_against_truth(node, merged)
    assert scores["worst_ratio"] <= 1.0, scores
    # Without alignment (each rank's clock taken as the root's) the ends are
    # off by the clocks' offsets: the check above can fail.
    raw = merge_ranks(merged.ranks, [HostAlignment.identity(r) for r in range(4)])
    with pytest.raises(AssertionError):
        _check_against_truth(node, raw)


@pytest.mark.slow
def test_every_rank_ran_the_same_runs_and_ssp_matches_sse_for_a_collective():
    node = SimNode(devices=2, seed=5)
    kernel = node.collective("allgather", 64 * MB)
    merged = profile_node(kernel, node.node_backends(), exchange=node.exchange_brackets, mode="both", runs=30)
    runs = [sorted(set(tl.executions["run"])) for tl in merged.timelines]
    assert runs[0] == runs[1]
    n_exec = [p.settings["executions_per_run"] for p in merged.ranks]
    assert n_exec[0] == n_exec[1]
    # Detected, not assumed: a collective's SSP is its SSE (paper Section V-D).
    assert all(chk is not None and chk.coincide for chk in merged.steady)
    view = merged.node["sse"]
    assert set(view.total) >= {"total", "io", "memory"}
    np.testing.assert_allclose(view.total["total"], view.per_rank["total"].sum(axis=0))
    assert view.energy_j["total"] == pytest.approx(sum(p.profiles["sse"].energy["total"].energy_j
                                                       for p in merged.ranks))


@pytest.mark.slow
def test_a_gemm_is_not_taken_for_steady_at_its_sse():
    p = fn.profile("cb-2k-gemm", SimBackend(seed=0), mode="both")
    chk = check_steady_states(p)
    assert chk is not None and not chk.coincide
    assert chk.ssp_w > chk.sse_w
    assert check_steady_states(fn.profile("cb-2k-gemm", SimBackend(seed=0), mode="sse", runs=20)) is None


def test_ranks_sharing_one_host_clock_are_identity_aligned():
    node = SimNode(devices=2, seed=2, shared_host_clock=True)
    kernel = node.collective("allreduce", 64 * MB)
    merged = profile_node(kernel, node.node_backends(), mode="sse", runs=30, top_up=False)
    assert merged.shares_host_clock == (True, True)
    assert np.all(merged.alignment_bound_ns == 0)
    assert _check_against_truth(node, merged)["worst_ratio"] <= 1.0
    assert "one host clock" in repr(merged)


def test_node_profile_file_round_trip_and_trace_has_a_track_group_per_rank(tmp_path):
    node = SimNode(devices=3, seed=4)
    kernel = node.collective("allreduce", 64 * MB)
    merged = profile_node(kernel, node.node_backends(), exchange=node.exchange_brackets, mode="sse", runs=30,
                          top_up=False)
    save_profile(merged, tmp_path / "node.fgprof")
    back = load_profile(tmp_path / "node.fgprof")
    assert isinstance(back, NodeProfile)
    np.testing.assert_array_equal(back.alignment_bound_ns, merged.alignment_bound_ns)
    for a, b in zip(back.timelines, merged.timelines):
        np.testing.assert_array_equal(a.executions, b.executions)
    assert back.alignment(1).to_root(1e12) == pytest.approx(merged.alignment(1).to_root(1e12))
    doc = node_trace_events(merged)
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert sorted(names) == [1, 2, 3]
    assert names[1].startswith("rank 0:") and "aligned +-" in names[2]
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in slices} == {1, 2, 3}
    assert sum(len(tl.executions) for tl in merged.timelines) == len(slices)
    path = export_trace(merged, tmp_path / "node.trace.json")
    assert json.loads(Path(path).read_text())["otherData"]["ranks"] == 3


def test_merge_checks_its_inputs():
    p0 = fn.profile("cb-4k-gemm", SimBackend(seed=0), mode="sse", runs=20)
    p1 = fn.profile("cb-2k-gemm", SimBackend(seed=0), mode="sse", runs=20)
    ident = [HostAlignment.identity(0), HostAlignment.identity(1)]
    with pytest.raises(ValueError, match="different kernels"):
        merge_ranks([p0, p1], ident)
    with pytest.raises(ValueError, match="root=2"):
        merge_ranks([p0, p0], ident, root=2)
    with pytest.raises(ValueError, match="alignments: 1 given for 2 ranks"):
        merge_ranks([p0, p0], ident[:1])
    with pytest.raises(ValueError, match="settings\\['host_alignment'\\]"):
        merge_ranks([p0, p0])
    with pytest.raises(ValueError, match="profiles: at least one"):
        merge_ranks([])
    with pytest.raises(ValueError, match="kernel: give the kernel"):
        profile_node(None, [SimBackend(seed=0)])
    with pytest.raises(ValueError, match="agreement: set by profile_node"):
        profile_node("cb-4k-gemm", [SimBackend(seed=0)], agreement=LocalAgreement())


def test_a_failing_rank_fails_the_node_without_hanging_the_others():
    class Broken(SimBackend):
        def execute_run(self, kernel, executions, run):
            raise RuntimeError("device lost")

    with pytest.raises(RuntimeError, match="rank 1 failed: RuntimeError\\('device lost'\\)"):
        profile_node("cb-4k-gemm", [SimBackend(seed=0), Broken(seed=1)], mode="sse", runs=20)


def test_thread_agreement_gives_every_rank_the_same_answer():
    group = ThreadAgreement.group(3, timeout_s=30)
    out: list[Any] = [None] * 3

    def rank(r: int) -> None:
        a = group[r]
        m = a.measurement(PowerMeasurement(100.0 + r, 2.0, 10))
        out[r] = (a.max(float(r)), a.mean(float(r)), m)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o == out[0] for o in out)
    mx, mean, m = out[0]
    assert (mx, mean) == (2.0, 1.0)
    assert m.mean_w == pytest.approx(101.0) and m.count == 30
    assert m.stderr_w == pytest.approx(2.0 / np.sqrt(3))
    with pytest.raises(ValueError, match="size=0"):
        ThreadAgreement.group(0)


# --------------------------------------------------------------------------- ranks over gloo

OFFSETS_NS = (7_000_000, -900_000_000, 1_600_000_000, 25_000_000)
SKEWS_PPM = (-15.0, 40.0, 55.0, -30.0)






def _replica(world: int, anchor_ns: int) -> SimNode:
    """The simulated node every rank builds identically, its host clocks those of the ranks' SkewedClocks.

    Rank r's SkewedClock reads ``mono (1 + s_r) + o_r``; the node's host
    clock of rank r reads ``true (1 + s_r) + o'_r``. With
    ``o'_r = o_r + anchor (1 + s_r)`` they are the same clock, the node's
    true time being CLOCK_MONOTONIC_RAW minus ``anchor``: the exchanges over
    gloo (real time) and the campaign (virtual time) then measure one truth.
    """
    offsets = [OFFSETS_NS[r] + anchor_ns * (1 + SKEWS_PPM[r] * 1e-6) for r in range(world)]
    return SimNode(devices=world, seed=11, host_offsets_ns=offsets, host_skews_ppm=list(SKEWS_PPM[:world]))


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from fingrav_native.app import profile_distributed
    from fingrav_native.clocks import SkewedClock

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    try:
        # One anchor for every replica: the root's monotonic time minus the node's start.
        start = SimNode(devices=world, seed=11).now()
        anchor = torch.tensor([fingrav_native.native.host_time_ns() - start], dtype=torch.int64)
        dist.broadcast(anchor, src=0)
        node = _replica(world, int(anchor.item()))
        kernel = node.collective("allreduce", 64 * MB)
        clock = SkewedClock(OFFSETS_NS[rank], SKEWS_PPM[rank])
        result = profile_distributed(kernel, node.backend(rank), clock=clock, exchanges=64, mode="sse", runs=30,
                                     top_up=False, out_dir=os.path.join(out_dir, "campaign"))
        if rank == 0:
            assert isinstance(result, NodeProfile)
            scores = _check_against_truth(node, result)
            summary = {"scores": scores, "bounds": [float(b) for b in result.alignment_bound_ns],
                       "shares": list(result.shares_host_clock)}
            (Path(out_dir) / "root.json").write_text(json.dumps(summary))
        else:
            assert result.settings["rank"] == rank and "host_alignment" in result.settings
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.optional
@pytest.mark.slow
def test_ranks_over_gloo_merge_on_the_root_within_the_bound(tmp_path, world):
    torch_or_skip()
    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_worker, args=(world, free_port(), str(tmp_path)), nprocs=world, join=True)
    summary = json.loads((tmp_path / "root.json").read_text())
    assert summary["scores"]["worst_ratio"] <= 1.0, summary
    assert summary["shares"] == [True] + [False] * (world - 1)
    # Loopback exchanges on a busy 2-core machine: well under the clocks' offsets, which are ms to s.
    assert all(0 < b < 5_000_000 for b in summary["bounds"][1:])
    # Post-processing merge of the per-rank files gives the same node.
    files = [tmp_path / "campaign" / f"rank_{r}.fgprof" for r in range(world)]
    again = merge_ranks([load_profile(f) for f in files])
    node = load_profile(tmp_path / "campaign" / "node.fgprof")
    np.testing.assert_allclose(again.alignment_bound_ns, node.alignment_bound_ns)
