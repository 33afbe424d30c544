"""What a device runs: the kernel description backends and the simulator share, and the plan of a run.

A run (paper Section IV-B) launches one kernel, or a sequence of kernels
back to back, some number of times; :data:`KernelSpec` says which and
:func:`execution_plan` checks it against the run's total. Every device
waits for idle between runs the same way (:func:`wait_for_idle`). They sit
below both ``backends/`` (the hardware and simulated backends) and ``sim/``
(the simulated node and its ranks), which take them from here rather than
from each other.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union, cast

import numpy as np

from fingrav_native._checks import instance_of, integer_in, positive_number, short_repr

#: A kernel, or a sequence of (kernel, executions) run back to back.
KernelSpec = Union[str, int, Sequence[tuple[Union[str, int], int]]]


def wait_for_idle(idle_level: Callable[[int], float], baseline_w: float, tolerance: float,
                  logger_period_ns: float, max_idle_ns: int) -> int:
    """Wait in chunks of 20 logger periods until one chunk's mean power is back near idle.

    Parameters
    ----------
    idle_level : callable
        ``idle_level(ns)`` lets ``ns`` pass and returns the mean logged total
        power over it (NaN when no log arrived, which counts as not idle).
    baseline_w : float
        Idle power measured when the backend was made.
    tolerance : float
        Relative excess over ``baseline_w`` that still counts as idle.
    logger_period_ns : float
        The logger's period (at most an hour).
    max_idle_ns : int
        Longest wait; a device still warm after it is used anyway.

    Returns
    -------
    int
        Nanoseconds waited.

    Notes
    -----
    Paper Section IV-B: every run starts from idle, so that runs share one
    power history and their logs can be stitched. Every backend waits this way.
    """
    if not callable(idle_level):
        raise ValueError(f"idle_level={short_repr(idle_level)}: must be a callable taking ns and returning W")
    baseline_w = positive_number(baseline_w, "baseline_w", allow_zero=True)
    tolerance = positive_number(tolerance, "tolerance")
    # A logger slower than an hour logs nothing a wait could use (and the chunk below overflows).
    logger_period_ns = positive_number(logger_period_ns, "logger_period_ns", upper=3.6e12)
    max_idle_ns = integer_in(max_idle_ns, "max_idle_ns", 0, 3_600 * 10**9)
    chunk = int(20 * logger_period_ns)
    waited = 0
    while waited < max_idle_ns:
        level = idle_level(chunk)
        waited += chunk
        if level <= baseline_w * (1 + tolerance):  # NaN compares False: keep waiting
            break
    return waited


def check_kernel_spec(kernel: Any, name: str = "kernel") -> bool:
    """Refuse what is no kernel by name; True for a sequence of (kernel, executions) pairs, False for one kernel.

    One kernel is a name, an id or a workload (anything with ``launch``); a
    sequence holds (kernel, executions) pairs with whole counts >= 1 (2.5
    executions was truncated to 2).
    """
    def single(k: Any) -> bool:
        return (isinstance(k, (str, int, np.integer)) and not isinstance(k, (bool, np.bool_))) or callable(
            getattr(k, "launch", None))
    if single(kernel):
        return False
    if isinstance(kernel, (list, tuple)) and kernel and all(
            isinstance(item, (list, tuple)) and len(item) == 2 and single(item[0]) for item in kernel):
        for _, count in kernel:
            integer_in(count, name, 1)
        return True
    raise ValueError(f"{name}={short_repr(kernel)}: must be a kernel (a name, an id or a Workload) or a non-empty "
                     "sequence of (kernel, executions) pairs")


def execution_plan(kernel: KernelSpec, executions: int, *, limit: int | None = None,
                   device: str = "the device") -> list[tuple[str | int, int]]:
    """A run's kernels as (kernel, executions) pairs, checked against the run's total.

    Parameters
    ----------
    kernel : KernelSpec
        One kernel, or a sequence of (kernel, executions) run back to back.
    executions : int
        Executions in the run (Section IV-B step 3); for a sequence, its total.
    limit : int, optional
        Most executions one run may have on this device (the simulator's is
        ``_core.SIM_MAX_PENDING_EXECUTIONS``): a larger run is refused here,
        by the argument's name, before anything is allocated or launched.
    device : str
        What the limit belongs to, for the message.

    Returns
    -------
    list of (str or int, int)
    """
    executions = integer_in(executions, "executions", 1)
    instance_of(device, "device", str, "the device's name in words, a str")
    if limit is not None and executions > integer_in(limit, "limit", 1):
        raise ValueError(f"executions={executions}: at most {limit} per run on {device} "
                         "(each execution is queued, simulated and recorded); run fewer")
    if not check_kernel_spec(kernel):
        return [(cast(Union[str, int], kernel), int(executions))]
    plan = [(k, int(c)) for k, c in cast(Sequence[tuple[Union[str, int], int]], kernel)]
    total = sum(c for _, c in plan)
    if total != executions:
        raise ValueError(f"executions={executions}: the sequence has {total} executions in all")
    return plan
