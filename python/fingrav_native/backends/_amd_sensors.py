"""What an AMD power mode's logs are, and where each logger figure comes from.

Each power mode the AMD backend can use (gpu_metrics energy or socket power, with the
firmware's or the driver's clock; hwmon average or input), what one of its logs is, and
whether each figure (period, window, delay, tick) is documented, measured or assumed. The
kernel sources named are drivers/gpu/drm/amd/include/kgd_pp_interface.h (the gpu_metrics
fields) and drivers/gpu/drm/amd/pm/amdgpu_pm.c (the hwmon files); the cache interval is
SMU_GPU_METRICS_CACHE_INTERVAL (amd-gfx, "drm/amd/pm: Use driver table structure in
smuv11", December 2025: "The default cache interval is set at 5ms").
"""

from __future__ import annotations

import dataclasses

from fingrav_native import _core
from fingrav_native.sensors._semantics import SensorSemantics

_PERIOD_GPU_METRICS = ("period", "measured",
                       "at start, from the gaps between distinct firmware timestamps while the GPU idles (the "
                       "driver caches the table 5 ms by default, SMU_GPU_METRICS_CACHE_INTERVAL; older drivers "
                       "not at all)")


_PERIOD_BOOTTIME = ("period", "measured",
                    "at start, from the gaps between tables whose accumulators moved while the GPU idles")


_PERIOD_HWMON = ("period", "measured", "at start, from the gaps between value changes while the GPU idles")


_WINDOW_ENERGY = ("window", "measured",
                  "= the period: a log is the exact average over the gap since the previous table, "
                  "which it carries as its own window")


_TICK_FIRMWARE = ("tick", "documented",
                  "10 ns: firmware_timestamp, 'PMFW attached timestamp (10ns resolution)' (kgd_pp_interface.h; "
                  "a 1.9 table states it in the field's unit, AMDGPU_METRICS_UNIT_TIME_2)")


_TICK_BOOTTIME = ("tick", "documented", "1 ns: system_clock_counter, 'Driver attached timestamp (in ns)'")


_TICK_HOST = ("tick", "documented", "1 ns: host CLOCK_MONOTONIC_RAW, read when a new value is first seen")


_DELAY_FIRMWARE = ("delay", "assumed",
                   "0: the firmware is taken to stamp a table when it samples the accumulators (undocumented)")


_DELAY_HWMON = ("delay", "assumed",
                "0, but a value is stamped at the first poll that sees it, up to one poll late, after an "
                "undocumented firmware lag")


#: The power modes of the AMD backend, by name: what one log is and where each figure comes from.
AMD_SENSORS: dict[str, SensorSemantics] = {s.mode: s for s in (
    SensorSemantics(
        "gpu_metrics energy",
        "total power = energy_accumulator difference (2^-16 J) / firmware_timestamp difference between "
        "consecutive distinct gpu_metrics tables",
        (_PERIOD_GPU_METRICS, _WINDOW_ENERGY, _DELAY_FIRMWARE, _TICK_FIRMWARE)),
    SensorSemantics(
        "gpu_metrics energy (boottime clock)",
        "total power = energy_accumulator difference (2^-16 J) / system_clock_counter difference between "
        "consecutive tables whose accumulators moved (this firmware leaves firmware_timestamp unset)",
        (_PERIOD_BOOTTIME, _WINDOW_ENERGY,
         ("delay", "assumed", "0: the driver stamps a table when it builds it, an undocumented lag after the "
                              "firmware sampled it"),
         _TICK_BOOTTIME)),
    SensorSemantics(
        "gpu_metrics socket",
        "curr_socket_power: the firmware's socket power in integer watts, stamped with firmware_timestamp",
        (_PERIOD_GPU_METRICS,
         ("window", "assumed", "0: the kernel documents the field only as 'Power (Watts)', its averaging is "
                               "undocumented; characterise it (fingrav characterize) before trusting detail "
                               "finer than the period"),
         _DELAY_FIRMWARE, _TICK_FIRMWARE)),
    SensorSemantics(
        "gpu_metrics socket (boottime clock)",
        "curr_socket_power: the firmware's socket power in integer watts, stamped with the driver's "
        "system_clock_counter (this firmware leaves firmware_timestamp unset)",
        (_PERIOD_BOOTTIME,
         ("window", "assumed", "0: the kernel documents the field only as 'Power (Watts)', its averaging is "
                               "undocumented"),
         ("delay", "assumed", "0: the driver stamps a table when it builds it, an undocumented lag after the "
                              "firmware sampled it"),
         _TICK_BOOTTIME)),
    SensorSemantics(
        "hwmon power1_average",
        "'average power used by the SoC in microWatts' (amdgpu_pm.c), stamped with host time",
        (_PERIOD_HWMON,
         ("window", "assumed", "0: the averaging window is not documented; characterise it (fingrav "
                               "characterize) before trusting detail finer than a second"),
         _DELAY_HWMON, _TICK_HOST)),
    SensorSemantics(
        "hwmon power1_input",
        "'instantaneous power used by the SoC in microWatts' (amdgpu_pm.c), stamped with host time",
        (_PERIOD_HWMON,
         ("window", "documented", "0: 'instantaneous power' (amdgpu_pm.c)"),
         _DELAY_HWMON, _TICK_HOST)),
)}


#: The mode the backend uses by default (channel='energy' on a firmware that stamps its tables).
DEFAULT_SENSOR = "gpu_metrics energy"


def power_semantics(power: _core.PowerSource) -> SensorSemantics:
    """What the logs of one AMD power source are, and where each logger figure comes from.

    Parameters
    ----------
    power : PowerSource
        A :class:`~fingrav_native._core.GpuMetricsSource` or
        :class:`~fingrav_native._core.HwmonPowerSource`.

    Returns
    -------
    SensorSemantics
        One of :data:`AMD_SENSORS`.

    Notes
    -----
    The gpu_metrics fields are those of the kernel's
    ``drivers/gpu/drm/amd/include/kgd_pp_interface.h``; the hwmon files are
    documented in ``drivers/gpu/drm/amd/pm/amdgpu_pm.c``. A window or delay
    nobody documented is marked ``assumed``: paper Section VI names the
    logger as what limits FinGraV, and an averaging sensor taken for an
    instantaneous one is a silent error.
    """
    if isinstance(power, _core.GpuMetricsSource):
        mode = f"gpu_metrics {power.channel}" + (" (boottime clock)" if power.clock == "boottime" else "")
        if power.clock == "firmware" and power.info.tick_ns == 1.0:
            # A 1.9 table whose firmware_timestamp says ns (AMDGPU_METRICS_UNIT_TIME_1), not the 10 ns of 1.4-1.8.
            sem = AMD_SENSORS[mode]
            tick = ("tick", "documented",
                    "1 ns: firmware_timestamp's unit in this 1.9 table (AMDGPU_METRICS_UNIT_TIME_1)")
            return dataclasses.replace(sem, figures=tuple(tick if f[0] == "tick" else f for f in sem.figures))
    elif isinstance(power, _core.HwmonPowerSource):
        mode = "hwmon power1_average" if power.averaged else "hwmon power1_input"
    else:
        raise ValueError(f"power={power!r}: must be a GpuMetricsSource or HwmonPowerSource")
    return AMD_SENSORS[mode]
