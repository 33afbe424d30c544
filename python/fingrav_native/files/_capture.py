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

Other tracers stamp on other host clocks: rocprofv3 (ROCprofiler-SDK) and its
rocpd databases on CLOCK_BOOTTIME (ROCr converts each dispatch's GPU ticks to
its "system clock", ``os::ReadSystemClock`` = ``clock_gettime(CLOCK_BOOTTIME)``,
and the SDK's own stamps use ``default_clock_id = CLOCK_BOOTTIME``), which
differs from the raw clock by the boot time plus every suspend, and is slewed
by NTP. So since capture format version 2 every burst brackets
CLOCK_BOOTTIME and CLOCK_MONOTONIC the same way (:attr:`PowerCapture.clock_brackets`),
and :meth:`PowerCapture.logger_map` maps the logs onto whichever of the
:data:`~fingrav_native.clocks._epoch.BRACKETED_CLOCKS` the trace uses.

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
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Optional, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import MAX_TICK_NS, MIN_TICK_NS, integer_in, readonly, tick_length
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native._errors import FingravError
from fingrav_native._version import __version__
from fingrav_native.clocks._epoch import (
    BRACKETED_CLOCKS,
    EpochMap,
    compose_logger_map,
    fit_epoch_map,
    identity_logger_map,
    realtime_stamped_map,
    wall_stamped_map,
)
from fingrav_native.clocks._maps import MIN_BRACKETS, ClockMapLike
from fingrav_native.clocks._onesided import fit_one_sided_clock_map
from fingrav_native.files._capture_counter import CapturedCounter
from fingrav_native.files._outputs import check_output_path, json_problem, json_scalar
from fingrav_native.files._safe import MAX_JSON_DEPTH, save_npz_atomically, short_repr
from fingrav_native.records._layouts import check_channels
from fingrav_native.records._recording import Recording
from fingrav_native.sensors._energy_counter import EnergyCounter
from fingrav_native.sensors._model import SensorModel

#: The ``format`` a capture file's header names.
CAPTURE_FORMAT = "fingrav-power-capture"


#: Bumped on any change a reader of the previous version would misread. Version 2 adds the
#: CLOCK_BOOTTIME and CLOCK_MONOTONIC brackets (``clocks`` in the header); version 1 files load
#: with CLOCK_REALTIME brackets only.
CAPTURE_VERSION = 2


#: The clocks bracketed beside CLOCK_REALTIME since version 2, and their member names in the file.
OTHER_CLOCK_MEMBERS = {"CLOCK_BOOTTIME": "boottime_brackets", "CLOCK_MONOTONIC": "monotonic_brackets"}


#: Power-source clock domains whose timestamps are already CLOCK_REALTIME:
#: NVML stamps its samples with the host's gettimeofday in us (nvml.h;
#: csrc/fingrav/nvidia/nvml.hpp), so they map onto the epoch by their tick alone.
REALTIME_CLOCK_DOMAINS = frozenset({"nvml-host-us"})


#: Clock domains stamped with the host clock itself (hwmon reads, stamped at the read).
HOST_CLOCK_DOMAINS = frozenset({"host-monotonic-raw"})


#: Clock domains whose timestamps are CLOCK_BOOTTIME ns already: the amdgpu driver's
#: ``system_clock_counter`` in gpu_metrics (csrc/fingrav/amd/gpu_metrics.cpp, domain "boottime").
BOOTTIME_CLOCK_DOMAINS = frozenset({"boottime"})


#: The clock domain of logs read from a tool's file (nvidia-smi, amd-smi, rocm-smi, dcgmi:
#: files/_power_logs.py): stamped on CLOCK_REALTIME ns by the tool, with no brackets; the map's
#: bound and any boot-time offset are in ``meta["log_file"]``.
LOG_FILE_CLOCK_DOMAIN = "log-file-realtime"


#: The clock each of those families stamps on.
_STAMPED_ON = {**{d: "CLOCK_REALTIME" for d in REALTIME_CLOCK_DOMAINS},
               **{d: "CLOCK_BOOTTIME" for d in BOOTTIME_CLOCK_DOMAINS}}


class CaptureFormatError(ValueError, FingravError):
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
    clock_brackets : dict of str to numpy.ndarray
        The same for the other clocks traces stamp on, taken in the same
        bursts: ``"CLOCK_BOOTTIME"`` and ``"CLOCK_MONOTONIC"``, each ``(n, 3)``
        int64 ``(mono_raw_before_ns, clock_ns, mono_raw_after_ns)``. Empty in
        captures of format version 1 (they bracket CLOCK_REALTIME only).
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
    counter : CapturedCounter or None
        The device's energy counter, recorded beside the logs where the
        device has one (None: none; every capture written before counters were
        recorded). :meth:`energy_counter` rebuilds it.

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
    clock_brackets: Mapping[str, np.ndarray] = field(default_factory=dict)
    counter: Optional[CapturedCounter] = None
    if TYPE_CHECKING:  # per capture, set in __post_init__; not a field (see clock_map)
        _fitted: ClassVar[dict[tuple[Any, ...], tuple[np.ndarray, EpochMap, tuple[tuple[Any, ...], ...]]]]

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
        tick_length(self.source["tick_ns"], "source.tick_ns")
        if self.sensor is not None and not isinstance(self.sensor, SensorModel):
            raise ValueError(f"sensor={self.sensor!r}: must be a SensorModel or None")
        integer_in(self.period_ns, "period_ns", 1)
        for name in ("stats", "meta"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name}: must be a dict")
        if self.counter is not None and not isinstance(self.counter, CapturedCounter):
            raise ValueError(f"counter={type(self.counter).__name__}: must be a CapturedCounter or None")
        # Frozen like the dataclass: a capture is a record of what happened.
        object.__setattr__(self, "samples", readonly(s.copy() if s.flags.writeable else s))
        object.__setattr__(self, "epoch_brackets", readonly(b.copy() if b.flags.writeable else b))
        object.__setattr__(self, "clock_brackets", _checked_clock_brackets(self.clock_brackets))
        # Fitted clock maps by (clock, threshold): not a field, so equality, replace() and saving ignore it.
        object.__setattr__(self, "_fitted", {})

    def __len__(self) -> int:
        return int(self.samples.shape[0])

    @property
    def recovered(self) -> Optional[dict[str, Any]]:
        """What was recovered of a recording that did not end (``meta["recovered"]``); None for a whole one.

        Set by :func:`load_capture` when it rebuilt the capture from the
        recorder's journal: ``logs``, ``span_s``, ``first_log_epoch_ns``,
        ``last_log_epoch_ns``, ``dropped_bytes`` and ``dropped_reason`` (a
        torn last record), ``journal``.
        """
        r = self.meta.get("recovered")
        return r if isinstance(r, dict) else None

    @property
    def clocks(self) -> tuple[str, ...]:
        """The host clocks this capture brackets against its own (CLOCK_REALTIME first)."""
        if self.source.get("clock_domain") == LOG_FILE_CLOCK_DOMAIN:
            return BRACKETED_CLOCKS  # a log file's stamps: logger_map says what each clock needs
        return ("CLOCK_REALTIME",) + tuple(c for c in BRACKETED_CLOCKS if c in self.clock_brackets)

    def brackets(self, clock: str = "CLOCK_REALTIME") -> np.ndarray:
        """The ``(n, 3)`` brackets of ``clock`` (``epoch_brackets`` for CLOCK_REALTIME).

        Raises
        ------
        ValueError
            ``clock`` is not a bracketed clock, or this capture has none of
            it (a capture of format version 1): the message says to record
            again with this version.
        """
        if clock not in BRACKETED_CLOCKS:
            raise ValueError(f"clock={clock!r}: must be one of {', '.join(BRACKETED_CLOCKS)}")
        if clock == "CLOCK_REALTIME":
            return self.epoch_brackets
        if clock not in self.clock_brackets:
            made_by = self.meta.get("fingrav_native_version", "an older version")
            raise ValueError(f"this capture brackets only {', '.join(self.clocks)} (recorded by fingrav_native "
                             f"{made_by}, before captures bracketed {clock}), so its logs cannot be placed on "
                             f"{clock}; record the capture again with fingrav_native {__version__} or later "
                             f"(PowerRecorder / fingrav_native.record), which brackets {', '.join(BRACKETED_CLOCKS)}")
        return self.clock_brackets[clock]

    def clock_map(self, clock: str = "CLOCK_REALTIME", *, step_threshold_ns: float = 20_000.0) -> EpochMap:
        """The host clock (the samples' ``host_ns``) onto ``clock``: :func:`fit_epoch_map` on its brackets.

        Fitted once per clock and threshold and kept: the capture is frozen
        and its brackets read-only, and the fit of a long capture takes
        seconds, which every analysis of it (the logger map, the energy
        counter's map, the alignment) would otherwise pay again. A map is
        fitted anew only for other brackets (another clock, another capture
        made by :func:`dataclasses.replace`) or another threshold; the fit's
        warnings (:class:`~fingrav_native.clocks.ClockStepWarning`) are
        given again with the kept map, as a new fit would give them.
        """
        brackets = self.brackets(clock)
        key = (clock, type(step_threshold_ns), step_threshold_ns)
        try:
            kept = self._fitted.get(key)
        except TypeError:  # an unhashable threshold: fit_epoch_map names what is wrong with it
            return fit_epoch_map(brackets, step_threshold_ns=step_threshold_ns, clock=clock)
        if kept is None or kept[0] is not brackets:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                fitted = fit_epoch_map(brackets, step_threshold_ns=step_threshold_ns, clock=clock)
            kept = (brackets, fitted, tuple((w.message, w.category, w.filename, w.lineno) for w in said))
            self._fitted[key] = kept
        for message, category, filename, lineno in kept[2]:
            warnings.warn_explicit(message, category, filename, lineno)
        return kept[1]

    def epoch_map(self, *, step_threshold_ns: float = 20_000.0) -> EpochMap:
        """The host clock (the samples' ``host_ns``) onto epoch ns: :func:`fit_epoch_map` on the brackets."""
        return self.clock_map("CLOCK_REALTIME", step_threshold_ns=step_threshold_ns)

    def clock_offsets(self) -> dict[str, dict[str, Optional[float]]]:
        """Each bracketed clock's offset from the host clock at the capture's start and end: :func:`clock_offsets`."""
        return clock_offsets({c: self.brackets(c) for c in self.clocks})

    def logger_map(self, *, step_threshold_ns: float = 20_000.0, clock: str = "CLOCK_REALTIME") -> EpochMap:
        """The logger's timestamps (the samples' ``source_ts``) onto epoch ns, or onto another host clock.

        Parameters
        ----------
        step_threshold_ns : float
            See :func:`fit_epoch_map`.
        clock : str
            The clock the trace stamps on: ``"CLOCK_REALTIME"`` (Kineto, the
            default), ``"CLOCK_BOOTTIME"`` (rocprofv3, rocpd) or
            ``"CLOCK_MONOTONIC"``.

        Returns
        -------
        EpochMap
            With ``clock_domain`` the source's and ``clock`` the one asked.

        Raises
        ------
        ValueError
            Too few samples to fit a logger with its own clock (16); no
            brackets of ``clock`` (a capture of format version 1; the message
            says to record again); a logger stamped on CLOCK_REALTIME (NVML)
            asked for another clock.

        Notes
        -----
        Paper Section IV-A places each power log by its own timestamp. By
        the source's clock domain:

        * stamped on ``clock`` itself (NVML's ``"nvml-host-us"`` on
          CLOCK_REALTIME, :data:`REALTIME_CLOCK_DOMAINS`; the amdgpu
          driver's ``"boottime"`` on CLOCK_BOOTTIME):
          ``ticks * tick_ns``; the bound is one tick (the stamp truncates);
        * the host clock (``"host-monotonic-raw"``): the map of ``clock``;
        * any other (a GPU or firmware clock, or a host clock other than
          ``clock``): fitted one-sidedly from the samples (a log precedes the
          read that saw it; :func:`~fingrav_native.clocks.fit_one_sided_clock_map`,
          as :func:`fingrav_native.clocks.fit_logger_map` does for
          campaign runs), then composed with the map of ``clock``. The
          minimum publication delay biases that fit late and is not in the bound.
        """
        domain = str(self.source["clock_domain"])
        tick = float(self.source["tick_ns"])
        ticks = np.asarray(self.samples["source_ts"], dtype=np.int64)
        if domain == LOG_FILE_CLOCK_DOMAIN:
            return _log_file_map(self, ticks, tick, clock)
        target = self.clock_map(clock, step_threshold_ns=step_threshold_ns)
        stamped_on = _STAMPED_ON.get(domain)
        if stamped_on == clock:
            return realtime_stamped_map(target, ticks, domain, tick)
        if domain in REALTIME_CLOCK_DOMAINS:
            raise ValueError(f"the {domain!r} logger stamps its logs on CLOCK_REALTIME; placing them on {clock} is "
                             "not supported (a trace from this GPU's own profiler stamps on CLOCK_REALTIME)")
        if domain in HOST_CLOCK_DOMAINS:
            return compose_logger_map(target, identity_logger_map(ticks, tick), domain, tick)
        try:
            lmap = fit_one_sided_clock_map(self.samples["host_ns"], ticks, tick_ns=tick)
        except ValueError as exc:
            raise ValueError(f"samples: the {domain!r} logger clock is fitted one-sidedly from the samples' "
                             f"(host_ns, source_ts): {exc}") from exc
        return compose_logger_map(target, lmap, domain, tick)

    def energy_counter(self, clock: str = "CLOCK_REALTIME") -> Optional[tuple[EnergyCounter, ClockMapLike]]:
        """The energy counter recorded with the logs and the map of its stamps onto ``clock`` (None: none).

        See :meth:`CapturedCounter.energy_counter`; :func:`~fingrav_native.profile_trace`
        closes a profile against it.
        """
        return None if self.counter is None else self.counter.energy_counter(self, clock)

    # ------------------------------------------------------------------ files
    def _header(self) -> dict[str, Any]:
        header = {"format": CAPTURE_FORMAT, "version": CAPTURE_VERSION, "source": self.source,
                  "sensor": None if self.sensor is None else self.sensor.as_dict(), "period_ns": int(self.period_ns),
                  "stats": self.stats, "meta": self.meta,
                  "clocks": ["CLOCK_REALTIME", *(c for c in BRACKETED_CLOCKS if c in self.clock_brackets)]}
        if self.counter is not None:  # the energy counter (files/_capture_counter.py)
            header["counter"] = self.counter.header()
        return header

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
        (int64), ``boottime_brackets`` and ``monotonic_brackets`` (int64,
        format version 2) and ``header`` (a JSON string: ``format``,
        ``version``, ``clocks`` (the bracketed clocks, version 2) and the
        dict fields), and with an energy counter its ``counter`` header and
        ``counter_samples`` (:mod:`fingrav_native.files._capture_counter`);
        no pickles, so :func:`load_capture` reads it with
        ``allow_pickle=False``. Written to a temporary file in the same
        folder and renamed over ``path`` (``os.replace``), so a crash never
        leaves a half-written capture under the final name.

        Raises
        ------
        ValueError
            The capture holds what :func:`load_capture` would refuse (a
            malformed ``source``, a sensor model whose fields are not of
            their types, a non-finite number, a non-string key or a value
            JSON has no form for in ``stats`` or ``meta``): named, and
            nothing is written. Or ``path`` names no file that can be
            written (a directory, a missing folder: also a
            ``FileNotFoundError``; an unwritable one: also a
            ``PermissionError``; a profile or campaign file).
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        problem = self._save_problem()
        if problem is not None:
            raise ValueError(f"capture: {problem}; load_capture would refuse the file, so nothing was written")
        path = check_output_path(path, "path", writes="capture")
        header = json.dumps(self._header(), allow_nan=False, default=json_scalar)
        members = {"samples": np.ascontiguousarray(self.samples),
                   "epoch_brackets": np.ascontiguousarray(self.epoch_brackets), "header": np.array(header)}
        for clock, b in self.clock_brackets.items():
            members[OTHER_CLOCK_MEMBERS[clock]] = np.ascontiguousarray(b)
        if self.counter is not None:
            members.update(self.counter.members())
        return save_npz_atomically(path, members, "capture")

    def _save_problem(self) -> Optional[str]:
        """What of the header :func:`load_capture` would refuse (None: nothing): its own checks, before a write."""
        problem = check_source(self.source)
        if problem is None and self.sensor is not None:
            d = self.sensor.as_dict()
            problem = check_sensor_fields(d) or json_problem(d, "sensor", MAX_JSON_DEPTH - 1)
            if problem is None:
                try:
                    SensorModel.from_dict(d)
                except (TypeError, ValueError, KeyError) as exc:
                    problem = f"sensor: {exc}"
        for name in ("source", "stats", "meta"):
            # The header is the document's first level: its fields may nest one level less than the reader allows.
            problem = problem or json_problem(getattr(self, name), name, MAX_JSON_DEPTH - 1)
        return problem

    def to_recording(self) -> Recording:
        """This capture as a :class:`~fingrav_native.records.Recording`: what every analysis takes.

        Returns
        -------
        Recording
            The logs; the brackets of every host clock the capture took
            (``"CLOCK_REALTIME"`` and, since format version 2,
            ``"CLOCK_BOOTTIME"`` and ``"CLOCK_MONOTONIC"``), each ``(n, 3)``
            rows of host clock before, that clock, host clock after (paper
            Section IV-A's bracketed reads); the source and the sensor model;
            ``period_ns``, ``stats`` and ``meta`` as provenance.
            :meth:`from_recording` gives the capture back; the energy
            counter (:attr:`counter`) is not part of a recording.
        """
        clocks = {"CLOCK_REALTIME": self.epoch_brackets, **self.clock_brackets}
        return Recording(samples=self.samples, clocks=clocks, sensor=self.sensor, source=dict(self.source),
                         provenance={"period_ns": int(self.period_ns), "stats": dict(self.stats), "meta": self.meta})

    @classmethod
    def from_recording(cls, recording: Recording, argument: str = "recording") -> PowerCapture:
        """The capture a :class:`~fingrav_native.records.Recording` of a capture holds (:meth:`to_recording`'s inverse).

        Parameters
        ----------
        recording : Recording
            Logs stamped by a power source (``source``: its clock domain and
            tick) with bracketed reads of CLOCK_REALTIME (and of the other
            host clocks a trace may stamp on), as :meth:`to_recording` gives.
        argument : str
            The caller's name for it (messages start with it).

        Raises
        ------
        ValueError
            Not a Recording, or one that holds executions or markers (a
            capture holds logs only), lacks the CLOCK_REALTIME brackets or
            the ``period_ns`` provenance, or whose parts a capture refuses;
            each message names ``argument`` and what is missing.
        """
        if not isinstance(recording, Recording):
            raise ValueError(f"{argument}: must be a Recording, not a {type(recording).__name__}")
        for part in ("executions", "markers"):
            if getattr(recording, part) is not None:
                raise ValueError(f"{argument}: the Recording holds {part}, which a power capture does not (the "
                                 "kernels come from the trace); give a Recording of the logs and their clocks")
        clocks = dict(recording.clocks)
        if "CLOCK_REALTIME" not in clocks:
            held = ", ".join(clocks) or "none"
            raise ValueError(f"{argument}: the Recording holds no CLOCK_REALTIME brackets (clocks held: {held}), "
                             "which place a capture's logs on the trace's clock; give logger_map= instead")
        prov = dict(recording.provenance)
        if "period_ns" not in prov:
            raise ValueError(f"{argument}: the Recording's provenance has no 'period_ns' (the sampler's poll "
                             "period a capture records)")
        meta = prov.get("meta", {})
        try:
            return cls(samples=np.array(recording.samples), epoch_brackets=np.array(clocks.pop("CLOCK_REALTIME")),
                       source=dict(recording.source), sensor=recording.sensor, period_ns=prov["period_ns"],
                       stats=dict(prov.get("stats", {})), meta=dict(meta) if isinstance(meta, Mapping) else meta,
                       clock_brackets={c: np.array(b) for c, b in clocks.items()})
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{argument}: the Recording is not a power capture's: {exc}") from None



def _log_file_map(capture: PowerCapture, ticks: np.ndarray, tick: float, clock: str) -> EpochMap:
    """The map of a log file's wall-clock stamps onto ``clock``, with the bound ``meta["log_file"]`` states."""
    log = capture.meta.get("log_file")
    if not isinstance(log, dict) or not isinstance(log.get("bound_ns"), (int, float)):
        raise ValueError("samples: a capture read from a power log without its meta['log_file'] bound; read the log "
                         "again (fingrav_native.files.read_power_log)")
    bound = float(log["bound_ns"])
    if clock == "CLOCK_REALTIME":
        return wall_stamped_map(ticks, tick, LOG_FILE_CLOCK_DOMAIN, bound)
    boot = log.get("boottime")
    if clock == "CLOCK_BOOTTIME" and isinstance(boot, dict):
        return wall_stamped_map(ticks, tick, LOG_FILE_CLOCK_DOMAIN, bound + float(boot["bound_ns"]),
                                clock=clock, shift_ns=int(boot["offset_ns"]))
    raise ValueError(f"samples: the trace's kernels are stamped on {clock}, and the {log.get('format')} log "
                     f"{log.get('file')} on CLOCK_REALTIME (wall time) with no bracketed reads of {clock}: the "
                     f"offset between the two is not known. Give it: boottime_offset_ns= (CLOCK_REALTIME - "
                     f"CLOCK_BOOTTIME on the recording host; fingrav trace --boottime-offset-ns), or offsets_from= "
                     f"a capture recorded on that host; or profile a trace stamped on CLOCK_REALTIME (torch.profiler)")


def clock_offsets(brackets: Mapping[str, np.ndarray]) -> dict[str, dict[str, Optional[float]]]:
    """Each clock's offset from the host clock at the start and end of its brackets, and its drift.

    Parameters
    ----------
    brackets : dict of str to numpy.ndarray
        Per clock, ``(n, 3)`` int64 ``(mono_raw_before_ns, clock_ns,
        mono_raw_after_ns)`` rows.

    Returns
    -------
    dict
        Per clock: ``start_offset_ns``, ``start_bound_ns``,
        ``end_offset_ns``, ``end_bound_ns`` (the clock minus the host clock
        at the middle of the tightest bracket among the first and among the
        last :data:`MIN_BRACKETS` reads by host time, and that bracket's
        half width: the read lies inside it) and ``drift_ppm`` between the
        two (None when both are one read). A summary for reading (kept in a recorded capture's ``meta``);
        the clock maps use every bracket.
    """
    out: dict[str, dict[str, Optional[float]]] = {}
    for clock, b in brackets.items():
        b = b[np.argsort(b[:, 0], kind="stable")]
        ends = []
        for part in (b[:MIN_BRACKETS], b[-MIN_BRACKETS:]):
            r = part[int(np.argmin(part[:, 2] - part[:, 0]))]
            mid2 = int(r[0]) + int(r[2])  # twice the middle: exact integers
            ends.append((2 * int(r[1]) - mid2, mid2, 0.5 * float(r[2] - r[0])))
        (o0, m0, w0), (o1, m1, w1) = ends
        span = 0.5 * (m1 - m0)
        out[clock] = {"start_offset_ns": o0 // 2, "start_bound_ns": w0, "end_offset_ns": o1 // 2,
                      "end_bound_ns": w1, "drift_ppm": 1e6 * 0.5 * (o1 - o0) / span if span > 0 else None}
    return out


def _checked_clock_brackets(clock_brackets: Any) -> dict[str, np.ndarray]:
    """``clock_brackets`` checked (known clocks, ``(n, 3)`` int64 rows, at least 3, after >= before), read-only."""
    if not isinstance(clock_brackets, Mapping):
        raise ValueError(f"clock_brackets: must be a dict of clock name to (n, 3) brackets, got "
                         f"{type(clock_brackets).__name__}")
    out: dict[str, np.ndarray] = {}
    for clock, b in clock_brackets.items():
        if clock not in OTHER_CLOCK_MEMBERS:
            raise ValueError(f"clock_brackets: unknown clock {short_repr(clock)}; the clocks bracketed beside "
                             f"CLOCK_REALTIME are {', '.join(OTHER_CLOCK_MEMBERS)}")
        if not isinstance(b, np.ndarray) or b.dtype != np.int64 or b.ndim != 2 or b.shape[1] != 3:
            raise ValueError(f"clock_brackets[{clock!r}]: must be an (n, 3) int64 array of (mono_raw_before_ns, "
                             f"{clock} ns, mono_raw_after_ns); got {getattr(b, 'dtype', type(b).__name__)} of shape "
                             f"{getattr(b, 'shape', None)}")
        if b.shape[0] < 3:
            raise ValueError(f"clock_brackets[{clock!r}]: {b.shape[0]} brackets; a map needs at least 3")
        bad = np.flatnonzero(b[:, 2] < b[:, 0])
        if bad.size:
            raise ValueError(f"clock_brackets[{clock!r}]: row {int(bad[0])} ends before it starts "
                             f"(mono_raw_after_ns {int(b[bad[0], 2])} < mono_raw_before_ns {int(b[bad[0], 0])})")
        out[str(clock)] = readonly(b.copy() if b.flags.writeable else b)
    return out


def check_source(source: Any) -> Optional[str]:
    """What is wrong with a capture header's ``source`` (None: nothing), by field."""
    if not isinstance(source, dict):
        return f"source: expected an object, got {short_repr(source)}"
    missing = [k for k in _SOURCE_KEYS if k not in source]
    if missing:
        return f"source: must be a dict with {', '.join(_SOURCE_KEYS)}; missing {missing}"
    for key in ("name", "clock_domain"):
        if not isinstance(source[key], str):
            return f"source.{key}: expected a string, got {short_repr(source[key])}"
    tick = source["tick_ns"]
    if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not (
            math.isfinite(tick) and MIN_TICK_NS <= tick <= MAX_TICK_NS):
        return (f"source.tick_ns: expected a clock's tick, a finite number in [{MIN_TICK_NS:g}, {MAX_TICK_NS:g}] ns, "
                f"got {short_repr(tick)}")
    for key in ("native_period_ns", "window_ns"):
        v = source[key]
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            return f"source.{key}: expected a finite number >= 0, got {short_repr(v)}"
    channels = source["channels"]
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        return f"source.channels: expected a list of strings, got {short_repr(channels)}"
    return None


def check_sensor_fields(d: dict[str, Any]) -> Optional[str]:
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


#: The ``format`` of a journal's header record (files/_journal.py).
JOURNAL_FORMAT = "fingrav-capture-journal"
JOURNAL_VERSION = 1


def journal_header(capture_header: dict[str, Any]) -> dict[str, Any]:
    """The journal's header record: the capture's header as it is known when the recording starts."""
    return {"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, "header": capture_header}
