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
  assumed 0 (:func:`~fingrav_native.backends.nvml_semantics`,
  :func:`~fingrav_native.backends.nvml_provenance`);
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
saying why. ``report()`` (in the report module beside this one) says what
was found, for ``fingrav devices``.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Optional, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import fraction, integer_in, short_repr
from fingrav_native._errors import FingravWarning
from fingrav_native.backends._base import HostRelease, LivePower, drain_all, marker_records, wait_for_idle
from fingrav_native.backends._nvidia_sensors import (
    CHANGE_ONLY_MODES,
    NVML_ARCH_AMPERE,
    NVML_MODES,
    NvmlMode,
    nvml_provenance,
    nvml_semantics,
    nvml_sensor,
    published_window,
)
from fingrav_native.backends._workloads import Workload
from fingrav_native.records._recording import Capabilities, RunRecord
from fingrav_native.sensors._model import SensorModel

#: What the constructor's sensor figures are: the model, the window, the semantics in words, the provenance.
_Figures = tuple[Optional[SensorModel], float, str, dict[str, str]]


class UnknownSensorWindowWarning(FingravWarning):
    """An NVIDIA power mode whose averaging window nobody has published or measured for this GPU.

    The window is then taken as 0 (instantaneous), so the error budget and the
    attribution ignore it; :func:`~fingrav_native.app.characterize`
    on a backend in the same mode measures it, and ``NvidiaBackend(sensor=...)``
    takes the result's ``sensor``.
    """


def nvml_attr(name: str) -> Any:
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
    if not isinstance(cuda_device, dict):
        raise ValueError(f"cuda_device={short_repr(cuda_device)}: must be a dict (an entry of cuda_devices())")
    if not isinstance(nvml_devices, (list, tuple)) or not all(isinstance(d, dict) for d in nvml_devices):
        raise ValueError(f"nvml_devices={short_repr(nvml_devices)}: must be a list of dicts (nvml_devices())")
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


def _check_power_args(power: Any, power_source: Any, sensor: Any, power_scope: Any) -> None:
    """Refuse a power mode, power source, sensor model or power scope the backend cannot take, by name."""
    if power_scope not in ("auto", "gpu", "module"):
        raise ValueError(f"power_scope={power_scope!r}: must be 'auto', 'gpu' or 'module'")
    if sensor is not None and not isinstance(sensor, SensorModel):
        raise ValueError(f"sensor={sensor!r}: must be a SensorModel (e.g. a characterisation's .sensor)")
    if power_source is None and power not in NVML_MODES:
        raise ValueError(f"power={power!r}: must be one of {', '.join(NVML_MODES)}")
    if power_source is not None and not isinstance(power_source, _core.PowerSource):
        raise ValueError(f"power_source={power_source!r}: must be a fingrav_native PowerSource")


