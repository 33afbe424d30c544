"""Launch journals (the native tool libraries' files): the C++ writer's file read back, and damage refused or counted."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from fingrav_native.files import LaunchFormatError, read_launches
from fingrav_native.files._journal import JOURNAL_MAGIC, encode_array, encode_json
from fingrav_native.records import LAUNCH_DTYPE

#: Written by tests/cpp/test_launch_capture.cpp (FINGRAV_LAUNCH_FIXTURE=...): six records, two names.
CPP_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "launches_cpp.journal"


def _head(clock: str = "CLOCK_BOOTTIME", vendor: str = "rocm", pid: int = 7) -> dict[str, object]:
    return {"format": "fingrav-launches", "version": 1, "vendor": vendor, "record_clock": clock, "pid": pid,
            "tool": "t", "tool_version": "0", "capacity": 8}


def _records(n: int, symbols: list[int]) -> np.ndarray:
    r = np.zeros(n, LAUNCH_DTYPE)
    r["start_ns"] = np.arange(n) * 1000 + 5
    r["end_ns"] = r["start_ns"] + 400
    r["correlation_id"] = np.arange(n) + 1
    r["symbol"] = [symbols[i % len(symbols)] for i in range(n)]
    r["grid"] = [64, 1, 1]
    r["block"] = [64, 1, 1]
    return r


def _journal(path: Path, frames: list[bytes]) -> Path:
    path.write_bytes(JOURNAL_MAGIC + b"".join(frames))
    return path


def _frames(clock: str = "CLOCK_BOOTTIME", pid: int = 7, names: tuple[str, ...] = ("a", "b")) -> list[bytes]:
    tag = b"BRBT" if clock == "CLOCK_BOOTTIME" else b"BRRT"
    return [encode_json(b"HEAD", _head(clock, pid=pid)),
            encode_json(b"SYMB", {"first": 0, "names": list(names)}),
            encode_array(b"LNCH", _records(4, [0, 1])),
            encode_array(tag, np.array([[10, 20, 30]], np.int64)),
            encode_json(b"STAT", {"records": 4, "dropped": 0, "vendor_dropped": 0, "closed": False}),
            encode_array(b"LNCH", _records(6, [1])[4:]),
            encode_json(b"STAT", {"records": 6, "dropped": 3, "vendor_dropped": 2, "closed": True})]


def test_silently_wrong_cpp_writer_roundtrip() -> None:
    """Every field the C++ writer stored reads back as the test wrote it (record i from its closed form)."""
    log = read_launches(CPP_FIXTURE)
    i = np.arange(6)
    assert log.names == ["gemm_kernel", 'void reduce<"x">(float*)']
    np.testing.assert_array_equal(log.records["start_ns"], i * 1000 + 17)
    np.testing.assert_array_equal(log.records["end_ns"], i * 1000 + 17 + 500 + i % 7)
    np.testing.assert_array_equal(log.records["correlation_id"], i + 1)
    np.testing.assert_array_equal(log.records["queue"], i % 3)
    np.testing.assert_array_equal(log.records["device"], i % 2)
    np.testing.assert_array_equal(log.records["symbol"], i % 2)
    np.testing.assert_array_equal(log.records["grid"], np.stack([i, np.full(6, 2), np.full(6, 3)], axis=1))
    np.testing.assert_array_equal(log.records["block"], np.tile([256, 1, 1], (6, 1)))
    assert (log.clock, log.vendor, log.closed, log.dropped, log.vendor_dropped) == ("CLOCK_BOOTTIME", "rocm",
                                                                                      True, 0, 1)
    assert log.notes == [{"key": "subscriber_conflict", "text": "fixture"}]
    assert log.brackets.shape[1] == 3 and len(log.brackets) >= 8
    assert np.all(log.brackets[:, 0] <= log.brackets[:, 2])
    trace = log.to_trace()
    assert trace.clock == "CLOCK_BOOTTIME" and len(trace.executions) == 6


def test_data_loss_cut_short_keeps_every_whole_record(tmp_path: Path) -> None:
    """A journal cut anywhere keeps the records of every whole LNCH before the cut and counts the rest."""
    frames = _frames()
    whole = b"".join(frames)
    ends = np.cumsum([len(f) for f in frames])
    # Inside each frame's header, at its payload's start, middle and last byte, and on the boundaries.
    cuts = sorted({int(e) + d for e in ends[:-1] for d in (1, 8, 16, 17)} | set((ends[:-1] + ends[1:]) // 2)
                  | set(ends[1:] - 1) | set(ends[1:]))
    for cut in cuts:
        log = read_launches(_journal(tmp_path / "launches.1.journal", [whole[:cut]]))
        whole_frames = int(np.searchsorted(ends, cut, side="right"))
        expect = 4 * (whole_frames >= 3) + 2 * (whole_frames >= 6)
        assert len(log.records) == expect, cut
        torn = cut - ends[whole_frames - 1]
        assert log.torn_bytes == torn and bool(log.torn_reason) == (torn > 0), cut
        assert log.closed is bool(cut == len(whole))


def test_data_loss_bad_crc_ends_the_journal(tmp_path: Path) -> None:
    frames = _frames()
    damaged = bytearray(frames[5])
    damaged[-1] ^= 0xFF  # the second LNCH written in part
    log = read_launches(_journal(tmp_path / "j", [*frames[:5], bytes(damaged), frames[6]]))
    assert len(log.records) == 4
    assert "checksum" in log.torn_reason and log.torn_bytes == len(damaged) + len(frames[6])
    assert log.dropped == 0 and not log.closed  # the last STAT read is the first one


def test_unclear_wrong_dtype_lnch_refused_by_name(tmp_path: Path) -> None:
    """A CRC-valid LNCH of another layout is refused, naming the record and both layouts."""
    frames = _frames()
    frames[2] = encode_array(b"LNCH", np.zeros(3, [("start_ns", "<i8"), ("end_ns", "<i8")]))
    with pytest.raises(LaunchFormatError, match="LNCH record of dtype .*not LAUNCH_DTYPE"):
        read_launches(_journal(tmp_path / "j", frames))
    frames = _frames()
    frames[3] = encode_array(b"BRRT", np.zeros((1, 3), np.int64))
    with pytest.raises(LaunchFormatError, match="BRRT brackets .* record clock is CLOCK_BOOTTIME"):
        read_launches(_journal(tmp_path / "k", frames))


def test_unclear_not_a_launch_journal(tmp_path: Path) -> None:
    with pytest.raises(LaunchFormatError, match="load_capture"):
        read_launches(_journal(tmp_path / "rec", [encode_json(b"HEAD", {"source": "sim"})]))
    with pytest.raises(LaunchFormatError, match="header record is not whole"):
        read_launches(_journal(tmp_path / "torn", [_frames()[0][:-3]]))
    (tmp_path / "plain").write_bytes(b"x" * 40)
    with pytest.raises(LaunchFormatError, match="no journal magic"):
        read_launches(tmp_path / "plain")
    with pytest.raises(FileNotFoundError, match="no launch journal"):
        read_launches(tmp_path / "missing")
    with pytest.raises(LaunchFormatError, match="SYMB record for ids from 5"):
        frames = _frames()
        frames[1] = encode_json(b"SYMB", {"first": 5, "names": ["a"]})
        read_launches(_journal(tmp_path / "s", frames))


def test_silently_wrong_folder_renumbers_each_journals_symbols(tmp_path: Path) -> None:
    """Two processes' journals: each numbers its own symbols; read together, every record keeps its name."""
    _journal(tmp_path / "launches.7.journal", _frames(pid=7, names=("a", "b")))
    _journal(tmp_path / "launches.8.journal", _frames(pid=8, names=("b", "c")))
    (tmp_path / "other.txt").write_text("not a journal")
    log = read_launches(tmp_path)
    got = [log.names[s] for s in log.records["symbol"]]
    assert got == ["a", "b", "a", "b", "b", "b"] + ["b", "c", "b", "c", "c", "c"]
    assert log.names == ["a", "b", "c"]
    assert log.pids == (7, 8) and log.dropped == 6 and log.vendor_dropped == 4 and log.closed


def test_silently_wrong_realtime_trace_is_on_kinetos_clock(tmp_path: Path) -> None:
    log = read_launches(_journal(tmp_path / "j", _frames(clock="CLOCK_REALTIME")))
    trace = log.to_trace()
    assert trace.clock == "unix-epoch"
    np.testing.assert_array_equal(trace.correlation, np.arange(6) + 1)
    assert os.path.basename(log.paths[0]) == "j"
