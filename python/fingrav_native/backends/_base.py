"""The backend protocol: what the FinGraV orchestrator needs from a device, and helpers every backend shares.

The orchestrator (:func:`fingrav_native.app.profile`) runs the paper's
eight steps (Section IV-B) against this small interface, so it cannot tell a
simulated GPU from a real one except through declared capabilities:

* ``execute_run`` launches one run (a kernel, or a sequence of kernels, back
  to back) and returns its :class:`RunRecord`: the raw power logs seen while
  it ran (SAMPLE_DTYPE, timestamps in the logger's clock), GPU-side begin/end
  markers of every execution in device-clock ticks, and bracketed clock reads
  taken around it;
* ``wait_idle`` lets the device return to idle between runs, measured from
  the power logs rather than a fixed sleep;
* ``capabilities`` says what the logger and markers are (period, averaging
  window, which clock stamps the logs);
* ``kernel_name``, ``new_run_id`` and ``read_clocks`` name a kernel, number
  the runs and take bracketed clock reads (host, device, host).

Optional capabilities are protocols of their own, each checked by its
``can_*`` function (which reads the members the protocol declares, so a
:class:`BackendWrapper` offers what its wrapped backend offers):

* :class:`Steerable`: ``wait_until(host_ns) -> int`` releases the next
  launch at a chosen host time and returns the host time reached (a target
  already past returns at once: ``wait_until(0)`` reads the time).
  Phase-steered campaigns (:mod:`fingrav_native.method`) need it, and fall
  back to random phase, saying so, on a backend without it;
* :class:`ArmedRelease`: ``release_at(host_ns)`` arms the next
  ``execute_run`` to launch at that time after its own setup (without it the
  campaign waits with ``wait_until`` before the run);
* :class:`VirtualTime`: ``advance_to(host_ns)`` lets a device on its own
  virtual clock sit idle until then (a resumed campaign, ``sync_report``).

Markers stay in device ticks until the whole campaign's clock reads are
fitted (:mod:`fingrav_native.clocks`), so a drifting clock is mapped by the
map fitted around each run, not by one offset taken at the start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence, Union, runtime_checkable

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in, whole_numbers
from fingrav_native.records._kernels import KernelSpec as KernelSpec  # re-exported: the protocol's kernel type
from fingrav_native.records._kernels import check_kernel_spec as check_kernel_spec
from fingrav_native.records._kernels import execution_plan as execution_plan
from fingrav_native.records._kernels import wait_for_idle as wait_for_idle
from fingrav_native.records._layouts import MARKER_RECORD_DTYPE as MARKER_RECORD_DTYPE  # what a backend returns
from fingrav_native.records._recording import Capabilities, RunRecord

if TYPE_CHECKING:
    from typing_extensions import TypeGuard



@runtime_checkable
class Backend(Protocol):
    """The interface the orchestrator drives (see the module docstring)."""

    @property
    def capabilities(self) -> Capabilities: ...

    def kernel_name(self, kernel: str | int) -> str: ...

    def new_run_id(self) -> int: ...

    def wait_idle(self) -> int: ...

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord: ...

    def read_clocks(self, n: int) -> np.ndarray: ...


class Steerable(Protocol):
    """Optional capability: launches released at a chosen host time (phase steering)."""

    def wait_until(self, host_ns: float) -> int: ...


class ArmedRelease(Protocol):
    """Optional capability: the next run's first launch armed for a host time, after the run's own setup."""

    def release_at(self, host_ns: float) -> None: ...


class VirtualTime(Protocol):
    """Optional capability: a device on a virtual clock, moved on while idle."""

    def advance_to(self, host_ns: int) -> None: ...


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The methods and properties a protocol declares (its own, not Protocol's machinery)."""
    return tuple(name for name, value in vars(protocol).items()
                 if not name.startswith("_") and (callable(value) or isinstance(value, property)))


def _offers(backend: object, protocol: type) -> bool:
    # getattr, not isinstance: Python 3.12's runtime protocols look attributes up statically, which would not see
    # what a BackendWrapper delegates through __getattr__.
    return all(callable(getattr(backend, name, None)) if callable(vars(protocol)[name]) else hasattr(backend, name)
               for name in protocol_members(protocol))


def is_backend(value: object) -> TypeGuard[Backend]:
    """Whether ``value`` offers every member of the :class:`Backend` protocol."""
    return _offers(value, Backend)


def can_steer(backend: object) -> TypeGuard[Steerable]:
    """Whether ``backend`` offers :class:`Steerable` (``wait_until``)."""
    return _offers(backend, Steerable)


def can_arm_release(backend: object) -> TypeGuard[ArmedRelease]:
    """Whether ``backend`` offers :class:`ArmedRelease` (``release_at``)."""
    return _offers(backend, ArmedRelease)


def can_advance(backend: object) -> TypeGuard[VirtualTime]:
    """Whether ``backend`` offers :class:`VirtualTime` (``advance_to``)."""
    return _offers(backend, VirtualTime)


