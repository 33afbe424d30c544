"""Energy-counter reads that go wrong: resets, clock resets, swapped reads, absurd steps, huge stamps.

Before these tests ``counter_to_logs`` took any fall of a wrapping counter
for a wrap (a driver reset became a 15.5 MW log), sorted reads by time (a
firmware clock reset interleaved two time bases into logs 10x the true
power), differenced two swapped reads into a negative step between two
doubled ones (the doubles kept), and wrapped uint64 stamps past 2**63 to
negative times.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fingrav_native.sensors import CounterDiscontinuityWarning, counter_to_logs

MS = 1_000_000
#: A 32-bit mJ counter (NVML's energy counts mJ): it wraps at about 4.3 MJ.
WRAP_J = 2.0**32 * 1e-3


def _steady(n=12, watts=300.0, start_j=0.0):
    """Reads of a board at a steady ``watts``, one per ms."""
    t = np.arange(n, dtype=np.int64) * MS
    return t, start_j + watts * 1e-3 * np.arange(n)


def _logs(*args, **kwargs):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        logs = counter_to_logs(*args, **kwargs)
    return logs, [w for w in seen if issubclass(w.category, CounterDiscontinuityWarning)]


def test_a_reset_of_a_wrapping_counter_is_not_a_wrap():
    t, e = _steady()
    e[6:] -= e[6]  # a driver reload: the counter starts again from 0
    logs, said = _logs(t, e, wrap_j=WRAP_J)
    assert logs.wraps == 0 and logs.resets == 1
    # It was taken for a wrap: (0 - 1.8 J + 4.29 MJ) over 1 ms, a 4.3 GW log.
    assert logs.samples["total"].max() == pytest.approx(300.0)
    assert len(said) == 1 and "no wrap explains" in str(said[0].message)


def test_a_true_wrap_is_still_a_wrap():
    t, e = _steady()
    e = (e + WRAP_J - 1.0) % WRAP_J  # 1 J short of the top: wraps after the 4th read
    logs, said = _logs(t, e, wrap_j=WRAP_J)
    assert logs.wraps == 1 and logs.resets == 0 and not said
    assert np.allclose(logs.samples["total"], 300.0, rtol=1e-6)
    assert len(logs.samples) == len(t) - 1


def test_a_firmware_clock_reset_never_interleaves_two_time_bases():
    t, e = _steady(10)
    t[5:] = t[5:] - t[5] + 100_000  # the firmware's clock restarts near 0 (0.1 ms after its epoch)
    logs, said = _logs(t, e)
    assert logs.clock_resets == 1
    # Sorted by time, the two bases interleaved into 0.3 J over 0.1 ms: 3 kW logs, 10x the true power.
    np.testing.assert_allclose(logs.samples["total"], 300.0, rtol=1e-6)
    assert len(logs.samples) == 6  # the interval across the reset and the two beside it left out
    assert len(said) == 1 and "clock reset" in str(said[0].message)


@pytest.mark.parametrize("what", ["values", "timestamps"])
def test_two_swapped_reads_are_left_out_not_doubled(what):
    t, e = _steady()
    if what == "values":
        e[[4, 5]] = e[[5, 4]]
    else:
        t[[4, 5]] = t[[5, 4]]
    logs, said = _logs(t, e)
    # Naively: a negative step dropped between two steps of 600 W (kept).
    np.testing.assert_allclose(logs.samples["total"], 300.0, rtol=1e-6)
    assert len(said) == 1


def test_an_absurd_step_is_not_power():
    t, e = _steady()
    e[7:] += 3e38 * 1e-3  # a flipped exponent in the 8th read, carried on
    logs, said = _logs(t, e)
    assert logs.implausible == 1
    assert logs.samples["total"].max() < 1e4
    assert "10000 W" in str(said[0].message)
    # A board known to draw 700 W: 3 x 700 W is the bound, so a 2.5 kW step is refused too.
    t, e = _steady(watts=2500.0)
    logs, _ = _logs(t, e, max_power_w=700.0)
    assert len(logs.samples) == 0 and logs.implausible == len(t) - 1


def test_uint64_stamps_past_2_63_are_refused_not_wrapped():
    t = np.uint64(2**63) + np.arange(5, dtype=np.uint64) * np.uint64(MS)
    with pytest.raises(ValueError, match=r"timestamps_ns: values must lie in \[-9223372036854775808"):
        counter_to_logs(t, np.arange(5) * 0.3)
    # Within int64 they are exact.
    t = np.uint64(2**62) + np.arange(5, dtype=np.uint64) * np.uint64(MS)
    assert counter_to_logs(t, np.arange(5) * 0.3).samples["source_ts"][0] == 2**62 + MS


def test_reads_beyond_the_wrap_range_are_refused():
    with pytest.raises(ValueError, match="energy_j: reads must lie in"):
        counter_to_logs([0, MS], [0.0, WRAP_J + 1.0], wrap_j=WRAP_J)
