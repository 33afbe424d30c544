"""Power logs people already record, read into a :class:`PowerCapture`: nvidia-smi, amd-smi, rocm-smi and dcgmi.

In-situ profiling (paper Section IV-A applied to an application's own loop)
needs the power logs with their timestamps and a map of those timestamps onto
the clock the application's trace stamps its kernels on. The vendor tools
write both into text files, on the host's wall clock (CLOCK_REALTIME) or
with no time at all:

``nvidia-smi --query-gpu=timestamp,index,power.draw,... --format=csv -lms N``
    One row per GPU per poll. ``timestamp`` is the local wall time
    ``YYYY/MM/DD HH:MM:SS.fff`` (milliseconds, the recording host's time zone,
    which the file does not say), ``power.draw`` in W (``"123.45 W"``, or
    unitless with ``nounits``; the header says ``[W]``). On recent drivers
    ``power.draw`` is a 1 s average (``power.draw.average``) and
    ``power.draw.instant`` the sensor's own reading; ``[N/A]`` and
    ``[Not Supported]`` stand for values the driver did not give.
``amd-smi metric -p --csv`` (``-w N`` to watch)
    ``gpu,socket_power,...`` (older releases: ``average_socket_power``,
    ``current_socket_power``), W; the watch mode of recent releases adds a
    ``timestamp`` column (epoch seconds, or ISO 8601).
``rocm-smi --showpower --csv``
    ``device,Average Graphics Package Power (W)`` (MI300: ``Current Socket
    Graphics Package Power (W)``), one row per card, no time.
``dcgmi dmon -e 155,156 -d MS``
    Whitespace columns under ``#Entity  POWER  TOTEC`` and a unit line
    ``ID  W  mJ`` (both repeated every screenful), rows ``GPU 0  120.5  ...``;
    field 155 is power usage (W), 156 the total energy (mJ since the driver
    loaded). No time. Field 156, where present, is the capture's energy
    counter (1 mJ steps, on the log's stamps): ``profile_trace`` closes the
    kernel table against it.

A file without times is read only with the start of its first row and the
period, given by name (``start=``, ``period_s=``): never assumed. Each
capture's ``meta["log_file"]`` states the format, the column, its unit, the
clock and the bound of the map onto it (the stamp's resolution plus the
delay between the read and its stamp), the sensor model and why, and the
values the tool did not give (counted, never read as 0).
"""

from __future__ import annotations

import csv
import datetime
import math
import os
import re
import zoneinfo
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Sequence, Union

import numpy as np

from fingrav_native._checks import file_path
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.files._capture import LOG_FILE_CLOCK_DOMAIN, CaptureFormatError, PowerCapture
from fingrav_native.files._capture_counter import CapturedCounter
from fingrav_native.files._safe import file_problem, short_repr
from fingrav_native.sensors._model import SensorModel, as_sensor, sensor_preset

__all__ = ["POWER_LOG_KINDS", "PowerLogFormatError", "power_log_summary", "read_power_log"]

#: A power-log format's name, or ``"auto"``: told apart by content.
PowerLogKind = Literal["auto", "nvidia-smi", "amd-smi", "rocm-smi", "dcgmi"]

#: The formats :func:`read_power_log` reads.
POWER_LOG_KINDS = ("nvidia-smi", "amd-smi", "rocm-smi", "dcgmi")

#: A power log larger than this is refused (a -lms 10 log of 8 GPUs for a day is about 500 MB).
MAX_LOG_BYTES = 2 << 30

#: What the tools print for a value they did not get: counted and left out, never 0.
_MISSING = re.compile(r"^(\[.*\]|N/A|NA|n/a|)$")

#: nvidia-smi's timestamp: local wall time to the millisecond.
_SMI_STAMP = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$")

#: The delay between a tool's stamp and its power read, assumed (not measured): one query of the
#: driver's cached value, well under a millisecond on an idle host.
READ_DELAY_NS = 1_000_000.0

#: The default bound of a boot-time offset given by hand (``/proc/uptime`` has 10 ms resolution).
BOOTTIME_OFFSET_BOUND_NS = 10_000_000.0

#: Per format and power column: the sensor preset taken when none is given, and why.
_PRESETS: dict[str, tuple[Optional[str], str]] = {
    "power.draw.instant": ("part-time-100ms", "power.draw.instant is NVML's instant field: a 25 ms average every "
                                              "100 ms on A100/H100 (SC'24); characterise other boards"),
    "power.draw": ("nvidia-average-1s", "power.draw is a 1 s average on recent drivers (as power.draw.average); "
                                        "give sensor= for an older driver or a GA100"),
    "power.draw.average": ("nvidia-average-1s", "power.draw.average is a 1 s average"),
    "socket_power": ("amd-1ms-average", "amd-smi socket_power is MI300's current socket power, about a 1 ms average"),
    "current_socket_power": ("amd-1ms-average", "current_socket_power is MI300's socket power, about a 1 ms "
                                                "average"),
    "Current Socket Graphics Package Power (W)": ("amd-1ms-average", "MI300's current socket power, about a 1 ms "
                                                                     "average"),
    "average_socket_power": (None, "average_socket_power is hwmon's power1_average, over a window the driver does "
                                   "not state"),
    "Average Graphics Package Power (W)": (None, "rocm-smi's average power is hwmon's power1_average, over a "
                                                 "window the driver does not state"),
    "POWER": ("nvidia-average-1s", "DCGM field 155 is NVML's power usage, a 1 s average on recent drivers"),
}

