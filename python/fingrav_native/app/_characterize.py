"""Characterise a device's power sensor by driving it: a square wave of load, its logs, the fitted sensor.

The driver runs a heavy and a light kernel in alternating levels on the device, places every edge by
the kernels' GPU-side markers, and hands the logs to the pure fits of ``sensors/_characterize.py``
(:func:`~fingrav_native.sensors.estimate_period`, :func:`~fingrav_native.sensors.fit_load_response`),
which also serve logs recorded elsewhere (:func:`~fingrav_native.characterize_logs`).
"""

from __future__ import annotations

import math
from typing import Any, Optional, Union

import numpy as np

from fingrav_native._checks import instance_of, integer_in, positive_number
from fingrav_native.app._open import open_device
from fingrav_native.backends._base import Backend
from fingrav_native.clocks._runs import nominal_durations, timeline_of
from fingrav_native.records._recording import Capabilities
from fingrav_native.sensors._characterize import Characterisation, estimate_period
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sensors._response_fit import fit_load_response

#: The longest level: an hour (a count of executions beyond it is an absurd value, not a wave).
_MAX_HALF_NS = 3.6e12


def _half_period(half_period_ns: Optional[float], prior: SensorModel, reach: float) -> float:
    """Each level's length: the one asked (at least a tenth of the prior's period), else sized from the prior."""
    if half_period_ns is None:
        return max(5e6, 2.0 * prior.period_ns, 4.0 * reach)
    half = float(half_period_ns)
    if half < prior.period_ns / 10.0:
        raise ValueError(f"half_period_ns={half_period_ns!r}: levels of {half / 1e6:.3g} ms against a sensor that "
                         f"updates every {prior.period_ns / 1e6:.3g} ms cannot be resolved (each update sees "
                         f"{prior.period_ns / (2 * half):.0f} cycles); give at least {prior.period_ns / 1e7:.3g} ms "
                         "(a tenth of the period), or leave it out to size the wave from the sensor")
    return half


def _level_counts(backend: Backend, caps: Capabilities, kernels: tuple[Any, Any], half: float) -> list[int]:
    """Executions of each kernel that fill one level of the square wave (``half`` ns), each timed on the device."""
    counts = []
    for k in kernels:
        backend.wait_idle()
        rec = backend.execute_run(k, 5, backend.new_run_id())
        one = float(np.median(nominal_durations(rec.markers, caps.device_tick_ns)))
        if one > 2.0 * half:
            raise ValueError(f"half_period_ns={half:g}: one execution of {k!r} lasts {one / 1e3:.1f} us, so a level "
                             f"would last {one / 1e3:.1f} us, not the {half / 1e3:.3g} us asked; give at least "
                             f"{one:.0f} ns or a shorter kernel")
        counts.append(max(1, int(math.ceil(half / one))))
    return counts


