"""Kernels that run at once: compute overlapped by communication, attributed with an additive level.

In distributed training a few NCCL/RCCL communication kernels run on their own streams through most
of the compute kernels (37-75 % of compute executions overlap one on real DDP/FSDP traces). A log
taken while two kernels run measures both; leaving every overlapped execution out leaves most of the
trace unattributed. Communication kernels draw little compute power and nearly the same power
whatever runs beside them (links and copy engines), so they are modelled as an additive level: power =
idle + the running compute signature's draw + ``level`` while a communication kernel runs, fitted by
least squares over every instantaneous log (each column an indicator of what was running at the log's
time; Kay 1993, the linear model). The logs taken during communication have that level subtracted
before the compute kernels are attributed. Compute kernels that overlap each other stay left out: two
compute kernels share the device in proportions no log can tell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from fingrav_native.insitu._trace import overlapping

#: Communication kernels by name: NCCL and RCCL collectives and point-to-point.
COMMUNICATION = re.compile(r"nccl|rccl|allreduce|allgather|reducescatter|sendrecv|all_reduce|all_gather|"
                           r"reduce_scatter|alltoall", re.IGNORECASE)


def is_communication(names: np.ndarray) -> np.ndarray:
    """Per signature name, whether it is a communication kernel (NCCL, RCCL collectives)."""
    return np.array([bool(COMMUNICATION.search(str(n))) for n in names], dtype=bool)


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
    # Sparse indicator columns (a log sees one or two kernels): idle, each compute signature, communication.
    rows, cols = [np.arange(len(t))], [np.zeros(len(t), dtype=np.int64)]
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
    x = Gi @ (A.T @ y)
    resid = y - A @ x
    dof = max(len(y) - int(np.linalg.matrix_rank(G)), 1)
    # The level's standard error (a signature never seen alone is a null direction of G).
    var = float(Gi[-1, -1]) * float(resid @ resid) / dof
    return CommunicationLevel(float(x[-1]), float(np.sqrt(max(var, 0.0))), int(during.sum()))


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


def keep_overlapped_compute(kt_start: np.ndarray, kt_end: np.ndarray, device: np.ndarray, kernel_id: np.ndarray,
                            names: np.ndarray, on_device: np.ndarray, conc: np.ndarray, t_logs: np.ndarray,
                            power: np.ndarray, notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
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
    (numpy.ndarray, numpy.ndarray)
        The executions still left out, and the power to attribute the
        compute kernels with (the communication level subtracted while a
        communication kernel runs); ``conc`` and ``power`` unchanged where
        nothing is overlapped by communication alone.
    """
    comm, over, compute_conc = communication_overlap(kt_start, kt_end, device, kernel_id, names, on_device, conc)
    if not over.any():
        return conc, power
    compute = on_device & ~comm
    dev = np.flatnonzero(on_device)
    lvl = communication_level(t_logs, power, kt_start[dev], kt_end[dev], kernel_id[dev], comm[dev])
    if not np.isfinite(lvl.level_w):
        notes.append(f"{int(over.sum())} of {int(compute.sum())} compute executions overlapped a communication kernel "
                     "and no log fell while one ran: left out")
        return conc, power
    during = running(t_logs, kt_start[comm], kt_end[comm])
    adjusted = np.where(during, power - lvl.level_w, power)
    kinds = sorted({str(n)[:40] for n in np.unique(names[kernel_id[comm]])})[:3]
    notes.append(f"{int(over.sum())} of {int(compute.sum())} compute executions overlapped a communication kernel "
                 f"({', '.join(kinds)}{', ...' if len(kinds) == 3 else ''}): kept, with the communication's "
                 f"additive level {lvl.level_w:.1f} +- {1.96 * lvl.se_w:.1f} W (least squares over every log, "
                 f"{lvl.logs_during} taken while one ran) subtracted from the logs taken while it ran; "
                 f"{int(compute_conc.sum())} overlapped another compute kernel: left out")
    return conc & ~over, adjusted
