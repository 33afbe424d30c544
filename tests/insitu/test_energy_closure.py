"""Energy closure: the kernel table plus the gaps against an energy counter, on closed-form truth.

The analytic training loop (``fingrav_native.sim.logged_loop``) gives the true power as a formula; a counter read every
2 ms integrates it exactly (quantised to 2^-16 J, as AMD's accumulator), so a counter consistent with the power
must close, and one with a 10 % gain or a 50 W scope offset must not, with the warning naming both figures.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.insitu import EnergyClosure, EnergyClosureWarning
from fingrav_native.insitu._closure_fit import closure_from
from fingrav_native.sensors import EnergyCounter
from fingrav_native.sim import Identity, logged_loop

INSTANT = fg.SensorModel("instant 100 us", "instant", period_ns=100_000.0)
QUANTUM = 2.0 ** -16


def truth_counter(loop, *, every_ns: int = 2_000_000, gain: float = 1.0, offset_w: float = 0.0,
                  scope: str = "gpu") -> EnergyCounter:
    """A counter of the loop's true power (times ``gain``, plus ``offset_w``), read every ``every_ns``, quantised."""
    grid = 250.0
    t = np.arange(0.0, loop.schedule.record_end_ns, grid)
    p = loop.power(t + grid / 2) * gain + offset_w
    cum = np.concatenate([[0.0], np.cumsum(p * grid * 1e-9)])
    reads = np.arange(0, int(loop.schedule.record_end_ns), every_ns, dtype=np.int64)
    e = np.floor(np.interp(reads, np.append(t, t[-1] + grid), cum) / QUANTUM) * QUANTUM
    return EnergyCounter.from_reads(reads, e, quantum_j=QUANTUM, scope=scope, name="simulated counter")


@pytest.fixture(scope="module")
def instant_loop():
    return logged_loop(INSTANT, seed=3, iterations=512)


@pytest.fixture(scope="module")
def instant_profile(instant_loop):
    """The instant loop's profile without a counter: the attribution every counter below is closed against.

    A counter changes only profile_trace's last step (the closure), so the attribution is computed once here and
    each counter closed on it (:func:`_close`); test_a_counter_consistent_with_the_power_closes checks that this
    gives what ``profile_trace(..., energy_counter=counter)`` gives. Read-only: closing returns a new profile.
    """
    return fg.profile_trace(instant_loop.trace, instant_loop.samples, Identity(), sensor=INSTANT)


def _profile(loop, sensor, counter):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp = fg.profile_trace(loop.trace, loop.samples, Identity(), sensor=sensor, energy_counter=counter)
    return tp, [w for w in caught if issubclass(w.category, EnergyClosureWarning)]


def _close(base, loop, counter):
    """``base`` (:func:`instant_profile`) closed against ``counter`` as profile_trace closes it, and the
    EnergyClosureWarnings that gives, as :func:`_profile` returns them."""
    kt = base.trace
    assert np.unique(kt.device).size == 1  # the loop's one device: every kernel is on the logs' device
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tp = closure_from(base, (counter, Identity()), loop.samples, INSTANT, np.ones(len(kt.device), dtype=bool))
    return tp, [w for w in caught if issubclass(w.category, EnergyClosureWarning)]


def _true_energy(loop, a: float, b: float) -> float:
    t = np.arange(a, b, 100.0)
    return float(np.sum(loop.power(t + 50.0)) * 100.0 * 1e-9)


@pytest.mark.parametrize("sensor", [INSTANT, fg.sensor_preset("amd-1ms-average")], ids=["instant", "1ms-average"])
def test_a_counter_consistent_with_the_power_closes(sensor, instant_loop, instant_profile) -> None:
    loop = instant_loop if sensor is INSTANT else logged_loop(sensor, seed=3, iterations=512)
    tp, caught = _profile(loop, sensor, truth_counter(loop))
    if sensor is INSTANT:  # the shared attribution closed on the counter is the profile the counter gives
        shared, shared_caught = _close(instant_profile, loop, truth_counter(loop))
        assert shared.closure == tp.closure and str(shared) == str(tp) and not shared_caught
    cl = tp.closure
    assert isinstance(cl, EnergyClosure) and not caught
    assert cl.agrees and abs(cl.difference_j) <= cl.half_width_j
    # The span is the trace's kernel span (to a counter reading), and the counter read the truth over it.
    assert cl.end_ns - cl.start_ns > 0.7e9
    o = loop.trace.origin_ns  # the span is on the trace's timeline, from its origin
    assert cl.counter_j == pytest.approx(_true_energy(loop, o + cl.start_ns, o + cl.end_ns), rel=1e-5)
    assert cl.model_j == pytest.approx(cl.kernels_j + cl.other_kernels_j + cl.gaps_j)
    assert cl.relative_half_width < (0.003 if sensor is INSTANT else 0.015)
    assert cl.gaps_j > 0.05 * cl.model_j  # the gaps and pauses are a real share, not rounding
    assert "energy closure over" in str(tp) and "(agree)" in str(tp)