#: Power columns each format holds, preferred first.
_COLUMNS = {
    "nvidia-smi": ("power.draw.instant", "power.draw", "power.draw.average"),
    "amd-smi": ("socket_power", "current_socket_power", "average_socket_power"),
    "rocm-smi": ("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)"),
    "dcgmi": ("POWER",),
}

#: The device column of each format.
_DEVICE_COLUMN = {"nvidia-smi": "index", "amd-smi": "gpu", "rocm-smi": "device", "dcgmi": "#Entity"}

#: Energy-counter columns: DCGM field 156 (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, short name TOTEC), the
#: total energy since the driver loaded, in mJ (NVML's nvmlDeviceGetTotalEnergyConsumption), 1 mJ steps.
_COUNTER_COLUMNS = {"dcgmi": "TOTEC"}
_COUNTER_QUANTUM_J = {"dcgmi": 1e-3}
_ENERGY_UNITS = {"mJ": 1e-3, "J": 1.0}


class PowerLogFormatError(CaptureFormatError):
    """A power log that cannot be read (unknown format, a unit that is not W or mW, time going back); named."""


@dataclass
class _Table:
    """One format's rows as text: what :func:`read_power_log` turns into logs."""

    kind: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)  # column -> unit named by the header
    notes: list[str] = field(default_factory=list)


