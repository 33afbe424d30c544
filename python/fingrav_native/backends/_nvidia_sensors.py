"""What an NVML power mode's logs are: its sensor model, its semantics in words, where each figure comes from.

One table per question, for the NVIDIA backend (:class:`~fingrav_native.backends.NvidiaBackend`
declares them in its capabilities) and its report (``fingrav devices``, which states them for
every mode, with or without a GPU). Sources: nvml.h (NVML API 13) and, for the instant field on
A100/H100, Yang, Adamek and Armour (SC'24).
"""

from __future__ import annotations

import dataclasses
from typing import Literal, Optional

from fingrav_native.sensors._model import SensorModel, SensorPresetName, sensor_preset
from fingrav_native.sensors._semantics import SensorSemantics

#: A power mode of the NVML source (``_core.NvmlPowerSource``).
NvmlMode = Literal["samples", "instant", "average", "energy", "usage"]

#: Power modes of the NVML source (``_core.NvmlPowerSource``).
NVML_MODES: tuple[NvmlMode, ...] = ("samples", "instant", "average", "energy", "usage")


#: NVML modes whose sensor a preset describes (sensors/_model.py, from nvml.h and Yang et al., SC'24).
_MODE_PRESETS: dict[str, SensorPresetName] = {
    "instant": "part-time-100ms", "average": "nvidia-average-1s", "energy": "nvidia-energy-counter"}


#: Modes whose source keeps a log only when the value (or counter) changes: NVML refreshes a
#: cached value far less often than it is polled, and repeats are not new logs.
CHANGE_ONLY_MODES: tuple[NvmlMode, ...] = ("instant", "average", "energy", "usage")


#: The published window of the instant field on A100/H100 (Yang, Adamek, Armour, SC'24).
_PART_TIME_WINDOW_NS = 25e6


def nvml_sensor(mode: NvmlMode, period_ns: float, window_ns: float, window_documented: bool) -> SensorModel:
    """What an NVML power mode's logs are, as a :class:`~fingrav_native.sensors.SensorModel`.

    Parameters
    ----------
    mode : {"samples", "instant", "average", "energy", "usage"}
        One of :data:`NVML_MODES`.
    period_ns : float
        The update period measured on this GPU (0: unknown, the preset's).
    window_ns : float
        The window the source declares (``PowerSource.info.window_ns``).
    window_documented : bool
        Whether that window is published (``NvmlPowerSource.window_documented``).

    Returns
    -------
    SensorModel
        ``instant`` with the published 25 ms window (the source declares it on
        A100/H100 only): a 25 ms average every 100 ms (Yang, Adamek and
        Armour, SC'24); ``average`` and, on Ampere and newer but GA100,
        ``usage``: a 1 s average (nvml.h, ``NVML_FI_DEV_POWER_AVERAGE`` and
        ``nvmlDeviceGetPowerUsage``); ``energy``: the mJ counter
        (``nvmlDeviceGetTotalEnergyConsumption``), differenced into exact
        windows; ``samples`` (``nvmlDeviceGetSamples``: nvml.h says nothing of
        a window), ``instant`` on other GPUs and ``usage`` where the
        architecture is unknown: the declared window (0) with
        ``source="assumed"``; characterise it (``fingrav characterize
        --backend nvidia``) before trusting a profile. The measured period
        replaces the preset's. Built to nvml.h and the paper, not verified on
        NVIDIA hardware in this repository (see the README).
    """
    if mode not in NVML_MODES:
        raise ValueError(f"mode={mode!r}: must be one of {', '.join(NVML_MODES)}")
    preset = _MODE_PRESETS.get(mode)
    if mode == "instant" and not (window_documented and window_ns == _PART_TIME_WINDOW_NS):
        preset = None  # the 25/100 ms figures are published for A100/H100 only
    if mode == "usage" and window_documented and window_ns >= 1e9:
        preset = "nvidia-average-1s"
    if preset is not None:
        base = sensor_preset(preset)
        if period_ns > 0:
            return dataclasses.replace(base, period_ns=float(period_ns),
                                       notes=f"{base.notes}; period {period_ns / 1e6:.3g} ms measured on this GPU")
        return base
    period = float(period_ns) if period_ns > 0 else 1e6
    if window_ns > 0:
        return SensorModel(f"nvml-{mode}", "window", period_ns=period, window_ns=float(window_ns),
                           source="documented" if window_documented else "assumed",
                           notes=f"NVML {mode}: declared window")
    return SensorModel(f"nvml-{mode}", "instant", period_ns=period,
                       source="documented" if window_documented else "assumed",
                       notes=(f"NVML {mode}: no averaging window is published for this GPU; taken as instantaneous "
                              "until characterised (fingrav characterize --backend nvidia)" if not window_documented
                              else f"NVML {mode}: instantaneous (nvml.h)"))


