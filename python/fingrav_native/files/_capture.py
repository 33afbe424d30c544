"""Live power capture beside a running application, on the application trace's clock.

In-situ profiling follows the paper's Section IV-A protocol in an
application's own loop: every execution of a kernel in, say, a training step
is one run at a random phase against the power logger, so many steps give
many phases, and the method's golden-run selection and stitching
(Section IV-B, steps 5-8) turn them into one fine-grain profile. What the
method needs from the capture is what a campaign run records: the power logs
with their timestamps, and a map from those timestamps onto the timeline the
kernels were stamped on.

The application's tracer (torch.profiler, whose Chrome trace Kineto writes)
stamps GPU kernels on the Unix epoch, ``CLOCK_REALTIME``: event ``ts`` in us
plus the trace's ``baseTimeNanoseconds``. The native :class:`Sampler` stamps
each read with the host clock, ``CLOCK_MONOTONIC_RAW``, which NTP neither
slews nor steps. The two clocks differ by an offset (the boot time) and a
*drift*: NTP slews ``CLOCK_REALTIME`` by up to 500 ppm to steer it, and the
raw clock runs at the crystal's own rate. So during a capture this module
takes bursts of bracketed reads (``_core.read_epoch_brackets``: a realtime
read between two raw reads) and fits the map afterwards with the clock-sync
fits of :mod:`fingrav_native.clocks` (offset, skew, piecewise over long
captures, error bounds), the paper's Section IV-A CPU-GPU sync applied to the
two host clocks.

Precision. Epoch nanoseconds are about 1.8e18; a float64 there resolves only
256 ns, coarser than a sub-millisecond kernel's features. Every host time
here stays int64 (samples, brackets, anchors), and
:meth:`EpochMap.to_host_relative` returns float64 nanoseconds relative to an
integer origin (a trace's ``baseTimeNanoseconds``, say) computed so that no
epoch-magnitude number ever passes through a float.

Names
-----
:class:`PowerRecorder`
    The context manager that records (a native Sampler thread, one Python
    thread that drains it and takes epoch brackets), and :func:`record_torch`,
    which runs a training step under torch.profiler inside one.
:class:`PowerCapture`, :func:`load_capture`
    What a recording is, saved as a versioned ``.npz`` without pickles.
:class:`EpochMap`, :func:`fit_epoch_map`, :class:`ClockStepWarning`
    The clock maps onto the Unix epoch, and the warning a realtime step gives.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in, readonly
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native._version import __version__
from fingrav_native.clocks._epoch import (
    EpochMap,
    compose_logger_map,
    fit_epoch_map,
    identity_logger_map,
    realtime_stamped_map,
)
from fingrav_native.clocks._onesided import fit_one_sided_clock_map
from fingrav_native.files._safe import (
    MAX_JSON_BYTES,
    check_archive,
    file_problem,
    loads_json,
    open_zip,
    read_member,
    read_npy,
    save_npz_atomically,
    short_repr,
)
from fingrav_native.records._layouts import check_channels
from fingrav_native.records._recording import Recording
from fingrav_native.sensors._model import SensorModel

#: The ``format`` a capture file's header names.
CAPTURE_FORMAT = "fingrav-power-capture"


#: Bumped on any change a reader of the previous version would misread.
CAPTURE_VERSION = 1


#: Power-source clock domains whose timestamps are already CLOCK_REALTIME:
#: NVML stamps its samples with the host's gettimeofday in us (nvml.h;
#: csrc/fingrav/nvidia/nvml.hpp), so they map onto the epoch by their tick alone.
REALTIME_CLOCK_DOMAINS = frozenset({"nvml-host-us"})


#: Clock domains stamped with the host clock itself (hwmon reads, stamped at the read).
HOST_CLOCK_DOMAINS = frozenset({"host-monotonic-raw"})


class CaptureFormatError(ValueError):
    """A file is not a readable power capture (foreign, newer, truncated); the message names the path."""


_SOURCE_KEYS = ("name", "clock_domain", "tick_ns", "native_period_ns", "window_ns", "channels")


def source_dict(source: _core.PowerSource) -> dict[str, Any]:
    """What a capture records of its power source: its info as plain values (the header's ``source``)."""
    info = source.info
    return {"name": str(info.name), "clock_domain": str(info.clock_domain), "tick_ns": float(info.tick_ns),
            "native_period_ns": int(info.native_period_ns), "window_ns": int(info.window_ns),
            "channels": [str(c) for c in info.channels]}


@dataclass(frozen=True)
class PowerCapture:
    """One live power recording beside an application, with what maps it onto the trace's clock.

    Made by :class:`PowerRecorder` and :func:`load_capture`. The samples'
    host times stay CLOCK_MONOTONIC_RAW int64; :meth:`epoch_map` and
    :meth:`logger_map` put them on the Unix epoch the application's trace
    uses.

    Attributes
    ----------
    samples : numpy.ndarray
        SAMPLE_DTYPE, in drain order (``seq`` consecutive unless the ring
        overflowed, which ``stats["drops"]`` counts).
    epoch_brackets : numpy.ndarray
        ``(n, 3)`` int64 ``(mono_raw_before_ns, realtime_ns,
        mono_raw_after_ns)``, at the start, every ``brackets_every_s`` and
        at the end.
    source : dict
        The power source: ``name``, ``clock_domain``, ``tick_ns``,
        ``native_period_ns``, ``window_ns``, ``channels``.
    sensor : SensorModel or None
        What each log is (instantaneous, a window, a counter), when known.
    period_ns : int
        The sampler's poll period.
    stats : dict
        The sampler's counters (``SamplerStats.as_dict()``: ``drops`` for
        ring overflows, ``source_missed`` for logs the source lost, ...)
        plus the recorder's own (``drain_thread_cpu_ns``, ``drains``,
        ``epoch_bracket_reads``, ``capacity``).
    meta : dict
        ``device``, ``hostname``, ``pid``, ``started_epoch_ns``,
        ``stopped_epoch_ns``, ``fingrav_native_version``, ``host_clock``,
        and ``trace`` when a trace was attached.

    Raises
    ------
    ValueError
        On construction, naming the field: wrong dtype or shape, a source
        dict missing keys, a non-positive period.
    """

    samples: np.ndarray
    epoch_brackets: np.ndarray
    source: dict[str, Any]
    sensor: Optional[SensorModel]
    period_ns: int
    stats: dict[str, Any]
    meta: dict[str, Any]

    def __post_init__(self) -> None:
        s = self.samples
        if not isinstance(s, np.ndarray) or s.dtype != SAMPLE_DTYPE or s.ndim != 1:
            raise ValueError(f"samples: must be a 1-D SAMPLE_DTYPE array; got "
                             f"{getattr(s, 'dtype', type(s).__name__)} of shape {getattr(s, 'shape', None)}")
        b = self.epoch_brackets
        if not isinstance(b, np.ndarray) or b.dtype != np.int64 or b.ndim != 2 or b.shape[1] != 3:
            raise ValueError(f"epoch_brackets: must be an (n, 3) int64 array; got "
                             f"{getattr(b, 'dtype', type(b).__name__)} of shape {getattr(b, 'shape', None)}")
        if b.shape[0] < 1:
            raise ValueError("epoch_brackets: empty; a capture needs its epoch brackets")
        # A capture keeps a failed read as NaN (NVML's); a value no board can draw is refused where it enters.
        check_channels(s, "samples", nan_total=True)
        if not isinstance(self.source, dict) or any(k not in self.source for k in _SOURCE_KEYS):
            missing = [k for k in _SOURCE_KEYS if not isinstance(self.source, dict) or k not in self.source]
            raise ValueError(f"source: must be a dict with {', '.join(_SOURCE_KEYS)}; missing {missing}")
        if self.sensor is not None and not isinstance(self.sensor, SensorModel):
            raise ValueError(f"sensor={self.sensor!r}: must be a SensorModel or None")
        integer_in(self.period_ns, "period_ns", 1)
        for name in ("stats", "meta"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name}: must be a dict")
        # Frozen like the dataclass: a capture is a record of what happened.
        object.__setattr__(self, "samples", readonly(s.copy() if s.flags.writeable else s))
        object.__setattr__(self, "epoch_brackets", readonly(b.copy() if b.flags.writeable else b))

    def __len__(self) -> int:
        return int(self.samples.shape[0])

    def epoch_map(self, *, step_threshold_ns: float = 20_000.0) -> EpochMap:
        """The host clock (the samples' ``host_ns``) onto epoch ns: :func:`fit_epoch_map` on the brackets."""
        return fit_epoch_map(self.epoch_brackets, step_threshold_ns=step_threshold_ns)

    def logger_map(self, *, step_threshold_ns: float = 20_000.0) -> EpochMap:
        """The logger's timestamps (the samples' ``source_ts``) onto epoch ns.

        Returns
        -------
        EpochMap
            With ``clock_domain`` the source's.

        Raises
        ------
        ValueError
            Too few samples to fit a logger with its own clock (16).

        Notes
        -----
        Paper Section IV-A places each power log by its own timestamp. By
        the source's clock domain:

        * CLOCK_REALTIME already (``"nvml-host-us"``, :data:`REALTIME_CLOCK_DOMAINS`):
          ``ticks * tick_ns``; the bound is one tick (the stamp truncates);
        * the host clock (``"host-monotonic-raw"``): the epoch map;
        * any other (a GPU or firmware clock): fitted one-sidedly from the
          samples (a log precedes the read that saw it;
          :func:`~fingrav_native.clocks.fit_one_sided_clock_map`, as
          :func:`fingrav_native.clocks.fit_logger_map` does for
          campaign runs), then composed with the epoch map. The minimum
          publication delay biases that fit late and is not in the bound.
        """
        domain = str(self.source["clock_domain"])
        tick = float(self.source["tick_ns"])
        ticks = np.asarray(self.samples["source_ts"], dtype=np.int64)
        epoch = self.epoch_map(step_threshold_ns=step_threshold_ns)
        if domain in REALTIME_CLOCK_DOMAINS:
            return realtime_stamped_map(epoch, ticks, domain, tick)
        if domain in HOST_CLOCK_DOMAINS:
            return compose_logger_map(epoch, identity_logger_map(ticks, tick), domain, tick)
        try:
            lmap = fit_one_sided_clock_map(self.samples["host_ns"], ticks, tick_ns=tick)
        except ValueError as exc:
            raise ValueError(f"samples: the {domain!r} logger clock is fitted one-sidedly from the samples' "
                             f"(host_ns, source_ts): {exc}") from exc
        return compose_logger_map(epoch, lmap, domain, tick)

    # ------------------------------------------------------------------ files
    def _header(self) -> dict[str, Any]:
        return {"format": CAPTURE_FORMAT, "version": CAPTURE_VERSION, "source": self.source,
                "sensor": None if self.sensor is None else self.sensor.as_dict(), "period_ns": int(self.period_ns),
                "stats": self.stats, "meta": self.meta}

    def save(self, path: Union[str, os.PathLike[str]]) -> str:
        """Write the capture to ``path`` atomically; return the path written.

        Parameters
        ----------
        path : str or path-like
            The file (``.npz`` by convention; the name is kept as given).

        Returns
        -------
        str

        Notes
        -----
        A numpy ``.npz`` holding ``samples`` (SAMPLE_DTYPE), ``epoch_brackets``
        (int64) and ``header`` (a JSON string: ``format``, ``version`` and
        the dict fields); no pickles, so :func:`load_capture` reads it with
        ``allow_pickle=False``. Written to a temporary file in the same
        folder and renamed over ``path`` (``os.replace``), so a crash never
        leaves a half-written capture under the final name.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        path = os.fspath(path)
        header = json.dumps(self._header())
        return save_npz_atomically(path, {"samples": np.ascontiguousarray(self.samples),
                                          "epoch_brackets": np.ascontiguousarray(self.epoch_brackets),
                                          "header": np.array(header)}, "capture")

    def to_recording(self) -> Recording:
        """This capture as a :class:`Recording` (logs, CLOCK_REALTIME brackets, source, sensor, stats)."""
        return Recording.from_capture(self)



def _check_source(source: Any) -> Optional[str]:
    """What is wrong with a capture header's ``source`` (None: nothing), by field."""
    if not isinstance(source, dict):
        return f"source: expected an object, got {short_repr(source)}"
    missing = [k for k in _SOURCE_KEYS if k not in source]
    if missing:
        return f"source: must be a dict with {', '.join(_SOURCE_KEYS)}; missing {missing}"
    for key in ("name", "clock_domain"):
        if not isinstance(source[key], str):
            return f"source.{key}: expected a string, got {short_repr(source[key])}"
    for key, low in (("tick_ns", "> 0"), ("native_period_ns", ">= 0"), ("window_ns", ">= 0")):
        v = source[key]
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              and (v > 0 if low == "> 0" else v >= 0))
        if not ok:
            return f"source.{key}: expected a finite number {low}, got {short_repr(v)}"
    channels = source["channels"]
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        return f"source.channels: expected a list of strings, got {short_repr(channels)}"
    return None