def test_the_closure_is_saved_with_the_profile(instant_loop, instant_profile, tmp_path) -> None:
    tp, _ = _close(instant_profile, instant_loop, truth_counter(instant_loop))
    back = fg.load(fg.save(tp, tmp_path / "tp.fgprof"))
    assert back.closure == tp.closure


def test_a_counter_with_a_10_percent_gain_is_named(instant_loop, instant_profile) -> None:
    tp, caught = _close(instant_profile, instant_loop, truth_counter(instant_loop, gain=1.10))
    cl = tp.closure
    assert not cl.agrees and len(caught) == 1
    assert cl.relative == pytest.approx(1 / 1.10 - 1, abs=0.004)
    assert cl.gain == pytest.approx(1.10, abs=0.03)
    text = str(caught[0].message)
    # Both figures, which side is which, and the cause that fits.
    assert f"add up to {cl.model_j:.4g} J" in text and f"reads {cl.counter_j:.4g} J" in text
    assert "power logs" in text and "energy counter (simulated counter, gpu scope" in text
    assert "a gain" in text and "an offset of" not in text
    assert "DISAGREE" in str(tp)


def test_a_counter_of_a_wider_scope_is_an_offset(instant_loop, instant_profile) -> None:
    # A module counter that also counts 50 W the GPU's logs do not see.
    tp, caught = _close(instant_profile, instant_loop, truth_counter(instant_loop, offset_w=50.0, scope="module"))
    cl = tp.closure
    assert not cl.agrees and len(caught) == 1
    assert cl.offset_w == pytest.approx(50.0, abs=12.0) and cl.gain == pytest.approx(1.0, abs=0.03)
    text = str(caught[0].message)
    assert "module scope" in text and "an offset of +5" in text and "different scopes" in text


def test_a_counter_outside_the_trace_is_said_not_raised(instant_loop, instant_profile) -> None:
    far = truth_counter(instant_loop)
    late = EnergyCounter(far.t + 10_000_000_000, far.energy_j, far.segment, quantum_j=QUANTUM)
    tp, caught = _close(instant_profile, instant_loop, late)
    assert tp.closure is None and not caught
    assert any(w.startswith("energy closure not checked: the energy counter has no two readings") for w in tp.warnings)


def test_no_counter_no_closure(instant_loop, instant_profile) -> None:
    tp = instant_profile  # profile_trace(instant_loop.trace, instant_loop.samples, Identity(), sensor=INSTANT)
    assert tp.closure is None and "energy closure" not in str(tp)
    with pytest.raises(ValueError, match="energy_counter: expected an EnergyCounter"):
        fg.profile_trace(instant_loop.trace, instant_loop.samples, Identity(), energy_counter=[1, 2])


def test_counter_reads_drop_repeats_undo_wraps_and_split_at_resets() -> None:
    c = EnergyCounter.from_reads([0, 10, 20, 30, 40, 50], [1.0, 1.0, 2.0, 0.5, 1.5, 2.5], quantum_j=0.5)
    # 10 repeats 0's value (dropped); 30 goes back: a reset, a new segment from its own value.
    assert c.t.tolist() == [0, 20, 30, 40, 50]
    assert c.segment.tolist() == [0, 0, 1, 1, 1]
    assert c.energy_j.tolist() == [0.0, 1.0, 1.0, 2.0, 3.0]
    w = EnergyCounter.from_reads([0, 10, 20], [14.0, 15.5, 0.5], wrap_j=16.0)
    assert w.segment.tolist() == [0, 0, 0] and w.energy_j.tolist() == [0.0, 1.5, 2.5]


def test_counter_steps_chain_into_segments() -> None:
    # Steps of 1 ms at 100, 200 W, then one lost (a gap of 1 ms), then 300 W: two segments.
    c = EnergyCounter.from_steps([1000, 2000, 4000], [1e6, 1e6, 1e6], [100.0, 200.0, 300.0], tick_ns=1000.0)
    assert c.t.tolist() == [0, 1000, 2000, 3000, 4000]
    assert c.segment.tolist() == [0, 0, 0, 1, 1]
    np.testing.assert_allclose(c.energy_j, [0.0, 0.1, 0.3, 0.3, 0.6])