def nvml_semantics(mode: NvmlMode, window_ns: Optional[float] = None,
                   window_documented: Optional[bool] = None) -> str:
    """What one log of an NVML power mode is, in words (``Capabilities.sensor_semantics``, ``fingrav devices``).

    Parameters
    ----------
    mode : {"samples", "instant", "average", "energy", "usage"}
        One of :data:`NVML_MODES`.
    window_ns, window_documented : float and bool, optional
        What the source declares on this GPU (``info.window_ns``,
        ``window_documented``); None (no GPU): the rule for every GPU.

    Returns
    -------
    str

    Notes
    -----
    Sources: nvml.h (NVML API 13) for ``nvmlDeviceGetSamples``,
    ``NVML_FI_DEV_POWER_INSTANT`` ("Current GPU power"),
    ``NVML_FI_DEV_POWER_AVERAGE`` ("GPU power averaged over 1 sec
    interval"), ``nvmlDeviceGetTotalEnergyConsumption`` ("in millijoules
    (mJ) since the driver was last reloaded") and ``nvmlDeviceGetPowerUsage``
    ("On Ampere (except GA100) or newer GPUs, the API returns power averaged
    over 1 sec interval. On GA100 and older architectures, instantaneous
    power is returned"); Yang, Adamek and Armour (SC'24) for the instant
    field on A100/H100 (25 ms of every 100 ms).
    """
    if mode not in NVML_MODES:
        raise ValueError(f"mode={mode!r}: must be one of {', '.join(NVML_MODES)}")
    known = window_documented if window_ns is not None else None
    kept = "logged when the value changes (period = the driver's refresh)"
    if mode == "samples":
        return ("driver samples (nvmlDeviceGetSamples), each stamped by the driver, from the newest at start on; "
                "no window published, taken as instantaneous")
    if mode == "instant":
        if known is None:
            return (f"NVML_FI_DEV_POWER_INSTANT: a 25 ms average every 100 ms on A100/H100 (SC'24), no window "
                    f"published elsewhere; {kept}")
        if known and window_ns == _PART_TIME_WINDOW_NS:
            return f"NVML_FI_DEV_POWER_INSTANT: a 25 ms average every 100 ms on this A100/H100 (SC'24); {kept}"
        return f"NVML_FI_DEV_POWER_INSTANT: no window published for this GPU, taken as instantaneous; {kept}"
    if mode == "average":
        return f"NVML_FI_DEV_POWER_AVERAGE: a 1 s average (nvml.h); {kept}"
    if mode == "energy":
        return ("energy counter (mJ, nvml.h): each log is the exact average power between two moves of the "
                "counter, window = their interval; nothing is kept until it moves")
    if known is None:
        return (f"nvmlDeviceGetPowerUsage: a 1 s average on Ampere and newer but GA100, instantaneous on GA100 and "
                f"older (nvml.h); {kept}")
    if window_ns and window_ns >= 1e9:
        return f"nvmlDeviceGetPowerUsage: a 1 s average on this GPU (Ampere or newer, not GA100; nvml.h); {kept}"
    if known:
        return f"nvmlDeviceGetPowerUsage: instantaneous on this GPU (GA100 or older; nvml.h); {kept}"
    return (f"nvmlDeviceGetPowerUsage: architecture unknown, so 1 s average or instantaneous cannot be told "
            f"(nvml.h); taken as instantaneous; {kept}")


def nvml_provenance(window_documented: Optional[bool], sensor: Optional[SensorModel] = None) -> dict[str, str]:
    """Where each logger figure of an NVML mode comes from (``Capabilities.provenance``).

    Parameters
    ----------
    window_documented : bool or None
        Whether the source's window is published (None: no GPU to ask).
    sensor : SensorModel, optional
        The sensor model used instead of the published one: a
        characterisation of this GPU (``source="characterised"``) makes the
        window and delay measured; any other model keeps its own ``source``
        (a preset: documented).

    Returns
    -------
    dict of str to str
        ``period``: measured (from the driver's sample buffer, or from the
        intervals between changes while idle, at start); ``window``:
        documented (nvml.h, SC'24 on A100/H100), measured (characterised)
        or assumed; ``delay``: nvml.h publishes none, so assumed 0 unless
        characterised; ``tick``: the %globaltimer step, measured at start.
        With ``window_documented=None`` a window that depends on the GPU is
        reported as assumed.
    """
    if sensor is not None:
        given = "measured" if sensor.source == "characterised" else (
            sensor.source if sensor.source in ("documented", "assumed") else "assumed")
        return {"period": "measured", "window": given, "delay": given, "tick": "measured"}
    return {"period": "measured", "window": "documented" if window_documented else "assumed", "delay": "assumed",
            "tick": "measured"}


#: Without a GPU: each mode's window as a rule, with its provenance (a GPU-dependent one is assumed;
#: nvml.h, SC'24 for instant).
_WINDOW_RULES = {
    "samples": ("assumed", "0: nvml.h publishes none"),
    "instant": ("documented", "25 ms of every 100 ms on A100/H100 (SC'24); 0 elsewhere, assumed"),
    "average": ("documented", "1 s (nvml.h)"),
    "energy": ("documented", "each log's interval (a counter)"),
    "usage": ("documented", "1 s from Ampere (except GA100), else 0 (nvml.h); 0 if the architecture is unknown"),
}


#: How each mode's period is measured at start (the NVIDIA backend's constructor).
_PERIOD_HOW = {
    "samples": "at start, from the intervals between the driver's sample timestamps",
    "energy": "at start, from the intervals between moves of the counter while idle",
    **{m: "at start, from the intervals between changes of the value while idle" for m in ("instant", "average",
                                                                                          "usage")},
}


def mode_semantics(mode: NvmlMode, window_ns: Optional[float], documented: Optional[bool]) -> SensorSemantics:
    """What the mode's logs are, then each figure with its source (``fingrav devices``)."""
    if window_ns is None or mode == "energy":
        window = _WINDOW_RULES[mode]
    else:
        window = (nvml_provenance(documented)["window"], f"{window_ns / 1e6:.4g} ms" if window_ns else "0")
    return SensorSemantics(
        mode=f"nvml {mode}", semantics=nvml_semantics(mode, window_ns, documented),
        figures=(("period", "measured", _PERIOD_HOW[mode]),
                 ("window", *window),
                 ("delay", "assumed", "0: nvml.h publishes none (characterise to measure it)"),
                 ("tick", "measured", "the %globaltimer step, at start")))
