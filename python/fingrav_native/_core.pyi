"""Type stub for the compiled core ``fingrav_native._core`` (csrc/bindings.cpp).

Checked against the built module by tests/test_stub.py (``mypy.stubtest``), so
it cannot drift. Integer arguments are ``SupportsIndex``: pybind11 accepts
``int`` and numpy integers but refuses ``float``.
"""

import enum
from types import TracebackType
from typing import Any, Literal, SupportsIndex, TypedDict, final, overload, type_check_only

import numpy as np
import numpy.typing as npt
import typing_extensions

from fingrav_native._errors import FingravError

# ---------------------------------------------------------------- constants

SAMPLE_DTYPE: np.dtype[np.void]
"""One drained sample (64 bytes): host_ns, host_poll_begin_ns, source_ts,
source_seq, seq, total, compute, io, memory, flags, window_ns."""
READING_DTYPE: np.dtype[np.void]
"""One reading as a source reports it: source_ts, source_seq, the four
channels, flags, window_ns."""
MARKER_DTYPE: np.dtype[np.void]
"""One EventLog marker (32 bytes): host_ns, device_ts, run, execution,
kernel_id, kind, flags."""
EXEC_DTYPE: np.dtype[np.void]
"""One simulated execution (SimDevice.executions()): run, index, kernel_id,
warm_index, start_ns, end_ns, marker ticks, host launch/sync times, energy,
mean power per channel, mean frequency, duration factor."""
LOG_DTYPE: np.dtype[np.void]
"""One simulated power-logger record (SimDevice.logs())."""
FIRMWARE_DTYPE: np.dtype[np.void]
"""One simulated firmware control step (SimDevice.firmware())."""
CHANNELS: tuple[str, str, str, str]
MIN_PERIOD_NS: int
MAX_PERIOD_NS: int
MIN_CAPACITY: int
MAX_CAPACITY: int
"""Largest Sampler capacity: 2**26 samples of 64 bytes (a 4 GiB ring)."""
MAX_MARKERS: int
"""Largest EventLog capacity: 2**26 markers of 32 bytes (2 GiB, allocated up front)."""
SIM_MAX_PENDING_EXECUTIONS: int
"""Most executions a SimDevice holds queued at once (2**20): the bound of one launch, and of one run."""
FLAG_SOURCE_GAP: int
FLAG_DERIVED: int
MARKER_HAS_DEVICE_TS: int

@type_check_only
class _Pybind11Type(type):
    """Stands for ``pybind11_builtins.pybind11_type``, the metaclass of every
    class bound with ``py::class_``: declared so the stub says what the runtime
    has (stubtest checks that a metaclass is present)."""

class LibraryNotFoundError(RuntimeError, FingravError):
    """A vendor library could not be loaded: the message lists every path tried and what to install."""

class SymbolNotFoundError(RuntimeError, FingravError):
    """A vendor library lacks a function fingrav needs (too old)."""

class DeviceUnavailableError(RuntimeError, FingravError):
    """The library loaded but the device is absent or not accessible."""

class SamplerError(RuntimeError, FingravError):
    """The sampler thread failed; raised by ``Sampler.stop()`` and the with-block exit."""

# ---------------------------------------------------------------- host clock

def host_time_ns() -> int:
    """Host time now: CLOCK_MONOTONIC_RAW in nanoseconds."""

def wait_until_ns(target_ns: SupportsIndex, spin_ns: SupportsIndex = 200000) -> int:
    """Sleep, then spin, until host time reaches ``target_ns``; return the host time at wake-up."""

def read_epoch_brackets(n: SupportsIndex) -> npt.NDArray[np.int64]:
    """``n`` CLOCK_REALTIME reads, each between two host clock reads, back to back.

    Returns an ``(n, 3)`` int64 array of ``(mono_raw_before_ns, realtime_ns,
    mono_raw_after_ns)``: each Unix-epoch read was taken somewhere inside
    its ``CLOCK_MONOTONIC_RAW`` bracket. Fitting many of them gives the
    offset and drift from host time onto the epoch clock that
    torch.profiler (Kineto) stamps its events with
    (:class:`fingrav_native.clocks.EpochMap`). Kept as int64
    because a float64 at 1.8e18 ns resolves only 256 ns. Raises
    ``ValueError`` naming ``n`` unless ``1 <= n <= 2**24``; the GIL is
    released while reading.
    """