def characterize(
    backend: Union[Backend, str],
    kernel: Any = "cb-8k-gemm",
    light: Any = "mb-2k-gemv",
    *,
    runs: int = 40,
    cycles: int = 4,
    half_period_ns: Optional[float] = None,
    prior: Optional[SensorModel] = None,
    channel: str = "total",
) -> Characterisation:
    """Measure a backend's power sensor with a load square wave: period, window and shape, delay, rise time.

    Parameters
    ----------
    backend : Backend or str
        The device (the simulator or a GPU): a backend, or a device string
        :func:`~fingrav_native.open_device` opens (``"sim"``, ``"nvidia:0"``).
    kernel, light : str, int or Workload
        A heavy kernel (default the simulator's CB-8K GEMM; on a GPU a large
        GEMM) and a light one (a small GEMV): the square wave's two levels.
        Both stay on the GPU, so every edge is logged inside a run and its
        time is known from the kernels' GPU-side markers.
    runs : int
        Runs; each puts its edges at a random phase against the sensor.
    cycles : int
        Heavy-light cycles per run.
    half_period_ns : float, optional
        Length of each level; default ``max(5 ms, 2 periods, 4 x (window +
        delay + 5 tau))`` of the prior, so the response settles in each. At
        least a tenth of the prior's period (a faster wave is averaged or
        aliased away before any log sees it) and half of one execution of
        each kernel (a level holds whole executions: one twice as long as
        asked would make another wave than the one asked); at most an hour.
    prior : SensorModel, optional
        What is believed of the sensor (default: the backend's declared
        capabilities); it only sizes the wave and the fit's first view.
    channel : str
        The power channel to fit.

    Returns
    -------
    Characterisation
        A SensorModel with ``source="characterised"`` that profiles can use
        (``stitch_logs(sensor=...)``), fitted by :func:`fit_load_response`
        to every log against the heavy executions' known times.

    Raises
    ------
    ValueError
        A bad argument (named); a wave the sensor cannot resolve (levels
        far shorter than its period, or than one execution); logs that do
        not follow the load (:func:`fit_load_response` refuses a fit whose
        load effect is within 3 standard errors of none, or whose errors are
        not finite).

    Notes
    -----
    Yang, Adamek and Armour (SC'24) drove square waves of load to find how
    NVIDIA's sensor averages; here the same, read as equivalent-time
    sampling:

    1. Time both kernels (5 executions each) to size the levels.
    2. Each run: ``cycles`` x (``kernel`` for half a period, ``light`` for
       half a period), back to back; wait for idle between runs.
    3. Place every log and execution on the host timeline through the runs'
       own clock maps (:func:`~fingrav_native.method._timeline.timeline_of`).
    4. Period from the logs' distinct timestamps; the sensor from every
       log against the heavy executions' times (:func:`fit_load_response`).
    """
    n_runs = integer_in(runs, "runs", 2, 100_000)
    n_cyc = integer_in(cycles, "cycles", 1, 1_000)
    instance_of(prior, "prior", (SensorModel, type(None)), "a SensorModel or None")
    instance_of(channel, "channel", str, "a power channel's name (a str)")
    if half_period_ns is not None:
        positive_number(half_period_ns, "half_period_ns", upper=_MAX_HALF_NS)
    # Like every driver, a device string ("sim", "nvidia:0") is opened through the one resolver.
    backend = open_device(backend)
    caps = backend.capabilities
    if prior is None:
        prior = SensorModel("declared", "window" if caps.logger_window_ns > 0 else "instant",
                            period_ns=caps.logger_period_ns, window_ns=caps.logger_window_ns, source="assumed")
    reach = prior.window_ns + prior.delay_ns + 5.0 * prior.tau_ns
    half = _half_period(half_period_ns, prior, reach)
    counts = _level_counts(backend, caps, (kernel, light), half)
    plan: list[tuple[Any, int]] = [(kernel, counts[0]), (light, counts[1])] * n_cyc
    total = sum(c for _, c in plan)
    records = []
    for _ in range(n_runs):
        backend.wait_idle()
        records.append(backend.execute_run(plan, total, backend.new_run_id()))
    tl = timeline_of(records, caps)
    if channel not in (tl.samples.dtype.names or ()):
        raise ValueError(f"channel={channel!r}: the logs have no such field")
    t = np.asarray(tl.logger_map.to_host(tl.samples["source_ts"]), dtype=np.float64)
    v = tl.samples[channel].astype(np.float64)
    period = estimate_period(t)
    ex = tl.executions
    heavy_id = int(np.sort(ex, order=["run", "index"])["kernel_id"][0])
    heavy = ex[ex["kernel_id"] == heavy_id]
    if len(heavy) == len(ex):
        raise ValueError("kernel, light: give two different kernels (the square wave's two levels)")
    try:
        step = fit_load_response(t, v, np.column_stack([heavy["start_ns"], heavy["end_ns"]]),
                                 scale_ns=max(reach, prior.period_ns / 4.0, 50_000.0), period_ns=period.period_ns)
    except ValueError as exc:
        raise ValueError(f"kernel, light: the {channel} logs of {n_runs} runs of {half / 1e6:.3g} ms levels "
                         f"({kernel} / {light}) do not characterise the sensor: {exc}") from None
    windowed = step.shape == "first_order" or step.window_ns > 0.02 * period.period_ns
    sensor = SensorModel(
        name=f"{caps.name} characterised", kind="window" if windowed else "instant", period_ns=period.period_ns,
        window_ns=step.window_ns if (step.shape == "boxcar" and windowed) else 0.0,
        shape=step.shape, tau_ns=step.tau_ns, delay_ns=step.delay_ns, source="characterised",
        notes=(f"{n_runs} runs of {n_cyc} heavy/light cycles of {half / 1e6:.1f} ms ({kernel} / {light}) "
               f"on {caps.device}"))
    return Characterisation(sensor=sensor, period=period, step=step, quantum=0.0, device=caps.device,
                            notes=sensor.notes)
