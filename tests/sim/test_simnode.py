"""The simulated multi-GPU node: fabric physics, lockstep collectives, host clocks, backends, errors."""

from __future__ import annotations

import doctest
import time

import numpy as np
import pytest

import fingrav_native as fn
from fingrav_native.backends import Backend
from fingrav_native.clocks import fit_clock_map
from fingrav_native.sim import COLLECTIVE_TRUTH_DTYPE, FabricParams, SimNode, collective_time
from fingrav_native.sim import _fabric as fabric
from fingrav_native.sim import _node as simnode

MB512 = 512 << 20
KB64 = 64 << 10


def _idle_total_w(node: SimNode, rank: int) -> float:
    t0 = node.now()
    node.idle(5_000_000)
    t = np.arange(t0 + 1_000_000, t0 + 5_000_000, 10_000, dtype=np.int64)
    return float(node.gpus[rank].truth_power(t)[:, 0].mean())


# ---------------------------------------------------------------------------- physics

def test_bandwidth_bound_allreduce_takes_ms_and_drives_io_and_memory() -> None:
    node = SimNode(devices=8, seed=1)
    idle = _idle_total_w(node, 0)
    big = node.collective("allreduce", MB512)
    small = node.collective("allreduce", KB64)
    tb, ts = node.collective_info(big), node.collective_info(small)
    assert 1e6 < tb.total_ns < 10e6 and tb.bandwidth_share > 0.9
    assert 10e3 < ts.total_ns < 100e3 and ts.bandwidth_share < 0.05

    eb = node.run(big, 6)[3].executions[2:]
    node.idle(20_000_000)
    es = node.run(small, 6)[3].executions[2:]
    dur_b = (eb["end_ns"] - eb["start_ns"]) / 1e3
    dur_s = (es["end_ns"] - es["start_ns"]) / 1e3
    assert np.all((dur_b > 1000) & (dur_b < 10_000))  # milliseconds
    assert np.all((dur_s > 10) & (dur_s < 200))        # tens of microseconds
    # Bandwidth-bound: the IO die (xGMI) and HBM near their dynamic maximum,
    # compute modest (io 60 + 170 a W, memory 40 + 120 a W).
    assert np.all(eb["mean_io_w"] > 60 + 0.7 * 170) and np.all(eb["mean_memory_w"] > 40 + 0.6 * 120)
    assert np.all(eb["mean_total_w"] - idle > 150)
    # Latency-bound: handshakes, compute and IO light, near idle.
    assert np.all(es["mean_io_w"] < 60 + 0.3 * 170) and np.all(es["mean_memory_w"] < 40 + 0.2 * 120)
    assert np.all(es["mean_total_w"] - idle < 0.4 * (eb["mean_total_w"].mean() - idle))
    assert np.all(es["mean_compute_w"] < eb["mean_compute_w"].min())


def test_collective_time_follows_the_ring_model() -> None:
    f = FabricParams()
    for kind, vol, steps in (("allreduce", lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1)),
                             ("allgather", lambda n: (n - 1) / n, lambda n: n - 1)):
        for n in (2, 4, 8, 16, 64):
            t = collective_time(kind, MB512, n, f)
            bw = min(f.links, n - 1) * f.link_bandwidth_gbs * f.link_efficiency
            assert t.steps == steps(n)
            assert t.latency_ns == pytest.approx(f.setup_latency_ns + steps(n) * f.link_latency_ns)
            assert t.bandwidth_ns == pytest.approx(vol(n) * MB512 / bw)
    # All-reduce moves twice what all-gather does.
    assert collective_time("allreduce", MB512, 8).bandwidth_ns == pytest.approx(
        2 * collective_time("allgather", MB512, 8).bandwidth_ns)
    # Latency-bound sizes grow with the ring's steps: linear in devices.
    lat = [collective_time("allreduce", KB64, n).total_ns for n in (8, 16, 32, 64)]
    assert np.all(np.diff(lat) > 0)
    assert (lat[3] - lat[2]) == pytest.approx(2 * (lat[2] - lat[1]), rel=0.05)
    # A single device still pays the launch.
    assert collective_time("allreduce", MB512, 1).total_ns == pytest.approx(f.setup_latency_ns)


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_simulated_transfers_last_what_the_model_says(devices: int) -> None:
    node = SimNode(devices=devices, seed=devices)
    name = node.collective("allreduce", MB512)
    for _ in range(3):
        node.run(name, 4)
        node.idle(10_000_000)
    rows = node.collective_truth()
    warm = rows[rows["index"] > 0]
    transfer = (warm["end_true_ns"] - warm["transfer_true_ns"]) / node.collective_info(name).total_ns
    # Only the run mode varies the transfer: nominal, or a slow mode up to +9%.
    assert np.all((transfer > 0.97) & (transfer < 1.1))


