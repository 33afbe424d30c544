"""A power capture's energy counter: what the recorder read of it, how the file stores it, how it maps.

Where the device offers an energy counter (AMD's ``energy_accumulator`` in
``gpu_metrics``, NVML's total energy), :class:`~fingrav_native.app.PowerRecorder`
records it beside the power logs: a second native sampler polls the
counter's own power source in energy mode, whose readings are the counter's
steps (the energy between two moves over the interval between them, stamped
by the counter's clock where it has one). Where the logs themselves are the
counter's steps (``"amd:N"``'s energy channel, ``"nvidia:N:energy"``) nothing
more is recorded and the capture says so. :meth:`CapturedCounter.energy_counter`
rebuilds the cumulative counter (:class:`~fingrav_native.sensors.EnergyCounter`)
and its clock map, which :func:`~fingrav_native.profile_trace` closes the
profile against (the energy closure).

In the capture file (format version unchanged: a reader that does not know
the counter ignores it and misreads nothing) the header's ``counter`` holds
``of_logs``, ``source`` (as the logs' source, or null), ``quantum_j``,
``stale_ns``, ``scope``, ``period_ns`` and ``stats``; the array
``counter_samples`` (SAMPLE_DTYPE) holds the counter source's readings.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from fingrav_native._checks import MAX_TICK_NS, MIN_TICK_NS, readonly
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.records._layouts import CHANNELS
from fingrav_native.sensors._energy_counter import EnergyCounter

#: The keys of a capture header's ``counter``.
COUNTER_KEYS = ("of_logs", "source", "quantum_j", "stale_ns", "scope", "period_ns", "stats")

#: The ``.npz`` member holding the counter source's readings.
COUNTER_MEMBER = "counter_samples"

_SOURCE_KEYS = ("name", "clock_domain", "tick_ns", "native_period_ns", "window_ns", "channels")


@dataclass(frozen=True)
class CapturedCounter:
    """An energy counter recorded with a capture.

    Attributes
    ----------
    samples : numpy.ndarray or None
        SAMPLE_DTYPE readings of the counter's source in energy mode (each
        ``total`` the mean power over ``window_ns`` ending at ``source_ts``);
        None when the capture's own logs are the counter's steps.
    source : dict or None
        That source, as a capture's ``source`` (None with ``samples``).
    quantum_j : float
        The counter's step (2^-16 J on AMD, 1 mJ on NVIDIA).
    stale_ns : float
        How long before its stamp a reading's value may have been reached
        (0 when the counter stamps its values; the poll period when its
        reader does).
    scope : str
        What the counter measures ("socket", "gpu", "module"; "" unknown).
    period_ns : int
        The poll period of its sampler (0 with the logs' own).
    stats : dict
        Its sampler's counters (``drops``, ``source_missed``, ...).

    Raises
    ------
    ValueError
        Naming the field: readings that are not a 1-D SAMPLE_DTYPE array, a
        source dict missing keys, a negative quantum or staleness.
    """

    samples: Optional[np.ndarray]
    source: Optional[dict[str, Any]]
    quantum_j: float
    stale_ns: float = 0.0
    scope: str = ""
    period_ns: int = 0
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = _problem(self.samples, self.source, self.quantum_j, self.stale_ns, self.scope, self.period_ns,
                           self.stats)
        if problem is not None:
            raise ValueError(problem)
        if self.samples is not None:
            s = self.samples
            object.__setattr__(self, "samples", readonly(s.copy() if s.flags.writeable else s))

    @property
    def of_logs(self) -> bool:
        """Whether the capture's own logs are the counter's steps."""
        return self.samples is None

    def energy_counter(self, capture: Any, clock: str = "CLOCK_REALTIME") -> Optional[tuple[EnergyCounter, ClockMapLike]]:
        """The cumulative counter and the map of its timestamps onto a host clock (None: no reading).

        Parameters
        ----------
        capture : PowerCapture
            The capture this counter belongs to (its logs, its clock maps).
        clock : str
            The host clock the trace stamps on (:meth:`PowerCapture.logger_map`'s
            ``clock``): the counter must land on the same timeline as the logs.

        Notes
        -----
        A counter on the logs' clock domain is mapped by the logs' map
        (:meth:`PowerCapture.logger_map`: fitted from the many logs, where
        the counter's own readings are few); one on another clock by a map
        fitted the same way from its own readings.
        """
        if self.samples is None:
            samples, source, cmap = capture.samples, capture.source, None
        else:
            samples, source = self.samples, self.source
            assert source is not None
            cmap = capture.logger_map(clock=clock) if source["clock_domain"] == capture.source["clock_domain"] else \
                dataclasses.replace(capture, samples=_stamps_only(samples), source=source,
                                    counter=None).logger_map(clock=clock)
        if len(samples) == 0:
            return None
        counter = EnergyCounter.from_steps(samples["source_ts"], samples["window_ns"], samples["total"],
                                           tick_ns=float(source["tick_ns"]), quantum_j=self.quantum_j,
                                           stale_ns=self.stale_ns, scope=self.scope, name=str(source["name"]))
        if len(counter) < 2:
            return None
        return counter, capture.logger_map(clock=clock) if cmap is None else cmap

    def header(self) -> dict[str, Any]:
        """The capture header's ``counter``."""
        return {"of_logs": self.of_logs, "source": self.source, "quantum_j": float(self.quantum_j),
                "stale_ns": float(self.stale_ns), "scope": self.scope, "period_ns": int(self.period_ns),
                "stats": self.stats}

    def members(self) -> dict[str, np.ndarray]:
        """The ``.npz`` members it adds to a capture file."""
        return {} if self.samples is None else {COUNTER_MEMBER: np.ascontiguousarray(self.samples)}


def _stamps_only(samples: np.ndarray) -> np.ndarray:
    """The counter's readings with their powers blanked: what fits its clock map (stamps only).

    A capture's logs are checked as powers; the counter's steps are not logs, and a glitched one (a negative
    or impossible step, which :meth:`EnergyCounter.from_steps` leaves out and names) must not refuse the map
    its good readings are placed by.
    """
    out = samples.copy()
    for name in CHANNELS:
        if name in (out.dtype.names or ()):
            out[name] = np.nan
    return out


def _number_problem(name: str, v: Any) -> Optional[str]:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return f"counter.{name}: expected a finite number >= 0, got {v!r}"[:200]
    return None


def _problem(samples: Any, source: Any, quantum_j: Any, stale_ns: Any, scope: Any, period_ns: Any,
             stats: Any) -> Optional[str]:
    """What is wrong with a counter's fields, by name (None: nothing)."""
    for name, v in (("quantum_j", quantum_j), ("stale_ns", stale_ns), ("period_ns", period_ns)):
        p = _number_problem(name, v)
        if p is not None:
            return p
    if not isinstance(scope, str):
        return f"counter.scope: expected a string, got {type(scope).__name__}"
    if not isinstance(stats, dict):
        return f"counter.stats: expected an object, got {type(stats).__name__}"
    if samples is None:
        return None if source is None else "counter.source: must be null when the logs are the counter"
    if not isinstance(samples, np.ndarray) or samples.dtype != SAMPLE_DTYPE or samples.ndim != 1:
        return (f"counter.samples: must be a 1-D SAMPLE_DTYPE array; got "
                f"{getattr(samples, 'dtype', type(samples).__name__)} of shape {getattr(samples, 'shape', None)}")
    if not isinstance(source, dict) or any(k not in source for k in _SOURCE_KEYS):
        missing = [k for k in _SOURCE_KEYS if not isinstance(source, dict) or k not in source]
        return f"counter.source: must be a dict with {', '.join(_SOURCE_KEYS)}; missing {missing}"
    tick = source["tick_ns"]
    if isinstance(tick, bool) or not isinstance(tick, (int, float)) or not (
            math.isfinite(tick) and MIN_TICK_NS <= tick <= MAX_TICK_NS):
        return (f"counter.source.tick_ns: expected a clock's tick, a finite number in [{MIN_TICK_NS:g}, "
                f"{MAX_TICK_NS:g}] ns, got {tick!r}")[:200]
    for key in ("name", "clock_domain"):
        if not isinstance(source[key], str):
            return f"counter.source.{key}: expected a string"
    return None


def counter_from_file(header: dict[str, Any], arrays: dict[str, np.ndarray],
                      bad: Callable[[str], Exception]) -> Optional[CapturedCounter]:
    """The counter a capture file's header and arrays hold (None: a capture without one, as every older file)."""
    h = header.get("counter")
    if h is None:
        if COUNTER_MEMBER in arrays:
            raise bad(f"the array {COUNTER_MEMBER!r} is there but the header has no 'counter'")
        return None
    if not isinstance(h, dict):
        raise bad(f"counter: expected an object, got {type(h).__name__}")
    missing = [k for k in COUNTER_KEYS if k not in h]
    if missing:
        raise bad(f"counter: missing {missing}")
    if not isinstance(h["of_logs"], bool):
        raise bad(f"counter.of_logs: expected true or false, got {h['of_logs']!r}"[:200])
    if h["of_logs"] == (COUNTER_MEMBER in arrays):
        raise bad(f"counter.of_logs is {str(h['of_logs']).lower()} but the array {COUNTER_MEMBER!r} is "
                  f"{'there' if h['of_logs'] else 'missing'}")
    samples = arrays.get(COUNTER_MEMBER)
    problem = _problem(samples, h["source"], h["quantum_j"], h["stale_ns"], h["scope"], h["period_ns"], h["stats"])
    if problem is not None:
        raise bad(problem)
    return CapturedCounter(samples=samples, source=h["source"], quantum_j=float(h["quantum_j"]),
                           stale_ns=float(h["stale_ns"]), scope=h["scope"], period_ns=int(h["period_ns"]),
                           stats=h["stats"])
