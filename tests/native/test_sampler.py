"""The sampler: what drain() returns, exactly-once delivery, drops, duplicates,
source misses, the no-copy hand-over, stats and the failure paths.

Timing is never asserted exactly: tests wait for conditions, then check
invariants that hold however the threads were scheduled.
"""

from __future__ import annotations

import ctypes
import gc
import os
import time

import numpy as np
import pytest

from fingrav_native import SAMPLE_DTYPE, SamplerError
from fingrav_native.native import CHANNELS, FLAG_SOURCE_GAP, MAX_CAPACITY, MIN_CAPACITY, Sampler, SyntheticSource

STATS_FIELDS = (
    "polls",
    "samples",
    "duplicates",
    "drops",
    "source_missed",
    "read_errors",
    "deadline_misses",
    "drained",
    "jitter_p50_ns",
    "jitter_p90_ns",
    "jitter_p99_ns",
    "jitter_max_ns",
    "mean_period_ns",
    "cpu_time_ns",
    "wall_time_ns",
    "buffered",
    "last_read_error",
)


def drain_rest(sampler: Sampler) -> np.ndarray:
    """What is left after stop() (empty when the final poll brought nothing)."""
    assert not sampler.running
    return sampler.drain()


def capsule_pointer(capsule: object) -> int:
    """The pointer a PyCapsule holds (the memory it owns)."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(get_pointer(capsule, get_name(capsule)))


# ---------------------------------------------------------------- delivery


def test_every_reading_arrives_exactly_once_when_the_consumer_keeps_up(wait_for, waveform):
    # A buffered source (depth 128 at 4 ms: a poll may stall 0.5 s without a
    # reading falling out of the source's buffer) and a large ring.
    cfg = dict(base_w=123.5, amplitude_w=45.25, cycle=7, channel_mask=0b1101)
    period = 4_000_000
    src = SyntheticSource(period_ns=period, depth=128, ts_offset=10_000, window_ns=500, **cfg)
    chunks = []
    with Sampler(src, period_ns=250_000) as sampler:
        while sampler.stats().samples < 40:
            chunk = sampler.drain()
            assert isinstance(chunk, np.ndarray)
            assert chunk.dtype == SAMPLE_DTYPE and chunk.ndim == 1
            chunks.append(chunk)
            wait_for(lambda: sampler.available > 0 or not sampler.running, "a new sample")
    chunks.append(drain_rest(sampler))
    got = np.concatenate(chunks)
    st = sampler.stats()
    n = len(got)

    assert n >= 40
    assert st.samples == n and st.drained == n and st.drops == 0
    assert st.source_missed == 0 and st.read_errors == 0
    k = np.arange(n, dtype=np.uint64)
    np.testing.assert_array_equal(got["seq"], k)
    np.testing.assert_array_equal(got["source_seq"], k)
    np.testing.assert_array_equal(got["source_ts"], 10_000 + k.astype(np.int64) * period)
    assert np.all(got["window_ns"] == 500)
    assert np.all(got["flags"] == 0)

    # Host timestamps bracket the poll, never go back, and are never earlier
    # than the moment the reading appeared at the source.
    assert np.all(got["host_poll_begin_ns"] <= got["host_ns"])
    assert np.all(np.diff(got["host_ns"]) >= 0)
    appear = np.array([src.appear_host_ns(int(i)) for i in k], dtype=np.int64)
    assert np.all(appear >= 0)
    assert np.all(appear <= got["host_ns"])

    expect = waveform(k, **cfg)
    for c, name in enumerate(CHANNELS):
        if cfg["channel_mask"] & (1 << c):
            np.testing.assert_allclose(got[name], expect[name], rtol=1e-6, atol=0)
            # The source's own accessor agrees bit for bit with what arrived.
            np.testing.assert_array_equal(got[name], [src.value(int(i), c) for i in k])
        else:
            assert np.all(np.isnan(got[name])), name


def test_drops_are_counted_when_the_consumer_does_not_keep_up(wait_for):
    capacity = MIN_CAPACITY
    assert capacity == 16
    src = SyntheticSource(period_ns=2_000_000, depth=128)
    sampler = Sampler(src, period_ns=200_000, capacity=capacity)
    sampler.start()
    try:
        # Nobody drains: the ring fills and further readings are dropped.
        wait_for(lambda: sampler.stats().drops >= 3, "at least 3 drops")
        st_full = sampler.stats()
        assert st_full.samples == capacity
        assert sampler.available == capacity
        first = sampler.drain()
        # The ring kept the oldest readings: the first `capacity` ones.
        np.testing.assert_array_equal(first["seq"], np.arange(capacity))
        np.testing.assert_array_equal(first["source_seq"], np.arange(capacity))
        wait_for(lambda: sampler.available >= 1, "a sample after the drain")
    finally:
        sampler.stop()
    rest = drain_rest(sampler)
    st = sampler.stats()

    assert len(rest) >= 1
    seq = np.concatenate([first["seq"], rest["seq"]]).astype(np.int64)
    # Everything pushed was drained; the gap in seq is the dropped readings.
    assert st.samples == len(seq) == st.drained
    assert np.all(np.diff(seq) >= 1)
    assert rest["seq"][0] >= capacity + 3, "drained seq values must show the drops as a gap"
    np.testing.assert_array_equal(np.diff(rest["seq"].astype(np.int64)), 1)
    gap_total = int(np.sum(np.diff(seq) - 1))
    assert st.drops >= st_full.drops >= 3
    assert st.drops >= gap_total
    accepted = st.samples + st.drops
    if len(rest) < capacity:
        # The ring was not full at the last accepted reading, so that reading
        # was kept: accepted readings are exactly seq 0 .. seq[-1].
        assert accepted == seq[-1] + 1
        assert st.drops == gap_total
    else:  # refilled completely: trailing drops are invisible in the data
        assert accepted >= seq[-1] + 1
    # The sampler numbers every accepted reading; dropped or not, none is missed
    # at the source here, so both numberings agree.
    if st.source_missed == 0:
        np.testing.assert_array_equal(rest["seq"], rest["source_seq"])


def test_duplicates_are_counted_for_a_latest_value_source(wait_for):
    # depth=1 is a "latest value" file; polling 500x faster than it changes
    # returns the same reading again and again.
    src = SyntheticSource(period_ns=50_000_000, depth=1)
    with Sampler(src, period_ns=100_000) as sampler:
        wait_for(lambda: sampler.stats().duplicates >= 5, "5 duplicate readings")
    st = sampler.stats()
    got = drain_rest(sampler)
    assert st.duplicates >= 5
    assert st.read_errors == 0 and st.drops == 0
    # Every poll returns exactly one reading: it is either new or a duplicate.
    assert st.samples + st.duplicates == st.polls
    assert src.polls == st.polls
    assert len(got) == st.samples
    np.testing.assert_array_equal(got["seq"], np.arange(len(got)))
    assert np.all(np.diff(got["source_seq"].astype(np.int64)) >= 1)


def test_source_missed_is_counted_when_the_source_outruns_the_poll(wait_for):
    # A reading every 10 us, polled every 2 ms, only the newest visible.
    src = SyntheticSource(period_ns=10_000, depth=1)
    with Sampler(src, period_ns=2_000_000) as sampler:
        wait_for(lambda: sampler.stats().samples >= 4, "4 samples")
    st = sampler.stats()
    got = drain_rest(sampler)
    src_seq = got["source_seq"].astype(np.int64)
    gaps = np.diff(src_seq) - 1

    assert len(got) == st.samples >= 4
    assert src_seq[0] == 0  # the first poll starts the source's clock
    assert st.source_missed > 0
    assert st.source_missed == int(gaps.sum())
    assert st.samples + st.source_missed == src_seq[-1] + 1
    has_gap = (got["flags"] & FLAG_SOURCE_GAP) != 0
    assert not has_gap[0]
    np.testing.assert_array_equal(has_gap[1:], gaps > 0)
    # Readings the source lost are not ring drops: seq stays contiguous.
    assert st.drops == 0
    np.testing.assert_array_equal(got["seq"], np.arange(len(got)))


def test_drain_respects_max_and_zero(wait_for):
    src = SyntheticSource(period_ns=1_000_000, depth=128)
    with Sampler(src, period_ns=200_000) as sampler:
        wait_for(lambda: sampler.available >= 5, "5 buffered samples")
        empty = sampler.drain(0)
        assert empty.dtype == SAMPLE_DTYPE and len(empty) == 0
        two = sampler.drain(2)
        three = sampler.drain(max=3)
    assert len(two) == 2 and len(three) == 3
    np.testing.assert_array_equal(np.concatenate([two, three])["seq"], np.arange(5))


# ---------------------------------------------------------------- no copy


def test_drain_hands_over_the_cpp_buffer_without_a_copy(wait_for):
    src = SyntheticSource(period_ns=1_000_000, depth=128)
    sampler = Sampler(src, period_ns=200_000)
    with sampler:
        wait_for(lambda: sampler.available >= 4, "4 buffered samples")  # noqa: F821 (the name is deleted below, after the lambda ran)
        arr = sampler.drain()
    assert len(arr) >= 4
    # numpy does not own the data: a capsule owning the C++ buffer does, and
    # the array's data pointer is exactly the pointer the capsule holds.
    assert arr.flags.owndata is False
    assert arr.base is not None
    assert type(arr.base).__name__ == "PyCapsule"
    assert capsule_pointer(arr.base) == arr.ctypes.data
    assert arr.flags.c_contiguous and arr.flags.writeable
    # Field views are views of that same memory.
    total = arr["total"]
    assert np.shares_memory(arr, total)
    total[0] = -1.0
    assert arr[0]["total"] == -1.0
    # The capsule keeps the memory alive after the sampler is gone.
    snapshot = arr.copy()
    del sampler, src
    gc.collect()
    np.testing.assert_array_equal(arr, snapshot)


def test_drained_arrays_own_their_memory_and_never_change(wait_for):
    # "Without a further copy" must not mean "a view of a buffer reused
    # later": each drain() gets memory of its own.
    src = SyntheticSource(period_ns=1_000_000, depth=128)
    arrays, snapshots = [], []
    with Sampler(src, period_ns=200_000) as sampler:
        for _ in range(4):
            wait_for(lambda: sampler.available >= 2, "2 buffered samples")
            arrays.append(sampler.drain())
            snapshots.append(arrays[-1].copy())
    arrays.append(sampler.drain())
    snapshots.append(arrays[-1].copy())
    arrays.append(sampler.drain())  # empty: drained to the end
    for a, b in zip(arrays, snapshots):
        np.testing.assert_array_equal(a, b)
    for i, a in enumerate(arrays):
        assert a.flags.owndata or type(a.base).__name__ == "PyCapsule"
        for b in arrays[i + 1 :]:
            assert not np.shares_memory(a, b)
    got = np.concatenate(arrays)
    np.testing.assert_array_equal(got["seq"], np.arange(len(got)))


def test_drain_into_writes_into_the_callers_array(wait_for):
    src = SyntheticSource(period_ns=1_000_000, depth=128)
    sentinel = np.uint64(2**64 - 1)
    big = np.zeros(40, dtype=SAMPLE_DTYPE)
    big["seq"] = sentinel
    window = big[8:24]  # a contiguous view into the caller's array
    address = window.ctypes.data
    with Sampler(src, period_ns=200_000) as sampler:
        wait_for(lambda: sampler.available >= 3, "3 buffered samples")
        head = sampler.drain(2)
        n = sampler.drain_into(window)
    assert isinstance(n, int) and 1 <= n <= len(window)
    assert window.ctypes.data == address
    assert np.shares_memory(window[:n], big)
    # The samples landed in the caller's memory, continuing the stream.
    np.testing.assert_array_equal(big["seq"][8 : 8 + n], np.arange(2, 2 + n))
    np.testing.assert_array_equal(head["seq"], [0, 1])
    assert np.all(np.diff(big["source_seq"][8 : 8 + n].astype(np.int64)) >= 1)
    assert np.all(big["host_ns"][8 : 8 + n] > 0)
    # Nothing outside the first n slots of the window was touched.
    assert np.all(big["seq"][:8] == sentinel)
    assert np.all(big["seq"][8 + n :] == sentinel)
    assert sampler.stats().drained == 2 + n


def test_drain_into_an_empty_array_moves_nothing(wait_for):
    with Sampler(SyntheticSource(period_ns=1_000_000, depth=8), period_ns=200_000) as sampler:
        wait_for(lambda: sampler.available >= 1, "a buffered sample")
        assert sampler.drain_into(np.empty(0, dtype=SAMPLE_DTYPE)) == 0
        assert sampler.available >= 1


# ---------------------------------------------------------------- stats


def test_stats_fields_and_invariants(wait_for):
    period = 500_000
    src = SyntheticSource(period_ns=1_000_000, depth=4)
    sampler = Sampler(src, period_ns=period)
    before = sampler.stats()
    assert before.polls == 0 and before.wall_time_ns == 0 and before.cpu_fraction == 0.0
    sampler.start()
    try:
        wait_for(lambda: sampler.stats().polls >= 60, "60 polls")
        live = sampler.stats()
        assert live.wall_time_ns > 0
        assert 0.0 <= live.cpu_fraction <= 1.0
    finally:
        sampler.stop()
    st = sampler.stats()

    d = st.as_dict()
    assert tuple(d) == STATS_FIELDS
    for name in STATS_FIELDS:
        assert d[name] == getattr(st, name), name
    assert repr(st).startswith("SamplerStats(polls=")

    assert st.polls >= 60
    assert st.cpu_time_ns > 0 and st.wall_time_ns > 0
    assert 0.0 < st.cpu_fraction <= 1.0
    assert st.cpu_fraction == pytest.approx(st.cpu_time_ns / st.wall_time_ns)
    assert 0 <= st.jitter_p50_ns <= st.jitter_p90_ns <= st.jitter_p99_ns <= st.jitter_max_ns
    assert st.buffered == sampler.available
    assert st.last_read_error == ""

    # mean_period_ns = (last scheduled poll - first) / (scheduled - 1). Polls
    # start at or after their absolute deadlines (lateness <= jitter_max_ns),
    # and deadlines advance by one period plus any skipped periods, so:
    #   P - max/(n-1) <= mean <= P * (1 + misses/(n-1)) + max/(n-1).
    # This holds however loaded the machine is; with little lateness it pins
    # the mean to the configured period.
    n = st.polls - 1  # the final poll at stop() is not scheduled
    slack = st.jitter_max_ns / (n - 1)
    assert st.mean_period_ns > 0
    assert st.mean_period_ns >= period - slack - 1
    assert st.mean_period_ns <= period * (1 + st.deadline_misses / (n - 1)) + slack + 1


def test_read_errors_are_counted_and_sampling_continues(wait_for):
    src = SyntheticSource(period_ns=1_000_000, depth=1, transient_error_every=3)
    with Sampler(src, period_ns=100_000) as sampler:
        wait_for(lambda: sampler.stats().polls >= 30, "30 polls")
    st = sampler.stats()  # stop() did not raise: transient errors are not fatal
    assert sampler.error is None
    assert src.polls == st.polls
    assert st.read_errors == st.polls // 3
    assert "injected transient error at poll" in st.last_read_error
    # The other polls each returned one reading, new or already seen.
    assert st.samples + st.duplicates == st.polls - st.read_errors


def test_fatal_source_error_stops_the_thread_and_stop_raises(wait_for):
    src = SyntheticSource(period_ns=1_000_000, depth=1, fatal_error_at_poll=5)
    sampler = Sampler(src, period_ns=100_000)
    assert sampler.error is None
    sampler.start()
    wait_for(lambda: not sampler.running, "the thread to end on the fatal error")
    assert sampler.started
    assert sampler.error is not None and "injected fatal error at poll 5" in sampler.error
    with pytest.raises(SamplerError, match="injected fatal error at poll 5") as excinfo:
        sampler.stop()
    assert isinstance(excinfo.value, RuntimeError)
    st = sampler.stats()
    assert st.polls == 5  # no final poll after a failure
    # What arrived before the failure can still be drained; then drain() is
    # empty (the failure was reported by stop() and stays in sampler.error).
    got = sampler.drain()
    assert len(got) == st.samples >= 1
    empty = sampler.drain()
    assert empty.dtype == SAMPLE_DTYPE and empty.shape == (0,)
    assert sampler.drain_into(np.zeros(4, dtype=SAMPLE_DTYPE)) == 0
    # stop() released the source.
    assert not src.in_use
    assert len(src.poll()) >= 1


def test_with_block_exit_raises_sampler_error(wait_for):
    src = SyntheticSource(period_ns=1_000_000, fatal_error_at_poll=3)
    with pytest.raises(SamplerError, match="injected fatal error at poll 3"):
        with Sampler(src, period_ns=100_000) as sampler:
            wait_for(lambda: not sampler.running, "the thread to end on the fatal error")
    assert not sampler.running
    assert not src.in_use


def test_body_exception_wins_over_sampler_error(wait_for):
    src = SyntheticSource(period_ns=1_000_000, fatal_error_at_poll=3)
    with pytest.raises(KeyError, match="from the body") as excinfo:
        with Sampler(src, period_ns=100_000) as sampler:
            wait_for(lambda: not sampler.running, "the thread to end on the fatal error")
            raise KeyError("from the body")
    assert not isinstance(excinfo.value, SamplerError)
    # The thread's failure is not lost: it stays readable.
    assert sampler.error is not None and "poll 3" in sampler.error
    assert not src.in_use


# ---------------------------------------------------------------- lifecycle


def test_with_block_stops_the_thread_and_frees_the_source():
    src = SyntheticSource(period_ns=1_000_000)
    sampler = Sampler(src, period_ns=100_000)
    assert not sampler.started and not sampler.running
    with sampler as entered:
        assert entered is sampler
        assert sampler.running and sampler.started
        assert src.in_use
    assert not sampler.running and sampler.started
    assert not src.in_use
    readings = src.poll()  # the source can be polled again
    assert len(readings) >= 1


def test_with_block_cleans_up_when_the_body_raises():
    src = SyntheticSource(period_ns=1_000_000)
    with pytest.raises(ZeroDivisionError) as excinfo:
        with Sampler(src, period_ns=100_000) as sampler:
            assert sampler.running
            1 / 0  # noqa: B018
    # The body's own exception propagates, unmasked and unchained.
    assert excinfo.type is ZeroDivisionError
    assert excinfo.value.__context__ is None
    assert not sampler.running
    assert sampler.error is None
    assert not src.in_use
    assert len(src.poll()) >= 1


def test_stop_is_idempotent_and_a_noop_before_start():
    sampler = Sampler(SyntheticSource(), period_ns=100_000)
    sampler.stop()
    assert not sampler.started
    sampler.start()
    sampler.stop()
    sampler.stop()
    assert not sampler.running and sampler.started


def test_sampler_properties():
    src = SyntheticSource(period_ns=2_000_000)
    sampler = Sampler(src, period_ns=123_456, capacity=1024)
    assert sampler.period_ns == 123_456
    assert sampler.capacity == 1024
    assert sampler.cpu is None
    assert sampler.source is src
    assert sampler.available == 0
    default = Sampler(SyntheticSource())
    assert default.period_ns == 1_000_000 and default.capacity == 1 << 16


def test_pinned_sampler_runs_on_an_allowed_cpu(wait_for):
    cpu = min(os.sched_getaffinity(0))
    sampler = Sampler(SyntheticSource(period_ns=1_000_000), period_ns=200_000, cpu=cpu)
    assert sampler.cpu == cpu
    with sampler:
        wait_for(lambda: sampler.stats().polls >= 3, "3 polls")
    assert sampler.error is None


def test_period_bounds_are_inclusive():
    src = SyntheticSource()
    assert Sampler(src, period_ns=20_000).period_ns == 20_000
    assert Sampler(src, period_ns=1_000_000_000).period_ns == 1_000_000_000
    assert Sampler(src, capacity=MIN_CAPACITY).capacity == MIN_CAPACITY


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("period_ns", [0, 19_999, 1_000_000_001, -1])
def test_period_out_of_range(period_ns):
    with pytest.raises(ValueError, match=rf"period_ns={period_ns}\b"):
        Sampler(SyntheticSource(), period_ns=period_ns)


@pytest.mark.parametrize("capacity", [100, 1000, 3 * 1024])
def test_capacity_not_a_power_of_two(capacity):
    with pytest.raises(ValueError, match=rf"capacity={capacity}\b.*power of two"):
        Sampler(SyntheticSource(), capacity=capacity)


@pytest.mark.parametrize("capacity", [0, 1, 8, MIN_CAPACITY // 2])
def test_capacity_below_minimum(capacity):
    with pytest.raises(ValueError, match=rf"capacity={capacity}\b.*>= {MIN_CAPACITY}"):
        Sampler(SyntheticSource(), capacity=capacity)


def test_capacity_negative():
    with pytest.raises(ValueError, match=r"capacity=-5\b"):
        Sampler(SyntheticSource(), capacity=-5)


def test_capacity_up_to_the_maximum():
    assert MAX_CAPACITY == 2**26
    # The ring is allocated, not touched: 4 GiB of address space, no memory.
    # A small machine may still refuse that much; then the error names it.
    try:
        assert Sampler(SyntheticSource(), capacity=MAX_CAPACITY).capacity == MAX_CAPACITY
    except MemoryError as e:
        assert str(e).startswith(f"capacity={MAX_CAPACITY}: cannot allocate 4.0 GiB")


@pytest.mark.parametrize("capacity", [2 * MAX_CAPACITY, 2**31, 2**40, 2**62])
def test_capacity_above_the_maximum_is_refused_before_allocating(capacity):
    # Not std::bad_alloc (a MemoryError naming nothing): the argument, the
    # limit and the memory it would take.
    gib = capacity * 64 / 2**30
    with pytest.raises(ValueError, match=rf"^capacity={capacity}: must be at most 2\^26 = {MAX_CAPACITY} samples "
                                         r"\(64 bytes each: .* asked, 4\.0 GiB at the limit\); drain more often") as e:
        Sampler(SyntheticSource(), capacity=capacity)
    if gib < 1024:
        assert f"{gib:.1f} GiB asked" in str(e.value)


@pytest.mark.parametrize("capacity", [2**63, 2**64, 10**30, -(2**63) - 1])
def test_capacity_beyond_int64_is_named(capacity):
    with pytest.raises(ValueError, match=rf"^capacity={capacity}: must be a power of two in \[16, 2\^26"):
        Sampler(SyntheticSource(), capacity=capacity)


@pytest.mark.parametrize("arg, value", [("capacity", 1024.0), ("capacity", "1024"), ("period_ns", 1e6),
                                        ("cpu", 0.0), ("capacity", True)])
def test_non_integer_arguments_are_named(arg, value):
    with pytest.raises(TypeError, match=rf"^{arg}=.*: must be an integer"):
        Sampler(SyntheticSource(), **{arg: value})


@pytest.mark.parametrize("period_ns", [2**63, 2**100])
def test_period_beyond_int64_is_named(period_ns):
    with pytest.raises(ValueError, match=rf"^period_ns={period_ns}: must be in \[20000, 1000000000\] ns"):
        Sampler(SyntheticSource(), period_ns=period_ns)


def test_integer_arguments_take_numpy_integers():
    sampler = Sampler(SyntheticSource(), period_ns=np.int64(200_000), capacity=np.uint32(64),
                      cpu=np.int16(min(os.sched_getaffinity(0))))
    assert (sampler.period_ns, sampler.capacity) == (200_000, 64)


def test_cpu_negative():
    with pytest.raises(ValueError, match=r"cpu=-1\b"):
        Sampler(SyntheticSource(), cpu=-1)


def test_cpu_not_allowed():
    allowed = os.sched_getaffinity(0)
    forbidden = next((c for c in range(1024) if c not in allowed), None)
    if forbidden is None:  # pragma: no cover - every CPU of CPU_SETSIZE allowed
        pytest.skip("every CPU is in this process's affinity set")
    with pytest.raises(ValueError, match=rf"cpu={forbidden}\b.*allowed"):
        Sampler(SyntheticSource(), cpu=forbidden)
    with pytest.raises(ValueError, match=r"cpu=5000\b"):
        Sampler(SyntheticSource(), cpu=5000)


def test_source_must_not_be_none():
    with pytest.raises(ValueError, match="source"):
        Sampler(None)  # type: ignore[arg-type]


def test_starting_twice():
    sampler = Sampler(SyntheticSource(), period_ns=100_000)
    sampler.start()
    try:
        with pytest.raises(RuntimeError, match=r"start\(\).*already started"):
            sampler.start()
    finally:
        sampler.stop()
    # A sampler runs once: not even after stop().
    with pytest.raises(RuntimeError, match=r"start\(\).*already started"):
        sampler.start()
    with pytest.raises(RuntimeError, match=r"start\(\).*already started"):
        with sampler:
            pass


def test_drain_a_never_started_sampler():
    sampler = Sampler(SyntheticSource())
    with pytest.raises(RuntimeError, match=r"drain\(\).*never started.*start\(\)"):
        sampler.drain()


def test_drain_a_stopped_sampler_with_nothing_left():
    sampler = Sampler(SyntheticSource(), period_ns=100_000)
    with sampler:
        pass
    assert len(sampler.drain()) >= 1  # the final poll's reading(s)
    # Drained to the end: an empty SAMPLE_DTYPE array, as often as asked.
    for _ in range(3):
        empty = sampler.drain()
        assert isinstance(empty, np.ndarray)
        assert empty.dtype == SAMPLE_DTYPE and empty.shape == (0,)
        assert len(sampler.drain(5)) == 0
    out = np.zeros(4, dtype=SAMPLE_DTYPE)
    assert sampler.drain_into(out) == 0
    assert np.all(out == np.zeros(4, dtype=SAMPLE_DTYPE))  # untouched
    assert sampler.stats().drained == sampler.stats().samples


def test_drain_into_a_never_started_sampler():
    with pytest.raises(RuntimeError, match=r"drain_into\(\).*never started.*start\(\)"):
        Sampler(SyntheticSource()).drain_into(np.zeros(4, dtype=SAMPLE_DTYPE))


def test_drain_negative_max():
    with Sampler(SyntheticSource(), period_ns=100_000) as sampler:
        with pytest.raises(ValueError, match=r"max=-1\b"):
            sampler.drain(-1)
        with pytest.raises(ValueError, match=r"^max=18446744073709551616: must be in \[0, "):
            sampler.drain(2**64)
        with pytest.raises(TypeError, match=r"^max=2\.0: must be an integer"):
            sampler.drain(2.0)  # type: ignore[arg-type]
        assert sampler.drain(np.int64(0)).shape == (0,)


def test_source_cannot_be_polled_while_a_sampler_runs():
    src = SyntheticSource()
    with Sampler(src, period_ns=100_000):
        assert src.in_use
        with pytest.raises(RuntimeError, match=r"poll\(\).*'synthetic'.*running sampler"):
            src.poll()
    assert len(src.poll()) >= 1


def test_source_shared_by_two_running_samplers():
    src = SyntheticSource()
    first = Sampler(src, period_ns=100_000)
    second = Sampler(src, period_ns=100_000)
    with first:
        with pytest.raises(RuntimeError, match=r"start\(\).*'synthetic'.*another sampler"):
            second.start()
        # The refused start left the second sampler unstarted...
        assert not second.started
    # ...so it can use the source once the first one let go.
    with second:
        assert second.running


@pytest.mark.parametrize(
    "make_out, why",
    [
        (lambda: np.zeros(8, dtype=np.float64), "dtype"),
        (lambda: np.zeros(8, dtype="V64"), "dtype"),
        (lambda: np.zeros((2, 4), dtype=SAMPLE_DTYPE), "1-D"),
        (lambda: np.zeros(8, dtype=SAMPLE_DTYPE)[::2], "C-contiguous"),
    ],
    ids=["float64", "void64", "2-d", "strided"],
)
def test_drain_into_rejects_bad_arrays(make_out, why):
    with Sampler(SyntheticSource(), period_ns=100_000) as sampler:
        with pytest.raises(ValueError, match=rf"^out: .*{why}"):
            sampler.drain_into(make_out())


def test_drain_into_rejects_a_read_only_array():
    out = np.zeros(8, dtype=SAMPLE_DTYPE)
    out.setflags(write=False)
    with Sampler(SyntheticSource(), period_ns=100_000) as sampler:
        with pytest.raises(ValueError, match=r"^out: .*writeable"):
            sampler.drain_into(out)


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        ({"depth": 0}, "depth=0"),
        ({"depth": 129}, "depth=129"),
        ({"period_ns": 999}, "period_ns=999"),
        ({"period_ns": 0}, "period_ns=0"),
        ({"cycle": 0}, "cycle=0"),
        ({"cycle": 1_000_001}, "cycle=1000001"),
        ({"channel_mask": 0}, "channel_mask=0"),
        ({"channel_mask": 16}, "channel_mask=16"),
        ({"base_w": float("nan")}, "base_w"),
        ({"amplitude_w": float("inf")}, "amplitude_w"),
    ],
)
def test_synthetic_source_rejects_bad_config(kwargs, arg):
    with pytest.raises(ValueError, match=rf"{arg}\b"):
        SyntheticSource(**kwargs)


@pytest.mark.parametrize(
    "arg", ["depth", "channel_mask", "window_ns", "transient_error_every", "fatal_error_at_poll"]
)
def test_synthetic_source_negative_unsigned_argument_is_named(arg):
    with pytest.raises(ValueError, match=rf"{arg}=-1\b"):
        SyntheticSource(**{arg: -1})


# ---------------------------------------------------------------- direct polls


def test_direct_poll_returns_readings():
    from fingrav_native.native import READING_DTYPE

    src = SyntheticSource(period_ns=1_000_000_000, depth=4, ts_offset=7, window_ns=3)
    assert src.appear_host_ns(0) == -1  # the clock starts at the first poll
    r = src.poll()
    assert r.dtype == READING_DTYPE
    assert r.flags.owndata is False and type(r.base).__name__ == "PyCapsule"
    assert len(r) == 1  # only reading 0 exists at the first poll
    assert r["source_seq"][0] == 0 and r["source_ts"][0] == 7 and r["window_ns"][0] == 3
    assert r["total"][0] == pytest.approx(300.0)
    assert src.polls == 1 and src.appear_host_ns(0) > 0
    assert src.appear_host_ns(2) - src.appear_host_ns(0) == 2 * 1_000_000_000


@pytest.mark.parametrize(
    "kwargs, kind", [({"transient_error_every": 1}, "transient"), ({"fatal_error_at_poll": 1}, "fatal")]
)
def test_direct_poll_reports_source_errors(kwargs, kind):
    src = SyntheticSource(**kwargs)
    with pytest.raises(RuntimeError, match=rf"poll\(\).*'synthetic'.*{kind}"):
        src.poll()
    assert not src.in_use


def test_a_sampler_that_failed_on_its_own_releases_its_source():
    src = SyntheticSource(fatal_error_at_poll=3)
    sampler = Sampler(src, period_ns=100_000)
    sampler.start()
    deadline = time.monotonic() + 30  # bounds a hang only
    while sampler.running and time.monotonic() < deadline:
        time.sleep(0.001)
    assert not sampler.running and sampler.error is not None
    # No stop() yet: the source is free all the same.
    assert not src.in_use
    with pytest.raises(SamplerError, match="injected fatal error"):
        sampler.stop()


def test_capacity_below_the_minimum_or_not_a_power_of_two_names_the_minimum():
    for capacity in (100, 8):
        with pytest.raises(ValueError, match=rf"capacity={capacity}: must be a power of two >= 16"):
            Sampler(SyntheticSource(), capacity=capacity)
