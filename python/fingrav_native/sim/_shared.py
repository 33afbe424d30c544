"""One simulated GPU shared by the recorder and a simulated application in another process.

``fingrav run --device sim -- APP`` runs APP as a child process, and the
recorder in the parent samples the power of the GPU APP launches on; on the
simulator the two processes must see the same GPU, as on hardware the
application and the power sensor share one. The parent creates the device
with :meth:`SharedSimGPU.create`: a file holding the device's parameters,
the host time its clocks are anchored at, and a lock-free ring of published
power logs (``csrc/fingrav/sim/shared_device.hpp``). The application,
``fingrav-sim-app`` (:func:`app_path`), opens it through the environment
variable ``FINGRAV_SIM_DEVICE``, runs the simulated device in real time with
those parameters, publishes each log when the simulated firmware makes it
visible to the host, reports each kernel execution through a stand-in vendor
runtime, and at exit writes the simulator's truth beside the file
(:meth:`SharedSimGPU.truth`).

Examples
--------
>>> import os, subprocess, tempfile
>>> from fingrav_native.sim import SharedSimGPU, app_path
>>> folder = tempfile.mkdtemp()
>>> gpu = SharedSimGPU.create(os.path.join(folder, "gpu.sim"), seed=1)
>>> gpu.state
'waiting'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in, real_number, short_repr
from fingrav_native._tools import installed_file
from fingrav_native.records._log_layouts import SCORE_DTYPE
from fingrav_native.sensors._model import SensorModel, as_sensor
from fingrav_native.sim._device import device_params, sensor_of_params

#: The environment variable that names the shared device file to the application.
DEVICE_ENV = _core.SHARED_SIM_DEVICE_ENV

_APP_NAME = "fingrav-sim-app"


def app_path() -> str:
    """The simulated application's executable, ``fingrav-sim-app``, installed with the simulator.

    Returns
    -------
    str
        Its path (``fingrav_native/sim/bin/fingrav-sim-app`` in the installed
        package, or in the package folder of a development checkout).

    Raises
    ------
    FileNotFoundError
        Naming every place looked in and how to build it.

    Notes
    -----
    Usage: ``fingrav-sim-app --vendor rocm|cuda [--standin PATH]
    [--workload train-step|gemm-loop] [--seconds S | --iterations N]
    [--seed N] [--rate R]`` (default: one second). ``train-step`` loops a
    training step of five kernels from 26 us to 2.5 ms (norm-like and
    memory-bound GEMVs, GEMMs, one over the power cap, a gradient
    all-reduce on its own queue) with a random host gap of 0.2-1.5 ms
    between steps (``--seed``), so kernels fall at every phase of the
    logger; ``gemm-loop`` repeats bursts of CB-4K GEMM. with ``FINGRAV_SIM_DEVICE`` naming a file made
    by :meth:`SharedSimGPU.create`. The stand-in vendor runtime is
    ``--standin``, else ``FINGRAV_STANDIN_LIBRARY``, else the vendor's
    stand-in installed with it (:func:`standin_library`). ``--rate R`` delivers R dispatch records
    per second (at most 10^5) without simulating the kernels, for the
    overhead bench. SIGTERM and SIGINT end the run cleanly (stand-in
    flushed and shut down, truth written), then the process ends by that
    signal.
    """
    path, tried = installed_file("sim", "bin", _APP_NAME, executable=True)
    if path is not None:
        return path
    raise FileNotFoundError(f"{_APP_NAME}: the simulated application is not built (looked in "
                            f"{', '.join(tried)}); it is built and installed with the package: "
                            "pip install -e . (or pip install fingrav-native)")


def _alive(pid: int) -> bool:
    # A process that exists, a zombie not yet reaped included (its parent has not seen it end).
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True




@dataclass(frozen=True)
class SharedSimTruth:
    """What the simulated application really did, written by it at exit beside the device file.

    Times are host time (CLOCK_MONOTONIC_RAW ns), the recorder's timeline.

    Attributes
    ----------
    executions : numpy.ndarray
        One row per kernel execution: ``kernel`` (bytes), ``kernel_id``,
        ``run`` (the iteration), ``start_ns``, ``end_ns``, ``energy_j`` (exact
        energy from the truth power), ``mean_total_w``, ``mean_compute_w``,
        ``mean_io_w``, ``mean_memory_w``.
    kernels : numpy.ndarray
        One row per kernel name: ``kernel``, ``count``, ``busy_ns``,
        ``energy_j``, ``mean_power_w`` (energy over busy time).
    energy : numpy.ndarray
        ``t_ns``, ``energy_j``: the exact cumulative energy of total power
        every 100 us over the whole run, idle time included.
    meta : dict
        ``workload``, ``vendor``, ``seed``, ``attach_ns``, ``detach_ns``,
        ``dispatched`` (records handed to the stand-in), ``dispatch_errors``,
        ``logs_published``, ``signal`` (the signal that ended it, 0 none).
    """

    executions: np.ndarray
    kernels: np.ndarray
    energy: np.ndarray
    meta: dict[str, Any]

    def energy_between(self, t0_ns: float, t1_ns: float) -> float:
        """The exact energy of total power over ``[t0_ns, t1_ns]``, J (linear between the 100 us samples).

        Raises ValueError naming the bound outside the span the truth covers.
        """
        t0 = real_number(t0_ns, "t0_ns")
        t1 = real_number(t1_ns, "t1_ns", low=t0)
        t = self.energy["t_ns"]
        if len(t) < 2 or t0 < t[0] or t1 > t[-1]:
            span = f"[{int(t[0])}, {int(t[-1])}]" if len(t) else "empty"
            raise ValueError(f"t0_ns={t0_ns!r}, t1_ns={t1_ns!r}: outside the span the truth covers ({span} ns)")
        e = np.interp([t0, t1], t.astype(np.float64), self.energy["energy_j"])
        return float(e[1] - e[0])

    def score(self, profile: Any) -> np.ndarray:
        """Each kernel of a trace profile of this run against the truth of the same quantity.

        The table's ``energy_j`` is FinGraV's energy per execution of
        interest (paper Section IV-B, steps 5-8): the logs of interest of the
        *golden* executions (those in the fullest execution-time bin, Table
        I's margin, past the warm-up) stitched over the fraction of the
        execution and integrated over the golden executions' median duration.
        Its truth is the mean exact energy of those same golden executions
        (``truth_golden_j``), not of every execution of the kernel
        (``truth_all_j``): the two differ wherever the kernel's durations
        spread wider than one bin (a throttled GEMM, clocks parked before a
        burst).

        Parameters
        ----------
        profile : TraceProfile
            What :func:`~fingrav_native.profile_trace` made of this run's
            launch records and power (``fingrav run``'s table): its
            ``kernels``, ``profiles`` (their golden run ids) and ``trace``.

        Returns
        -------
        numpy.ndarray
            One row per table row: ``kernel``, ``executions``, ``golden``,
            ``estimate_j``, ``half_width_j``, ``truth_golden_j``,
            ``truth_all_j``, ``error`` (estimate over ``truth_golden_j``,
            minus one), ``error_all``, ``covered`` (the golden truth inside
            the estimate's interval).

        Raises
        ------
        ValueError
            ``profile`` is not a trace profile, or its trace holds a kernel's
            executions in another number than the truth does (a trace of
            another run).
        """
        kernels, profiles, trace = (getattr(profile, a, None) for a in ("kernels", "profiles", "trace"))
        if kernels is None or profiles is None or trace is None:
            raise ValueError(f"profile={short_repr(profile)}: must be a TraceProfile (profile_trace's result)")
        names = self.executions["kernel"].astype(str)
        t_start = self.executions["start_ns"]
        sig_names = np.asarray(trace.signatures["name"]).astype(str)
        tex = trace.executions
        tex_names = sig_names[tex["kernel_id"]]
        rows = np.zeros(len(kernels), dtype=SCORE_DTYPE)
        for i, (k, ep) in enumerate(zip(kernels, profiles)):
            name = str(k["name"])
            mine = np.flatnonzero(names == name)
            theirs = np.flatnonzero(tex_names == name)
            if len(mine) != len(theirs):
                raise ValueError(f"profile: its trace holds {len(theirs)} executions of {name!r}, the truth "
                                 f"{len(mine)}: a profile of another run")
            # The k-th execution of a kernel in start order is the same one in the trace and in the truth.
            mine = mine[np.argsort(t_start[mine], kind="stable")]
            theirs = theirs[np.argsort(tex["start_ns"][theirs], kind="stable")]
            golden = np.isin(tex["run"][theirs], np.asarray(ep.golden.run_ids))
            energy = self.executions["energy_j"]
            est, truth_g, truth_a = float(k["energy_j"]), float(np.mean(energy[mine[golden]])), \
                float(np.mean(energy[mine]))
            rows[i] = (name, len(mine), int(golden.sum()), est, float(k["energy_half_width_j"]), truth_g, truth_a,
                       est / truth_g - 1.0, est / truth_a - 1.0, abs(est - truth_g) <= float(k["energy_half_width_j"]))
        return rows


class SharedSimGPU:
    """A simulated GPU in a file, shared with the application that runs on it.

    Make one with :meth:`create` (the recorder's side) or :meth:`open`.
    Before an application attaches and after it ends, its power source gives
    no logs: :attr:`state` says which (``"waiting"``, ``"attached"``,
    ``"detached"``). No idle power is made up for those spans, so every log
    recorded is one the application's device produced.
    """

    def __init__(self, device: _core.SharedSimDevice, sensor: Optional[SensorModel] = None) -> None:
        if not isinstance(device, _core.SharedSimDevice):
            raise ValueError(f"device={device!r}: must be a _core.SharedSimDevice; use SharedSimGPU.create or .open")
        self._dev = device
        self._sensor = sensor if sensor is not None else sensor_of_params(dict(device.params))

    @classmethod
    def create(cls, path: Union[str, os.PathLike[str]], *, seed: int = 0, sensor: SensorModel | str | None = None,
               capacity: Optional[int] = None, **params: float) -> SharedSimGPU:
        """Create the shared device file at ``path`` (the parent's side; never over an existing file).

        Parameters
        ----------
        path : str or path-like
            The file to create; its folder must exist. The application
            writes its truth beside it (``PATH.truth/``).
        seed : int
            Seed of every random stream of the device.
        sensor : SensorModel or str, optional
            The power sensor the logger simulates, as for
            :class:`~fingrav_native.sim.SimGPU`.
        capacity : int, optional
            Logs the ring holds (a power of two in [16, 2^24]; default
            16384, 16 s of 1 ms logs): a reader may fall that far behind.
        **params : float
            Any simulator parameter (:func:`~fingrav_native.sim.parameters`).

        Raises
        ------
        ValueError
            Naming the argument: an existing path, an unknown or invalid
            parameter, a bad capacity.
        OSError
            The file cannot be created.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        target = os.fspath(path)
        if os.path.lexists(target):
            raise ValueError(f"path={target!r}: exists; a shared device file is never written over "
                             "(remove it or choose another path)")
        folder = os.path.dirname(os.path.abspath(target))
        if not os.path.isdir(folder):
            raise ValueError(f"path={target!r}: its folder {folder!r} does not exist")
        seed = integer_in(seed, "seed", 0)
        merged = device_params(seed, sensor, params)
        cap = _core.SHARED_SIM_DEFAULT_CAPACITY if capacity is None else integer_in(capacity, "capacity", 16, 1 << 24)
        if cap & (cap - 1):
            raise ValueError(f"capacity={capacity!r}: must be a power of two in [16, 2^24]")
        try:
            dev = _core.SharedSimDevice.create(target, merged, capacity=cap)
        except RuntimeError as exc:
            raise OSError(str(exc)) from exc
        return cls(dev, as_sensor(sensor))

    @classmethod
    def open(cls, path: Union[str, os.PathLike[str]]) -> SharedSimGPU:
        """Open an existing shared device file (made by :meth:`create`).

        Raises ValueError naming the path when it is missing or not a shared device file.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        target = os.fspath(path)
        if not os.path.isfile(target):
            raise ValueError(f"path={target!r}: no such file")
        try:
            return cls(_core.SharedSimDevice.open(target))
        except RuntimeError as exc:
            raise ValueError(f"path={target!r}: {exc}") from exc

    # ------------------------------------------------------------------ state
    @property
    def device(self) -> _core.SharedSimDevice:
        """The underlying C++ object (for tool builders)."""
        return self._dev

    @property
    def path(self) -> str:
        """The shared device file."""
        return str(self._dev.path)

    @property
    def params(self) -> dict[str, float]:
        """Every parameter's value on this device."""
        return dict(self._dev.params)

    @property
    def sensor(self) -> SensorModel:
        """The sensor the logger simulates."""
        return self._sensor

    @property
    def state(self) -> str:
        """Whether an application runs on the device.

        ``"waiting"`` (none yet), ``"attached"`` (one runs), ``"detached"``
        (it ended and wrote its truth), or ``"lost"`` (its process is gone
        without detaching: killed, so no more logs will come and no truth
        was written).
        """
        state = str(self._dev.state)
        if state == "attached" and not _alive(int(self._dev.producer_pid)):
            return "lost"
        return state

    @property
    def published(self) -> int:
        """Logs the application has published into the ring."""
        return int(self._dev.published)

    def env(self) -> dict[str, str]:
        """The environment the application needs to find this device: ``{"FINGRAV_SIM_DEVICE": path}``."""
        return {DEVICE_ENV: os.path.abspath(self.path)}

    # ------------------------------------------------------------------ live
    def power_source(self, depth: int = 64) -> _core.SharedSimPowerSource:
        """The logger as a PowerSource for a live Sampler or PowerRecorder.

        The same source info (name, clock domain, tick, period) as
        :meth:`SimGPU.power_source <fingrav_native.sim.SimGPU.power_source>`;
        ``depth`` logs at most per poll (default 64: a sampler stalled for up
        to 64 logger periods, as a busy host stalls it, loses no log; a longer
        stall is counted in the sampler's ``source_missed``).
        """
        return _core.SharedSimPowerSource(self._dev, depth=integer_in(depth, "depth", 1, 128))

    def timestamp_source(self) -> _core.SharedSimTimestampSource:
        """The device clock as a TimestampSource: the application's clock model, each read costing the simulated round trip."""
        return _core.SharedSimTimestampSource(self._dev)

    # ------------------------------------------------------------------ truth
    @property
    def truth_path(self) -> str:
        """Where the application writes its truth: ``PATH.truth/``."""
        return self.path + ".truth"

    def truth(self) -> SharedSimTruth:
        """What the application did, from the truth it wrote at exit (see :class:`SharedSimTruth`).

        Raises
        ------
        FileNotFoundError
            No truth yet: the application has not ended, was killed before
            it could write it, or never ran (:attr:`state` says which).
        """
        folder = self.truth_path
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"{folder}: no truth from the simulated application (its state is "
                                    f"{self.state!r}: it writes the truth when it ends, also on SIGTERM/SIGINT, "
                                    "not when killed)")
        with open(os.path.join(folder, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("format") != "fingrav-sim-truth" or meta.get("version") != 1:
            raise ValueError(f"{folder}: not a simulated application's truth (format "
                             f"{meta.get('format')!r} version {meta.get('version')!r})")
        load = {name: np.load(os.path.join(folder, name + ".npy"), allow_pickle=False)
                for name in ("executions", "kernels", "energy")}
        return SharedSimTruth(load["executions"], load["kernels"], load["energy"], meta)