@pytest.mark.parametrize("kwargs, match", [
    (dict(t=[0, 1], energy_j=[0.0], segment=[0, 0]), "one length"),
    (dict(t=[0.0, 1.0], energy_j=[0.0, 1.0], segment=[0, 0]), "must be integers"),
    (dict(t=[0, 1], energy_j=[1.0, 0.0], segment=[0, 0]), "energy_j: goes back"),
    (dict(t=[1, 0], energy_j=[0.0, 1.0], segment=[0, 0]), "t: goes back"),
    (dict(t=[0, 1], energy_j=[0.0, np.nan], segment=[0, 0]), "energy_j: must be finite"),
    (dict(t=[0, 1], energy_j=[0.0, 1.0], segment=[1, 0]), "segment: must be non-decreasing"),
    (dict(t=[0, 1], energy_j=[0.0, 1.0], segment=[0, 0], quantum_j=-1.0), "quantum_j"),
])
def test_a_malformed_counter_is_refused_by_field(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        EnergyCounter(**kwargs)


# ---------------------------------------------------------------------------------------------- counter faults
#: A 32-bit accumulator of 2^-16 J (the width some firmware documents): it wraps at 65,536 J.
WRAP_32 = 2.0 ** 32 * QUANTUM


def _raw_reads(loop, every_ns: int = 2_000_000):
    """The loop's true cumulative energy (J) at reads every ``every_ns``, quantised, and the read times."""
    c = truth_counter(loop, every_ns=every_ns)
    return c.t.copy(), c.energy_j.copy()


def _closed(base, loop, counter):
    tp, caught = _close(base, loop, counter)
    assert tp.closure is not None
    return tp.closure, caught


def test_silently_wrong_a_counter_reset_mid_capture_is_split_not_a_65536_J_step(instant_loop, instant_profile) -> None:
    # A driver reload resets a 32-bit accumulator to near zero halfway: unwrapped at its width, the fall was a
    # 65,536 J step (a closure off by thousands of percent, blamed on a gain or an offset).
    t, e = _raw_reads(instant_loop)
    k = len(t) // 2
    e = e + 100.0
    e[k:] = e[k:] - e[k] + 0.25
    cl, caught = _closed(instant_profile, instant_loop, EnergyCounter.from_reads(t, e, quantum_j=QUANTUM, wrap_j=WRAP_32,
                                                                 tick_ns=1.0, scope="gpu"))
    assert cl.agrees and not caught, str(cl)
    o = instant_loop.trace.origin_ns
    truth = _true_energy(instant_loop, o + cl.start_ns, o + cl.end_ns)
    # The interval across the reset (one 2 ms read interval) is left out, nothing else.
    assert cl.counter_j == pytest.approx(truth, rel=0.01) and cl.counter_j < truth
    assert "the counter broke 1 time(s): the counter fell from" in cl.note and "a reset: no wrap of" in cl.note
    assert "2 segment(s)" in cl.note and "not a gain or an offset" in cl.note


def test_silently_wrong_a_documented_wrap_is_unwrapped(instant_loop, instant_profile) -> None:
    # The same accumulator crossing its top halfway: a wrap, one segment, the whole span.
    t, e = _raw_reads(instant_loop)
    e = (e + WRAP_32 - e[len(e) // 2] + 0.1) % WRAP_32
    c = EnergyCounter.from_reads(t, e, quantum_j=QUANTUM, wrap_j=WRAP_32, tick_ns=1.0)
    assert not c.breaks and c.segment.max() == 0
    cl, caught = _closed(instant_profile, instant_loop, c)
    assert cl.agrees and not caught and "broke" not in cl.note


@pytest.mark.parametrize("jump_ms", [-300.0, -2.9, 250.0])
def test_silently_wrong_a_counter_clock_reset_is_split_not_blamed_on_gain_or_offset(instant_loop, instant_profile,
                                                                                     jump_ms) -> None:
    # The counter's clock goes back (a firmware restart: by 300 ms, or by half a read) or jumps 250 ms ahead,
    # 60 % into the capture. Sorted, the two time bases interleaved: a false disagreement blamed on a gain or an
    # offset. Now a new time base: the side the map does not place (the shorter) is left out, and said.
    t, e = _raw_reads(instant_loop)
    k = 3 * len(t) // 5
    t[k:] += int(jump_ms * 1e6)
    c = EnergyCounter.from_reads(t, e, quantum_j=QUANTUM, tick_ns=1.0)
    assert [b[:2] for b in c.breaks] == [(k, "clock")]
    cl, caught = _closed(instant_profile, instant_loop, c)
    assert cl.agrees and not caught, str(cl)
    assert "the counter's clock" in cl.note and "another time base" in cl.note


def test_silently_wrong_counter_steps_with_a_reset_or_a_clock_reset_are_split_in_record_order() -> None:
    # Steps of 1 ms at 100 W; one negative (the accumulator reset between two reads), then the clock restarts
    # near 0. Sorted by end, the restarted steps had been chained before the first ones.
    end = np.array([1000, 2000, 3000, 4000, 5000, 1000, 2000, 3000], dtype=np.int64)
    p = np.array([100.0, 100.0, -2e5, 100.0, 100.0, 100.0, 100.0, 100.0])
    c = EnergyCounter.from_steps(end, np.full(8, 1e6), p, tick_ns=1000.0)
    assert [b[1] for b in c.breaks] == ["reset", "clock"]
    assert "negative power" in c.breaks[0][2] and "went back by 4 ms" in c.breaks[1][2]
    assert c.segment.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    assert c.time_base().tolist() == [0] * 6 + [1] * 4
    np.testing.assert_allclose(np.diff(c.energy_j)[np.diff(c.segment) == 0], 0.1)