def _check_sensor_fields(d: dict[str, Any]) -> Optional[str]:
    """What is wrong with the types of a header's ``sensor`` fields (None: nothing); the model checks values."""
    for f in dataclasses.fields(SensorModel):
        if f.name not in d:
            continue
        v = d[f.name]
        if f.type in ("str", str):
            if not isinstance(v, str):
                return f"sensor.{f.name}: expected a string, got {short_repr(v)}"
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"sensor.{f.name}: expected a number, got {short_repr(v)}"
    return None


def load_capture(path: Union[str, os.PathLike[str]]) -> PowerCapture:
    """Read a capture written by :meth:`PowerCapture.save`.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    PowerCapture

    Raises
    ------
    CaptureFormatError
        Naming the path: a directory or other non-file, not a readable
        ``.npz`` (truncated, damaged: the member is named), a file of another
        format, a newer format version (with the version found), more data
        than a capture holds (a zip bomb, an array header declaring more
        than its bytes), a header nested too deep, or missing or malformed
        arrays or header fields (named).
    FileNotFoundError
        No such file.
    ValueError
        ``path`` is not a path.

    Notes
    -----
    The ``.npz`` is read member by member with the size caps and ``.npy``
    header checks of the profile loader (:mod:`fingrav_native.files._safe`),
    never with pickle.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such power capture file")

    def bad(what: str) -> CaptureFormatError:
        return CaptureFormatError(f"{path}: {what}")

    problem = file_problem(path)
    if problem is not None:
        raise bad(f"{problem}; a power capture is an .npz file")
    arrays = _read_arrays(path, bad)
    header = _read_header(arrays["header"], bad)
    _check_contents(header, arrays, bad)
    sensor = _sensor_of(header, bad)
    try:
        return PowerCapture(samples=arrays["samples"], epoch_brackets=arrays["epoch_brackets"],
                            source=header["source"], sensor=sensor, period_ns=header["period_ns"],
                            stats=header["stats"], meta=header["meta"])
    except (ValueError, TypeError) as exc:
        raise bad(str(exc)) from exc


#: Makes the loader's error for a fault (the message names the file).
_Bad = Callable[[str], CaptureFormatError]


def _read_arrays(path: str, bad: _Bad) -> dict[str, np.ndarray]:
    """The ``header``, ``samples`` and ``epoch_brackets`` members present, through the loaders' guards."""
    zf = open_zip(path, lambda what: bad(f"not a readable {CAPTURE_FORMAT} file (.npz): {what}"))
    with zf:
        budget = check_archive(zf, os.path.getsize(path), bad, max_members=64)
        names = {n[: -len(".npy")] for n in zf.namelist() if n.endswith(".npy")}
        if "header" not in names:
            raise bad(f"not a {CAPTURE_FORMAT} file (no 'header' array; found {sorted(names)[:8]})")
        arrays: dict[str, np.ndarray] = {}
        for key in ("header", "samples", "epoch_brackets"):
            if key in names:
                # The header is a few kB of JSON; only the arrays may be large.
                data = read_member(zf, f"{key}.npy", bad, budget, limit=MAX_JSON_BYTES if key == "header" else None)
                arrays[key] = read_npy(data, bad, f"the array {key!r}")
    return arrays


