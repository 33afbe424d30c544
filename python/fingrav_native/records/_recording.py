"""What was measured: a device's capabilities, one campaign run as returned, and the :class:`Recording` value."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional

import numpy as np

from fingrav_native._checks import (
    flag,
    instance_of,
    integer_in,
    positive_number,
    short_repr,
    structured,
    tick_length,
    whole_numbers,
)
from fingrav_native.records._layouts import check_channels
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sensors._semantics import FIGURES, PROVENANCES

if TYPE_CHECKING:
    from fingrav_native.clocks._maps import ClockMap


def _ns_words(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.4g} {unit}"
    return f"{ns:.4g} ns" if ns else "0"


@dataclass(frozen=True)
class Capabilities:
    """What a backend's logger, clocks and markers are.

    Attributes
    ----------
    name : str
        Backend name (``sim``, ``amd``, ``nvidia``).
    device : str
        Which device, in words.
    logger_period_ns : float
        Nominal period of the power logger.
    logger_window_ns : float
        Averaging window of a log (0 = instantaneous).
    logger_clock : str
        ``"device"`` when logs are stamped with the device clock the markers
        use, else the name of the logger's own clock (fitted one-sidedly).
    device_tick_ns : float
        Nominal device-clock tick.
    gpu_markers : bool
        Whether execution begin/end come from GPU-side timestamps (else host
        brackets around launches, a larger localisation error).
    marker_err_ns : float
        Half-width of a marker's own placement error (probe-kernel write
        latency), before clock-map error.
    channels : tuple of str
        Power channels the logger provides.
    virtual_time : bool
        True when the device runs in simulated (virtual) time.
    logger_tick_ns : float
        Length of one tick of the logs' timestamps (``Sample.source_ts``);
        0 means the device tick (loggers stamped by the device clock).
    sensor : SensorModel, optional
        What each log measures (window, filter, delay, counter: an
        averaging log placed as an instantaneous one is misplaced), as far
        as the backend knows it; a characterisation can replace it. ``profile`` attributes by
        deconvolution when it averages over more than the resolution asked
        for. None (profiles saved before sensors were modelled): the logs'
        own ``window_ns`` fields say.
    sensor_semantics : str
        What one log is, in words, for the mode in use (e.g. "NVML power
        usage: a 1 s average, refreshed about every 100 ms"); empty in
        profiles saved before it was recorded.
    provenance : dict of str to str
        For each figure the backend reports (``"period"``, ``"window"``,
        ``"delay"``, ``"tick"``), where it comes from: ``"documented"`` (a
        vendor header or manual), ``"measured"`` (on this device, at start)
        or ``"assumed"`` (neither: characterise the sensor before trusting
        it). See :data:`PROVENANCES`. ``"tick"`` is the device clock's
        update step (``device_tick_ns * device_resolution_ticks``).
    device_resolution_ticks : float
        How many device ticks the device clock advances per update (1: every
        tick). NVIDIA's %globaltimer counts ns but may move once a
        microsecond (1000); the clock map widens its bound by half a step
        (:func:`~fingrav_native.clocks.fit_clock_map`,
        ``resolution_ticks``). 1 in profiles saved before it was recorded.
    """

    name: str
    device: str
    logger_period_ns: float
    logger_window_ns: float
    logger_clock: str
    device_tick_ns: float
    gpu_markers: bool
    marker_err_ns: float
    channels: tuple[str, ...]
    virtual_time: bool
    logger_tick_ns: float = 0.0
    sensor: Optional[SensorModel] = None
    sensor_semantics: str = ""
    provenance: dict[str, str] = field(default_factory=dict)
    device_resolution_ticks: float = 1.0

    def __post_init__(self) -> None:
        for text in ("name", "device", "logger_clock", "sensor_semantics"):
            instance_of(getattr(self, text), text, str, "a str")
        positive_number(self.logger_period_ns, "logger_period_ns")
        tick_length(self.device_tick_ns, "device_tick_ns")
        tick_length(self.logger_tick_ns, "logger_tick_ns", allow_zero=True)
        for number in ("logger_window_ns", "marker_err_ns"):
            positive_number(getattr(self, number), number, allow_zero=True)
        for switch in ("gpu_markers", "virtual_time"):
            flag(getattr(self, switch), switch)
        if isinstance(self.channels, (str, bytes)) or not isinstance(self.channels, (tuple, list)) or not all(
                isinstance(c, str) for c in self.channels):
            raise ValueError(f"channels={short_repr(self.channels)}: must be a tuple of channel names (str)")
        instance_of(self.sensor, "sensor", (SensorModel, type(None)), "a SensorModel or None")
        instance_of(self.provenance, "provenance", dict, "a dict of figure to provenance")
        r = self.device_resolution_ticks
        if not positive_number(r, "device_resolution_ticks") >= 1:
            raise ValueError(f"device_resolution_ticks={self.device_resolution_ticks!r}: must be a number >= 1 "
                             "(device ticks per clock update)")
        bad = {k: v for k, v in self.provenance.items() if k not in FIGURES or v not in PROVENANCES}
        if bad:
            raise ValueError(f"provenance: {bad} is not a map of {FIGURES} to one of {PROVENANCES}")

    def describe_figures(self) -> str:
        """The logger's figures with where each comes from, in one line (``fingrav devices``, profiles).

        Returns
        -------
        str
            E.g. ``"period 100 ms (measured), window 25 ms (documented), delay 0 (assumed), tick 1 ns
            (measured)"``; figures without a recorded provenance are left out.

        Notes
        -----
        Paper Section VI names the logger's period as what limits the
        method; a window or delay nobody measured is the silent error an
        averaging sensor brings.
        """
        values = {"period": self.logger_period_ns, "window": self.logger_window_ns,
                  "delay": self.sensor.delay_ns if self.sensor is not None else 0.0,
                  "tick": self.device_tick_ns * self.device_resolution_ticks}
        parts = [f"{k} {_ns_words(values[k])} ({self.provenance[k]})" for k in FIGURES if k in self.provenance]
        return ", ".join(parts)


@dataclass(frozen=True)
class RunRecord:
    """Everything one run produced, raw (paper Section IV-B steps 2 and 4).

    Attributes
    ----------
    run : int
        Run id.
    executions : int
        Executions in the run.
    samples : numpy.ndarray
        SAMPLE_DTYPE power logs seen while the run was under way.
    markers : numpy.ndarray
        MARKER_RECORD_DTYPE GPU-side markers, one per execution.
    brackets : numpy.ndarray
        (n, 3) int64 bracketed clock reads taken around the run.
    idle_wait_ns : int
        How long the backend waited for idle before the run.
    """

    run: int
    executions: int
    samples: np.ndarray
    markers: np.ndarray
    brackets: np.ndarray
    idle_wait_ns: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        integer_in(self.run, "run", 0)
        integer_in(self.executions, "executions", 0)
        integer_in(self.idle_wait_ns, "idle_wait_ns", 0)
        check_channels(structured(self.samples, "samples", ("source_ts",), "the run's logs (SAMPLE_DTYPE)"), "samples",
                       nan_total=True)
        structured(self.markers, "markers", ("begin_ticks", "end_ticks"), "GPU-side markers (MARKER_RECORD_DTYPE)")
        b = self.brackets
        if not isinstance(b, np.ndarray) or b.ndim != 2 or b.shape[1] != 3 or b.dtype.kind not in "iu":
            raise ValueError(f"brackets={short_repr(b)}: must be an (n, 3) integer array of bracketed clock reads")
        whole_numbers(b, "brackets", -(2**63), 2**63 - 1)  # a uint64 read past 2**63 is refused, not wrapped
        instance_of(self.meta, "meta", dict, "a dict")

    def to_recording(self, caps: Optional["Capabilities"] = None, **provenance: Any) -> "Recording":
        """This run as a :class:`Recording` (its logs, markers and device-clock brackets)."""
        return Recording.from_run(self, caps, **provenance)



def _readonly_copy(a: Any, dtype: Any = None) -> np.ndarray:
    # A copy, so the recording never changes when the caller's array does; read-only, so it cannot be changed.
    arr = np.array(a, dtype=dtype, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True)
class Recording:
    """What was measured, in one value: the lowest layer every analysis reads (docs/ARCHITECTURE.md).

    A recording is the logs a power sensor produced and what places them in
    time: the executions they may be attributed to (or the raw markers that
    give them), the bracketed clock reads of every clock domain involved, the
    sensor's model, the source that was read, and where it all came from. A
    campaign run (:class:`RunRecord`, a stored run), a live capture
    (``PowerCapture``) and logs a user brings are each a recording
    (:meth:`from_run`, ``PowerCapture.to_recording``, or the constructor);
    the analyses (:func:`fingrav_native.stitch_logs`,
    :func:`fingrav_native.profile_trace`,
    :func:`fingrav_native.characterize_logs`) take it as their log input.

    Attributes
    ----------
    samples : numpy.ndarray
        The power logs, SAMPLE_DTYPE-compatible (``source_ts`` on the
        logger's clock, ``host_ns``, one float field per channel).
    executions : numpy.ndarray or None
        EXECUTION_DTYPE executions on the host clock, where known.
    markers : numpy.ndarray or None
        Raw execution markers (device ticks), where the executions are not
        yet placed on the host clock.
    clocks : dict of str to numpy.ndarray
        Bracketed clock reads per clock domain: ``(n, 3)`` int64 rows of
        host-before, the domain's read, host-after.
    sensor : SensorModel or None
        What each log measures (None: instantaneous, or not known).
    source : dict
        The power source: name, clock domain, tick, period, window, channels.
    provenance : dict
        Where the recording comes from: device, run, role, kernel, file,
        versions; any JSON-ready value.
    """

    samples: np.ndarray
    executions: Optional[np.ndarray] = None
    markers: Optional[np.ndarray] = None
    clocks: Mapping[str, np.ndarray] = field(default_factory=dict)
    sensor: Optional[SensorModel] = None
    source: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        samples = self.samples
        if not isinstance(samples, np.ndarray) or samples.dtype.names is None or "source_ts" not in samples.dtype.names \
                or samples.ndim != 1:
            raise ValueError("samples: must be a 1-d structured array with a 'source_ts' field (SAMPLE_DTYPE)")
        check_channels(samples, "samples", nan_total=True)
        object.__setattr__(self, "samples", _readonly_copy(samples))
        for name in ("executions", "markers"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, np.ndarray) or value.dtype.names is None or value.ndim != 1:
                    raise ValueError(f"{name}: must be a 1-d structured array or None")
                arr = value
                if arr.dtype.names is None or arr.ndim != 1:
                    raise ValueError(f"{name}: must be a 1-d structured array or None")
                object.__setattr__(self, name, _readonly_copy(arr))
        if not isinstance(self.clocks, Mapping):
            raise ValueError(f"clocks: must be a mapping of clock domain to (n, 3) reads, got {type(self.clocks).__name__}")
        clocks: dict[str, np.ndarray] = {}
        for domain, reads in self.clocks.items():
            if not isinstance(domain, str) or not domain:
                raise ValueError(f"clocks: each key must be a clock domain's name (a non-empty str), got {domain!r}")
            arr = np.asarray(reads)
            if arr.ndim != 2 or arr.shape[1] != 3 or arr.dtype.kind not in "iu":
                raise ValueError(f"clocks[{domain!r}]: must be (n, 3) integer reads (host before, the domain's "
                                 f"read, host after), got shape {arr.shape} of {arr.dtype}")
            clocks[domain] = _readonly_copy(arr, np.int64)
        object.__setattr__(self, "clocks", clocks)
        if self.sensor is not None and not isinstance(self.sensor, SensorModel):
            raise ValueError(f"sensor: must be a SensorModel or None, got {type(self.sensor).__name__}")
        for name in ("source", "provenance"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ValueError(f"{name}: must be a dict, got {type(value).__name__}")
            object.__setattr__(self, name, dict(value))

    @classmethod
    def from_run(cls, record: RunRecord, caps: Optional[Capabilities] = None, **provenance: Any) -> Recording:
        """A campaign run as a recording: its logs, markers and device-clock brackets.

        Parameters
        ----------
        record : RunRecord
            One run as a backend returned it (paper Section IV-B, steps 2 and 4).
        caps : Capabilities, optional
            The backend's capabilities: the sensor, the clock domains' names
            and the device, recorded with the run.
        **provenance
            More to record (role, kernel, file, ...).
        """
        if not isinstance(record, RunRecord):
            raise ValueError(f"record: must be a RunRecord, got {type(record).__name__}")
        # A run brackets the device clock (the markers' ticks) between host reads.
        domain = "device"
        prov: dict[str, Any] = {"run": int(record.run), "executions": int(record.executions),
                                "idle_wait_ns": int(record.idle_wait_ns), **record.meta, **provenance}
        if caps is not None:
            prov.setdefault("device", str(caps.device))
        return cls(samples=record.samples, markers=record.markers,
                   clocks={domain: record.brackets} if len(record.brackets) else {},
                   sensor=None if caps is None else caps.sensor, provenance=prov)

    def to_run(self) -> RunRecord:
        """The recording as the :class:`RunRecord` a backend returns (markers and one clock domain's brackets)."""
        if self.markers is None:
            raise ValueError("recording: has no markers, so it is not a campaign run")
        if len(self.clocks) > 1:
            raise ValueError(f"recording: has {len(self.clocks)} clock domains; a run holds one")
        brackets = next(iter(self.clocks.values())) if self.clocks else np.empty((0, 3), np.int64)
        prov = dict(self.provenance)
        run, executions, idle = prov.pop("run", 0), prov.pop("executions", len(self.markers)), prov.pop("idle_wait_ns", 0)
        prov.pop("device", None)
        return RunRecord(run=int(run), executions=int(executions), samples=np.array(self.samples),
                         markers=np.array(self.markers), brackets=np.array(brackets), idle_wait_ns=int(idle), meta=prov)

    def executions_for(self, argument: str, analysis: str) -> np.ndarray:
        """The executions on the host clock, or an error naming ``argument`` and what the recording lacks.

        Parameters
        ----------
        argument : str
            The caller's name for the recording (messages start with it).
        analysis : str
            What needs the executions, for the message.

        Raises
        ------
        ValueError
            No executions: with raw markers only, says to place them first
            (their device ticks are not on the host clock the logs are
            placed on, paper Section IV-B step 2).
        """
        if self.executions is not None:
            return self.executions
        if self.markers is not None:
            raise ValueError(f"{argument}: the Recording holds raw markers (device ticks) but no executions on the "
                             f"host clock, which {analysis} needs; place them first "
                             "(fingrav_native.clocks.timeline_of, then Timeline.to_recording)")
        raise ValueError(f"{argument}: the Recording holds no executions, which {analysis} needs")

    def logger_clock_map(self, argument: str) -> ClockMap:
        """The map of the logs' ``source_ts`` onto the host clock, fitted on the brackets of their clock domain.

        The domain is ``source["clock_domain"]``; its reads in ``clocks``
        are fitted two-sidedly (:func:`~fingrav_native.clocks.fit_clock_map`,
        paper Section IV-A: bracketed reads place each log) with the tick
        ``source["tick_ns"]`` (1 ns where not given).

        Parameters
        ----------
        argument : str
            The caller's name for the clock map (messages start with it).

        Raises
        ------
        ValueError
            No brackets of the logs' clock domain: the message names
            ``argument`` (give the map) and the domains the recording has.
        """
        from fingrav_native.clocks._twosided import fit_clock_map

        domain = self.source.get("clock_domain")
        if not isinstance(domain, str) or domain not in self.clocks:
            held = ", ".join(repr(d) for d in self.clocks) or "none"
            raise ValueError(f"{argument}: required: the Recording holds no bracketed reads of its logs' clock "
                             f"(source['clock_domain']={domain!r}; clock domains held: {held}), so the logs cannot "
                             "be placed on the host clock without a map")
        tick = self.source.get("tick_ns", 1.0)
        return fit_clock_map(self.clocks[domain], tick_ns=float(tick))