@final
class HostClockInfo(metaclass=_Pybind11Type):
    """Cost and resolution of reading the host clock (no public constructor)."""

    @property
    def read_cost_ns(self) -> float: ...
    @property
    def min_read_cost_ns(self) -> int: ...
    @property
    def resolution_ns(self) -> int: ...
    @property
    def observed_step_ns(self) -> int: ...

def measure_host_clock(reads: SupportsIndex = 200000) -> HostClockInfo:
    """Measure the host clock over ``reads`` (>= 2) back-to-back reads."""

# ---------------------------------------------------------------- sources

@final
class SourceInfo(metaclass=_Pybind11Type):
    """What a power source provides and in which clock domain (no public constructor)."""

    @property
    def name(self) -> str: ...
    @property
    def clock_domain(self) -> str: ...
    @property
    def channel_mask(self) -> int: ...
    @property
    def native_period_ns(self) -> int: ...
    @property
    def tick_ns(self) -> float: ...
    @property
    def has_sequence(self) -> bool: ...
    @property
    def window_ns(self) -> int: ...
    @property
    def channels(self) -> list[str]: ...

class PowerSource(metaclass=_Pybind11Type):
    """A source of power readings (interface; no public constructor)."""

    @property
    def info(self) -> SourceInfo: ...
    @property
    def in_use(self) -> bool: ...
    def poll(self) -> npt.NDArray[np.void]:
        """Poll once from this thread; READING_DTYPE records, oldest first."""

@final
class SyntheticSource(PowerSource):
    """Deterministic test source with a documented waveform."""

    def __init__(
        self,
        *,
        period_ns: SupportsIndex = 1000000,
        depth: SupportsIndex = 1,
        channel_mask: SupportsIndex = 15,
        base_w: float | SupportsIndex = 300.0,
        amplitude_w: float | SupportsIndex = 100.0,
        cycle: SupportsIndex = 50,
        ts_offset: SupportsIndex = 0,
        window_ns: SupportsIndex = 0,
        transient_error_every: SupportsIndex = 0,
        fatal_error_at_poll: SupportsIndex = 0,
    ) -> None: ...
    def value(self, k: int, channel: SupportsIndex) -> float:
        """Power of channel ``channel`` (0..3) in reading ``k``."""
    def appear_host_ns(self, k: SupportsIndex) -> int:
        """Host time at which reading ``k`` appears; -1 before the first poll."""
    @property
    def polls(self) -> int: ...

# ---------------------------------------------------------------- sampler

@type_check_only
class _SamplerStatsDict(TypedDict):
    polls: int
    samples: int
    duplicates: int
    drops: int
    source_missed: int
    read_errors: int
    deadline_misses: int
    drained: int
    jitter_p50_ns: int
    jitter_p90_ns: int
    jitter_p99_ns: int
    jitter_max_ns: int
    mean_period_ns: float
    cpu_time_ns: int
    wall_time_ns: int
    buffered: int
    last_read_error: str

@final
class SamplerStats(metaclass=_Pybind11Type):
    """Counters and timing of one sampler run (no public constructor)."""

    @property
    def polls(self) -> int: ...
    @property
    def samples(self) -> int: ...
    @property
    def duplicates(self) -> int: ...
    @property
    def drops(self) -> int: ...
    @property
    def source_missed(self) -> int: ...
    @property
    def read_errors(self) -> int: ...
    @property
    def deadline_misses(self) -> int: ...
    @property
    def drained(self) -> int: ...
    @property
    def jitter_p50_ns(self) -> int: ...
    @property
    def jitter_p90_ns(self) -> int: ...
    @property
    def jitter_p99_ns(self) -> int: ...
    @property
    def jitter_max_ns(self) -> int: ...
    @property
    def mean_period_ns(self) -> float: ...
    @property
    def cpu_time_ns(self) -> int: ...
    @property
    def wall_time_ns(self) -> int: ...
    @property
    def buffered(self) -> int: ...
    @property
    def last_read_error(self) -> str: ...
    @property
    def cpu_fraction(self) -> float:
        """Sampler thread CPU time / wall time (1.0 = one whole core)."""
    def as_dict(self) -> _SamplerStatsDict: ...

