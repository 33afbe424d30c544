"""EventLog: markers, the full-log refusal, argument ranges, and the zero-copy
read-only view that never changes once handed out."""

from __future__ import annotations

import enum
import gc

import numpy as np
import pytest

from fingrav_native._core import MAX_MARKERS
from fingrav_native.native import MARKER_DTYPE, MARKER_HAS_DEVICE_TS, EventLog, MarkerKind, host_time_ns


def test_marker_kind_is_an_int_enum():
    assert issubclass(MarkerKind, enum.IntEnum)
    assert {m.name: int(m) for m in MarkerKind} == {
        "EXEC_BEGIN": 0,
        "EXEC_END": 1,
        "RUN_BEGIN": 2,
        "RUN_END": 3,
    }
    assert MarkerKind(2) is MarkerKind.RUN_BEGIN


def test_marks_are_recorded_as_given():
    log = EventLog(8)
    assert len(log) == 0 and log.capacity == 8 and log.dropped == 0
    before = host_time_ns()
    log.mark(MarkerKind.RUN_BEGIN, 3)
    after = host_time_ns()
    log.mark(MarkerKind.EXEC_BEGIN, 3, 0, 42, host_ns=1_000, device_ts=-5)
    log.mark(MarkerKind.EXEC_END, run=3, execution=0, kernel_id=42, host_ns=2_000)
    assert len(log) == 3
    m = log.markers()
    assert m.dtype == MARKER_DTYPE and len(m) == 3
    np.testing.assert_array_equal(m["kind"], [MarkerKind.RUN_BEGIN, MarkerKind.EXEC_BEGIN, MarkerKind.EXEC_END])
    np.testing.assert_array_equal(m["run"], [3, 3, 3])
    np.testing.assert_array_equal(m["execution"], [-1, 0, 0])  # -1: a run marker
    np.testing.assert_array_equal(m["kernel_id"], [0, 42, 42])
    assert before <= m["host_ns"][0] <= after  # stamped with the host clock now
    np.testing.assert_array_equal(m["host_ns"][1:], [1_000, 2_000])
    # device_ts only counts with the flag; without it, it is zero.
    np.testing.assert_array_equal(m["flags"], [0, MARKER_HAS_DEVICE_TS, 0])
    np.testing.assert_array_equal(m["device_ts"], [0, -5, 0])


def test_full_log_refuses_and_counts():
    log = EventLog(2)
    log.mark(MarkerKind.RUN_BEGIN, 0)
    log.mark(MarkerKind.RUN_END, 0)
    with pytest.raises(RuntimeError, match=r"mark\(\).*full.*capacity=2\b"):
        log.mark(MarkerKind.RUN_BEGIN, 1)
    assert len(log) == 2 and log.dropped == 1
    with pytest.raises(RuntimeError, match=r"dropped=2\b"):
        log.mark(MarkerKind.RUN_BEGIN, 1)
    assert log.markers()["run"].tolist() == [0, 0]  # the refused markers left no trace
    log.clear()
    assert len(log) == 0 and log.dropped == 0
    log.mark(MarkerKind.RUN_BEGIN, 9)
    assert len(log) == 1


@pytest.mark.parametrize("capacity", [0, -1, MAX_MARKERS + 1, 2**34, 2**64, -(2**70)])
def test_capacity_out_of_range_is_named_with_its_range(capacity):
    with pytest.raises(ValueError, match=rf"^capacity={capacity}: must be in \[1, 2\^26 = {MAX_MARKERS}\] markers"):
        EventLog(capacity)


@pytest.mark.parametrize("capacity", [1.0, "8", None, True])
def test_capacity_must_be_an_integer(capacity):
    with pytest.raises(TypeError, match=r"^capacity=.*: must be an integer"):
        EventLog(capacity)  # type: ignore[arg-type]


def test_capacity_takes_numpy_integers():
    assert EventLog(np.int64(16)).capacity == 16
    assert EventLog(np.uint8(3)).capacity == 3


def test_kind_must_be_a_marker_kind():
    with pytest.raises(TypeError, match=r"^kind=0: must be a MarkerKind"):
        EventLog(2).mark(0, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args, kwargs, name, valid",
    [
        ((2**31,), {}, "run", r"\[0, 2\^31 - 1 = 2147483647\]"),
        ((-1,), {}, "run", r"\[0, 2\^31 - 1 = 2147483647\]"),
        ((2**64,), {}, "run", r"\[0, 2\^31 - 1 = 2147483647\]"),
        ((0, -2), {}, "execution", r"\[-1, 2\^31 - 1 = 2147483647\] \(-1 for a run marker\)"),
        ((0, 2**31), {}, "execution", r"\[-1, "),
        ((0, 0, 2**31), {}, "kernel_id", r"\[-2\^31, 2\^31 - 1\]"),
        ((0, 0, -(2**31) - 1), {}, "kernel_id", r"\[-2\^31, 2\^31 - 1\]"),
        ((0,), {"host_ns": -1}, "host_ns", r"\[0, 2\^63 - 1\] ns"),
        ((0,), {"host_ns": 2**63}, "host_ns", r"\[0, 2\^63 - 1\] ns"),
        ((0,), {"device_ts": 2**63}, "device_ts", r"\[-2\^63, 2\^63 - 1\] ticks"),
        ((0,), {"device_ts": -(2**63) - 1}, "device_ts", r"\[-2\^63, 2\^63 - 1\] ticks"),
    ],
)
def test_mark_out_of_range_names_the_argument_and_its_range(args, kwargs, name, valid):
    log = EventLog(4)
    value = kwargs[name] if name in kwargs else args[("run", "execution", "kernel_id").index(name)]
    with pytest.raises(ValueError, match=rf"^{name}={value}: must be in {valid}"):
        log.mark(MarkerKind.RUN_BEGIN, *args, **kwargs)
    assert len(log) == 0 and log.dropped == 0  # a refused marker leaves no trace


