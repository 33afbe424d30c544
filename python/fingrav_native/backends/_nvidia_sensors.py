"""What an NVML power mode's logs are: its sensor model, its semantics in words, where each figure comes from.

One table per question, for the NVIDIA backend (:class:`~fingrav_native.backends.NvidiaBackend`
declares them in its capabilities) and its report (``fingrav devices``, which states them for
every mode, with or without a GPU). Sources: nvml.h (NVML API 13) and, for the instant field on
A100/H100, Yang, Adamek and Armour (SC'24).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Optional

from fingrav_native._checks import choice, flag, instance_of, positive_number
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
        NVIDIA hardware in this repository (see docs/reference/hardware.md).
    """
    choice(mode, "mode", NVML_MODES)
    period_ns = positive_number(period_ns, "period_ns", allow_zero=True)
    window_ns = positive_number(window_ns, "window_ns", allow_zero=True)
    window_documented = flag(window_documented, "window_documented")
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
    choice(mode, "mode", NVML_MODES)
    if window_ns is not None:
        window_ns = positive_number(window_ns, "window_ns", allow_zero=True)
    if window_documented is not None:
        window_documented = flag(window_documented, "window_documented")
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
    if window_documented is not None:
        flag(window_documented, "window_documented")
    instance_of(sensor, "sensor", (SensorModel, type(None)), "a SensorModel or None")
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


def mode_semantics(mode: NvmlMode, window_ns: Optional[float], documented: Optional[bool],
                   published: Optional["PublishedWindow"] = None) -> SensorSemantics:
    """What the mode's logs are, then each figure with its source (``fingrav devices``).

    ``published`` (:func:`published_window`, a GPU's board family) gives the
    window's figure and provenance, and its source is added to the words.
    """
    if published is not None:
        w = published.window_ns
        window = (published.provenance, f"{w / 1e6:.4g} ms" if w else "0")
    elif window_ns is None or mode == "energy":
        window = _WINDOW_RULES[mode]
    else:
        window = (nvml_provenance(documented)["window"], f"{window_ns / 1e6:.4g} ms" if window_ns else "0")
    words = nvml_semantics(mode, window_ns, documented)
    if published is not None:
        words += f"; {published.reference}"
    return SensorSemantics(
        mode=f"nvml {mode}", semantics=words,
        figures=(("period", "measured", _PERIOD_HOW[mode]),
                 ("window", *window),
                 ("delay", "assumed", "0: nvml.h publishes none (characterise to measure it)"),
                 ("tick", "measured", "the %globaltimer step, at start")))


@dataclass(frozen=True)
class PublishedWindow:
    """What is known of one NVML mode's averaging window on one board, and from where.

    Attributes
    ----------
    window_ns : float
        The window (0: instantaneous, or nothing known).
    provenance : str
        ``"documented"`` (nvml.h), ``"measured"`` (published measurements of
        this board family) or ``"assumed"`` (neither: characterise it).
    reference : str
        The source, in words.
    """

    window_ns: float
    provenance: str
    reference: str


#: nvml.h: NVML_DEVICE_ARCH_AMPERE (Kepler 2 ... Hopper 9).
NVML_ARCH_AMPERE = 7

#: Windows measured by Yang, Adamek and Armour (SC'24, "Part-time power measurements: nvidia-smi's lack of
#: attention", over 70 GPUs), per board family: (modes, a substring of the board's name, its compute
#: capability, the window, in words). Only the boards measured: a family's sibling is assumed, not measured.
MEASURED_WINDOWS: tuple[tuple[tuple[str, ...], str, tuple[int, int], float, str], ...] = (
    (("instant", "usage"), "A100", (8, 0), 25e6,
     "SC'24: A100 averages 25 ms of every 100 ms in both fields (17.6-19.4 ms on some boards)"),
    (("instant",), "H100 PCIe", (9, 0), 25e6, "SC'24: H100 PCIe averages 25 ms of every 100 ms"),
    (("usage",), "V100", (7, 0), 10e6, "SC'24: V100 averages about 10 ms of every 20 ms"),
    (("usage",), "Quadro RTX 8000", (7, 5), 20e6, "SC'24: Quadro RTX 8000 averages about 20 ms of every 100 ms"),
)


def published_window(mode: NvmlMode, name: str, compute_capability: Optional[tuple[int, int]],
                     ampere_or_newer: Optional[bool], period_ns: float = 0.0) -> PublishedWindow:
    """The averaging window one NVML mode is known to have on one board: documented, measured or assumed.

    Parameters
    ----------
    mode : {"samples", "instant", "average", "energy", "usage"}
    name : str
        The board's name as NVML gives it ("NVIDIA A100-SXM4-80GB").
    compute_capability : (int, int) or None
    ampere_or_newer : bool or None
        From NVML's architecture (None: unknown).
    period_ns : float
        The measured update period (an energy counter's window is its
        interval between moves).

    Returns
    -------
    PublishedWindow

    Notes
    -----
    nvml.h documents ``average`` (1 s) and ``usage`` on Ampere and newer but
    GA100 (1 s); it calls ``usage`` instantaneous on GA100 and older, and
    publishes nothing for ``instant`` and ``samples``. Yang, Adamek and
    Armour (SC'24) measured averaging windows where nvml.h says
    instantaneous (:data:`MEASURED_WINDOWS`); on boards they did not
    measure, the family's figure is assumed (``UnknownSensorWindowWarning``
    on the backend), never declared as documented.
    """
    if mode not in NVML_MODES:
        raise ValueError(f"mode={mode!r}: must be one of {', '.join(NVML_MODES)}")
    if mode == "average":
        return PublishedWindow(1e9, "documented", "nvml.h NVML_FI_DEV_POWER_AVERAGE: averaged over 1 sec")
    if mode == "energy":
        return PublishedWindow(float(period_ns), "documented" if period_ns > 0 else "assumed",
                               "nvml.h energy counter: each log averages exactly over the interval between two "
                               "moves of the counter (its period, measured at start)")
    cc = tuple(compute_capability) if compute_capability is not None else None
    for modes, board, family, window, words in MEASURED_WINDOWS:
        if mode in modes and board in name and cc == family:
            return PublishedWindow(window, "measured", words)
    if mode == "usage" and ampere_or_newer and cc != (8, 0):
        return PublishedWindow(1e9, "documented", "nvml.h nvmlDeviceGetPowerUsage: a 1 s average on Ampere "
                                                  "(except GA100) or newer")
    for modes, board, family, window, words in MEASURED_WINDOWS:
        if mode in modes and cc == family:
            return PublishedWindow(window, "assumed", f"assumed from this family's measured board ({words}); "
                                                      f"{name} itself was not measured")
    if mode == "usage" and ampere_or_newer is False:
        return PublishedWindow(0.0, "assumed", "nvml.h calls it instantaneous on GA100 and older, but SC'24 "
                                               "measured averaging windows on such boards; none for this one")
    return PublishedWindow(0.0, "assumed", f"no window published or measured for NVML {mode} on {name}")