@final
class Sampler(metaclass=_Pybind11Type):
    """Polls one power source on a background C++ thread into a lock-free ring."""

    def __init__(
        self,
        source: PowerSource,
        *,
        period_ns: SupportsIndex = 1000000,
        capacity: SupportsIndex = 65536,
        cpu: SupportsIndex | None = None,
    ) -> None: ...
    def start(self) -> None:
        """Start the sampler thread; a sampler runs once."""
    def stop(self) -> None:
        """Stop and join the thread; raises SamplerError if the thread failed."""
    def drain(self, max: SupportsIndex | None = None) -> npt.NDArray[np.void]:
        """Move buffered samples (at most ``max``) into a new SAMPLE_DTYPE array that owns them.

        Empty once a stopped sampler is drained; RuntimeError before start().
        """
    def drain_into(self, out: npt.NDArray[np.void]) -> int:
        """Move up to ``len(out)`` samples into ``out``; return how many (0 once a stopped sampler is drained)."""
    @property
    def available(self) -> int: ...
    @property
    def running(self) -> bool: ...
    @property
    def started(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    @property
    def period_ns(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def cpu(self) -> int | None: ...
    @property
    def source(self) -> PowerSource: ...
    def stats(self) -> SamplerStats: ...
    def __enter__(self) -> Sampler: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

# ---------------------------------------------------------------- event log

class MarkerKind(enum.IntEnum):
    """What a marker marks."""

    EXEC_BEGIN = 0
    EXEC_END = 1
    RUN_BEGIN = 2
    RUN_END = 3

@final
class EventLog(metaclass=_Pybind11Type):
    """Append-only log of execution/run markers."""

    def __init__(self, capacity: SupportsIndex = 1048576) -> None:
        """``capacity`` markers in [1, MAX_MARKERS], allocated up front; ValueError names it otherwise."""
    def mark(
        self,
        kind: MarkerKind,
        run: SupportsIndex,
        execution: SupportsIndex = -1,
        kernel_id: SupportsIndex = 0,
        *,
        host_ns: SupportsIndex | None = None,
        device_ts: SupportsIndex | None = None,
    ) -> None:
        """Append a marker; RuntimeError when the log is full.

        ``run`` in [0, 2**31 - 1], ``execution`` in [-1, 2**31 - 1] (-1: a run
        marker), ``kernel_id`` int32, ``host_ns`` in [0, 2**63 - 1], ``device_ts``
        int64: ValueError naming the argument and its range otherwise.
        """
    def markers(self) -> npt.NDArray[np.void]:
        """A read-only MARKER_DTYPE view (no copy) of the markers so far; it never changes afterwards."""
    def clear(self) -> None:
        """Forget all markers; arrays from ``markers()`` keep theirs (a viewed buffer is not reused)."""
    @property
    def capacity(self) -> int: ...
    @property
    def dropped(self) -> int: ...
    def __len__(self) -> int: ...

@final
class KinetoScanner(metaclass=_Pybind11Type):
    """A streaming reader of Kineto Chrome traces (csrc/fingrav/kineto_scan.hpp).

    ``feed`` the JSON's bytes in chunks of any size (the GIL is released),
    then ``finish`` once: a dict with the status (0 read; else why not, with
    the refused event, field and value as the document had them) and the
    kept columns as numpy arrays (kernels in document order, signatures,
    kernel names as written, ProfilerSteps).
    """

    def __init__(self, max_kept_bytes: SupportsIndex, max_depth: SupportsIndex,
                 max_int_digits: SupportsIndex) -> None: ...
    def feed(self, data: typing_extensions.Buffer) -> None:
        """Scan the document's next bytes (chunks may split any token)."""
    @property
    def failed(self) -> bool:
        """Whether the bytes so far are already refused (the rest need not be fed)."""
    def finish(self) -> dict[str, Any]:
        """End the document: the status, the error's details or the kept columns."""

# ---------------------------------------------------------------- simulator

def sim_parameters() -> list[tuple[str, float, str]]:
    """Every simulator parameter as (name, default, doc)."""

def sim_kernel_presets() -> list[dict[str, Any]]:
    """The built-in kernels (the paper's cases) as dicts: name, kind (str);
    shape (list of (end, compute, io, memory) float tuples); duration_ns,
    freq_sensitivity, exec_cv, outlier_prob, outlier_factor, cold_factor,
    cold_decay, launch_gap_ns, run_cv, slow_mode_prob, slow_mode_min,
    slow_mode_max (float). Plain dicts, so they round-trip into add_kernel()."""

class TimestampSource(metaclass=_Pybind11Type):
    """A device clock readable from the host (interface; no public constructor)."""

    @property
    def name(self) -> str: ...
    @property
    def clock_domain(self) -> str: ...
    @property
    def nominal_tick_ns(self) -> float: ...
    def read_device_ticks(self) -> int:
        """One read of the device clock (blocks for the read's latency)."""

@final
class SimDevice(metaclass=_Pybind11Type):
    """The simulated GPU (see fingrav_native.sim for the friendly wrapper)."""

    def __init__(self, params: dict[str, float] = {}, *, realtime: bool = False) -> None: ...
    @property
    def realtime(self) -> bool: ...
    @property
    def params(self) -> dict[str, float]: ...
    def add_kernel(self, spec: dict[str, Any]) -> int:
        """Register a user-defined kernel (keys as sim_kernel_presets() gives, name required); return its id."""
    def kernel_id(self, name: str) -> int: ...
    def kernels(self) -> list[dict[str, Any]]: ...
    def now(self) -> int: ...
    def advance(self, ns: SupportsIndex) -> None: ...
    def launch(self, kernel: SupportsIndex, count: SupportsIndex, run: SupportsIndex) -> None:
        """Enqueue ``count`` executions (at most SIM_MAX_PENDING_EXECUTIONS queued) of kernel id ``kernel`` for ``run``."""
    def synchronize(self) -> int: ...
    def busy(self) -> bool: ...
    def read_clock(self) -> tuple[int, int, int]:
        """One bracketed read: (host_before_ns, device_ticks, host_after_ns)."""
    def read_clocks(self, n: SupportsIndex) -> npt.NDArray[np.int64]:
        """A burst of n back-to-back bracketed reads as an (n, 3) int64 array."""
    def device_ticks_at(self, host_ns: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """True device clock ticks at host times (a 1-D array)."""
    def logger_ticks_at(self, host_ns: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """True logger clock ticks at host times (a 1-D array)."""
    @overload
    def host_at_device_ticks(self, ticks: float) -> float: ...
    @overload
    def host_at_device_ticks(self, ticks: npt.ArrayLike) -> float | npt.NDArray[np.float64]: ...
    @overload
    def host_at_logger_ticks(self, ticks: float) -> float: ...
    @overload
    def host_at_logger_ticks(self, ticks: npt.ArrayLike) -> float | npt.NDArray[np.float64]: ...
    def truth_power(self, host_ns: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Exact power (total, compute, io, memory) at host times, as an (n, 4) array."""
    def executions(self, first: SupportsIndex = 0) -> npt.NDArray[np.void]:
        """EXEC_DTYPE records."""
    def execution_count(self) -> int:
        """How many execution records there are."""
    def logs(self) -> npt.NDArray[np.void]:
        """LOG_DTYPE records."""
    def observed_samples(self, from_publish_ns: SupportsIndex | None = None) -> npt.NDArray[np.void]:
        """The logs as a polling sampler would have drained them (SAMPLE_DTYPE)."""
    def firmware(self) -> npt.NDArray[np.void]:
        """FIRMWARE_DTYPE records."""
    def clear_records(self) -> None: ...
    def current_freq(self) -> float: ...
    def current_temp_rise_k(self) -> float: ...

@final
class SimPowerSource(PowerSource):
    """A real-time SimDevice's power logger as a PowerSource for the Sampler."""

    def __init__(self, device: SimDevice, *, depth: SupportsIndex = 1) -> None: ...

@final
class SimTimestampSource(TimestampSource):
    """A SimDevice's clock as a TimestampSource."""

    def __init__(self, device: SimDevice) -> None: ...

SHARED_SIM_DEVICE_ENV: str
SHARED_SIM_DEFAULT_CAPACITY: int

@final
class SharedSimDevice(metaclass=_Pybind11Type):
    """A simulated GPU shared with an application process through a file (see fingrav_native.sim.SharedSimGPU)."""

    @staticmethod
    def create(path: str, params: dict[str, float] = {}, *, capacity: SupportsIndex = 16384) -> SharedSimDevice: ...
    @staticmethod
    def open(path: str) -> SharedSimDevice: ...
    @property
    def path(self) -> str: ...
    @property
    def params(self) -> dict[str, float]: ...
    @property
    def clock_epoch_ns(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def producer_pid(self) -> int: ...
    @property
    def attach_ns(self) -> int: ...
    @property
    def detach_ns(self) -> int: ...
    @property
    def published(self) -> int: ...
    def newest(self, n: SupportsIndex) -> npt.NDArray[np.void]: ...

@final
class SharedSimPowerSource(PowerSource):
    """A shared simulated device's power logger as a PowerSource for the Sampler."""

    def __init__(self, device: SharedSimDevice, *, depth: SupportsIndex = 1) -> None: ...

@final
class SharedSimTimestampSource(TimestampSource):
    """A shared simulated device's clock as a TimestampSource."""

    def __init__(self, device: SharedSimDevice) -> None: ...
    def read(self) -> tuple[int, int, int]: ...

# ---------------------------------------------------------------- clock sync

def measure_brackets(source: TimestampSource, n: SupportsIndex) -> npt.NDArray[np.int64]:
    """``n`` bracketed reads: an (n, 3) int64 array of (host_before_ns, device_ticks, host_after_ns)."""

@final
class ClockSyncStats(metaclass=_Pybind11Type):
    """Counters of a ClockSyncRecorder."""

    @property
    def bursts(self) -> int: ...
    @property
    def reads(self) -> int: ...
    @property
    def drops(self) -> int: ...
    @property
    def cpu_time_ns(self) -> int: ...
    @property
    def wall_time_ns(self) -> int: ...

@final
class ClockSyncRecorder(metaclass=_Pybind11Type):
    """Takes a burst of bracketed device-clock reads every interval on a background thread."""

    def __init__(
        self,
        source: TimestampSource,
        *,
        interval_ns: SupportsIndex = 250000000,
        burst: SupportsIndex = 32,
        capacity: SupportsIndex = 65536,
    ) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def drain(self) -> npt.NDArray[np.int64]: ...
    @property
    def available(self) -> int: ...
    @property
    def running(self) -> bool: ...
    @property
    def started(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    @property
    def interval_ns(self) -> int: ...
    @property
    def burst(self) -> int: ...
    def stats(self) -> ClockSyncStats: ...
    def __enter__(self) -> ClockSyncRecorder: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...

# ---- AMD runtime (csrc/fingrav/amd/kfd_clock.hpp, csrc/fingrav/amd/hip.hpp)

HIP_WALL_CLOCK_RATE_ATTRIBUTE: int
"""hipDeviceAttributeWallClockRate's value (10017 in ROCm 6.x headers)."""
HIP_PROBE_KERNEL: str
"""Entry point of the marker probe kernel."""
HIP_PROBE_SOURCE: str
"""HIP source of the marker probe kernel (compiled at run time with hiprtc)."""

def gfx_arch_from_target_version(version: SupportsIndex) -> str:
    """The gfx target name of a KFD topology gfx_target_version (90402 -> 'gfx942')."""

def hiprtc_compile_probe(arch: str) -> bytes:
    """Compiles the marker probe for a gfx target with hiprtc; returns the AMDGPU code object."""

def hip_runtime_info() -> dict[str, Any]:
    """The HIP runtime's path, version and devices (init_error says why there are none)."""

class KfdClockSource(TimestampSource):
    """The GPU clock counter of one KFD gpu_id, read with AMDKFD_IOC_GET_CLOCK_COUNTERS."""

    def __init__(
        self, gpu_id: SupportsIndex, *, device_path: str = "/dev/kfd", nominal_tick_ns: float | SupportsIndex = 10.0
    ) -> None: ...
    def read_counters(self) -> dict[str, int]: ...
    @property
    def gpu_id(self) -> int: ...
    @property
    def device_path(self) -> str: ...
    @property
    def kfd_version(self) -> tuple[int, int]: ...

class HipMarkerProbe(metaclass=_Pybind11Type):
    """GPU-side execution markers: a probe kernel writing the wall clock into mapped slots."""

    def __init__(self, device: SupportsIndex, slots: SupportsIndex, *, arch: str) -> None: ...
    def stamp(self, stream: int, slot: SupportsIndex) -> None: ...
    def slots(self) -> npt.NDArray[np.uint64]:
        """A copy of the slots (0: not written since reset()); read after the stream syncs."""
    def reset(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def arch(self) -> str: ...
    @property
    def wall_clock_rate_khz(self) -> int: ...

class HipEventTimer(metaclass=_Pybind11Type):
    """HIP events recorded on a stream: the second marker source (durations only)."""

    def __init__(self, device: SupportsIndex, events: SupportsIndex) -> None: ...
    def record(self, stream: int, index: SupportsIndex) -> None: ...
    def synchronize(self, index: SupportsIndex) -> None: ...
    def elapsed_ms(self, start: SupportsIndex, end: SupportsIndex) -> float: ...
    def __len__(self) -> int: ...

class HipTimestampSource(TimestampSource):
    """The GPU wall clock read through the probe on a private stream."""

    def __init__(self, device: SupportsIndex, *, arch: str, timeout_ns: SupportsIndex = 1000000000) -> None: ...
    @property
    def wall_clock_rate_khz(self) -> int: ...

# ---------------------------------------------------------------- AMD power (gpu_metrics, hwmon)

class GpuMetricsFormatError(ValueError, FingravError):
    """A gpu_metrics table of an unknown revision or size, or bytes that disagree with its header."""

AMD_ENERGY_UNIT_UJ: float
AMD_FIRMWARE_TICK_NS: int
AMD_DRIVER_CACHE_INTERVAL_NS: int
GPU_METRICS_LAYOUTS: tuple[tuple[int, int, int, str], ...]

@type_check_only
class _GpuMetricsDict(TypedDict):
    format_revision: int
    content_revision: int
    structure_size: int
    layout: str
    temperature_hotspot_c: int | None
    temperature_mem_c: int | None
    temperature_vrsoc_c: int | None
    curr_socket_power_w: int | None
    average_gfx_activity_pct: int | None
    average_umc_activity_pct: int | None
    energy_accumulator: int | None
    energy_j: float | None
    system_clock_counter_ns: int | None
    firmware_timestamp: int | None
    firmware_tick_ns: int
    accumulation_counter: int | None
    throttle_status: int | None
    gfxclk_lock_status: int | None
    current_gfxclk_mhz: list[int]
    current_uclk_mhz: int | None
    num_partition: int | None
    attribute_count: int | None
    encoding_bytes: int | None

@type_check_only
class _GpuMetricsStatsDict(TypedDict):
    reads: int
    tables: int
    emitted: int
    unpaired: int
    energy_resets: int
    long_gaps: int

def parse_gpu_metrics(data: bytes) -> _GpuMetricsDict:
    """Parse one gpu_metrics read (formats 1.4-1.9); None marks fields the firmware leaves unset."""

@final
class GpuMetricsSource(PowerSource):
    """Power from an amdgpu gpu_metrics file: energy-derived (default) or integer socket power."""

    def __init__(self, path: str, channel: str = "energy", clock: str = "auto") -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def channel(self) -> str: ...
    @property
    def clock(self) -> str:
        """'firmware' or 'boottime' (resolved from 'auto' when opened)."""
    @property
    def layout(self) -> str: ...
    @property
    def first_table(self) -> _GpuMetricsDict: ...
    def stats(self) -> _GpuMetricsStatsDict: ...

@final
class HwmonPowerSource(PowerSource):
    """Power from an amdgpu hwmon power1_average / power1_input file (host-stamped)."""

    def __init__(self, path: str) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def averaged(self) -> bool: ...
    def read_microwatts(self) -> int: ...

# ---- nvml: NVIDIA power through NVML (csrc/fingrav/nvidia/nvml.hpp)

NVML_MODES: tuple[str, ...]
"""The NvmlPowerSource modes: samples, instant, average, energy, usage."""

@type_check_only
class _NvmlDeviceDict(TypedDict):
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    power_limit_w: float | None
    architecture: int | None
    compute_capability: tuple[int, int] | None
    modes: list[str]
    unsupported: dict[str, str]
    energy_from_field: bool
    c2c_enabled: bool | None
    field_scopes: dict[str, list[str]]
    memory_modes: list[str]
    memory_unsupported: dict[str, str]
    sample_buffer: int
    driver_version: str
    library_path: str

def nvml_library_path() -> str:
    """Where NVML (libnvidia-ml) is, without initialising it; raises LibraryNotFoundError."""

def nvml_devices() -> list[_NvmlDeviceDict]:
    """Every GPU NVML sees with the power modes that work on it; [] when it sees none."""

def _nvml_prototypes() -> list[tuple[str, str, str, bool]]:
    """(name, return type, '(parameters)', required) of every NVML function resolved."""

def _nvml_constants() -> dict[str, int]:
    """The nvml.h constants the core declares, by name."""

def _nvml_layouts() -> list[tuple[str, str, int]]:
    """(type, member, offset) of the NVML structs the core declares; member '' gives sizeof."""

@final
class NvmlPowerSource(PowerSource):
    """Board power of one NVIDIA GPU through NVML (clock domain 'nvml-host-us', tick_ns 1000)."""

    def __init__(self, device: SupportsIndex = 0, mode: str = "samples", scope: str = "auto") -> None: ...
    @property
    def mode(self) -> str: ...
    @property
    def scope(self) -> str:
        """The power the readings are of: 'gpu' or 'module' (GPU, Grace CPU and memory)."""
    @property
    def scope_reference(self) -> str:
        """Why that scope, in words."""
    @property
    def device(self) -> int: ...
    @property
    def library_path(self) -> str: ...
    @property
    def window_documented(self) -> bool:
        """Whether the averaging window declared in ``info.window_ns`` is published (nvml.h, or SC'24 for A100/H100)."""
    @property
    def window_reference(self) -> str:
        """Where the declared window comes from, in words ('' when nowhere)."""
    @property
    def unchanged_polls(self) -> int:
        """Polls that saw the value (or energy counter) the previous poll saw, so kept nothing."""
    @property
    def restamped(self) -> int:
        """Changed values whose NVML timestamp did not advance, stamped when first seen."""
    @property
    def sample_capacity(self) -> int: ...
    @property
    def possible_overruns(self) -> int: ...
    @property
    def energy_resets(self) -> int: ...
    @property
    def memory_channel(self) -> bool:
        """Whether the readings carry GPU memory power (NVML_POWER_SCOPE_MEMORY) in the 'memory' channel."""
    @property
    def memory_reference(self) -> str:
        """Why the memory channel is there or not, in words."""
    @property
    def memory_missing(self) -> int:
        """Polls whose memory value failed or read 0 while the total was read (NaN there)."""
    @property
    def device_info(self) -> _NvmlDeviceDict: ...

# ---------------------------------------------------------------- NVIDIA runtime: CUDA driver, %globaltimer probe, events

CUDA_PROBE_UNWRITTEN: int
"""The value of a probe slot no probe has written yet (2**64 - 1)."""

@type_check_only
class _CudaDeviceDict(TypedDict):
    index: int
    name: str
    pci_bus_id: str
    uuid: str
    compute_capability: tuple[int, int]
    clock_rate_khz: int
    memory_clock_rate_khz: int
    multiprocessors: int
    total_memory: int
    can_map_host_memory: bool

def cuda_library_path() -> str:
    """Where libcuda loads from; raises LibraryNotFoundError naming every path tried."""

def cuda_driver_version() -> int:
    """The driver's CUDA version (cuDriverGetVersion, e.g. 12040)."""

def cuda_devices() -> list[_CudaDeviceDict]:
    """Every CUDA device, in CUDA_VISIBLE_DEVICES order."""

def cuda_probe_ptx() -> str:
    """The PTX text of the %globaltimer probe kernels."""

def _cuda_prototypes() -> list[tuple[str, list[str], str]]:
    """The declared driver entry points: (api name, symbols tried, parameter types)."""

def _cuda_constants() -> dict[str, int]:
    """The declared driver constants by their cuda.h names."""

@final
class CudaMarkerProbe(metaclass=_Pybind11Type):
    """GPU-side markers: %globaltimer stored into host-mapped slots from the workload's stream."""

    def __init__(self, device: SupportsIndex = 0, slots: SupportsIndex = 65536) -> None: ...
    def stamp(self, stream: SupportsIndex, slot: SupportsIndex) -> None: ...
    def values(self, first: SupportsIndex = 0, count: SupportsIndex | None = None) -> npt.NDArray[np.uint64]: ...
    def reset(self) -> None: ...
    def synchronize(self, stream: SupportsIndex) -> None: ...
    @property
    def size(self) -> int: ...
    @property
    def device(self) -> int: ...

@final
class CudaEventTimer(metaclass=_Pybind11Type):
    """CUDA events with timing recorded on a stream: a second marker source."""

    def __init__(self, device: SupportsIndex = 0, count: SupportsIndex = 2) -> None: ...
    def record(self, stream: SupportsIndex, index: SupportsIndex) -> None: ...
    def synchronize(self, index: SupportsIndex) -> None: ...
    def elapsed_ms(self, start: SupportsIndex, end: SupportsIndex) -> float: ...
    @property
    def size(self) -> int: ...

@final
class GlobaltimerSource(TimestampSource):
    """%globaltimer (ns) of a CUDA device as a TimestampSource (one probe launch per read)."""

    def __init__(self, device: SupportsIndex = 0, *, timeout_ns: SupportsIndex = 1000000000) -> None: ...
    def measure_steps(self, n: SupportsIndex) -> npt.NDArray[np.uint64]: ...
    @property
    def device(self) -> int: ...

# ---------------------------------------------------------------- native launch capture

def launch_clock_brackets(clock: str, n: SupportsIndex) -> npt.NDArray[np.int64]:
    """n bracketed reads of a launch record clock ('CLOCK_BOOTTIME': rocprofiler-sdk's, 'CLOCK_REALTIME':
    CUPTI's) as the launch capture takes them at each flush: (n, 3) int64 (CLOCK_MONOTONIC_RAW before,
    the clock, CLOCK_MONOTONIC_RAW after), ns. ValueError naming clock or n (in [1, 2^24])."""

def journal_crc32(data: bytes, crc: SupportsIndex = 0) -> int:
    """The CRC-32 the launch journal frames each record with, continuing from crc: zlib.crc32(data, crc)."""
