"""Kernels that run at once: compute overlapped by communication, attributed with an additive level.

In distributed training a few NCCL/RCCL communication kernels run on their own streams through most
of the compute kernels (37-75 % of compute executions overlap one on real DDP/FSDP traces). A log
taken while two kernels run measures both; leaving every overlapped execution out leaves most of the
trace unattributed. Communication kernels draw little compute power and nearly the same power
whatever runs beside them (links and copy engines), so they are modelled as an additive level: power =
idle + the running compute signature's draw + ``level`` while a communication kernel runs, fitted by
least squares over every instantaneous log (each column an indicator of what was running at the log's
time; Kay 1993, the linear model). The logs taken during communication have that level subtracted
before the compute kernels are attributed. Compute kernels that overlap each other are left out of the
signatures' fits (two compute kernels share the device in proportions no log can tell); their spans are
attributed jointly (insitu._concurrent).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import scipy.sparse

from fingrav_native.insitu._trace import KernelTrace, overlapping
from fingrav_native.method._joint import merged_intervals

#: Communication kernels by name: NCCL and RCCL collectives and point-to-point.
COMMUNICATION = re.compile(r"nccl|rccl|allreduce|allgather|reducescatter|sendrecv|all_reduce|all_gather|"
                           r"reduce_scatter|alltoall", re.IGNORECASE)


def is_communication(names: np.ndarray) -> np.ndarray:
    """Per signature name, whether it is a communication kernel (NCCL, RCCL collectives)."""
    return np.array([_communication_name(str(n)) for n in names], dtype=bool)


@functools.lru_cache(maxsize=4096)
def _communication_name(name: str) -> bool:
    # One search per name however often a trace's names are asked (names of 2,000 characters are common).
    return bool(COMMUNICATION.search(name))


def running(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Whether any of the intervals ``[start, end)`` holds each time ``t``."""
    return (np.searchsorted(np.sort(start), t, side="right") - np.searchsorted(np.sort(end), t, side="right")) > 0


@dataclass(frozen=True)
class CommunicationLevel:
    """The communication kernels' additive power: the fitted level, its standard error and the logs behind it."""

    level_w: float
    se_w: float
    logs_during: int


def communication_level(t: np.ndarray, power: np.ndarray, start: np.ndarray, end: np.ndarray, kernel_id: np.ndarray,
                        comm: np.ndarray) -> CommunicationLevel:
    """Least squares of each log's power on what was running: idle, each compute signature, communication.

    Parameters
    ----------
    t, power : numpy.ndarray
        Instantaneous logs on the trace's timeline (ns) and their power (W).
    start, end, kernel_id : numpy.ndarray
        The device's executions.
    comm : numpy.ndarray of bool
        Per execution, a communication kernel.

    Returns
    -------
    CommunicationLevel
        NaN level where no log falls while communication runs.
    """
    ok = np.isfinite(power)
    t, y = t[ok], power[ok]
    during = running(t, start[comm], end[comm]) if comm.any() else np.zeros(len(t), dtype=bool)
    if not during.any():
        return CommunicationLevel(float("nan"), float("nan"), 0)
    # Logs inside compute executions first: a signature's power is its own wherever it runs, so one seen
    # both with and without communication beside it measures the level. Gaps relax from the kernel before
    # them (a level shared by every gap is wrong by tens of watts), and launch gaps inside a communication
    # kernel put that misfit into the level: 69 W for 60 W on a simulated DDP loop.
    inside = running(t, start[~comm], end[~comm])
    got = _level_fit(t[inside], y[inside], start, end, kernel_id, comm, intercept=False)
    if got is None:
        got = _level_fit(t, y, start, end, kernel_id, comm, intercept=True)
    if got is None:
        return CommunicationLevel(float("nan"), float("nan"), int(during.sum()))
    return CommunicationLevel(got[0], got[1], int(during.sum()))


def _level_fit(t: np.ndarray, y: np.ndarray, start: np.ndarray, end: np.ndarray, kernel_id: np.ndarray,
               comm: np.ndarray, intercept: bool) -> Optional[tuple[float, float]]:
    """The communication's level and standard error by least squares on indicator columns; None where the
    logs do not determine it (every signature seen beside communication is always seen so, and no intercept)."""
    if not len(t):
        return None
    during = running(t, start[comm], end[comm])
    # Sparse indicator columns (a log sees one or two kernels): idle, each compute signature, communication.
    rows, cols = [np.arange(len(t))] if intercept else [], [np.zeros(len(t), dtype=np.int64)] if intercept else []
    sigs = np.unique(kernel_id[~comm])
    for j, k in enumerate(sigs, start=1):
        sel = (kernel_id == k) & ~comm
        hit = np.flatnonzero(running(t, start[sel], end[sel]))
        rows.append(hit)
        cols.append(np.full(len(hit), j, dtype=np.int64))
    hit = np.flatnonzero(during)
    rows.append(hit)
    cols.append(np.full(len(hit), len(sigs) + 1, dtype=np.int64))
    r, c = np.concatenate(rows), np.concatenate(cols)
    A = scipy.sparse.csr_matrix((np.ones(len(r)), (r, c)), shape=(len(t), len(sigs) + 2))
    # Normal equations: columns are few (signatures), logs many.
    G = (A.T @ A).toarray()
    Gi = np.linalg.pinv(G)
    # The level is determined only where its direction lies in G's row space (a signature never seen
    # alone is a null direction of G; without the intercept, so is the idle column).
    if not abs(float((G @ Gi)[-1, -1]) - 1.0) < 1e-6:
        return None
    x = Gi @ (A.T @ y)
    resid = y - A @ x
    dof = max(len(y) - int(np.linalg.matrix_rank(G)), 1)
    var = float(Gi[-1, -1]) * float(resid @ resid) / dof
    return float(x[-1]), float(np.sqrt(max(var, 0.0)))