class BackendWrapper:
    """A backend that delegates every call to another: subclass to record, lock or time its calls.

    The four calls that drive the device go through :meth:`_around`, so a
    wrapper that treats them alike (a lock shared by the ranks of a node, a
    timer of the simulator's cost) overrides one method; one that needs a
    call's result (keeping each run's clock reads) overrides that call.
    Anything else (``advance_to``, ``gpu``, ...) is the wrapped backend's own.

    Parameters
    ----------
    inner : Backend
        The backend wrapped.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner

    def _around(self, call: Callable[..., Any], *args: Any) -> Any:
        """Run one of the four device calls; the default just calls it."""
        return call(*args)

    @property
    def capabilities(self) -> Capabilities:
        """The wrapped backend's capabilities."""
        return self.inner.capabilities

    def kernel_name(self, kernel: str | int) -> str:
        """The wrapped backend's name of ``kernel``."""
        return self.inner.kernel_name(kernel)

    def new_run_id(self) -> int:
        """A run id from the wrapped backend."""
        return int(self._around(self.inner.new_run_id))

    def wait_idle(self) -> int:
        """The wrapped backend's wait for idle."""
        return int(self._around(self.inner.wait_idle))

    def read_clocks(self, n: int) -> np.ndarray:
        """The wrapped backend's bracketed clock reads."""
        return np.asarray(self._around(self.inner.read_clocks, n))

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        """One run on the wrapped backend."""
        rec: RunRecord = self._around(self.inner.execute_run, kernel, executions, run)
        return rec

    def __getattr__(self, name: str) -> Any:
        # Only reached for what this class does not define.
        if name == "inner":  # not set yet (copy/unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


class HostRelease:
    """Phase-steered launches on the host clock: the release that hardware (and live) backends share.

    A backend that mixes this in offers ``wait_until`` (the campaign reads
    the time with ``wait_until(0)``) and ``release_at``: the next
    ``execute_run`` does its own setup (sampler started, clock reads taken),
    then calls :meth:`_released` right before its first launch, which sleeps
    then spins (:func:`fingrav_native._core.wait_until_ns`, GIL released)
    until the armed host time. The setup's jitter stays out of the launch
    time (equivalent-time sampling, :mod:`fingrav_native.method`).
    """

    _release_ns: Optional[float] = None

    def wait_until(self, host_ns: float) -> int:
        """Wait until host time (CLOCK_MONOTONIC_RAW ns) ``host_ns``; return the host time at wake-up."""
        return int(_core.wait_until_ns(int(np.ceil(float(host_ns)))))

    def release_at(self, host_ns: float) -> None:
        """Arm the next ``execute_run`` to release its first launch at host time ``host_ns``."""
        self._release_ns = float(host_ns)

    def _released(self) -> Optional[float]:
        """Inside ``execute_run``, right before the first launch: wait for an armed release.

        Returns
        -------
        float or None
            How late the release was (ns; the setup outlasted the steerer's
            lead), or None when none was armed.
        """
        release, self._release_ns = self._release_ns, None
        if release is None:
            return None
        return float(self.wait_until(release) - release)


class LivePower:
    """A backend whose runs poll a live power source (``self._power``) lends it out, read-only.

    For recording power while an application runs
    (:class:`~fingrav_native.app.PowerRecorder`): a second
    Sampler may poll it while no run is in progress; its logs are stamped in
    the clock the backend's ``capabilities`` name (``logger_clock``).
    """

    _power: _core.PowerSource

    @property
    def power_source(self) -> _core.PowerSource:
        """The power source each run's Sampler polls."""
        return self._power


def drain_all(sampler: "_core.Sampler") -> np.ndarray:
    """Everything a stopped sampler kept (an empty SAMPLE_DTYPE array when it kept nothing)."""
    return sampler.drain()


def marker_records(run: int, kernel_id: "int | Sequence[int]", ticks: np.ndarray, host_launch_ns: np.ndarray,
                   host_sync_ns: int) -> np.ndarray:
    """MARKER_RECORD_DTYPE rows from a probe's slots, as the hardware backends write them.

    Parameters
    ----------
    run : int
        Run id.
    kernel_id : int or sequence of int
        Kernel id of every execution (or one for all).
    ticks : numpy.ndarray
        Device-clock slots: begin of execution i at ``2 i``, its end at ``2 i + 1``.
    host_launch_ns : numpy.ndarray
        Host time of each execution's launch call.
    host_sync_ns : int
        Host time the run's completion was seen (recorded on the last execution).

    Returns
    -------
    numpy.ndarray

    Notes
    -----
    Paper Section IV-B step 2: GPU-side start and end of every execution.
    """
    launch = whole_numbers(host_launch_ns, "host_launch_ns", -(2**63), 2**63 - 1).ravel()
    n = len(launch)
    ticks = whole_numbers(ticks, "ticks", -(2**63), 2**63 - 1).ravel()  # the markers' int64 ticks
    if len(ticks) < 2 * n:
        raise ValueError(f"ticks: {len(ticks)} slots for {n} executions; a probe writes two per execution")
    integer_in(run, "run", 0, 2**31 - 1)  # MARKER_RECORD_DTYPE's int32
    integer_in(host_sync_ns, "host_sync_ns", -(2**63))
    kid: Union[int, np.ndarray]
    if isinstance(kernel_id, (int, np.integer)) and not isinstance(kernel_id, (bool, np.bool_)):
        kid = integer_in(kernel_id, "kernel_id", -(2**31), 2**31 - 1)
    else:
        kid = whole_numbers(kernel_id, "kernel_id", -(2**31), 2**31 - 1)
        if kid.shape != (n,):
            raise ValueError(f"kernel_id: one per execution ({n}) or one for all, got shape {kid.shape}")
    host_launch_ns = launch
    markers = np.zeros(n, dtype=MARKER_RECORD_DTYPE)
    markers["run"] = run
    markers["index"] = np.arange(n)
    markers["kernel_id"] = kid
    markers["begin_ticks"] = ticks[0:2 * n:2]
    markers["end_ticks"] = ticks[1:2 * n:2]
    markers["host_launch_ns"] = host_launch_ns
    markers["host_sync_ns"] = -1
    if n:
        markers["host_sync_ns"][-1] = host_sync_ns
    return markers