def _read_lines(path: str) -> list[str]:
    """The file's lines (a regular, not too large, UTF-8 text file)."""
    problem = file_problem(path)
    if problem is not None:
        raise PowerLogFormatError(f"{path}: {problem}; a power log is a text file")
    size = os.path.getsize(path)
    if size > MAX_LOG_BYTES:
        raise PowerLogFormatError(f"{path}: {size} bytes, more than a power log holds ({MAX_LOG_BYTES} bytes)")
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PowerLogFormatError(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from None
    return text.splitlines()


def _detect(path: str, lines: list[str]) -> str:
    """The format of a log, told apart by its first lines."""
    for line in lines[:50]:
        s = line.strip()
        if not s or s.startswith("'CTRL'") or s.startswith("="):
            continue
        if s.startswith("#Entity"):
            return "dcgmi"
        cells = [c.strip() for c in s.split(",")]
        names = {re.sub(r"\s*\[.*\]$", "", c) for c in cells}
        if names & set(_COLUMNS["nvidia-smi"]) or _SMI_STAMP.match(cells[0]):
            return "nvidia-smi"
        if names & set(_COLUMNS["amd-smi"]):
            return "amd-smi"
        if names & set(_COLUMNS["rocm-smi"]):
            return "rocm-smi"
        break
    shown = short_repr(next((x for x in lines if x.strip()), ""))
    raise PowerLogFormatError(f"{path}: not a power log this reader knows (first line {shown}); it reads "
                              f"{', '.join(POWER_LOG_KINDS)} output (see read_power_log)")


def _csv_table(path: str, lines: list[str], kind: str, columns: Optional[Sequence[str]]) -> _Table:
    """A CSV log: the header (or ``columns`` for a file written without one) and its rows; repeated headers skipped."""
    rows = list(csv.reader(lines, skipinitialspace=True))
    start = 0
    while start < len(rows) and (not rows[start] or rows[start][0].startswith("'CTRL'")):
        start += 1
    if start == len(rows):
        raise PowerLogFormatError(f"{path}: no rows")
    first = [c.strip() for c in rows[start]]
    has_header = not (kind == "nvidia-smi" and _SMI_STAMP.match(first[0]))
    if has_header:
        header_raw, start = first, start + 1
    elif columns is None:
        raise PowerLogFormatError(f"{path}: an nvidia-smi log written with noheader: its columns are not known; "
                                  "pass columns= (fingrav trace --log-columns) in the order of --query-gpu, "
                                  "e.g. timestamp,index,power.draw")
    else:
        header_raw = [str(c).strip() for c in columns]
    t = _Table(kind, [])
    for c in header_raw:
        m = re.match(r"^(.*?)\s*\[(.*)\]$", c)
        name = m.group(1) if m else c
        if m:
            t.units[name] = m.group(2)
        t.header.append(name)
    for i in range(start, len(rows)):
        r = [c.strip() for c in rows[i]]
        if not r or r == [""] or r == first or r[0].startswith("'CTRL'"):
            continue
        if len(r) != len(t.header):
            raise PowerLogFormatError(f"{path}: line {i + 1} has {len(r)} fields, the header {len(t.header)} "
                                      f"({', '.join(t.header)})")
        t.rows.append(r)
        t.lines.append(i + 1)
    return t


def _dcgmi_table(path: str, lines: list[str]) -> _Table:
    """``dcgmi dmon`` output: the ``#Entity`` header, its unit line, rows ``GPU 0  v1  v2 ...`` (headers repeat)."""
    t = _Table("dcgmi", [])
    unit_line = False
    for i, line in enumerate(lines):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "#Entity":
            if t.header and parts != t.header:
                raise PowerLogFormatError(f"{path}: line {i + 1}: a header with other fields ({' '.join(parts)}) "
                                          f"than the first ({' '.join(t.header)})")
            t.header, unit_line = parts, True
            continue
        if unit_line and parts[0] == "ID":
            t.units.update(zip(t.header[1:], parts[1:]))
            unit_line = False
            continue
        if not t.header or len(parts) != len(t.header) + 1:
            raise PowerLogFormatError(f"{path}: line {i + 1} is not a dcgmi dmon row under its header: "
                                      f"{short_repr(line)}")
        t.rows.append([f"{parts[0]} {parts[1]}", *parts[2:]])
        t.lines.append(i + 1)
    return t


def _column(path: str, t: _Table, column: Optional[str]) -> str:
    """The power column read: ``column``, else the format's first present."""
    if column is not None:
        if column not in t.header:
            raise ValueError(f"column={column!r}: not in {path}, whose columns are {', '.join(t.header)}")
        return column
    for c in _COLUMNS[t.kind]:
        if c in t.header:
            return c
    raise PowerLogFormatError(f"{path}: a {t.kind} log without a power column (it has {', '.join(t.header)}; "
                              f"expected one of {', '.join(_COLUMNS[t.kind])})")


def _unit_scale(path: str, unit: str, where: str) -> float:
    """W per unit of a power value: W 1, mW 1e-3; any other unit refused."""
    if unit in ("W", ""):
        return 1.0
    if unit == "mW":
        return 1e-3
    raise PowerLogFormatError(f"{path}: {where}: the unit {unit!r} is not a power unit this reader converts "
                              "(W or mW)")


def _values(path: str, t: _Table, col: int, rows: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The power column in W of ``rows`` (NaN: a value the tool did not give, counted by what it printed)."""
    name = t.header[col]
    head_unit = t.units.get(name, "W" if name.endswith("(W)") else "")
    head_scale = _unit_scale(path, head_unit, f"the column {name!r}")
    out = np.full(len(t.rows), np.nan)
    missing: dict[str, int] = {}
    for k in np.flatnonzero(rows):
        v = t.rows[k][col]
        if _MISSING.match(v):
            missing[v or "(empty)"] = missing.get(v or "(empty)", 0) + 1
            out[k] = np.nan
            continue
        m = re.match(r"^([-+0-9.eE]+)\s*([A-Za-z]*)$", v)
        try:
            number = float(m.group(1)) if m else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise PowerLogFormatError(f"{path}: line {t.lines[k]}: {name} = {short_repr(v)} is not a power")
        assert m is not None
        scale = _unit_scale(path, m.group(2), f"line {t.lines[k]}") if m.group(2) else head_scale
        out[k] = number * scale
    return out, missing


def _counter(path: str, t: _Table, rows: np.ndarray, ns: np.ndarray, period_ns: int
             ) -> tuple[Optional[CapturedCounter], Optional[str]]:
    """The log's energy counter (DCGM field 156) as the steps between its readings, on the logs' stamps.

    Each step is the energy between two readings over the time between their rows: the mean power a
    counter-mode source logs (:meth:`~fingrav_native.sensors.EnergyCounter.from_steps`, which leaves out and
    names a step that goes back: a driver reload resets the total). A reading the tool did not give is skipped,
    the step spanning it. Returns the counter (None: no column, or fewer than two readings) and its words.
    """
    name = _COUNTER_COLUMNS.get(t.kind)
    if name is None or name not in t.header:
        return None, None
    unit = t.units.get(name, "mJ")
    if unit not in _ENERGY_UNITS:
        raise PowerLogFormatError(f"{path}: the column {name!r}: the unit {unit!r} is not an energy unit this reader "
                                  f"converts ({' or '.join(_ENERGY_UNITS)})")
    col = t.header.index(name)
    energy = np.full(len(ns), np.nan)
    for i, k in enumerate(np.flatnonzero(rows).tolist()):
        v = t.rows[k][col]
        if _MISSING.match(v):
            continue
        try:
            energy[i] = float(v) * _ENERGY_UNITS[unit]
        except ValueError:
            energy[i] = math.nan
        if not math.isfinite(energy[i]):
            raise PowerLogFormatError(f"{path}: line {t.lines[k]}: {name} = {short_repr(v)} is not an energy")
    have = np.flatnonzero(np.isfinite(energy))
    words = (f"{name} (DCGM field 156, total energy since the driver loaded, in {unit}; 1 mJ steps) on the "
             "log's stamps: the energy closure's counter")
    if len(have) < 2:
        return None, f"{name}: fewer than two readings, no energy counter"
    end = ns[have]
    window = np.diff(end)
    joules = np.diff(energy[have])
    # A step's length is stored in 32 bits (4.29 s): a longer one (readings missing for that long) is left out,
    # said here, and the counter's segments meet there (the closure sums either side, never across it).
    fits = window <= np.iinfo(np.uint32).max
    if not fits.all():
        words += f"; {int((~fits).sum())} steps over 4.29 s between readings left out (the closure sums either side)"
    s = np.zeros(int(fits.sum()), dtype=SAMPLE_DTYPE)
    s["host_ns"] = s["source_ts"] = end[1:][fits]
    s["seq"] = s["source_seq"] = np.arange(len(s))
    s["window_ns"] = window[fits]
    with np.errstate(divide="ignore", invalid="ignore"):
        s["total"] = joules[fits] / (window[fits] * 1e-9)
    for c in ("compute", "io", "memory"):
        s[c] = np.nan
    source = {"name": f"{t.kind} {name}", "clock_domain": LOG_FILE_CLOCK_DOMAIN, "tick_ns": 1.0,
              "native_period_ns": period_ns, "window_ns": 0, "channels": ["total"]}
    return CapturedCounter(samples=s, source=source, quantum_j=_COUNTER_QUANTUM_J[t.kind], stale_ns=0.0,
                           scope="gpu", period_ns=period_ns, stats={"readings": int(len(have))}), words


def _device_of(v: str) -> int:
    """A device cell as an ordinal: ``0``, ``card0``, ``GPU 0``."""
    m = re.search(r"(\d+)$", v)
    return int(m.group(1)) if m else -1


def _pick_device(path: str, t: _Table, device: Optional[int]) -> tuple[np.ndarray, list[int]]:
    """Rows of ``device`` (all rows when the log has one GPU), and the GPUs the log holds."""
    name = _DEVICE_COLUMN[t.kind]
    if name not in t.header:
        # A log that names no GPU is one GPU's: the one ``device`` names where given (the trace's), said in meta.
        return np.ones(len(t.rows), dtype=bool), []
    col = t.header.index(name)
    ids = np.array([_device_of(r[col]) for r in t.rows], dtype=np.int64)
    gpus = sorted(int(g) for g in np.unique(ids))
    if device is None:
        if len(gpus) > 1:
            raise ValueError(f"device: {path} interleaves the logs of GPUs {gpus}; say which one the trace's kernels "
                             "ran on (device=N, fingrav trace --device N)")
        return np.ones(len(t.rows), dtype=bool), gpus
    if device not in gpus:
        raise ValueError(f"device={device!r}: {path} holds the logs of GPUs {gpus} only")
    return ids == device, gpus


def _zone(tz: Optional[str], path: str, why: str) -> tuple[datetime.tzinfo, str]:
    """The time zone named by ``tz`` (``"UTC"``, ``"local"``, an IANA name, ``"+01:00"``), and its words."""
    if tz is None:
        raise ValueError(f"tz: {path} stamps {why} local wall time without a zone; give the zone it was recorded "
                         "in (tz='Europe/Berlin', 'UTC', '+01:00', or 'local' for this host's; fingrav trace "
                         "--log-tz): it is never guessed")
    if not isinstance(tz, str):
        raise ValueError(f"tz={short_repr(tz)}: must be a time zone's name")
    if tz == "local":
        local = datetime.datetime.now().astimezone().tzinfo
        assert local is not None
        return local, f"this host's local zone ({datetime.datetime.now().astimezone().tzname()}), as tz='local' said"
    m = re.match(r"^([+-])(\d{2}):?(\d{2})$", tz)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return (datetime.timezone(sign * datetime.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))),
                f"UTC{tz}")
    try:
        return zoneinfo.ZoneInfo(tz), tz
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"tz={tz!r}: not a time zone (an IANA name such as 'Europe/Berlin', 'UTC', '+01:00' "
                         "or 'local')") from None


def _local_ns(stamps: list[str], fmt: str, zone: datetime.tzinfo) -> np.ndarray:
    """Epoch ns of local wall-time stamps in ``zone`` (each converted: a daylight-saving change is honoured)."""
    out = np.empty(len(stamps), dtype=np.int64)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    cache: dict[str, int] = {}
    for k, s in enumerate(stamps):
        head, _, frac = s.partition(".")
        base = cache.get(head)
        if base is None:
            d = datetime.datetime.strptime(head, fmt).replace(tzinfo=zone)
            base = cache[head] = (d - epoch) // datetime.timedelta(microseconds=1) * 1000
        out[k] = base + int(round(float("0." + frac) * 1e9)) if frac else base
    return out


@dataclass(frozen=True)
class _Times:
    """The logs' epoch ns and what the map onto CLOCK_REALTIME rests on."""

    ns: np.ndarray
    resolution_ns: float
    read_delay_ns: float
    words: str


def _stamped_times(path: str, t: _Table, rows: np.ndarray, tz: Optional[str]) -> _Times:
    """The times of a log with a timestamp column (nvidia-smi; amd-smi's watch mode)."""
    col = t.header.index("timestamp")
    stamps = [t.rows[k][col] for k in np.flatnonzero(rows)]
    if t.kind == "nvidia-smi":
        bad = next((k for k, s in enumerate(stamps) if not _SMI_STAMP.match(s)), None)
        if bad is not None:
            raise PowerLogFormatError(f"{path}: {short_repr(stamps[bad])} is not nvidia-smi's timestamp "
                                      "(YYYY/MM/DD HH:MM:SS.fff)")
        zone, zwords = _zone(tz, path, "nvidia-smi's timestamps as")
        # The stamp truncates to its millisecond: the instant lies in [stamp, stamp + 1 ms), so the middle
        # is unbiased (left at the stamp, every log sits 0.5 ms early, 1 % of a 60 ms kernel's energy).
        return _Times(_local_ns(stamps, "%Y/%m/%d %H:%M:%S", zone) + 500_000, 1e6, READ_DELAY_NS,
                      f"nvidia-smi's local wall time to the millisecond in {zwords}, on CLOCK_REALTIME, each log at "
                      "the middle of its millisecond")
    if all(re.match(r"^\d+(\.\d+)?$", s) for s in stamps):
        digits = max((len(s.partition(".")[2]) for s in stamps), default=0)
        ns = np.array([int(round(float(s) * 1e9)) for s in stamps], dtype=np.int64)
        res = 10.0 ** (9 - min(digits, 9))
        return _Times(ns + int(res) // 2, res, READ_DELAY_NS,
                      f"epoch seconds to {res / 1e9:g} s, on CLOCK_REALTIME, each log at the middle of its stamp's "
                      "resolution (the stamp truncates)")
    try:
        parsed = [datetime.datetime.fromisoformat(s) for s in stamps]
    except ValueError as exc:
        raise PowerLogFormatError(f"{path}: a timestamp is neither epoch seconds nor ISO 8601 ({exc})") from None
    if any(d.tzinfo is None for d in parsed):
        zone, zwords = _zone(tz, path, "its ISO timestamps as")
        parsed = [d.replace(tzinfo=zone) if d.tzinfo is None else d for d in parsed]
    else:
        zwords = "the zone each stamp states"
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    ns = np.array([(d - epoch) // datetime.timedelta(microseconds=1) * 1000 for d in parsed], dtype=np.int64)
    return _Times(ns, 1e3 if any("." in s for s in stamps) else 1e9, READ_DELAY_NS,
                  f"ISO 8601 wall time in {zwords}, on CLOCK_REALTIME")


def _epoch_ns(value: Any, name: str) -> int:
    """A start time as epoch ns: epoch seconds, an aware datetime or an ISO 8601 string with its zone."""
    if isinstance(value, datetime.datetime):
        d = value
    elif isinstance(value, str):
        try:
            d = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{name}={value!r}: not an ISO 8601 time") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return int(round(float(value) * 1e9))
    else:
        raise ValueError(f"{name}={short_repr(value)}: must be epoch seconds, a datetime or an ISO 8601 string")
    if d.tzinfo is None:
        raise ValueError(f"{name}={value!r}: a time without its zone; add it (e.g. +00:00): it is never guessed")
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (d - epoch) // datetime.timedelta(microseconds=1) * 1000


def _given_times(path: str, t: _Table, rows: np.ndarray, start: Any, period_s: Any) -> _Times:
    """The times of a log without a timestamp column, from the start and period given by name."""
    if start is None or period_s is None:
        missing = " and ".join(n for n, v in (("start", start), ("period_s", period_s)) if v is None)
        raise ValueError(f"{missing}: {path} is a {t.kind} log without times; give the wall-clock time of its first "
                         "row (start=, epoch seconds or ISO 8601 with its zone) and the period it was written at "
                         "(period_s=; fingrav trace --log-start, --log-period): they are never assumed")
    if isinstance(period_s, bool) or not isinstance(period_s, (int, float)) or not (
            math.isfinite(period_s) and period_s > 0):
        raise ValueError(f"period_s={short_repr(period_s)}: must be a positive number of seconds")
    t0 = _epoch_ns(start, "start")
    n = int(rows.sum())
    ns = t0 + np.round(np.arange(n) * float(period_s) * 1e9).astype(np.int64)
    return _Times(ns, float(period_s) * 1e9, 0.0,
                  f"the start and period given ({float(period_s) * 1e3:g} ms), on CLOCK_REALTIME: the bound is one "
                  "period and assumes the tool kept its period (one that fell behind drifts past it)")


def _sensor(t: _Table, column: str, sensor: Any) -> tuple[SensorModel, str]:
    """The sensor model of the logs and why: ``sensor`` (a model, a preset, a characterisation file) or the column's."""
    if isinstance(sensor, (str, os.PathLike)) and os.path.isfile(os.fspath(sensor)):
        from fingrav_native.files._characterisation import load_characterisation

        return load_characterisation(os.fspath(sensor)).sensor, f"characterised ({os.fspath(sensor)})"
    given = as_sensor(sensor)
    if given is not None:
        return given, "given"
    preset, why = _PRESETS.get(column, (None, f"{column} has no preset"))
    if preset is None:
        raise ValueError(f"sensor: {why}; characterise it (fingrav characterize) and pass the file, or name a "
                         "preset (sensor=, fingrav trace --sensor)")
    return sensor_preset(preset), f"preset {preset}: {why}"


def _check_order(path: str, t: _Table, rows: np.ndarray, ns: np.ndarray) -> None:
    """Time never goes back (a clock step, an unsorted or concatenated file): refused at the line."""
    back = np.flatnonzero(np.diff(ns) < 0)
    if back.size:
        lines = np.asarray(t.lines)[np.flatnonzero(rows)]
        k = int(back[0])
        raise PowerLogFormatError(f"{path}: time goes back at line {int(lines[k + 1])} "
                                  f"({(ns[k] - ns[k + 1]) / 1e6:.3f} ms before line {int(lines[k])}): a clock step, a "
                                  "daylight-saving change in the wrong zone, or files joined out of order")


def _boottime(boottime_offset_ns: Any, offsets_from: Any, bound_ns: Any) -> Optional[dict[str, Any]]:
    """CLOCK_REALTIME - CLOCK_BOOTTIME and its bound: given, or measured from a capture's brackets (None: neither)."""
    if boottime_offset_ns is not None and offsets_from is not None:
        raise ValueError("boottime_offset_ns, offsets_from: give one")
    if offsets_from is not None:
        if not isinstance(offsets_from, PowerCapture) or "CLOCK_BOOTTIME" not in offsets_from.clocks:
            raise ValueError("offsets_from: must be a PowerCapture that brackets CLOCK_BOOTTIME (recorded on the same "
                             "host as the log)")
        o = offsets_from.clock_offsets()
        rt, bt = o["CLOCK_REALTIME"], o["CLOCK_BOOTTIME"]
        start = float(rt["start_offset_ns"] or 0) - float(bt["start_offset_ns"] or 0)
        end = float(rt["end_offset_ns"] or 0) - float(bt["end_offset_ns"] or 0)
        widths = max(float(rt["start_bound_ns"] or 0) + float(bt["start_bound_ns"] or 0),
                     float(rt["end_bound_ns"] or 0) + float(bt["end_bound_ns"] or 0))
        return {"offset_ns": round(0.5 * (start + end)), "bound_ns": widths + 0.5 * abs(end - start),
                "from": "a capture's CLOCK_REALTIME and CLOCK_BOOTTIME brackets"}
    if boottime_offset_ns is None:
        return None
    if isinstance(boottime_offset_ns, bool) or not isinstance(boottime_offset_ns, (int, np.integer)):
        raise ValueError(f"boottime_offset_ns={short_repr(boottime_offset_ns)}: must be an integer, "
                         "CLOCK_REALTIME - CLOCK_BOOTTIME in ns")
    b = BOOTTIME_OFFSET_BOUND_NS if bound_ns is None else float(bound_ns)
    if not (math.isfinite(b) and b >= 0):
        raise ValueError(f"boottime_offset_bound_ns={short_repr(bound_ns)}: must be a finite number >= 0")
    return {"offset_ns": int(boottime_offset_ns), "bound_ns": b, "from": "given"}


def read_power_log(path: Union[str, "os.PathLike[str]"], *, kind: PowerLogKind = "auto", device: Optional[int] = None,
                   sensor: Any = None, tz: Optional[str] = None, column: Optional[str] = None,
                   columns: Optional[Sequence[str]] = None, start: Any = None, period_s: Optional[float] = None,
                   boottime_offset_ns: Optional[int] = None, boottime_offset_bound_ns: Optional[float] = None,
                   offsets_from: Optional[PowerCapture] = None) -> PowerCapture:
    """Read a power log written by nvidia-smi, amd-smi, rocm-smi or dcgmi into a capture ``profile_trace`` takes.

    The logs and their wall-clock stamps become a :class:`PowerCapture`
    whose :meth:`~PowerCapture.logger_map` places them on the trace's clock
    (paper Section IV-A: each log placed by its own timestamp): on
    CLOCK_REALTIME (torch.profiler / Kineto) directly, on CLOCK_BOOTTIME
    (rocprofv3, rocpd) through the boot time's offset, given or measured.

    Parameters
    ----------
    path : str or path-like
        The log (see the module's docstring for the layouts).
    kind : {"auto", "nvidia-smi", "amd-smi", "rocm-smi", "dcgmi"}
        The format; ``"auto"`` tells it by content.
    device : int, optional
        The GPU (the tool's index) whose logs to read; needed when the file
        interleaves several.
    sensor : SensorModel, str or path, optional
        What each log measures: a model, a preset's name, or a
        characterisation file. Default: the column's preset (nvidia-smi's
        ``power.draw`` and DCGM's power: ``nvidia-average-1s``;
        ``power.draw.instant``: ``part-time-100ms``; amd-smi's socket power:
        ``amd-1ms-average``); an average over a window no document states
        (amd-smi ``average_socket_power``, rocm-smi's average) is refused
        without one.
    tz : str, optional
        The zone local wall-time stamps were written in (nvidia-smi's always):
        ``"UTC"``, an IANA name, ``"+01:00"``, or ``"local"`` (this host's).
        Never guessed.
    column : str, optional
        The power column to read (default the format's finest present:
        ``power.draw.instant`` before ``power.draw``).
    columns : sequence of str, optional
        The columns of an nvidia-smi log written with ``noheader``, in the
        order of ``--query-gpu``.
    start, period_s : optional
        For a log without times (rocm-smi, dcgmi, amd-smi without ``-w``):
        the wall-clock time of its first row (epoch seconds, or an aware
        datetime or ISO 8601 string) and the period in seconds.
    boottime_offset_ns : int, optional
        ``CLOCK_REALTIME - CLOCK_BOOTTIME`` on the recording host, ns (the
        boot time on the epoch), to place the logs on a rocprofv3 trace; its
        bound ``boottime_offset_bound_ns`` (default 10 ms, ``/proc/uptime``'s
        resolution).
    offsets_from : PowerCapture, optional
        Instead: a capture recorded on the same host, whose brackets measure
        that offset.

    Returns
    -------
    PowerCapture
        Logs on CLOCK_REALTIME ns (``host_ns`` and ``source_ts`` alike: a
        file holds no other clock), the sensor model, and
        ``meta["log_file"]``: the format, column, unit, clock, the map's
        bound, the sensor's reason, the GPUs seen, the values not given,
        and the energy counter read (DCGM's field 156, where logged: the
        capture's ``counter``, which ``profile_trace`` closes the table
        against).

    Raises
    ------
    PowerLogFormatError
        Not a format this reads (the first line shown), a unit other than W
        or mW (mJ or J for an energy counter), a value that is not a power
        (or an energy), a row of the wrong width, time going back (the line
        named), no values at all.
    ValueError
        Named: ``device`` missing for a file of several GPUs (or naming one it
        lacks), ``tz`` missing for local stamps, ``start``/``period_s``
        missing for a file without times, ``sensor`` missing where no preset
        is documented, ``column`` not in the file.
    FileNotFoundError
        No such file.
    """
    path = file_path(path, "path")
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{path}: no such power log")
    if period_s is not None and (isinstance(period_s, bool) or not isinstance(period_s, (int, float)) or not (
            math.isfinite(period_s) and period_s > 0)):
        raise ValueError(f"period_s={short_repr(period_s)}: must be a positive number of seconds")
    if kind not in ("auto", *POWER_LOG_KINDS):
        raise ValueError(f"kind={short_repr(kind)}: must be 'auto' or one of {', '.join(POWER_LOG_KINDS)}")
    if device is not None and (isinstance(device, bool) or not isinstance(device, (int, np.integer)) or device < 0):
        raise ValueError(f"device={short_repr(device)}: must be a GPU's index (an integer >= 0)")
    lines = _read_lines(path)
    found = _detect(path, lines) if kind == "auto" else kind
    t = _dcgmi_table(path, lines) if found == "dcgmi" else _csv_table(path, lines, found, columns)
    col = _column(path, t, column)
    rows, gpus = _pick_device(path, t, None if device is None else int(device))
    watts, missing = _values(path, t, t.header.index(col), rows)
    timed = "timestamp" in t.header
    if timed and (start is not None or period_s is not None):
        given = " and ".join(n for n, v in (("start", start), ("period_s", period_s)) if v is not None)
        raise ValueError(f"{given}: {path} stamps every row itself; the given {given} would be ignored, so leave "
                         "it out")
    times = _stamped_times(path, t, rows, tz) if timed else _given_times(path, t, rows, start, period_s)
    _check_order(path, t, rows, times.ns)
    model, why = _sensor(t, col, sensor)
    boot = _boottime(boottime_offset_ns, offsets_from, boottime_offset_bound_ns)
    w = watts[rows]
    keep = np.isfinite(w)
    if not keep.any():
        raise PowerLogFormatError(f"{path}: no {col} value in {int(rows.sum())} rows (all {missing})")
    ns = times.ns[keep]
    counter = _counter(path, t, rows, times.ns, int(np.median(np.diff(ns))) if len(ns) > 1 else 0)
    return _capture(path, found, col, t, times, w[keep], ns, model, why, boot, gpus, device, missing, counter)


def _capture(path: str, kind: str, col: str, t: _Table, times: _Times, w: np.ndarray, ns: np.ndarray,
             model: SensorModel, why: str, boot: Optional[dict[str, Any]], gpus: list[int], device: Optional[int],
             missing: dict[str, int], counter: tuple[Optional[CapturedCounter], Optional[str]]) -> PowerCapture:
    """The capture of the logs read, with what they are and how they map stated in ``meta["log_file"]``."""
    s = np.zeros(len(ns), dtype=SAMPLE_DTYPE)
    s["host_ns"] = s["source_ts"] = ns
    s["seq"] = s["source_seq"] = np.arange(len(ns))
    s["total"] = w
    for c in ("compute", "io", "memory"):
        s[c] = np.nan
    period = int(np.median(np.diff(ns))) if len(ns) > 1 else int(model.period_ns)
    span = [int(ns[0]), int(ns[len(ns) // 2]), int(ns[-1])]
    brackets = np.array([[x, x, x] for x in span], dtype=np.int64)
    unit = t.units.get(col, "W" if col.endswith("(W)") or kind == "dcgmi" else "W (the format's documented unit)")
    log = {"format": kind, "file": os.path.abspath(path), "column": col, "unit": unit, "clock": times.words,
           "resolution_ns": times.resolution_ns, "read_delay_ns": times.read_delay_ns,
           "bound_ns": times.resolution_ns + times.read_delay_ns, "sensor": why, "gpus": gpus,
           "device": device, "logs": len(ns), "missing": missing, "boottime": boot, "counter": counter[1]}
    source = {"name": kind, "clock_domain": LOG_FILE_CLOCK_DOMAIN, "tick_ns": 1.0, "native_period_ns": period,
              "window_ns": int(model.window_ns), "channels": ["total"]}
    meta = {"device": device if device is not None else (gpus[0] if len(gpus) == 1 else None),
            "host_clock": "CLOCK_REALTIME (the log's own stamps; a file holds no other clock)", "log_file": log,
            "started_epoch_ns": int(ns[0]), "stopped_epoch_ns": int(ns[-1])}
    return PowerCapture(samples=s, epoch_brackets=brackets, source=source, sensor=model, period_ns=max(period, 1),
                        stats={"logs": len(ns), "missing_values": int(sum(missing.values()))}, meta=meta,
                        counter=counter[0])


def power_log_summary(capture: PowerCapture) -> Optional[str]:
    """One paragraph on a capture read from a power log: format, column, unit, clock, bound, sensor, gaps (None: not one).

    Parameters
    ----------
    capture : PowerCapture

    Returns
    -------
    str or None

    Raises
    ------
    ValueError
        ``capture`` is not a PowerCapture.
    """
    if not isinstance(capture, PowerCapture):
        raise ValueError(f"capture={short_repr(capture)}: must be a PowerCapture, not a {type(capture).__name__}")
    log = capture.meta.get("log_file")
    if not isinstance(log, dict):
        return None
    named = "" if log.get("gpus") else " (the log names no GPU: taken as this one)"
    gpu = f"GPU {log['device']}{named}" if log.get("device") is not None else (
        f"GPU {log['gpus'][0]}" if log.get("gpus") else "the one GPU it names none of")
    missing = log.get("missing") or {}
    gaps = (f"; {sum(missing.values())} values not given ({', '.join(f'{v} x {k}' for k, v in missing.items())}) "
            "left out, never read as 0" if missing else "")
    boot = log.get("boottime")
    bt = (f"; onto CLOCK_BOOTTIME through the boot time's offset ({boot['from']}, +-{boot['bound_ns'] / 1e6:g} ms)"
          if isinstance(boot, dict) else "")
    sensor = capture.sensor.name if capture.sensor is not None else "none"
    counter = f"; energy counter: {log['counter']}" if log.get("counter") else ""
    return (f"power log: {log['format']} {log['file']}: {log['logs']} logs of {gpu}, {log['column']} in "
            f"{log['unit']}; clock: {log['clock']}; map bound {log['bound_ns'] / 1e6:g} ms (stamp resolution "
            f"{log['resolution_ns'] / 1e6:g} ms + read delay {log['read_delay_ns'] / 1e6:g} ms){bt}; sensor "
            f"{sensor} ({log['sensor']}){gaps}{counter}")