def communication_overlap(kt_start: np.ndarray, kt_end: np.ndarray, device: np.ndarray, kernel_id: np.ndarray,
                          names: np.ndarray, on_device: np.ndarray,
                          conc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per execution: a communication kernel of the device; compute overlapped by communication alone; compute
    overlapped by other compute (``conc``: executions that overlap any other on their device)."""
    comm = is_communication(names)[kernel_id] & on_device
    if not comm.any():
        nothing = np.zeros(len(kt_start), dtype=bool)
        return comm, nothing, conc & on_device
    compute = on_device & ~comm
    compute_conc = overlapping(kt_start, kt_end, device, compute)
    return comm, compute & conc & ~compute_conc, compute_conc


def beside_compute(start: np.ndarray, end: np.ndarray, kernel_id: np.ndarray, comm: np.ndarray,
                   compute: np.ndarray) -> np.ndarray:
    """Per execution, a communication kernel whose signature mostly runs beside compute: an additive level.

    Parameters
    ----------
    start, end, kernel_id : numpy.ndarray
        Per execution of the trace.
    comm, compute : numpy.ndarray of bool
        Communication and compute executions of one device.

    Returns
    -------
    numpy.ndarray of bool
        The executions of every communication signature at least half of
        whose executions overlap a compute execution. A log taken beside
        compute measures both, so such a signature is the level it adds over
        whatever runs (CompPow's accounting of concurrent execution, Li et
        al. 2024); one that mostly runs alone is a kernel like any other, its
        whole power over its executions.
    """
    out = np.zeros(len(start), dtype=bool)
    idx = np.flatnonzero(comm)
    if not len(idx) or not compute.any():
        return out
    a, b = merged_intervals(start[compute].astype(np.float64), end[compute].astype(np.float64))
    s, e = start[idx].astype(np.float64), end[idx].astype(np.float64)
    # A compute interval of the union ends after s and starts before e.
    hit = np.searchsorted(a, e, side="left") > np.searchsorted(b, s, side="right")
    share = np.bincount(kernel_id[idx], weights=hit, minlength=int(kernel_id.max()) + 1) / np.maximum(
        np.bincount(kernel_id[idx], minlength=int(kernel_id.max()) + 1), 1)
    out[idx] = share[kernel_id[idx]] >= 0.5
    return out


def split_time(a: np.ndarray, b: np.ndarray, c_a: np.ndarray, c_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per interval ``[a, b)``: its time with none of the intervals ``[c_a, c_b)`` running and with one running.

    Parameters
    ----------
    a, b : numpy.ndarray
        The intervals measured (communication kernels), ns.
    c_a, c_b : numpy.ndarray
        The intervals that may run beside them (compute kernels), ns; they may overlap one another.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Exposed and overlapped time per interval (ns); they add up to ``b - a``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not len(c_a):
        return b - a, np.zeros(len(a))
    u_a, u_b = merged_intervals(np.asarray(c_a, dtype=np.float64), np.asarray(c_b, dtype=np.float64))
    # Time covered by the union up to x: cumulative lengths of the intervals before, plus the part of the one in.
    done = np.concatenate([[0.0], np.cumsum(u_b - u_a)])

    def covered(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(u_a, x, side="right")
        inside = np.clip(x - u_a[np.maximum(k - 1, 0)], 0.0, (u_b - u_a)[np.maximum(k - 1, 0)])
        return np.asarray(done[np.maximum(k - 1, 0)] + np.where(k > 0, inside, 0.0), dtype=np.float64)

    over = covered(b) - covered(a)
    return b - a - over, over


def keep_overlapped_compute(kt_start: np.ndarray, kt_end: np.ndarray, device: np.ndarray, kernel_id: np.ndarray,
                            names: np.ndarray, on_device: np.ndarray, conc: np.ndarray, t_logs: np.ndarray,
                            power: np.ndarray, notes: list[str]
                            ) -> tuple[np.ndarray, np.ndarray, Optional[CommunicationLevel]]:
    """Compute executions overlapped only by communication kept, and the logs to attribute them with.

    Parameters
    ----------
    kt_start, kt_end, device, kernel_id : numpy.ndarray
        Per execution of the trace.
    names : numpy.ndarray
        Per signature, its name.
    on_device : numpy.ndarray of bool
        Executions of the device the logs belong to.
    conc : numpy.ndarray of bool
        Executions that overlap any other on their device.
    t_logs, power : numpy.ndarray
        Instantaneous logs on the trace's timeline and their total power.
    notes : list of str
        What was kept, subtracted and left out is said here.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, CommunicationLevel or None)
        The executions still left out, the power to attribute the
        compute kernels with (the communication level subtracted while a
        communication kernel runs), and the level; ``conc`` and ``power``
        unchanged, and None, where nothing is overlapped by communication
        alone.
    """
    comm, over, compute_conc = communication_overlap(kt_start, kt_end, device, kernel_id, names, on_device, conc)
    if not over.any():
        return conc, power, None
    compute = on_device & ~comm
    dev = np.flatnonzero(on_device)
    lvl = communication_level(t_logs, power, kt_start[dev], kt_end[dev], kernel_id[dev], comm[dev])
    if not np.isfinite(lvl.level_w):
        notes.append(f"{int(over.sum())} of {int(compute.sum())} compute executions overlapped a communication kernel "
                     "and no log fell while one ran: left out")
        return conc, power, None
    during = running(t_logs, kt_start[comm], kt_end[comm])
    adjusted = np.where(during, power - lvl.level_w, power)
    kinds = sorted({str(n)[:40] for n in np.unique(names[kernel_id[comm]])})[:3]
    notes.append(f"{int(over.sum())} of {int(compute.sum())} compute executions overlapped a communication kernel "
                 f"({', '.join(kinds)}{', ...' if len(kinds) == 3 else ''}): kept, with the communication's "
                 f"additive level {lvl.level_w:.1f} +- {1.96 * lvl.se_w:.1f} W (least squares over the logs, "
                 f"{lvl.logs_during} taken while one ran) subtracted from the logs taken while it ran; "
                 f"{int(compute_conc.sum())} overlapped another compute kernel: left out of the signatures' fits "
                 "(their spans attributed jointly, TraceProfile.concurrency)")
    return conc & ~over, adjusted, lvl


def communication_split(note: str, kt: KernelTrace, it_of: np.ndarray, iterations: np.ndarray, comm: np.ndarray,
                        compute: np.ndarray, table: np.ndarray, sig_rows: np.ndarray) -> dict[str, Any]:
    """The communication's time and energy per steady iteration, split into exposed and overlapped.

    Parameters
    ----------
    note : str
        The iteration summary's note, to add to.
    kt : KernelTrace
    it_of : numpy.ndarray
        Per execution, its row of ``iterations`` by step (:meth:`KernelTrace.iteration`), -1 for none.
    iterations : numpy.ndarray
        ITERATION_DTYPE rows; their ``steady`` flag picks the iterations averaged over.
    comm, compute : numpy.ndarray of bool
        Per execution, the device's communication and compute kernels.
    table, sig_rows : numpy.ndarray
        The kernel table and each row's signature id.

    Returns
    -------
    dict
        The ``comm_*`` fields of :class:`~fingrav_native.insitu.IterationSummary` (and ``note`` where a
        communication signature has no energy); empty without a steady iteration.

    Notes
    -----
    CompPow (Li et al., 2024) accounts for communication by whether compute
    runs beside it: the exposed part costs the iteration time and its own
    power, the overlapped part only what it adds. Each communication
    execution's time is split by the union of the compute executions; its
    energy is its row's power (the additive level for a joint attribution,
    its whole power for one that runs alone) over each part.
    """
    steps = iterations["step"][iterations["steady"]]
    if not len(steps) or not comm.any():
        return {}
    ex = kt.executions
    step_of = np.where(it_of >= 0, kt.steps["step"][np.clip(it_of, 0, None)] if len(kt.steps) else -1, -1)
    mine = comm & np.isin(step_of, steps)
    exposed, over = split_time(ex["start_ns"][mine], ex["end_ns"][mine], ex["start_ns"][compute],
                               ex["end_ns"][compute])
    row = np.full(len(kt.signatures), -1, dtype=np.int64)
    own = np.asarray(sig_rows) >= 0  # the joint row [g] has no signature of its own
    row[sig_rows[own]] = np.flatnonzero(own)
    r = row[ex["kernel_id"][mine]]
    n = len(steps)
    out: dict[str, Any] = {"comm_exposed_ns": float(np.sum(exposed)) / n, "comm_overlapped_ns": float(np.sum(over)) / n}
    if np.any(r < 0) or not np.all(np.isfinite(table["energy_j"][r[r >= 0]])):
        note = "; ".join(x for x in (note, "a communication signature has no energy: the communication's energy "
                                     "per iteration is not reported") if x)
        return {**out, "note": note}
    # Energy per ns of each execution's row: its energy and interval over its duration (a level's is the level).
    rate = table["energy_j"][r] / table["duration_ns"][r]
    half = table["energy_half_width_j"][r] / table["duration_ns"][r]
    return {**out, "comm_exposed_j": float(np.sum(rate * exposed)) / n,
            "comm_overlapped_j": float(np.sum(rate * over)) / n,
            "comm_exposed_half_width_j": float(np.sum(half * exposed)) / n,
            "comm_overlapped_half_width_j": float(np.sum(half * over)) / n}
