"""The NVIDIA backend: NVML power logs, %globaltimer clocks and GPU-side markers.

FinGraV needs three things from a GPU (paper Section IV-B): power logs with
their timestamps (step 2), a map between the GPU's clock and the host's
(step 1, CPU-GPU time synchronisation) and the start and end of every
execution on the GPU's own clock (step 4). On NVIDIA GPUs:

* power: NVML (``_core.NvmlPowerSource``: the driver's sample buffer,
  instant or averaged power, or the energy counter), polled by the C++
  :class:`~fingrav_native.Sampler` thread. NVML stamps its samples with host
  microseconds, so the logger clock is fitted one-sidedly from the logs.
  Cached values are logged only when they change, so the logger period is
  the driver's refresh, measured at start; each mode's window is the
  published one (nvml.h; Yang et al., SC'24 for A100/H100) or, warned,
  assumed 0 (:func:`nvml_semantics`, :func:`nvml_provenance`);
* clock: ``%globaltimer`` (ns), read by a tiny PTX probe that the CUDA driver
  JITs (:class:`~fingrav_native._core.GlobaltimerSource`), bracketed between
  two host clock reads (:func:`~fingrav_native._core.measure_brackets`); its
  update step, measured at start, is the clock map's resolution;
* markers: the same probe enqueued on the workload's own stream before and
  after each execution (:class:`~fingrav_native._core.CudaMarkerProbe`), so
  its timestamps sit exactly between executions in the GPU's queue; CUDA
  events around the run cross-check them.

Every vendor library is opened at run time: on a machine without the driver
the backend raises :class:`~fingrav_native.LibraryNotFoundError` naming the
paths tried, and without a GPU :class:`~fingrav_native.DeviceUnavailableError`
saying why. :func:`report` says what was found, for ``fingrav devices``.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Optional, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in
from fingrav_native.backends._base import HostRelease, LivePower, drain_all, marker_records, wait_for_idle
from fingrav_native.backends._report import BackendReport, Component, DeviceEntry
from fingrav_native.backends._workloads import Workload
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sensors._model import SensorModel, sensor_preset
from fingrav_native.sensors._semantics import SensorSemantics

#: Power modes of the NVML source (``_core.NvmlPowerSource``).
NVML_MODES = ("samples", "instant", "average", "energy", "usage")


#: NVML modes whose sensor a preset describes (sensors/model.py, from nvml.h and Yang et al., SC'24).
_MODE_PRESETS = {"instant": "part-time-100ms", "average": "nvidia-average-1s", "energy": "nvidia-energy-counter"}


#: Modes whose source keeps a log only when the value (or counter) changes (issue 19, items 3 and 4).
_CHANGE_ONLY_MODES = ("instant", "average", "energy", "usage")


#: The published window of the instant field on A100/H100 (Yang, Adamek, Armour, SC'24).
_PART_TIME_WINDOW_NS = 25e6


class UnknownSensorWindowWarning(UserWarning):
    """An NVIDIA power mode whose averaging window nobody has published or measured for this GPU.

    The window is then taken as 0 (instantaneous), so the error budget and the
    attribution ignore it; :func:`~fingrav_native.sensors.characterize.characterize`
    on a backend in the same mode measures it, and ``NvidiaBackend(sensor=...)``
    takes the result's ``sensor``.
    """


def nvml_sensor(mode: str, period_ns: float, window_ns: float, window_documented: bool) -> SensorModel:
    """What an NVML power mode's logs are, as a :class:`~fingrav_native.sensors.model.SensorModel`.

    Parameters
    ----------
    mode : str
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


