"""EventLog: markers, the full-log refusal, and the zero-copy read-only view."""

from __future__ import annotations

import enum
import gc

import numpy as np
import pytest

from fingrav_native import MARKER_DTYPE, MARKER_HAS_DEVICE_TS, EventLog, MarkerKind, host_time_ns


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


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_must_be_positive(capacity):
    with pytest.raises(ValueError, match=rf"capacity={capacity}\b"):
        EventLog(capacity)


def test_kind_must_be_a_marker_kind():
    with pytest.raises(TypeError):
        EventLog(2).mark(0, 1)  # type: ignore[arg-type]


def test_markers_is_a_read_only_view_of_the_log():
    log = EventLog(16)
    log.mark(MarkerKind.RUN_BEGIN, 1)
    log.mark(MarkerKind.EXEC_BEGIN, 1, 0)
    first = log.markers()
    # A view, not a copy: numpy does not own the data, the EventLog does.
    assert first.flags.owndata is False
    assert first.base is log
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

    # The storage is reused after clear(): the earlier view sees the new marker.
    log.clear()
    log.mark(MarkerKind.RUN_END, 99, kernel_id=5, host_ns=123)
    assert first["run"][0] == 99
    assert first["kind"][0] == MarkerKind.RUN_END
    assert first["host_ns"][0] == 123


def test_view_keeps_the_log_alive():
    log = EventLog(4)
    log.mark(MarkerKind.RUN_BEGIN, 11, host_ns=5)
    view = log.markers()
    del log
    gc.collect()
    assert view["run"].tolist() == [11]
    assert view["host_ns"].tolist() == [5]
    assert isinstance(view.base, EventLog) and len(view.base) == 1


def test_empty_view():
    m = EventLog(4).markers()
    assert m.dtype == MARKER_DTYPE and m.shape == (0,)