class NvidiaBackend(HostRelease, LivePower):
    """An NVIDIA GPU as a FinGraV backend (NVML power, %globaltimer markers).

    Parameters
    ----------
    device : int
        CUDA device index (as PyTorch and CuPy number it, after
        ``CUDA_VISIBLE_DEVICES``).
    power : {"samples", "instant", "average", "energy", "usage"}
        NVML mode: ``"samples"`` (the driver's power sample buffer),
        ``"instant"``, ``"average"``, ``"energy"`` (derived from the energy
        counter) or ``"usage"``. Ignored when ``power_source`` is given.
    power_scope : {"auto", "gpu", "module"}
        Which power the field modes (``instant``, ``average``) read (nvml.h,
        the power fields' scope): the GPU alone, or the module (GPU, Grace
        CPU and their memory). ``"auto"``: the module on a Grace Hopper
        superchip (NVML reports C2C enabled), as Zeus reads it there; else
        the GPU. The other modes have no scope in nvml.h: ``"module"`` with
        them is an error. :attr:`power_scope` says what was chosen and why.
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
        (:func:`~fingrav_native.app.characterize`,
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
    orchestrator's (:func:`fingrav_native.app.profile`).

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
        power: NvmlMode = "samples",
        period_ns: Optional[int] = None,
        brackets_per_run: int = 16,
        idle_tolerance: float = 0.01,
        max_idle_ns: int = 5_000_000_000,
        power_source: Optional[_core.PowerSource] = None,
        marker_slots: int = 1 << 16,
        sensor: Optional[SensorModel] = None,
        power_scope: str = "auto",
    ) -> None:
        device = integer_in(device, "device", 0)
        _check_power_args(power, power_source, sensor, power_scope)
        self._brackets_per_run = integer_in(brackets_per_run, "brackets_per_run", 2)
        fraction(idle_tolerance, "idle_tolerance")
        self._idle_tol = float(idle_tolerance)
        self._max_idle_ns = integer_in(max_idle_ns, "max_idle_ns", 1)
        marker_slots = integer_in(marker_slots, "marker_slots", 2, 1 << 28)
        if period_ns is not None:
            period_ns = integer_in(period_ns, "period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)

        # The CUDA side first: it says whether there is a GPU at all.
        self._open_cuda(device, marker_slots)
        self._power = self._open_power(power, power_source, power_scope)
        info = self._power.info
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

        resolution_ticks = self._measure_at_start(info.name, period_declared)
        if self.power_mode == "external":
            model, window_ns, semantics, provenance = self._external_figures(info, period_declared, sensor)
        else:
            model, window_ns, semantics, provenance = self._nvml_figures(power, info, sensor)
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
            # What each log is: profiles deconvolve averaging sensors with it.
            sensor=model,
            sensor_semantics=semantics,
            provenance=provenance,
            device_resolution_ticks=resolution_ticks,
        )

    # ------------------------------------------------------------ construction

    def _open_cuda(self, device: int, marker_slots: int) -> None:
        """The CUDA device: its properties, %globaltimer clock, marker probe and events."""
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

    def _open_power(self, power: NvmlMode, power_source: Optional[_core.PowerSource],
                    scope: str) -> _core.PowerSource:
        """The NVML source of this GPU in mode ``power`` and ``scope``, unless a source is given; sets the power mode."""
        if power_source is None:
            nvml_devices = nvml_attr("nvml_devices")()
            nvml_index = match_nvml_device(self.device_info, nvml_devices)
            src = nvml_attr("NvmlPowerSource")(nvml_index, power, scope)
            power_source = src
            self.nvml_index: Optional[int] = nvml_index
            self._nvml_device: dict[str, Any] = dict(nvml_devices[nvml_index])
            self.power_mode: str = power
            #: What the logs are the power of, and why: ``("gpu" | "module" | "external", reason)``.
            self.power_scope: tuple[str, str] = (str(src.scope), str(src.scope_reference))
        else:
            if scope == "module":
                raise ValueError("power_scope='module': an external power_source reads what it reads; "
                                 "leave power_scope at 'auto'")
            self.nvml_index = None
            self.power_mode = "external"
            self.power_scope = ("external", "the power source given")
        assert power_source is not None
        return power_source

    def _measure_at_start(self, name: str, period_declared: bool) -> float:
        """Timer step, marker gaps, logger period (unless declared) and idle baseline; the resolution in ticks.

        %globaltimer counts ns but moves in steps (about 1 us on some GPUs,
        32 ns on recent ones); a clock map that assumed a 1 ns step would
        understate its bound by half a step. So the step is measured here,
        inside one kernel, as bench/nvidia_validate.py does.
        """
        self.timer_resolution = self.measure_timer_resolution(256)
        resolution_ticks = max(float(self.timer_resolution["median_ns"]), 1.0)  # device tick: 1 ns
        self.marker_gaps_ns = self._measure_marker_gaps()
        idle = self._idle_for_period(name) if not period_declared else self._idle_samples(
            int(min(max(50 * self._logger_period, 2e8), 2e9)))
        if len(idle) == 0:
            raise RuntimeError(f"{name}: no power log arrived in the idle baseline; check that the GPU's "
                               "power readings work (nvidia-smi -q -d POWER) or choose another power mode")
        self._baseline_w = float(np.mean(idle["total"]))
        return resolution_ticks

    @staticmethod
    def _external_figures(info: Any, period_declared: bool, sensor: Optional[SensorModel]) -> _Figures:
        """An external source's figures: its own declaration, taken on trust (or a given sensor's)."""
        window_ns = float(sensor.window_ns) if sensor is not None else float(info.window_ns)
        semantics = (f"external power source {info.name}: logs as it declares them (period "
                     f"{'declared' if period_declared else 'measured'}, window {window_ns / 1e6:.4g} ms)")
        given = nvml_provenance(False, sensor)
        provenance = {"period": "documented" if period_declared else "measured", "window": given["window"],
                      "delay": given["delay"], "tick": "measured"}
        return sensor, window_ns, semantics, provenance

    def _nvml_figures(self, power: NvmlMode, info: Any, sensor: Optional[SensorModel]) -> _Figures:
        """An NVML mode's figures: published, assumed (with a warning) or a characterisation's."""
        # The board family's table (nvml.h, and SC'24's measurements on the boards they measured), not
        # the C++ source's compute-capability rule: the same figures, with "measured" and "assumed" kept apart.
        dev = getattr(self, "_nvml_device", {})
        arch = dev.get("architecture")
        pw = published_window(power, str(dev.get("name", self.device_info["name"])), dev.get("compute_capability"),
                              None if arch is None else int(arch) >= NVML_ARCH_AMPERE,
                              self._logger_period)
        documented = pw.provenance != "assumed"
        published = dataclasses.replace(
            nvml_sensor(power, self._logger_period, pw.window_ns if power != "energy" else 0.0, documented),
            source=pw.provenance, notes=pw.reference)
        model = (dataclasses.replace(sensor, period_ns=self._logger_period)
                 if sensor is not None else published)
        window_ns = float(model.window_ns) if sensor is not None else pw.window_ns
        semantics = f"{nvml_semantics(power, pw.window_ns, documented)}; {pw.reference}; scope: {self.power_scope[1]}"
        if sensor is not None:
            semantics += (f"; window {sensor.window_ns / 1e6:.4g} ms and delay {sensor.delay_ns / 1e6:.4g} ms "
                          f"from a characterisation ({sensor.source})")
        provenance = nvml_provenance(documented, sensor)
        if sensor is None:
            provenance["window"] = pw.provenance
        if provenance["window"] == "assumed":
            # stacklevel 3: the warning names the line that built the backend, not this helper.
            warnings.warn(
                f"{info.name}: the averaging window of NVML mode '{power}' on {self.device_info['name']} is "
                f"assumed, {pw.window_ns / 1e6:.4g} ms ({pw.reference}); the error budget rests on it; "
                f"measure it with fingrav_native.app.characterize(NvidiaBackend(power={power!r})) and pass "
                f"its .sensor as NvidiaBackend(sensor=...)",
                UnknownSensorWindowWarning, stacklevel=3)
        return model, window_ns, semantics, provenance

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
                         "(see fingrav_native.backends)")

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
            return self._last_w if self.power_mode in CHANGE_ONLY_MODES else float("nan")

        waited = wait_for_idle(level, self._baseline_w, self._idle_tol, self._logger_period, self._max_idle_ns)
        extra = int(self._rng.integers(0, max(int(self._logger_period), 1)))
        time.sleep(extra / 1e9)
        return waited + extra

    def execute_run(self, kernel: Workload, executions: int, run: int) -> RunRecord:
        """Launch one run with the sampler polling NVML; return its raw record.

        Parameters
        ----------
        kernel : Workload
            What one execution is (:mod:`fingrav_native.backends`).
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
                             "(see fingrav_native.backends)")
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
        the source keeps a log only when the value changes (a repeat is no
        new log), so 200 ms of idle may hold one log or none. Chunks of
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