def test_all_ranks_end_a_collective_together_but_start_apart() -> None:
    node = SimNode(devices=8, seed=5)
    name = node.collective("allgather", MB512)
    res = node.run(name, 5)
    starts = np.array([r.executions["start_ns"] for r in res])
    ends = np.array([r.executions["end_ns"] for r in res])
    tick = node.gpus[0].params["device_tick_ns"]
    assert np.all(ends.max(axis=0) - ends.min(axis=0) <= tick)
    assert np.all(starts.max(axis=0) - starts.min(axis=0) > 100)
    # So each rank sees a different execution time for the same collective:
    # the earliest to arrive waited longest.
    dur = ends - starts
    for i in range(5):
        assert np.argmax(dur[:, i]) == np.argmin(starts[:, i])
    # The truth rows say the same, and data moves only after the last arrival.
    rows = node.collective_truth(res[0].run)
    assert rows.dtype == COLLECTIVE_TRUTH_DTYPE and len(rows) == 8 * 5
    for i in range(5):
        ri = rows[rows["index"] == i]
        assert np.all(ri["transfer_true_ns"] == ri["start_true_ns"].max() + (ri["transfer_true_ns"][0]
                                                                                - ri["start_true_ns"].max()))
        assert np.all(ri["transfer_true_ns"] - ri["start_true_ns"] >= node.fabric.handshake_ns - 10)
        assert np.all(ri["end_true_ns"] == ends[ri["rank"], i])


