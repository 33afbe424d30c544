"""What a power log measures: the sensor model, one object used wherever logs are placed.

A power sensor is part of the measurement: a log that averages or lags is
placed wrong unless what it averages is known. The paper's logger reports
instantaneous power every 1 ms (Section IV-A); the loggers users have do not:

* NVIDIA ``nvmlDeviceGetPowerUsage`` is a 1 s average on Ampere and newer
  (except GA100); the "instant" field (``NVML_FI_DEV_POWER_INSTANT``) on
  A100/H100 updates every 100 ms and averages 25 ms of it (Yang, Adamek and
  Armour, SC'24, "Part-time power measurements: nvidia-smi's lack of
  attention"); ``nvmlDeviceGetTotalEnergyConsumption`` (mJ) updates every
  10-100 ms depending on the GPU.
* AMD MI300 ``energy_accumulator`` (gpu_metrics) counts 15.259 uJ (2^-16 J)
  steps, updated about every 1 ms; ``current_socket_power`` is filtered
  (undocumented).

:class:`SensorModel` describes a sensor by its update period, averaging
window and window shape (boxcar, or a first-order filter with a time
constant), reporting delay, gain and offset, and quantum; energy counters are
their own kind (the difference of two reads is the exact average power over
the interval between them: a window with both ends known). Its
:meth:`~SensorModel.interval_weights` is the forward model every consumer
uses: the share of a log's value that comes from the power in an interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, Optional

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import choice, instance_of, numbers, positive_number, real_number, short_repr

#: Response weight below which a first-order filter's tail is cut (the support's start).
_FILTER_TAIL = 1e-4


KINDS = ("instant", "window", "counter")


SHAPES = ("boxcar", "first_order")


def response_weights(first_order: bool, e: np.ndarray, a: np.ndarray, b: np.ndarray,
                     length: np.ndarray | np.float64) -> np.ndarray:
    """The forward model's weight of ``[a, b]`` in a response that ends at ``e = t - delay`` (Yang et al., SC'24).

    A boxcar of window ``length`` gives ``|[a, b] & [e - length, e]| / length``; a
    first-order filter of time constant ``length`` gives
    ``exp(-(e - min(b, e)) / length) - exp(-(e - min(a, e)) / length)``. Every argument
    broadcasts, so a batch of trial sensors (one ``length`` per element) is weighed by the
    same arithmetic as one sensor's :meth:`SensorModel.interval_weights`.
    """
    if first_order:
        hi = np.minimum(b, e)
        lo = np.minimum(a, e)
        return np.asarray(np.where(hi > lo, np.exp(-(e - hi) / length) - np.exp(-(e - lo) / length), 0.0))
    return np.asarray(np.clip(np.minimum(b, e) - np.maximum(a, e - length), 0.0, None) / length)


@dataclass(frozen=True)
class SensorModel:
    """A power sensor: what each of its logs measures, in host time.

    A log stamped ``t`` (on the host timeline, after the clock map) reports
    ``offset_w + gain * integral k(t - delay_ns - s) P(s) ds`` of the true
    power ``P``, with the response ``k``: a point at 0 (``instant``); a
    boxcar of length ``window_ns`` (``window``, ``shape="boxcar"``); or
    ``exp(-u / tau_ns) / tau_ns`` (``shape="first_order"``). A ``counter``
    reports energy; differences of consecutive reads become boxcar logs whose
    window is the interval between them (:func:`~fingrav_native.sensors.counter_to_logs`).

    Attributes
    ----------
    name : str
        Preset name or a user label.
    kind : str
        ``"instant"``, ``"window"`` or ``"counter"``.
    period_ns : float
        Update period: how often a new value appears.
    window_ns : float
        Boxcar averaging window (0 for instant sensors and filters). Logs
        that carry their own ``window_ns`` field override it per log.
    shape : str
        ``"boxcar"`` or ``"first_order"``.
    tau_ns : float
        Time constant of a first-order filter.
    delay_ns : float
        Reporting delay: a value stamped ``t`` describes the window ending at
        ``t - delay_ns``. Negative when the logger stamps a value before its
        window ends (a timestamp taken when the averaging starts, or a clock
        map that lands early).
    gain, offset_w : float
        Calibration: reported = offset + gain * true.
    quantum : float
        Resolution of the reported value (W for power, J for counters); 0
        when finer than the noise.
    source : str
        Where the figures come from: ``"documented"``, ``"characterised"``
        (:func:`~fingrav_native.app.characterize`) or
        ``"assumed"``.
    notes : str
        The reference or the caveat.
    """

    name: str
    kind: str
    period_ns: float
    window_ns: float = 0.0
    shape: str = "boxcar"
    tau_ns: float = 0.0
    delay_ns: float = 0.0
    gain: float = 1.0
    offset_w: float = 0.0
    quantum: float = 0.0
    source: str = "documented"
    notes: str = ""

    def __post_init__(self) -> None:
        for text in ("name", "source", "notes"):
            instance_of(getattr(self, text), text, str, "a str")
        choice(self.kind, "kind", KINDS)
        choice(self.shape, "shape", SHAPES)
        # Stored as the floats they are checked as: a string or a numpy scalar kept would fail at first use
        # (or in the JSON file), far from the mistake.
        numbers = {"period_ns": positive_number(self.period_ns, "period_ns"),
                   "window_ns": positive_number(self.window_ns, "window_ns", allow_zero=True),
                   "tau_ns": positive_number(self.tau_ns, "tau_ns", allow_zero=True),
                   "delay_ns": real_number(self.delay_ns, "delay_ns"),  # negative: stamped before the window ends
                   "gain": positive_number(self.gain, "gain"),
                   "offset_w": real_number(self.offset_w, "offset_w"),
                   "quantum": positive_number(self.quantum, "quantum", allow_zero=True)}
        for field_name, value in numbers.items():
            object.__setattr__(self, field_name, value)
        if self.shape == "first_order" and self.tau_ns <= 0:
            raise ValueError(f"tau_ns={self.tau_ns!r}: a first-order filter needs a time constant > 0")
        if self.kind == "instant" and (self.window_ns > 0 or self.shape != "boxcar"):
            raise ValueError("kind='instant': window_ns must be 0 and shape 'boxcar'")

    # ------------------------------------------------------------------ geometry

    @property
    def averages(self) -> bool:
        """Whether a log averages over time (a window, a filter or a counter interval)."""
        return self.kind != "instant" or self.window_ns > 0 or self.shape == "first_order"

    def memory_ns(self, window_ns: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """How far back before ``t - delay`` a log's value reaches (its response's length).

        Parameters
        ----------
        window_ns : array_like, optional
            Per-log boxcar windows (a log's own ``window_ns`` field); default
            the model's.

        Returns
        -------
        numpy.ndarray
            Nanoseconds; for a first-order filter, where its weight falls below 1e-4.
        """
        w = np.asarray(self.window_ns if window_ns is None else window_ns, dtype=np.float64)
        if self.shape == "first_order":
            return np.broadcast_to(self.tau_ns * math.log(1.0 / _FILTER_TAIL), w.shape).astype(np.float64)
        return w

    def interval_weights(self, t_ns: npt.ArrayLike, a_ns: npt.ArrayLike, b_ns: npt.ArrayLike,
                         window_ns: Optional[npt.ArrayLike] = None) -> np.ndarray:
        """Share of a log's value that comes from the true power in ``[a, b]``.

        Parameters
        ----------
        t_ns : array_like
            The logs' host times (stamps), broadcast against ``a_ns``/``b_ns``.
        a_ns, b_ns : array_like
            Interval starts and ends (host ns), ``a <= b``.
        window_ns : array_like, optional
            Per-log boxcar windows; default the model's.

        Returns
        -------
        numpy.ndarray
            Weights in [0, 1]; over a partition of the log's response they sum
            to 1. An instant log gives 1 for the interval that holds its
            instant (closed on the left, open on the right) and 0 elsewhere.

        Notes
        -----
        The forward model of Yang et al. (SC'24) and of equivalent-time
        sampling: a log is a linear functional of the power curve. With
        ``e = t - delay``: a boxcar of length ``W`` gives
        ``|[a, b] & [e - W, e]| / W``; a first-order filter gives
        ``exp(-(e - min(b, e)) / tau) - exp(-(e - min(a, e)) / tau)``.

        Examples
        --------
        >>> m = SensorModel("avg", "window", period_ns=1e6, window_ns=1e6)
        >>> float(m.interval_weights(2e6, 1.5e6, 3e6))
        0.5
        """
        # Numbers of any shape (a NaN stamp gives a NaN weight, for the caller to mask); None or text is named.
        e = numbers(t_ns, "t_ns").astype(np.float64) - self.delay_ns
        a = numbers(a_ns, "a_ns").astype(np.float64)
        b = numbers(b_ns, "b_ns").astype(np.float64)
        if self.shape == "first_order":
            return response_weights(True, e, a, b, np.float64(self.tau_ns))
        w = np.asarray(self.window_ns if window_ns is None else numbers(window_ns, "window_ns"), dtype=np.float64)
        inst = w <= 0
        safe_w = np.where(inst, 1.0, w)
        overlap = response_weights(False, e, a, b, safe_w)
        point = ((a <= e) & (e < b)).astype(np.float64)
        return np.where(inst, point, overlap)

    def with_window(self, window_ns: float) -> SensorModel:
        """The same sensor with another boxcar window (a characterisation's estimate)."""
        return replace(self, window_ns=float(window_ns))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (profile files and characterisation files)."""
        return {"name": self.name, "kind": self.kind, "period_ns": self.period_ns, "window_ns": self.window_ns,
                "shape": self.shape, "tau_ns": self.tau_ns, "delay_ns": self.delay_ns, "gain": self.gain,
                "offset_w": self.offset_w, "quantum": self.quantum, "source": self.source, "notes": self.notes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SensorModel:
        """Inverse of :meth:`as_dict`; unknown or missing keys are an error naming them."""
        if not isinstance(d, dict):
            raise ValueError(f"sensor: must be a dict of a SensorModel's fields, not a {type(d).__name__}")
        known = set(cls.__dataclass_fields__)
        extra = set(d) - known
        if extra:
            raise ValueError(f"sensor: unknown fields {sorted(extra, key=str)}")
        missing = [f for f in ("name", "kind", "period_ns") if f not in d]
        if missing:
            raise ValueError(f"sensor: missing fields {missing} (a sensor needs its name, kind and period_ns)")
        return cls(**d)


#: The name of a sensor preset (:data:`SENSOR_PRESETS`).
SensorPresetName = Literal["instant-1ms", "amd-1ms-average", "amd-energy-accumulator", "part-time-100ms",
                           "nvidia-average-1s", "nvidia-energy-counter"]


#: The sensors users meet, with their documented figures (see the module docstring).
SENSOR_PRESETS: dict[str, SensorModel] = {
    m.name: m for m in (
        SensorModel("instant-1ms", "instant", period_ns=1e6,
                    notes="the paper's internal MI300X logger (Section IV-A): instantaneous, every 1 ms"),
        SensorModel("amd-1ms-average", "window", period_ns=1e6, window_ns=1e6,
                    notes="AMD MI300 socket power as a 1 ms average (gpu_metrics, PMFW updates about every 1 ms)"),
        SensorModel("amd-energy-accumulator", "counter", period_ns=1e6, quantum=2.0**-16,
                    notes="AMD MI300 gpu_metrics energy_accumulator: 15.259 uJ steps, updated about every 1 ms"),
        SensorModel("part-time-100ms", "window", period_ns=100e6, window_ns=25e6,
                    notes="NVIDIA A100/H100 NVML_FI_DEV_POWER_INSTANT: a 25 ms average every 100 ms "
                          "(Yang, Adamek, Armour, SC'24)"),
        SensorModel("nvidia-average-1s", "window", period_ns=100e6, window_ns=1e9,
                    notes="NVIDIA nvmlDeviceGetPowerUsage on Ampere and newer (not GA100): a 1 s average; "
                          "the 100 ms update period is assumed"),
        SensorModel("nvidia-energy-counter", "counter", period_ns=100e6, quantum=1e-3,
                    notes="NVIDIA nvmlDeviceGetTotalEnergyConsumption: mJ, updated every 10-100 ms by GPU "
                          "(100 ms assumed; characterise to measure)"),
    )
}


def sensor_preset(name: str) -> SensorModel:
    """A named sensor of :data:`SENSOR_PRESETS`.

    Parameters
    ----------
    name : str
        ``"instant-1ms"``, ``"amd-1ms-average"``, ``"amd-energy-accumulator"``,
        ``"part-time-100ms"``, ``"nvidia-average-1s"`` or ``"nvidia-energy-counter"``
        (:data:`SensorPresetName`); a name given by a user, so checked here.

    Returns
    -------
    SensorModel
    """
    if not isinstance(name, str):
        raise ValueError(f"name={short_repr(name)}: must be a sensor preset's name, one of {sorted(SENSOR_PRESETS)}")
    try:
        return SENSOR_PRESETS[name]
    except KeyError:
        raise ValueError(f"name={name!r}: unknown sensor preset; choose from {sorted(SENSOR_PRESETS)}") from None


def as_sensor(value: Any, name: str = "sensor") -> Optional[SensorModel]:
    """``value`` as a sensor model: a :class:`SensorModel`, a preset's name, or None (kept None).

    The one resolver of every ``sensor=`` argument, so each refuses a wrong
    type by name (a number stored as a sensor failed later with an
    AttributeError).
    """
    if value is None or isinstance(value, SensorModel):
        return value
    if isinstance(value, str):
        return sensor_preset(value)
    raise ValueError(f"{name}={short_repr(value)}: must be a SensorModel, a preset name ({', '.join(SENSOR_PRESETS)}) "
                     f"or None, not a {type(value).__name__}")