def nvml_semantics(mode: str, window_ns: Optional[float] = None, window_documented: Optional[bool] = None) -> str:
    """What one log of an NVML power mode is, in words (``Capabilities.sensor_semantics``, ``fingrav devices``).

    Parameters
    ----------
    mode : str
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


_VERIFIED_ON = ("not yet verified on NVIDIA hardware: built to nvml.h and cuda.h and tested on fakes "
                "(run bench/nvidia_validate.py on one)")


def _nvml_attr(name: str) -> Any:
    """An NVML binding of _core, or a clear error when this build has none."""
    fn = getattr(_core, name, None)
    if fn is None:
        raise RuntimeError(
            f"this build of fingrav_native has no NVML support (_core.{name} is missing); "
            "rebuild from a source tree that includes the NVML power source")
    return fn


def _pci_key(bus_id: str) -> Optional[tuple[int, int, int, int]]:
    """(domain, bus, device, function) of a PCI address as CUDA or NVML spells it.

    CUDA writes ``0000:3b:00.0``, NVML ``00000000:3B:00.0``: compare numbers,
    not strings.
    """
    try:
        dom_bus, dev_fn = bus_id.strip().rsplit(":", 1)
        dom, bus = dom_bus.split(":") if ":" in dom_bus else ("0", dom_bus)
        dev, fn = dev_fn.split(".")
        return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except (ValueError, AttributeError):
        return None


def match_nvml_device(cuda_device: dict[str, Any], nvml_devices: list[dict[str, Any]]) -> int:
    """The NVML index of a CUDA device, matched by UUID, else by PCI address.

    Parameters
    ----------
    cuda_device : dict
        One entry of ``_core.cuda_devices()`` (``uuid``, ``pci_bus_id``).
    nvml_devices : list of dict
        ``_core.nvml_devices()`` (``index``, ``uuid``, ``pci_bus_id``).

    Returns
    -------
    int
        The NVML index.

    Raises
    ------
    DeviceUnavailableError
        When no NVML device is the same GPU.

    Notes
    -----
    Indices cannot be compared: ``CUDA_VISIBLE_DEVICES`` renumbers CUDA's
    devices and CUDA orders by speed by default, while NVML enumerates every
    GPU in PCI order. Power logs of the wrong GPU would silently spoil every
    step after the paper's step 2 (Section IV-B).
    """
    uuid = str(cuda_device.get("uuid") or "").lower()
    if uuid:
        for d in nvml_devices:
            if str(d.get("uuid") or "").lower() == uuid:
                return int(d["index"])
    key = _pci_key(str(cuda_device.get("pci_bus_id") or ""))
    if key is not None:
        for d in nvml_devices:
            if _pci_key(str(d.get("pci_bus_id") or "")) == key:
                return int(d["index"])
    seen = ", ".join(f"{d.get('index')}: {d.get('pci_bus_id')} {d.get('uuid')}" for d in nvml_devices) or "none"
    raise _core.DeviceUnavailableError(
        f"NVML has no device matching CUDA device {cuda_device.get('index')} "
        f"({cuda_device.get('name')}, PCI {cuda_device.get('pci_bus_id')}, {uuid or 'no UUID'}); "
        f"NVML sees: {seen}")


class NvidiaBackend(HostRelease, LivePower):
    """An NVIDIA GPU as a FinGraV backend (NVML power, %globaltimer markers).

    Parameters
    ----------
    device : int
        CUDA device index (as PyTorch and CuPy number it, after
        ``CUDA_VISIBLE_DEVICES``).
    power : str
        NVML mode: ``"samples"`` (the driver's power sample buffer),
        ``"instant"``, ``"average"``, ``"energy"`` (derived from the energy
        counter) or ``"usage"``. Ignored when ``power_source`` is given.
    period_ns : int, optional
        Sampler poll period; default: a quarter of the logger period,
        clamped to the sampler's limits.
    brackets_per_run : int
        Bracketed clock reads around each run (half before, half after).
    idle_tolerance : float
        Relative excess over the idle baseline below which the GPU counts as
        idle again (``wait_idle``).
    max_idle_ns : int
        Longest wait for idle.
    power_source : PowerSource, optional
        Use this source instead of NVML (an external meter, or a test).
    marker_slots : int
        Probe slots allocated up front (two per execution; grown on demand).
    sensor : SensorModel, optional
        This GPU's sensor in this mode as a characterisation measured it
        (:func:`~fingrav_native.sensors.characterize.characterize`,
        ``source="characterised"``): its window and delay replace the
        published or assumed ones in :attr:`capabilities` (provenance
        "measured"), and no :class:`UnknownSensorWindowWarning` is raised.

    Warns
    -----
    UnknownSensorWindowWarning
        When the mode's averaging window is neither published for this GPU
        (nvml.h; Yang et al., SC'24 for the instant field on A100/H100) nor
        given by ``sensor``: ``samples`` everywhere, ``instant`` off
        A100/H100, ``usage`` on an unknown architecture.

    Notes
    -----
    Paper Section IV-B: steps 1 (clock sync: :meth:`read_clocks`), 2 (power
    logs: the sampler on NVML) and 4 (executions with GPU-side markers:
    :meth:`execute_run`) are what a backend does; the rest is the
    orchestrator's (:func:`fingrav_native.method.profile.profile`).

    At start the backend measures what it does not take on trust: the
    %globaltimer update step (:meth:`measure_timer_resolution`, the method
    of ``bench/nvidia_validate.py``), which becomes the device clock map's
    resolution (``Capabilities.device_resolution_ticks``); and, unless the
    source declares it, the logger period, from the intervals between
    distinct logs while idle (NVML keeps a log only when the value changes,
    so this is the driver's refresh, not the poll period).
    :attr:`capabilities` says per figure whether it was documented,
    measured or assumed, and what one log is (``sensor_semantics``).
    """

    def __init__(
        self,
        device: int = 0,
        *,
        power: str = "samples",
        period_ns: Optional[int] = None,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 5_000_000_000,
        power_source: Optional[_core.PowerSource] = None,
        marker_slots: int = 1 << 16,
        sensor: Optional[SensorModel] = None,
    ) -> None:
        device = integer_in(device, "device", 0)
        if sensor is not None and not isinstance(sensor, SensorModel):
            raise ValueError(f"sensor={sensor!r}: must be a SensorModel (e.g. a characterisation's .sensor)")
        if power_source is None and power not in NVML_MODES:
            raise ValueError(f"power={power!r}: must be one of {', '.join(NVML_MODES)}")
        if power_source is not None and not isinstance(power_source, _core.PowerSource):
            raise ValueError(f"power_source={power_source!r}: must be a fingrav_native PowerSource")
        self._brackets_per_run = integer_in(brackets_per_run, "brackets_per_run", 2)
        if not isinstance(idle_tolerance, (int, float)) or not 0 < idle_tolerance < 1:
            raise ValueError(f"idle_tolerance={idle_tolerance!r}: must be in (0, 1)")
        self._idle_tol = float(idle_tolerance)
        self._max_idle_ns = integer_in(max_idle_ns, "max_idle_ns", 1)
        marker_slots = integer_in(marker_slots, "marker_slots", 2, 1 << 28)
        if period_ns is not None:
            period_ns = integer_in(period_ns, "period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)

        # The CUDA side first: it says whether there is a GPU at all.
        devices = _core.cuda_devices()
        if device >= len(devices):
            raise _core.DeviceUnavailableError(
                f"device={device}: the CUDA driver sees {len(devices)} device(s) "
                "(indices follow CUDA_VISIBLE_DEVICES)")
        self.device_info: dict[str, Any] = dict(devices[device])
        self.device = device
        self._clock = _core.GlobaltimerSource(device)
        self._probe = _core.CudaMarkerProbe(device, marker_slots)
        self._events = _core.CudaEventTimer(device, 2)

        if power_source is None:
            nvml_index = match_nvml_device(self.device_info, _nvml_attr("nvml_devices")())
            power_source = _nvml_attr("NvmlPowerSource")(nvml_index, power)
            self.nvml_index: Optional[int] = nvml_index
            self.power_mode = power
        else:
            self.nvml_index = None
            self.power_mode = "external"
        assert power_source is not None
        self._power = power_source
        info = power_source.info
        self._logger_tick_ns = float(info.tick_ns)
        # NVML's native period depends on the GPU and mode; an unknown one
        # (0) is measured from the first idle logs below.
        self._logger_period = float(info.native_period_ns) or 0.0
        period_declared = self._logger_period > 0
        if period_ns is None:
            guess = self._logger_period / 4 if self._logger_period else 1_000_000
            period_ns = int(min(max(guess, _core.MIN_PERIOD_NS), _core.MAX_PERIOD_NS))
        self._period_ns = int(period_ns)
        self._next_run_id = 0
        self._kernel_ids: dict[str, int] = {}
        self._rng = np.random.default_rng()
        self._last_w = float("nan")

        # Issue 19, item 6: %globaltimer counts ns but moves in steps (about
        # 1 us on some GPUs, 32 ns on recent ones); a clock map that assumes
        # a 1 ns step understates its bound by half a step. Measured here,
        # inside one kernel, as bench/nvidia_validate.py does.
        self.timer_resolution = self.measure_timer_resolution(256)
        resolution_ticks = max(float(self.timer_resolution["median_ns"]), 1.0)  # device tick: 1 ns
        self.marker_gaps_ns = self._measure_marker_gaps()
        idle = self._idle_for_period(info.name) if not period_declared else self._idle_samples(
            int(min(max(50 * self._logger_period, 2e8), 2e9)))
        if len(idle) == 0:
            raise RuntimeError(f"{info.name}: no power log arrived in the idle baseline; check that the GPU's "
                               "power readings work (nvidia-smi -q -d POWER) or choose another power mode")
        self._baseline_w = float(np.mean(idle["total"]))

        if self.power_mode == "external":
            model = sensor
            window_ns = float(sensor.window_ns) if sensor is not None else float(info.window_ns)
            semantics = (f"external power source {info.name}: logs as it declares them (period "
                         f"{'declared' if period_declared else 'measured'}, window {window_ns / 1e6:.4g} ms)")
            # An external source's figures are its own declaration, taken on trust (or a given sensor's).
            given = nvml_provenance(False, sensor)
            provenance = {"period": "documented" if period_declared else "measured", "window": given["window"],
                          "delay": given["delay"], "tick": "measured"}
        else:
            documented = bool(getattr(power_source, "window_documented", False))
            published = nvml_sensor(power, self._logger_period, float(info.window_ns), documented)
            model = (dataclasses.replace(sensor, period_ns=self._logger_period)
                     if sensor is not None else published)
            window_ns = float(model.window_ns) if sensor is not None else float(info.window_ns)
            semantics = nvml_semantics(power, float(info.window_ns), documented)
            if sensor is not None:
                semantics += (f"; window {sensor.window_ns / 1e6:.4g} ms and delay {sensor.delay_ns / 1e6:.4g} ms "
                              f"from a characterisation ({sensor.source})")
            provenance = nvml_provenance(documented, sensor)
            if provenance["window"] == "assumed":
                warnings.warn(
                    f"{info.name}: no averaging window is published for NVML mode '{power}' on "
                    f"{self.device_info['name']}, so it is taken as 0 (instantaneous) and the error budget "
                    f"ignores it; measure it with fingrav_native.sensors.characterize.characterize("
                    f"NvidiaBackend(power={power!r})) and pass its .sensor as NvidiaBackend(sensor=...)",
                    UnknownSensorWindowWarning, stacklevel=2)
        self._caps = Capabilities(
            name="nvidia",
            device=f"{self.device_info['name']} (CUDA {device}, PCI {self.device_info['pci_bus_id']})",
            logger_period_ns=self._logger_period,
            logger_window_ns=window_ns,
            logger_clock=str(info.clock_domain),
            device_tick_ns=1.0,
            gpu_markers=True,
            # A begin marker's timer read precedes the kernel's start by at
            # most one probe-to-next-kernel gap; p90 of back-to-back probes.
            marker_err_ns=float(np.percentile(self.marker_gaps_ns, 90)),
            channels=tuple(info.channels),
            virtual_time=False,
            # NVML stamps in us; the orchestrator fits the logger map in that tick.
            logger_tick_ns=self._logger_tick_ns,
            # What each log is (issue 15): profiles deconvolve averaging sensors.
            sensor=model,
            sensor_semantics=semantics,
            provenance=provenance,
            device_resolution_ticks=resolution_ticks,
        )

    # ------------------------------------------------------------ protocol

    @property
    def capabilities(self) -> Capabilities:
        """The NVML logger, %globaltimer clock and probe markers of this GPU."""
        return self._caps

    def kernel_name(self, kernel: Union[Workload, str, int]) -> str:
        """The name of a workload (its ``name``)."""
        if isinstance(kernel, Workload):
            return kernel.name
        if isinstance(kernel, str):
            return kernel
        raise ValueError(f"kernel={kernel!r}: the NVIDIA backend runs Workload objects "
                         "(see fingrav_native.backends.workloads)")

    def new_run_id(self) -> int:
        """A run id never used by this backend before."""
        self._next_run_id += 1
        return self._next_run_id - 1

    def read_clocks(self, n: int) -> np.ndarray:
        """``n`` bracketed %globaltimer reads: (n, 3) int64 (host_before, ticks, host_after)."""
        return _core.measure_brackets(self._clock, integer_in(n, "n", 1))

    def wait_idle(self) -> int:
        """Sample until the logged power is back near the idle baseline.

        Returns
        -------
        int
            Nanoseconds waited.

        Notes
        -----
        Paper Section IV-B: runs start from idle so that each run's power
        history is the same. Chunks of 20 logger periods are sampled until a
        chunk's mean total power is within ``idle_tolerance`` of the baseline
        measured at construction, or ``max_idle_ns`` has passed. A random
        extra of up to one logger period puts the next launch at a random
        phase of the logger (Section IV-A relies on it).
        """
        def level(ns: int) -> float:
            s = self._idle_samples(ns)
            if len(s):
                return float(np.mean(s["total"]))
            # The NVML value modes log only changes: no log means the value
            # held, at the last one seen. Other sources: nothing is known.
            return self._last_w if self.power_mode in _CHANGE_ONLY_MODES else float("nan")

        waited = wait_for_idle(level, self._baseline_w, self._idle_tol, self._logger_period, self._max_idle_ns)
        extra = int(self._rng.integers(0, max(int(self._logger_period), 1)))
        time.sleep(extra / 1e9)
        return waited + extra

    def execute_run(self, kernel: Workload, executions: int, run: int) -> RunRecord:
        """Launch one run with the sampler polling NVML; return its raw record.

        Parameters
        ----------
        kernel : Workload
            What one execution is (:mod:`fingrav_native.backends.workloads`).
        executions : int
            Executions in the run, back to back on the workload's stream.
        run : int
            Run id.

        Returns
        -------
        RunRecord
            Power logs (``source_ts`` in the logger's ticks, ``logger_tick_ns`` each), one
            MARKER_RECORD_DTYPE row per execution with %globaltimer begin/end
            ticks, and bracketed clock reads before and after.

        Notes
        -----
        Paper Section IV-B step 4. Per execution: probe, launch, probe on the
        same stream, so each probe's timestamp lies between the previous
        execution's end and the next one's start. The stream is read once
        per run; a workload that changes streams mid-run is an error.
        """
        if not isinstance(kernel, Workload):
            raise ValueError(f"kernel={kernel!r}: the NVIDIA backend runs Workload objects "
                             "(see fingrav_native.backends.workloads)")
        executions = integer_in(executions, "executions", 1, (1 << 27) - 1)
        run = integer_in(run, "run", 0, 2**31 - 1)
        if self._probe.size < 2 * executions:
            self._probe = _core.CudaMarkerProbe(self.device, 2 * executions)
        kid = self._kernel_ids.setdefault(kernel.name, len(self._kernel_ids))
        self._probe.reset()
        host_launch = np.empty(executions, dtype=np.int64)
        before = _core.measure_brackets(self._clock, self._brackets_per_run // 2)
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            stream = int(kernel.stream())
            # Phase steering: launch at the armed release (HostRelease), after the setup above.
            late = self._released()
            self._events.record(stream, 0)
            for i in range(executions):
                host_launch[i] = _core.host_time_ns()
                self._probe.stamp(stream, 2 * i)
                kernel.launch()
                self._probe.stamp(stream, 2 * i + 1)
            self._events.record(stream, 1)
            if kernel.synchronize is not None:
                kernel.synchronize()
            self._probe.synchronize(stream)
            host_sync = _core.host_time_ns()
            # Logs are published after they are sampled: keep polling a little.
            time.sleep(2 * self._logger_period / 1e9)
        samples = self._seen(drain_all(sampler))
        after = _core.measure_brackets(self._clock, self._brackets_per_run - self._brackets_per_run // 2)
        if int(kernel.stream()) != stream:
            raise RuntimeError(f"{kernel.name}: the workload's stream changed during the run "
                               f"({stream:#x} -> {int(kernel.stream()):#x}); markers would be on the wrong queue")
        ticks = self._probe.values(0, 2 * executions)
        unwritten = np.flatnonzero(ticks == _core.CUDA_PROBE_UNWRITTEN)
        if len(unwritten):
            raise RuntimeError(f"{kernel.name}: {len(unwritten)} of {2 * executions} probe slots were not written "
                               f"after the stream synchronised (first: slot {int(unwritten[0])})")
        markers = marker_records(run, kid, ticks.astype(np.int64), host_launch, host_sync)
        return RunRecord(
            run=run, executions=executions, samples=samples, markers=markers,
            brackets=np.concatenate([before, after]),
            meta={"sampler": sampler.stats().as_dict(),
                  **({"release_late_ns": float(late)} if late is not None else {}),
                  "event_run_ms": float(self._events.elapsed_ms(0, 1)),
                  "probe_run_ns": int(ticks[-1]) - int(ticks[0]),
                  "stream": stream, "workload": dict(kernel.meta), "framework": kernel.framework},
        )

    # ------------------------------------------------------------ helpers

    def _idle_samples(self, ns: int) -> np.ndarray:
        with _core.Sampler(self._power, period_ns=self._period_ns) as sampler:
            time.sleep(ns / 1e9)
        return self._seen(drain_all(sampler))

    def _seen(self, samples: np.ndarray) -> np.ndarray:
        """Remember the newest logged power (a change-only mode logs nothing while it holds)."""
        if len(samples):
            self._last_w = float(samples["total"][-1])
        return samples

    def _idle_for_period(self, name: str, chunk_ns: int = 200_000_000, changes: int = 8,
                         longest_ns: int = 10_000_000_000) -> np.ndarray:
        """Idle logs until ``changes`` intervals between distinct logs are seen; sets the logger period.

        NVML refreshes its values every ~100 ms (1/6 s to 1 s by product) and
        the source keeps a log only when the value changes (issue 19, item
        3), so 200 ms of idle may hold one log or none. Chunks of
        ``chunk_ns`` are sampled until ``changes`` intervals are seen, or
        ``longest_ns`` has passed with at least one; the period is their
        median (robust to a refresh that repeated the value).
        """
        chunks: list[np.ndarray] = []
        waited = 0
        while True:
            chunks.append(self._idle_samples(chunk_ns))
            waited += chunk_ns
            ts = np.unique(np.concatenate(chunks)["source_ts"])
            steps = np.diff(ts).astype(np.float64) * self._logger_tick_ns
            steps = steps[steps > 0]
            if len(steps) >= changes or waited >= longest_ns:
                break
        if len(steps) == 0:
            raise RuntimeError(f"{name}: fewer than two distinct logs in {waited / 1e6:.0f} ms of idle; "
                               "cannot tell the logger period")
        self._logger_period = float(np.median(steps))
        return np.concatenate(chunks)

    def _measure_marker_gaps(self, pairs: int = 64) -> np.ndarray:
        """Gaps (ns) between back-to-back probes on one stream: the marker's placement error."""
        n = min(2 * pairs, self._probe.size)
        self._probe.reset()
        for i in range(n):
            self._probe.stamp(0, i)
        self._probe.synchronize(0)
        ticks = self._probe.values(0, n).astype(np.int64)
        self._probe.reset()
        return np.diff(ticks)

    def measure_timer_resolution(self, n: int = 256) -> dict[str, float]:
        """Update step of %globaltimer, timed inside one kernel.

        Parameters
        ----------
        n : int
            Steps to time.

        Returns
        -------
        dict
            ``min_ns``, ``median_ns``, ``max_ns`` of the non-zero steps and
            ``frozen`` (how many waits saw no change within 2^24 reads).

        Notes
        -----
        The timer counts ns but updates in steps (historically ~1 us on
        some GPUs, 32 ns on recent ones); a marker cannot be finer than the
        step, so it adds to the error budget of paper Section IV-B step 1.
        """
        steps = self._clock.measure_steps(integer_in(n, "n", 1, 1 << 20)).astype(np.int64)
        moving = steps[steps > 0]
        if len(moving) == 0:
            raise RuntimeError("%globaltimer did not move within 2^24 reads: the timer is frozen on this GPU")
        return {"min_ns": int(moving.min()), "median_ns": float(np.median(moving)), "max_ns": int(moving.max()),
                "frozen": int(len(steps) - len(moving))}


#: Without a GPU: the window each mode would use and where it comes from (nvml.h; SC'24 for instant).
#: Without a GPU: each mode's window as a rule, with its provenance (a GPU-dependent one is assumed).
_WINDOW_RULES = {
    "samples": ("assumed", "0: nvml.h publishes none"),
    "instant": ("documented", "25 ms of every 100 ms on A100/H100 (SC'24); 0 elsewhere, assumed"),
    "average": ("documented", "1 s (nvml.h)"),
    "energy": ("documented", "each log's interval (a counter)"),
    "usage": ("documented", "1 s from Ampere (except GA100), else 0 (nvml.h); 0 if the architecture is unknown"),
}


#: How each mode's period is measured at start (nvidia.py's backend constructor).
_PERIOD_HOW = {
    "samples": "at start, from the intervals between the driver's sample timestamps",
    "energy": "at start, from the intervals between moves of the counter while idle",
    **{m: "at start, from the intervals between changes of the value while idle" for m in ("instant", "average",
                                                                                          "usage")},
}


def _mode_semantics(mode: str, window_ns: Optional[float], documented: Optional[bool]) -> SensorSemantics:
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


def _device_sensors(nvml_index: int, modes: list[str]) -> tuple[SensorSemantics, ...]:
    """Per supported mode of one NVML device, what its source declares (a source is opened for each)."""
    out: list[SensorSemantics] = []
    for mode in modes:
        try:
            src = _nvml_attr("NvmlPowerSource")(nvml_index, mode)
            out.append(_mode_semantics(mode, float(src.info.window_ns), bool(src.window_documented)))
            del src
        except RuntimeError as exc:  # the mode failed between the probe and now: say so
            out.append(SensorSemantics(mode=f"nvml {mode}", semantics=f"could not open: {exc}"))
    return tuple(out)


def report() -> BackendReport:
    """What the NVIDIA backend finds on this machine (``fingrav devices``).

    Returns
    -------
    BackendReport
        Components: the CUDA driver library, its devices, NVML and its
        devices, each with the path found or the reason it is missing.

    Notes
    -----
    Never raises for a missing GPU or library: the report says why (paper
    Section IV-B needs power logs and GPU-side timestamps; both must be here).
    """
    components: list[Component] = []
    entries: list[DeviceEntry] = []
    reasons: list[str] = []

    def brief(exc: Exception) -> str:
        # The reason line keeps the first line; the component keeps the paths tried.
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return first[: -len("; tried:")] if first.endswith("; tried:") else first

    cuda_devs: list[dict[str, Any]] = []
    try:
        components.append(Component("CUDA driver (libcuda)", True, _core.cuda_library_path()))
        try:
            cuda_devs = [dict(d) for d in _core.cuda_devices()]
            version = _core.cuda_driver_version()
            components.append(Component("CUDA devices", bool(cuda_devs),
                                        f"{len(cuda_devs)} device(s), driver CUDA {version // 1000}.{version % 1000 // 10}"))
            if not cuda_devs:
                reasons.append("the CUDA driver sees no device")
        except RuntimeError as exc:
            components.append(Component("CUDA devices", False, str(exc)))
            reasons.append(f"CUDA: {exc}")
    except RuntimeError as exc:
        components.append(Component("CUDA driver (libcuda)", False, str(exc)))
        reasons.append(f"CUDA: {brief(exc)}")

    nvml_devs: list[dict[str, Any]] = []
    nvml_path = getattr(_core, "nvml_library_path", None)
    if nvml_path is None:
        components.append(Component("NVML (libnvidia-ml)", False,
                                    "this build of fingrav_native has no NVML support"))
        reasons.append("no NVML support in this build")
    else:
        try:
            components.append(Component("NVML (libnvidia-ml)", True, str(nvml_path())))
            try:
                nvml_devs = list(_nvml_attr("nvml_devices")())
                components.append(Component("NVML devices", bool(nvml_devs), f"{len(nvml_devs)} device(s)"))
            except RuntimeError as exc:
                components.append(Component("NVML devices", False, str(exc)))
                reasons.append(f"NVML: {exc}")
        except RuntimeError as exc:
            components.append(Component("NVML (libnvidia-ml)", False, str(exc)))
            reasons.append(f"NVML: {brief(exc)}")

    usable = 0
    per_device: dict[int, tuple[SensorSemantics, ...]] = {}
    for d in cuda_devs:
        details: dict[str, Any] = {k: d[k] for k in ("pci_bus_id", "uuid", "multiprocessors", "total_memory")}
        details["compute_capability"] = "{}.{}".format(*d["compute_capability"])
        try:
            idx = match_nvml_device(d, nvml_devs) if nvml_devs else None
        except RuntimeError as exc:
            idx = None
            details["nvml"] = str(exc)
        if idx is not None:
            details["nvml_index"] = idx
            modes = next((n.get("modes") for n in nvml_devs if int(n["index"]) == idx), None)
            if modes is not None:
                details["power_modes"] = list(modes)
                per_device[int(d["index"])] = _device_sensors(idx, [str(m) for m in modes])
            usable += 1
        entries.append(DeviceEntry(int(d["index"]), str(d["name"]), details))
    if cuda_devs and nvml_devs and not usable:
        reasons.append("no CUDA device matched an NVML device")
    available = usable > 0
    # Issue 19: per mode, what a log is and whether each figure is documented,
    # measured or assumed; one set when every GPU agrees (the usual node),
    # else one per device; without a GPU, the rules a GPU would get.
    sensors: tuple[SensorSemantics, ...]
    if len(set(per_device.values())) == 1:
        sensors = next(iter(per_device.values()))
    elif per_device:
        sensors = tuple(dataclasses.replace(m, mode=f"{m.mode} on [{i}]") for i, v in per_device.items() for m in v)
    else:
        sensors = tuple(_mode_semantics(mode, None, None) for mode in NVML_MODES)
    return BackendReport(
        backend="nvidia",
        available=available,
        devices=tuple(entries),
        components=tuple(components),
        reason="" if available else "; ".join(reasons) or "no usable NVIDIA GPU",
        verified_on=_VERIFIED_ON,
        sensors=sensors,
    )