def test_early_ranks_spin_inside_the_collective_at_low_but_not_idle_power() -> None:
    # A large launch skew makes the first execution's waits long enough to look at.
    node = SimNode(devices=4, seed=6, fabric=FabricParams(launch_skew_ns=300_000))
    idle = _idle_total_w(node, 0)
    name = node.collective("allreduce", MB512)
    node.run(name, 2)
    rows = node.collective_truth()
    first = rows[rows["index"] == 0]
    r = int(first["rank"][np.argmin(first["start_true_ns"])])
    row = first[first["rank"] == r][0]
    assert row["transfer_true_ns"] - row["start_true_ns"] > 100_000
    # Middle of the spin (after the power lag settles) vs middle of the transfer.
    spin = node.gpus[r].truth_power([(row["start_true_ns"] + row["transfer_true_ns"]) // 2])[0]
    xfer = node.gpus[r].truth_power([(row["transfer_true_ns"] + row["end_true_ns"]) // 2])[0]
    assert idle + 10 < spin[0] < idle + 0.25 * (xfer[0] - idle)


def test_ordinary_kernels_run_independently_and_a_following_collective_waits_for_all() -> None:
    node = SimNode(devices=4, seed=7)
    name = node.collective("allreduce", 1 << 20)
    res = node.run([("cb-2k-gemm", 3), (name, 2)], 5)
    for r in res:
        assert list(r.executions["kernel_id"]) == [node.kernel_id("cb-2k-gemm")] * 3 + [node.kernel_id(name)] * 2
        assert list(r.executions["index"]) == list(range(5))
    gemm_end = np.array([r.executions["end_ns"][2] for r in res])
    coll_start = np.array([r.executions["start_ns"][3] for r in res])
    assert len(set(gemm_end.tolist())) == 4  # each device's GEMMs took their own time
    assert np.all(coll_start > gemm_end)
    assert np.all(coll_start - gemm_end < 50_000)  # arrival soon after the device was free
    ends = np.array([r.executions["end_ns"][3:] for r in res])
    assert np.all(ends.max(axis=0) - ends.min(axis=0) <= 10)
    # A single device still runs a collective (setup latency only, the handshake spin).
    one = SimNode(devices=1, seed=7)
    ex = one.run(one.collective("allreduce", 1 << 20), 3)[0].executions
    assert np.all((ex["end_ns"] - ex["start_ns"] > 10_000) & (ex["end_ns"] - ex["start_ns"] < 30_000))
    # A GEMM alone: no synchronisation at all between devices.
    node.idle(20_000_000)
    ends = np.array([r.executions["end_ns"] for r in node.run("cb-4k-gemm", 3)])
    assert np.all(ends.max(axis=0) - ends.min(axis=0) > 10)


# ---------------------------------------------------------------------------- clocks

def test_host_clocks_differ_by_the_configured_offsets_and_skews() -> None:
    offsets = [0.0, 2.5e6, -1.2e9, 3.0e9]
    skews = [0.0, 30.0, -20.0, 45.0]
    node = SimNode(devices=4, seed=8, host_offsets_ns=offsets, host_skews_ppm=skews)
    t = node.now()
    for r in range(4):
        assert node.host_now(r) == round(t * (1 + skews[r] * 1e-6) + offsets[r])
        h = node.host_from_true(r, np.array([t, t + 10**9], dtype=np.float64))
        assert np.allclose(node.true_from_host(r, h), [t, t + 10**9], rtol=0, atol=1e-3)
        assert (h[1] - h[0]) == pytest.approx(1e9 * (1 + skews[r] * 1e-6), abs=1e-3)
    # Records come stamped in the rank's clock, truth alongside.
    b = node.backend(2)
    rec = b.execute_run("cb-2k-gemm", 3, b.new_run_id())
    assert np.array_equal(rec.meta["truth_start_ns"],
                          np.rint(node.host_from_true(2, rec.meta["truth_start_true_ns"])).astype(np.int64))
    assert rec.brackets[:, 0].min() < rec.samples["host_ns"].min()
    assert abs(float(rec.brackets[0, 0]) - node.host_from_true(2, node.now())) < 50e6
    # Truth power asked in the rank's host clock is the device's truth at that true time.
    t_true = (rec.meta["truth_start_true_ns"] + rec.meta["truth_end_true_ns"]) // 2
    np.testing.assert_allclose(node.truth_power(2, node.host_from_true(2, t_true)),
                               node.gpus[2].truth_power(t_true), rtol=1e-4)


def test_default_host_clocks_are_deliberately_different_unless_shared() -> None:
    node = SimNode(devices=8, seed=9)
    off, sk = node.host_offsets_ns, node.host_skews_ppm
    assert len(set(off.tolist())) == 8 and np.all((np.abs(off) >= 1e6) & (np.abs(off) < 4e9))
    assert np.all(np.abs(sk) <= 50) and np.ptp(sk) > 10
    hosts = [node.host_now(r) for r in range(8)]
    assert len(set(hosts)) == 8
    # Each device has its own clock too.
    ticks = {int(g.device_ticks_at([node.now()])[0]) for g in node.gpus}
    assert len(ticks) == 8
    shared = SimNode(devices=3, seed=9, shared_host_clock=True)
    assert len({shared.host_now(r) for r in range(3)}) == 1


def test_clock_exchange_recovers_offset_and_skew_within_its_bound() -> None:
    node = SimNode(devices=4, seed=10, fabric=FabricParams(msg_asymmetry=0.5))
    br = node.exchange_brackets(3, 64, peer=1, spacing_ns=1_000_000)
    assert br.shape == (64, 3) and br.dtype == np.int64
    m = fit_clock_map(br, tick_ns=1.0)
    peer = np.linspace(br[0, 1], br[-1, 1], 50)
    truth = node.host_from_true(3, node.true_from_host(1, peer))
    err = m.to_host(peer) - truth
    assert np.all(np.abs(err) <= m.error_bound_at(truth))
    assert np.allclose(m.to_device(truth), peer, atol=np.abs(err).max() * 1.01 + 1)
    true_ratio = (1 + node.host_skews_ppm[3] * 1e-6) / (1 + node.host_skews_ppm[1] * 1e-6)
    assert abs(m.ns_per_tick - true_ratio) * 1e6 < max(m.skew_bound_ppm, 1.0)
    assert abs(node.host_offsets_ns[3] - node.host_offsets_ns[1]) > 1e6  # a real offset was recovered
    # Symmetric legs: the error is far below the half round trip.
    assert np.abs(err).max() < 0.25 * m.best_rtt_ns


def test_message_asymmetry_shows_up_as_the_honest_floor() -> None:
    node = SimNode(devices=2, seed=11, fabric=FabricParams(msg_asymmetry=0.8))
    br = node.exchange_brackets(1, 64, spacing_ns=1_000_000)
    m = fit_clock_map(br, tick_ns=1.0)
    truth = node.host_from_true(1, node.true_from_host(0, br[:, 1].astype(np.float64)))
    err = m.to_host(br[:, 1]) - truth
    # The peer read its clock 80% of the way through the round trip, the
    # fit assumes the middle: every mapped time is off by ~0.3 rtt, and no
    # fit can see it; the reported bound (~half the best round trip) covers it.
    expected = -(0.8 - 0.5) * m.best_rtt_ns
    assert np.median(err) == pytest.approx(expected, rel=0.25)
    assert np.all(np.abs(err) <= m.error_bound_at(truth))
    assert m.floor_ns >= abs(expected)


# ---------------------------------------------------------------------------- backends and determinism

def _campaign(seed: int) -> tuple[list, list]:
    node = SimNode(devices=3, seed=seed)
    name = node.collective("allreduce", 4 << 20)
    results = node.run(name, 4) + node.run([("mb-4k-gemv", 2), (name, 2)], 4)
    bs = node.node_backends()
    recs = []
    for i in range(2):
        bs[0].wait_idle()
        recs.append(bs[0].execute_run(name, 4, bs[0].new_run_id()))
    for b in bs[1:]:
        for i in range(2):
            b.wait_idle()
            recs.append(b.execute_run(name, 4, b.new_run_id()))
    recs.append(node.exchange_brackets(2, 16))
    return results, recs


def test_same_seed_and_calls_give_identical_records() -> None:
    r1, b1 = _campaign(12)
    r2, b2 = _campaign(12)
    r3, _ = _campaign(13)
    for x, y in zip(r1, r2):
        assert np.array_equal(x.executions, y.executions) and np.array_equal(x.samples, y.samples)
    for x, y in zip(b1[:-1], b2[:-1]):
        for field in ("samples", "markers", "brackets"):
            assert np.array_equal(getattr(x, field), getattr(y, field))
    assert np.array_equal(b1[-1], b2[-1])
    assert not np.array_equal(r1[0].executions["end_ns"], r3[0].executions["end_ns"])


def test_rank_backends_replay_the_same_runs() -> None:
    node = SimNode(devices=4, seed=14)
    name = node.collective("allgather", 32 << 20)
    bs = node.node_backends()
    assert all(isinstance(b, Backend) for b in bs)
    assert len({b.capabilities.device for b in bs}) == 4
    assert bs[0].wait_idle() > 0
    rec0 = bs[0].execute_run(name, 4, bs[0].new_run_id())
    t_after = node.now()
    recs = [rec0]
    for b in bs[1:]:
        assert b.wait_idle() == 0  # the node already waited, before rank 0's run
        recs.append(b.execute_run(name, 4, b.new_run_id()))
    assert node.now() == t_after  # replayed, not simulated again
    assert len({r.run for r in recs}) == 1
    true_end = np.array([r.meta["truth_end_true_ns"] for r in recs])
    assert np.all(np.ptp(true_end, axis=0) <= 10)
    # Same kernel ids on every rank (node ids); each rank's own device ticks.
    assert all(np.array_equal(r.markers["kernel_id"], rec0.markers["kernel_id"]) for r in recs)
    assert len({int(r.markers["begin_ticks"][0]) for r in recs}) == 4
    # A rank asking for a different run under the same id: a collective mismatch.
    bs[0].execute_run(name, 4, 7)
    with pytest.raises(ValueError, match="run=7"):
        bs[1].execute_run(name, 5, 7)
    # A backend made after runs were simulated cannot read them.
    late = SimNode(devices=2, seed=1)
    b0 = late.backend(0)
    b0.execute_run("cb-2k-gemm", 2, 0)
    with pytest.raises(ValueError, match="node_backends"):
        late.backend(1).execute_run("cb-2k-gemm", 2, 0)


def test_profile_of_a_collective_on_one_rank_matches_the_truth() -> None:
    node = SimNode(devices=4, seed=15)
    name = node.collective("allreduce", 256 << 20)
    bs = node.node_backends()
    prof = fn.profile(name, bs[2], mode="sse", runs=16, top_up=False)
    sse = prof.profiles["sse"]
    assert sse.execution_index == 3 and sse.golden.count >= 8
    # Truth: the rank's fourth execution in the golden runs.
    rows = node.collective_truth()
    rows = rows[(rows["rank"] == 2) & (rows["index"] == 3) & np.isin(rows["run"], sse.golden.run_ids)]
    energies, durations = [], []
    for row in rows:
        t = np.arange(row["start_true_ns"], row["end_true_ns"], 1000, dtype=np.int64)
        energies.append(node.gpus[2].truth_power(t)[:, 0].sum() * 1e-6)
        durations.append(row["end_true_ns"] - row["start_true_ns"])
    assert sse.duration_ns == pytest.approx(np.median(durations), rel=0.02)
    assert sse.energy["total"].energy_j == pytest.approx(np.median(energies), rel=0.05)
    # Another rank replays the very same runs (same decisions: fixed runs, no top-up).
    t = node.now()
    prof1 = fn.profile(name, bs[0], mode="sse", runs=16, top_up=False)
    assert node.now() == t
    assert prof1.profiles["sse"].duration_ns == pytest.approx(sse.duration_ns, rel=0.05)


def test_ssp_and_sse_coincide_for_a_collective() -> None:
    # Paper Section V-D: a collective's power is steady from the first
    # executions on (no thermal creep at its power), so the SSP search stops at the SSE.
    node = SimNode(devices=2, seed=3)
    name = node.collective("allgather", 64 << 20)
    prof = fn.profile(name, node.backend(0), mode="both", runs=12, top_up=False, max_executions=64)
    assert prof.ssp_search is not None and prof.ssp_search.executions <= 8
    sse, ssp = prof.profiles["sse"], prof.profiles["ssp"]
    assert ssp.energy["total"].energy_j / ssp.duration_ns == pytest.approx(
        sse.energy["total"].energy_j / sse.duration_ns, rel=0.03)


def test_doctests() -> None:
    assert doctest.testmod(simnode).failed == 0
    assert doctest.testmod(fabric).failed == 0  # collective_time's example


def test_one_run_on_64_devices_is_cheap() -> None:
    node = SimNode(devices=64, seed=16)
    name = node.collective("allreduce", KB64)
    node.run(name, 4)
    # CPU time: what the run costs, which a loaded machine (CI beside other jobs, parallel workers) leaves alone.
    t = time.process_time()
    res = node.run(name, 4)
    elapsed = time.process_time() - t
    assert len(res) == 64
    assert elapsed < 2.0, f"one 4-execution run on 64 devices took {elapsed:.2f} s of CPU time"


# ---------------------------------------------------------------------------- errors

def test_bad_arguments_raise_value_errors_naming_them() -> None:
    with pytest.raises(ValueError, match="devices"):
        SimNode(devices=0)
    with pytest.raises(ValueError, match="seed"):
        SimNode(devices=2, seed=-1)
    with pytest.raises(ValueError, match="host_offsets_ns"):
        SimNode(devices=2, host_offsets_ns=[0.0])
    with pytest.raises(ValueError, match="host_skews_ppm"):
        SimNode(devices=2, host_skews_ppm=[0.0, 5000.0])
    with pytest.raises(ValueError, match="links"):
        FabricParams(links=0)
    with pytest.raises(ValueError, match="msg_asymmetry"):
        FabricParams(msg_asymmetry=1.5)
    with pytest.raises(ValueError, match="cap_w"):
        SimNode(devices=2, cap_w=-1)
    node = SimNode(devices=2, seed=1)
    with pytest.raises(ValueError, match="nbytes"):
        node.collective("allreduce", -1)
    with pytest.raises(ValueError, match="kind"):
        node.collective("broadcast", 1024)
    with pytest.raises(ValueError, match="rank"):
        node.backend(2)
    with pytest.raises(ValueError, match="rank"):
        node.host_now(-1)
    with pytest.raises(ValueError, match="rank"):
        node.truth_power(5, [0])
    with pytest.raises(ValueError, match="peer"):
        node.exchange_brackets(1, 8, peer=1)
    with pytest.raises(ValueError, match="peer"):
        node.exchange_brackets(1, 8, peer=2)
    with pytest.raises(ValueError, match="n="):
        node.exchange_brackets(1, 0)
    with pytest.raises(ValueError, match="kernel"):
        node.run("no-such-kernel", 2)
    with pytest.raises(ValueError, match="kernel"):
        node.run(3, 2)
    with pytest.raises(ValueError, match="executions"):
        node.run("cb-2k-gemm", 0)
    with pytest.raises(ValueError, match="ns="):
        node.idle(-5)
    node.run("cb-2k-gemm", 2, run=4)
    with pytest.raises(ValueError, match="run=4"):
        node.run("cb-2k-gemm", 2, run=4)
