"""A synthetic application and the power logs vendor tools would have written of it, for the power-log tests.

The application alternates two kernels of tens of milliseconds (each at one
constant power, so a kernel's true energy is its power times its duration in
closed form) with idle gaps; the simulator's sensor (:func:`observe`) logs
the power and each tool's writer prints those logs in the tool's own layout
(nvidia-smi's local wall time to the millisecond, amd-smi's epoch seconds,
rocm-smi and dcgmi without times).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Optional
from zoneinfo import ZoneInfo

import numpy as np

from fingrav_native.insitu import KernelTrace
from fingrav_native.sensors import SensorModel
from fingrav_native.sim import observe

#: The application's first kernel starts here on CLOCK_REALTIME (2024-05-01 12:00:00 UTC).
T0_NS = 1_714_564_800_000_000_000

#: Per kernel: name, duration (ns), power (W); idle between them.
KERNELS = (("gemm_60ms", 60_000_000, 300.0), ("reduce_30ms", 30_000_000, 220.0))
IDLE_W = 100.0
GAP_NS = (10_000_000, 20_000_000)


@dataclass(frozen=True)
class SimApp:
    """The trace on CLOCK_REALTIME, the logs (epoch ns, W) and each kernel's true energy per execution (J)."""

    trace: KernelTrace
    stamps_ns: np.ndarray
    watts: np.ndarray
    energy_j: dict[str, float]


def sim_app(sensor: SensorModel, *, seconds: float = 40.0, seed: int = 0, noise_w: float = 2.0,
            poll_ns: Optional[float] = None) -> SimApp:
    """The application run for ``seconds`` and what ``sensor`` logged of it (polled every ``poll_ns``)."""
    rng = np.random.default_rng(seed)
    starts, ends, names, levels = [], [], [], []
    t = 0.0
    while t < seconds * 1e9:
        for (name, dur, watts), gap in zip(KERNELS, GAP_NS):
            d = dur * (1.0 + 0.02 * rng.standard_normal())
            starts.append(t)
            ends.append(t + d)
            names.append(name)
            levels.append(watts)
            t += d + gap
    s, e = np.round(starts).astype(np.int64), np.round(ends).astype(np.int64)
    grid_ns = 50_000.0
    reach = sensor.window_ns + abs(sensor.delay_ns) + 2e6
    tg = np.arange(-reach - 200e6, t + reach + 200e6, grid_ns)
    k = np.searchsorted(s, tg + grid_ns / 2, side="right") - 1
    inside = (k >= 0) & (tg + grid_ns / 2 < e[np.clip(k, 0, None)])
    p = np.where(inside, np.asarray(levels)[np.clip(k, 0, None)], IDLE_W)
    logs = observe(tg, p, sensor, rng=np.random.default_rng([seed, 1]), start_ns=-100e6, stop_ns=t + 100e6,
                   noise_w=noise_w, poll_ns=poll_ns)
    one = [(1, 1, 1)] * len(s)
    kt = KernelTrace.from_rows(s + T0_NS, e + T0_NS, names, one, one, clock="CLOCK_REALTIME", source="synthetic")
    energy = {n: w * 1e-9 * float(np.mean((e - s)[np.asarray(names) == n])) for n, _, w in KERNELS}
    return SimApp(kt, np.round(logs["source_ts"]).astype(np.int64) + T0_NS, logs["total"].astype(np.float64), energy)


def smi_stamp(ns: int, zone: str) -> str:
    """nvidia-smi's timestamp of epoch ``ns``: local wall time in ``zone``, truncated to the millisecond."""
    d = datetime.datetime.fromtimestamp((ns // 1_000_000) / 1e3, ZoneInfo(zone))
    return d.strftime("%Y/%m/%d %H:%M:%S.") + f"{(ns // 1_000_000) % 1000:03d}"


def write_nvidia_smi(path: str, app: SimApp, zone: str = "Europe/Berlin", *, other_gpu: bool = True,
                     column: str = "power.draw.instant") -> str:
    """``nvidia-smi --query-gpu=timestamp,index,power.draw,<column> --format=csv -lms N`` of the logs (GPU 0),
    a second GPU interleaved (idle, its instant field ``[N/A]`` now and then)."""
    lines = [f"timestamp, index, power.draw [W], {column} [W]"]
    for k, (ns, w) in enumerate(zip(app.stamps_ns, app.watts)):
        stamp = smi_stamp(int(ns), zone)
        lines.append(f"{stamp}, 0, {w:.2f} W, {w:.2f} W")
        if other_gpu:
            lines.append(f"{stamp}, 1, 61.00 W, {'[N/A]' if k % 7 == 0 else '60.00 W'}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_amd_smi(path: str, app: SimApp) -> str:
    """``amd-smi metric -p --csv -w N`` of the logs with the watch mode's timestamp column (epoch seconds, ms)."""
    lines = ["timestamp,gpu,socket_power,gfx_voltage,soc_voltage,mem_voltage,power_management,throttle_status"]
    lines += [f"{ns // 1_000_000 / 1e3:.3f},0,{w:.0f},N/A,N/A,N/A,ENABLED,UNTHROTTLED"
              for ns, w in zip(app.stamps_ns, app.watts)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def write_rocm_smi(path: str, app: SimApp) -> str:
    """``rocm-smi --showpower --csv`` run in a loop: each poll's header and one card's row, no time."""
    lines = []
    for w in app.watts:
        lines += ["device,Current Socket Graphics Package Power (W)", f"card0,{w:.1f}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def true_energy_j(app: SimApp, t_ns: np.ndarray) -> np.ndarray:
    """The application's energy (J) from its first kernel's start to each epoch time ``t_ns``, in closed form:
    idle power throughout, and each kernel's power above idle over the part of it before ``t``."""
    ex = app.trace.executions
    s, e = ex["start_ns"].astype(np.float64), ex["end_ns"].astype(np.float64)
    level = {str(name): w for name, _, w in KERNELS}
    above = np.array([level[str(app.trace.signatures["name"][k])] for k in ex["kernel_id"]]) - IDLE_W
    done = np.concatenate([[0.0], np.cumsum(above * (e - s))])
    t = np.asarray(t_ns, dtype=np.float64) - float(app.trace.origin_ns)
    j = np.searchsorted(s, t, side="right") - 1
    k = np.clip(j, 0, None)
    inside = np.where(j >= 0, above[k] * np.clip(t - s[k], 0.0, e[k] - s[k]), 0.0)
    return 1e-9 * (IDLE_W * t + np.where(j >= 0, done[k], 0.0) + inside)


def write_dcgmi(path: str, app: SimApp, *, counter_gain: Optional[float] = 1.0) -> str:
    """``dcgmi dmon -e 155,156 -d MS`` of the logs: the header and unit lines every 25 rows, no time; field 156
    (TOTEC) the true energy since a driver load 1 h before, times ``counter_gain``, in whole mJ (None:
    ``-e 155``, power alone)."""
    lines = []
    energy_mj = np.floor((counter_gain or 0.0) * (true_energy_j(app, app.stamps_ns) + 3600.0 * IDLE_W) * 1e3)
    for k, w in enumerate(app.watts):
        if k % 25 == 0:
            lines += ["#Entity   POWER    TOTEC", "ID        W        mJ"] if counter_gain is not None else [
                "#Entity   POWER", "ID        W"]
        lines.append(f"GPU 0     {w:<8.3f} {energy_mj[k]:.0f}" if counter_gain is not None else f"GPU 0     {w:.3f}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
