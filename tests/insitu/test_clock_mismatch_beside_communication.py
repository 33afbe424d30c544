"""The clock-mismatch check on a DDP-like loop (compute beside an all-reduce) under instantaneous logs.

The offset against the kernels was measured on the kernels that ran alone: on the simulator's loop two of
seven (the all-reduce overlaps the other five), the logs beside the all-reduce left to the level between
kernels. The best shift landed one GEMM off (+409 us) on exact clocks, a ClockMismatchWarning for clocks
that agree. The compute kernels beside communication now count, and the communication's additive level is
fitted and taken off the logs taken while it ran; clocks that truly disagree are still warned of.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fingrav_native import profile_trace
from fingrav_native.insitu import ClockMismatchWarning, KernelTrace, LogAlignment, align_logs_to_trace
from fingrav_native.insitu._align import MISMATCH_SLACK_NS
from fingrav_native.sensors import SensorModel
from fingrav_native.sim import COMMUNICATION, Identity, LoggedLoop, logged_loop

INSTANT_100US = SensorModel("instant 100 us", "instant", period_ns=100_000.0)


@pytest.fixture(scope="module")
def ddp_loop() -> LoggedLoop:
    return logged_loop(INSTANT_100US, seed=1, iterations=256, communication_w=60.0)


def _profiled(loop: LoggedLoop, late_ns: int) -> tuple[LogAlignment, int]:
    """The loop profiled with its logs stamped ``late_ns`` late: the measured offset and the mismatch warnings."""
    samples = loop.samples.copy()
    samples["source_ts"] += late_ns
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp = profile_trace(loop.trace, samples, Identity(), sensor=INSTANT_100US)
    assert tp.alignment is not None
    return tp.alignment, sum(issubclass(w.category, ClockMismatchWarning) for w in caught)


def _exact(a: LogAlignment) -> bool:
    """The offset and its interval within the measurement's resolution of zero."""
    return (not a.far and abs(a.offset_ns) <= MISMATCH_SLACK_NS and a.low_ns <= MISMATCH_SLACK_NS
            and a.high_ns >= -MISMATCH_SLACK_NS)


def test_silently_wrong_clock_mismatch_warned_on_exact_clocks_beside_communication(ddp_loop: LoggedLoop) -> None:
    # Exact clocks: +409 us and a warning before; now within the 5 us resolution, and no warning.
    a, warned = _profiled(ddp_loop, 0)
    assert warned == 0 and _exact(a), a


def test_silently_wrong_clock_mismatch_beside_communication_still_warned(ddp_loop: LoggedLoop) -> None:
    # Logs stamped 2 ms late: the level fitted where the logs place themselves, not at the map's placement
    # (there it came out -216 W for 60 W and the offset 380 us short); warned, the offset found within 10 us.
    a, warned = _profiled(ddp_loop, 2_000_000)
    assert warned == 1 and a.far
    assert a.offset_ns == pytest.approx(-2e6, abs=10e3)


def _compute_and_overlay(trace: KernelTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ex = trace.executions
    comm = trace.signatures["name"][ex["kernel_id"]] == COMMUNICATION[0]
    order = np.argsort(ex["start_ns"][~comm], kind="stable")
    s, e, k = (ex[f][~comm][order] for f in ("start_ns", "end_ns", "kernel_id"))
    return s, e, k, ex["start_ns"][comm], ex["end_ns"][comm]


def test_silently_wrong_offset_beside_an_unmodelled_overlay(ddp_loop: LoggedLoop) -> None:
    # Every compute kernel, the all-reduce's 60 W left in the logs: +8 us (95 % 7.5 to 8.5), beyond the
    # resolution. Declared as an overlay, its level comes off the logs beside it: within the resolution.
    s, e, k, os_, oe = _compute_and_overlay(ddp_loop.trace)
    t = ddp_loop.samples["source_ts"].astype(np.float64) - ddp_loop.trace.origin_ns
    y = ddp_loop.samples["total"]
    a = align_logs_to_trace(t, y, s, e, k, overlay_ns=(os_, oe))
    assert _exact(a) and not a.at_edge, a


@pytest.mark.parametrize("bad", [(np.zeros(2),), (np.zeros(2), np.zeros(3)), (np.ones(2), np.zeros(2)),
                                 (np.array([0.0, np.nan]), np.ones(2))])
def test_unclear_overlay_ns_named(bad: tuple[np.ndarray, ...]) -> None:
    t = np.arange(0.0, 1e6, 1e3)
    with pytest.raises(ValueError, match="overlay_ns"):
        align_logs_to_trace(t, np.full(len(t), 100.0), [0.0], [5e5], [0], overlay_ns=bad)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("communication_w, exposed", [(0.0, False), (60.0, False), (60.0, True)])
def test_silently_wrong_clock_mismatch_false_alarms_over_seeds(communication_w: float, exposed: bool) -> None:
    # Six seeds of exact clocks, without communication, beside compute and exposed in the host's pause: no
    # warning, the offset within the resolution (the false-alarm rate was 6 in 6 beside compute). Logs stamped
    # +0.5, +2, +5 and -2 ms off on two of them: every one warned, the offset found within 10 us.
    for seed in range(6):
        loop = logged_loop(INSTANT_100US, seed=seed, iterations=256, communication_w=communication_w,
                           communication_exposed=exposed)
        a, warned = _profiled(loop, 0)
        assert warned == 0 and _exact(a), (seed, a)
        if seed >= 2:
            continue
        for late in (500_000, 2_000_000, 5_000_000, -2_000_000):
            a, warned = _profiled(loop, late)
            assert warned == 1 and a.offset_ns == pytest.approx(-late, abs=10e3), (seed, late, a)