def _read_header(header_text: np.ndarray, bad: _Bad) -> dict[str, Any]:
    """The header's JSON object, of this format and a version this reader reads."""
    if header_text.ndim != 0 or header_text.dtype.kind != "U":
        raise bad(f"the header is not a string (dtype {header_text.dtype}, shape {header_text.shape})")
    header = loads_json(str(header_text[()]), bad, "the header")
    if not isinstance(header, dict):
        raise bad(f"the header is a {type(header).__name__}, not a JSON object")
    fmt = header.get("format")
    if fmt != CAPTURE_FORMAT:
        raise bad(f"format {short_repr(fmt)}, not {CAPTURE_FORMAT!r}")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise bad(f"format version {short_repr(version)} is not a version number")
    if version > CAPTURE_VERSION:
        raise bad(f"format version {version} is newer than this fingrav_native ({__version__}) reads "
                  f"(up to {CAPTURE_VERSION}); upgrade fingrav_native")
    return header


def _check_contents(header: dict[str, Any], arrays: dict[str, np.ndarray], bad: _Bad) -> None:
    """Both arrays and every header field present; the source and the dict fields well formed."""
    for key in ("samples", "epoch_brackets"):
        if key not in arrays:
            raise bad(f"the array {key!r} is missing")
    for key in ("source", "period_ns", "stats", "meta"):
        if key not in header:
            raise bad(f"the header field {key!r} is missing")
    problem = _check_source(header["source"])
    if problem is not None:
        raise bad(problem)
    for key in ("stats", "meta"):
        if not isinstance(header[key], dict):
            raise bad(f"{key}: expected an object, got {short_repr(header[key])}")


def _sensor_of(header: dict[str, Any], bad: _Bad) -> Optional[SensorModel]:
    """The header's sensor model, None when it has none."""
    if header.get("sensor") is None:
        return None
    if not isinstance(header["sensor"], dict):
        raise bad(f"sensor: expected an object, got {type(header['sensor']).__name__}")
    problem = _check_sensor_fields(header["sensor"])
    if problem is not None:
        raise bad(problem)
    try:
        return SensorModel.from_dict(header["sensor"])
    except (TypeError, ValueError, KeyError) as exc:
        raise bad(f"sensor: {exc}") from exc
