"""The plain arrays every FinGraV step consumes and produces.

Everything the analysis layer works on is a numpy structured array, so each
step also runs on logs a user brings from elsewhere (DESIGN.md, "Data flow"):

* ``samples`` — power logs, SAMPLE_DTYPE (from the C++ sampler, the
  simulator, or a user): ``source_ts`` in the logger's own clock, ``host_ns``
  the host time right after the read that saw the log, one column per channel.
* ``executions`` — EXECUTION_DTYPE: every execution's run, index within the
  run, kernel id, and start/end on the host timeline with the uncertainty of
  each (how well the GPU-side markers were placed).
* ``lois`` — LOI_DTYPE: logs of interest, i.e. logs placed inside an
  execution of interest, with their time of interest (TOI) and placement
  uncertainty (paper Section IV-A).

The clock maps that turn device or logger ticks into host time are objects
with ``to_host(ticks)`` and ``error_bound_at(host_ns)`` (see
:mod:`fingrav_native.clocks.maps`).
"""

from __future__ import annotations

import numpy as np

from fingrav_native._core import CHANNELS, SAMPLE_DTYPE

__all__ = ["CHANNELS", "EXECUTION_DTYPE", "LOI_DTYPE", "SAMPLE_DTYPE", "make_executions", "validate_executions"]

#: One execution of a kernel, on the host timeline (CLOCK_MONOTONIC_RAW ns).
EXECUTION_DTYPE = np.dtype(
    [
        ("run", "<i4"),           # run id
        ("index", "<i4"),         # execution index within the run (0 = first)
        ("kernel_id", "<i4"),
        ("start_ns", "<f8"),      # host time the execution started
        ("end_ns", "<f8"),        # host time it ended
        ("start_err_ns", "<f4"),  # half-width of the uncertainty of start_ns
        ("end_err_ns", "<f4"),    # ... and of end_ns
    ]
)

#: A log of interest: one power log placed inside one execution of interest.
LOI_DTYPE = np.dtype(
    [
        ("run", "<i4"),
        ("execution", "<i4"),     # execution index within the run
        ("kernel_id", "<i4"),
        ("seq", "<u8"),           # the log's sampler sequence number
        ("host_ns", "<f8"),       # the log's time on the host timeline (window end if windowed)
        ("window_ns", "<f8"),     # averaging window ending at host_ns (0 = instantaneous)
        ("toi_ns", "<f8"),        # time of interest: execution start to the log (windowed: centre of the window's part inside the execution)
        ("toi_frac", "<f8"),      # toi_ns / duration_ns
        ("duration_ns", "<f8"),   # the execution's duration
        ("uncert_ns", "<f8"),     # placement uncertainty of toi_ns (half-width)
        ("overlap", "<f4"),       # share of the log's window inside the execution (1 if instantaneous)
        ("total", "<f4"),
        ("compute", "<f4"),
        ("io", "<f4"),
        ("memory", "<f4"),
    ]
)


def make_executions(
    run: np.ndarray,
    index: np.ndarray,
    kernel_id: np.ndarray,
    start_ns: np.ndarray,
    end_ns: np.ndarray,
    start_err_ns: np.ndarray | float = 0.0,
    end_err_ns: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Build an EXECUTION_DTYPE array from columns, validating them.

    Parameters
    ----------
    run, index, kernel_id : array_like of int
        Run id, execution index within the run, kernel id.
    start_ns, end_ns : array_like of float
        Host-time start and end of each execution (ns).
    start_err_ns, end_err_ns : array_like of float or float
        Uncertainty (half-width, ns) of each start and end.

    Returns
    -------
    numpy.ndarray
        EXECUTION_DTYPE records.

    Raises
    ------
    ValueError
        Mismatched lengths, non-finite times, an execution that ends before
        it starts, negative uncertainties, or executions of one run that
        overlap; the message names the argument.
    """
    cols = {
        "run": np.asarray(run), "index": np.asarray(index), "kernel_id": np.asarray(kernel_id),
        "start_ns": np.asarray(start_ns, dtype=np.float64), "end_ns": np.asarray(end_ns, dtype=np.float64),
    }
    n = cols["run"].shape[0] if cols["run"].ndim == 1 else -1
    for name, col in cols.items():
        if col.ndim != 1 or col.shape[0] != n:
            raise ValueError(f"{name}: must be 1-D with the same length as run ({n}), got shape {col.shape}")
    out = np.zeros(n, dtype=EXECUTION_DTYPE)
    for name, col in cols.items():
        out[name] = col
    out["start_err_ns"] = start_err_ns
    out["end_err_ns"] = end_err_ns
    validate_executions(out)
    return out


def validate_executions(executions: np.ndarray, name: str = "executions") -> None:
    """Check an EXECUTION_DTYPE array; raise ValueError naming what is wrong."""
    if not isinstance(executions, np.ndarray) or executions.dtype.names is None:
        raise ValueError(f"{name}: must be a structured array with the fields of EXECUTION_DTYPE")
    missing = [f for f in EXECUTION_DTYPE.names or () if f not in executions.dtype.names]
    if missing:
        raise ValueError(f"{name}: missing fields {missing}")
    if executions.ndim != 1:
        raise ValueError(f"{name}: must be 1-D")
    if len(executions) == 0:
        raise ValueError(f"{name}: is empty; nothing was executed")
    start, end = executions["start_ns"].astype(np.float64), executions["end_ns"].astype(np.float64)
    if not (np.all(np.isfinite(start)) and np.all(np.isfinite(end))):
        raise ValueError(f"{name}: start_ns and end_ns must be finite")
    bad = np.nonzero(end <= start)[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}: execution {i} (run {int(executions['run'][i])}, index {int(executions['index'][i])}) "
            f"ends at {end[i]:.0f} ns, not after its start {start[i]:.0f} ns"
        )
    if np.any(executions["start_err_ns"] < 0) or np.any(executions["end_err_ns"] < 0):
        raise ValueError(f"{name}: start_err_ns and end_err_ns must be >= 0")
    order = np.lexsort((start, executions["run"]))
    r, s, e = executions["run"][order], start[order], end[order]
    same_run = r[1:] == r[:-1]
    overlap = np.nonzero(same_run & (s[1:] < e[:-1]))[0]
    if overlap.size:
        i = int(order[overlap[0] + 1])
        raise ValueError(
            f"{name}: executions overlap in run {int(executions['run'][i])} "
            f"(execution index {int(executions['index'][i])} starts before the previous one ends)"
        )