def test_mark_names_a_huge_integer_by_its_size():
    with pytest.raises(ValueError, match=r"^run=<a 10001-bit integer>: must be in \[0, "):
        EventLog(4).mark(MarkerKind.RUN_BEGIN, 2**10000)
    with pytest.raises(ValueError, match=r"^device_ts=<a negative 301-bit integer>: must be in "):
        EventLog(4).mark(MarkerKind.RUN_BEGIN, 0, device_ts=-(2**300))


@pytest.mark.parametrize("value", [1.5, 2.0, "3", True])
def test_mark_refuses_non_integers_by_name(value):
    with pytest.raises(TypeError, match=r"^run=.*: must be an integer, in \[0, "):
        EventLog(4).mark(MarkerKind.RUN_BEGIN, value)  # type: ignore[arg-type]


def test_mark_takes_the_whole_range_and_numpy_integers():
    log = EventLog(8)
    log.mark(MarkerKind.EXEC_BEGIN, 2**31 - 1, 2**31 - 1, -(2**31), host_ns=2**63 - 1, device_ts=-(2**63))
    log.mark(MarkerKind.RUN_END, np.int64(7), np.int32(-1), np.uint16(3), host_ns=np.int64(0), device_ts=np.uint32(9))
    m = log.markers()
    assert m["run"].tolist() == [2**31 - 1, 7]
    assert m["execution"].tolist() == [2**31 - 1, -1]
    assert m["kernel_id"].tolist() == [-(2**31), 3]
    assert m["host_ns"].tolist() == [2**63 - 1, 0]
    assert m["device_ts"].tolist() == [-(2**63), 9]
    assert m["flags"].tolist() == [MARKER_HAS_DEVICE_TS, MARKER_HAS_DEVICE_TS]


def test_markers_is_a_read_only_view_of_the_log():
    log = EventLog(16)
    log.mark(MarkerKind.RUN_BEGIN, 1)
    log.mark(MarkerKind.EXEC_BEGIN, 1, 0)
    first = log.markers()
    # A view, not a copy: numpy does not own the data; a capsule holding the
    # log's buffer does.
    assert first.flags.owndata is False
    assert type(first.base).__name__ == "PyCapsule"
    assert first.flags.writeable is False
    with pytest.raises(ValueError, match="read-only"):
        first["run"][0] = 7

    log.mark(MarkerKind.EXEC_END, 1, 0)
    second = log.markers()
    assert len(first) == 2 and len(second) == 3
    # Both views look at the same storage.
    assert first.ctypes.data == second.ctypes.data
    assert np.shares_memory(first, second)
    np.testing.assert_array_equal(second[:2], first)


def test_markers_never_change_after_clear_and_new_marks():
    # The case: a returned array changed after clear() and a new mark().
    log = EventLog(4)
    log.mark(MarkerKind.RUN_BEGIN, 1, host_ns=10)
    log.mark(MarkerKind.EXEC_BEGIN, 1, 0, 7, host_ns=11, device_ts=5)
    first = log.markers()
    snapshot = first.copy()
    for round_ in range(3):
        log.clear()
        for i in range(4):  # fill the new buffer to the end
            log.mark(MarkerKind.RUN_END, 99 + round_, kernel_id=i, host_ns=123 + i)
        np.testing.assert_array_equal(first, snapshot)
        now = log.markers()
        assert now["run"].tolist() == [99 + round_] * 4
        assert not np.shares_memory(now, first)
    np.testing.assert_array_equal(first, snapshot)


def test_clear_reuses_the_buffer_once_no_view_holds_it():
    log = EventLog(4)
    log.mark(MarkerKind.RUN_BEGIN, 1)
    held = log.markers()
    address = held.ctypes.data
    log.clear()
    log.mark(MarkerKind.RUN_BEGIN, 2)
    moved = log.markers()
    assert moved.ctypes.data != address  # a held buffer is left to its view
    del held, moved
    gc.collect()
    address = log.markers().ctypes.data  # a temporary view, gone at once
    log.clear()
    log.mark(MarkerKind.RUN_BEGIN, 3)
    assert log.markers().ctypes.data == address  # nobody held it: reused


def test_view_outlives_the_log():
    log = EventLog(4)
    log.mark(MarkerKind.RUN_BEGIN, 11, host_ns=5)
    view = log.markers()
    del log
    gc.collect()
    assert view["run"].tolist() == [11]
    assert view["host_ns"].tolist() == [5]


def test_empty_view():
    m = EventLog(4).markers()
    assert m.dtype == MARKER_DTYPE and m.shape == (0,)
