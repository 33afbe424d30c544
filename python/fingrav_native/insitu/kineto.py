"""GPU kernels from a torch.profiler (Kineto) Chrome trace, as executions the method consumes.

torch.profiler exports its trace as Chrome trace JSON (``export_chrome_trace``,
optionally gzipped). GPU kernels are complete events (``"ph": "X"``) with
``"cat": "kernel"``, ``ts`` and ``dur`` in microseconds, and ``args`` carrying
``device``, ``stream``, ``correlation``, ``grid`` and ``block``; the top-level
``baseTimeNanoseconds`` is the Unix-epoch time the ``ts`` values count from
(Kineto's ``ChromeTraceLogger``; PyTorch documents the format only through the
exporter). Everything else (CPU ops, runtime calls, flows) is ignored.

Times are kept exact: ``ts`` is parsed relative to ``baseTimeNanoseconds`` and
the executions are returned relative to an int64 ``origin_ns``, so no float64
ever holds an epoch time (at 1.8e18 ns a float64 resolves only 256 ns).
"""

from __future__ import annotations

import gzip
import json
import os
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Union

import numpy as np

from fingrav_native.method.records import EXECUTION_DTYPE, validate_executions

__all__ = ["KERNEL_SIGNATURE_DTYPE", "STEP_DTYPE", "KernelTrace", "TraceFormatError", "read_kineto_trace",
           "write_kineto_trace"]

#: One kernel signature: launches of one kernel with one grid and block shape.
KERNEL_SIGNATURE_DTYPE = np.dtype([
    ("id", "<i4"),
    ("name", "U256"),
    ("grid", "<i8", (3,)),
    ("block", "<i8", (3,)),
])


#: One iteration of the application as the profiler marked it (``ProfilerStep#N``), on the CPU.
STEP_DTYPE = np.dtype([
    ("step", "<i8"),       # N of ProfilerStep#N
    ("start_ns", "<i8"),   # relative to the trace's origin_ns
    ("end_ns", "<i8"),
])

#: Kineto's categories of runtime calls that launch kernels (CUDA and ROCm builds).
_RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime")

#: A launch time the trace does not give.
NO_LAUNCH = np.iinfo(np.int64).min


class TraceFormatError(ValueError):
    """The file is not a Chrome trace with GPU kernel events (the message says what is missing)."""


@dataclass(frozen=True)
class KernelTrace:
    """GPU kernel executions read from an application's trace.

    Attributes
    ----------
    executions : numpy.ndarray
        EXECUTION_DTYPE, one row per kernel execution, in start order: times
        in ns relative to ``origin_ns`` on the trace's clock; ``run`` is the
        execution's own id (each execution is a run of one, as in a training
        loop every iteration is a run), ``index`` 0, ``kernel_id`` the
        signature id.
    signatures : numpy.ndarray
        KERNEL_SIGNATURE_DTYPE, indexed by ``kernel_id``.
    device, stream, correlation : numpy.ndarray
        Per execution (int64; -1 where the trace does not say).
    origin_ns : int
        Trace-clock time (ns) of zero in ``executions``.
    clock : str
        The trace's clock (``"unix-epoch"`` for Kineto).
    source : str
        Where the trace came from.
    launch_ns : numpy.ndarray
        Per execution, the CPU time (relative to ``origin_ns``) of the runtime
        call that launched it, matched by correlation id; :data:`NO_LAUNCH`
        where the trace has none.
    steps : numpy.ndarray
        STEP_DTYPE: the ``ProfilerStep#N`` annotations (``prof.step()`` in the
        loop), in order; empty when the loop did not call it.
    """

    executions: np.ndarray
    signatures: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    origin_ns: int
    clock: str
    source: str
    launch_ns: np.ndarray
    steps: np.ndarray

    def __len__(self) -> int:
        return len(self.executions)

    @classmethod
    def from_rows(cls, start_ns: Any, end_ns: Any, names: Any, grid: Any, block: Any, *, clock: str, source: str,
                  device: Any = None, stream: Any = None, correlation: Any = None, launch_ns: Any = None,
                  steps: Any = None, err_ns: Any = 1000.0) -> KernelTrace:
        """A trace from one row per kernel execution on the trace's clock (every reader builds it here).

        Parameters
        ----------
        start_ns, end_ns : array_like of int
            Per execution, on ``clock`` (int64 ns, any order).
        names : sequence of str
        grid, block : sequences of three integers
            Per execution; with the name they make the signature.
        clock, source : str
        device, stream, correlation : array_like of int, optional
            Per execution (default 0, 0 and -1).
        launch_ns : array_like of int, optional
            Per execution, its launch on ``clock``, or :data:`NO_LAUNCH`.
        steps : sequence of (step, start_ns, end_ns), optional
            Iterations on ``clock``.
        err_ns : float or array_like
            Placement error of each start and end.

        Returns
        -------
        KernelTrace
            Executions in start order, relative to the first start
            (``origin_ns``); times stay int64 until that subtraction.
        """
        start = np.asarray(start_ns, dtype=np.int64)
        end = np.asarray(end_ns, dtype=np.int64)
        n = len(start)

        def per(v: Any, what: str, default: int) -> np.ndarray:
            out = np.full(n, default, dtype=np.int64) if v is None else np.asarray(v, dtype=np.int64)
            if out.shape != (n,):
                raise ValueError(f"{what}: {out.shape} values for {n} executions")
            return out

        if end.shape != (n,) or len(names) != n or len(grid) != n or len(block) != n:
            raise ValueError(f"end_ns, names, grid, block: one per execution ({n})")
        order = np.argsort(start, kind="stable")
        origin = int(start[order[0]])
        sig_of: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int] = {}
        kid = np.array([sig_of.setdefault((str(names[i]), tuple(grid[i]), tuple(block[i])), len(sig_of))
                        for i in order], dtype=np.int32)
        sigs = np.zeros(len(sig_of), dtype=KERNEL_SIGNATURE_DTYPE)
        for (name, g, b), k in sig_of.items():
            sigs[k] = (k, name[:256], g, b)
        ex = np.zeros(n, dtype=EXECUTION_DTYPE)
        ex["run"] = np.arange(n, dtype=np.int32)  # each execution is a run of one
        ex["kernel_id"] = kid
        ex["start_ns"] = (start[order] - origin).astype(np.float64)
        ex["end_ns"] = (end[order] - origin).astype(np.float64)
        err = np.broadcast_to(np.asarray(err_ns, dtype=np.float64), (n,))
        ex["start_err_ns"] = err[order]
        ex["end_err_ns"] = err[order]
        launch = per(launch_ns, "launch_ns", NO_LAUNCH)[order]
        launch = np.where(launch != NO_LAUNCH, launch - origin, NO_LAUNCH)
        st = sorted(steps or (), key=lambda x: (x[1], x[0]))  # by start: iteration() searches them
        return cls(executions=ex, signatures=sigs, device=per(device, "device", 0)[order],
                   stream=per(stream, "stream", 0)[order], correlation=per(correlation, "correlation", -1)[order],
                   origin_ns=origin, clock=str(clock), source=str(source), launch_ns=launch,
                   steps=np.array([(k, a - origin, b - origin) for k, a, b in st], dtype=STEP_DTYPE))

    @classmethod
    def from_executions(cls, executions: np.ndarray, names: Any, *, grid: Any = None, block: Any = None,
                        device: Any = None, stream: Any = None, origin_ns: int = 0,
                        clock: str = "host") -> KernelTrace:
        """Executions you already have (EXECUTION_DTYPE, any clock) as a trace, one name per execution.

        Parameters
        ----------
        executions : numpy.ndarray
            EXECUTION_DTYPE records; ``start_ns``/``end_ns`` relative to
            ``origin_ns`` on ``clock``.
        names : sequence of str
            Per execution, its kernel's name.
        grid, block : sequences of up to three integers, optional
            Per execution (default unknown: -1); with the name they make the signature.
        device, stream : sequences of int, optional
            Per execution (default 0 and 0).
        origin_ns : int
            Clock time of zero in ``executions``.
        clock : str
            The clock's name (the power logs' map must end on it).

        Returns
        -------
        KernelTrace

        Raises
        ------
        ValueError
            Lengths that do not match, named.
        """
        validate_executions(executions)
        n = len(executions)
        if len(names) != n:
            raise ValueError(f"names: {len(names)} names for {n} executions")

        def dims(v: Any, what: str) -> list[tuple[int, int, int]]:
            if v is None:
                return [(-1, -1, -1)] * n
            if len(v) != n:
                raise ValueError(f"{what}: {len(v)} values for {n} executions")
            return [_dims(list(x), what, i) for i, x in enumerate(v)]

        base = int(origin_ns)
        start = base + np.rint(executions["start_ns"]).astype(np.int64)
        end = base + np.rint(executions["end_ns"]).astype(np.int64)
        kt = cls.from_rows(start, end, names, dims(grid, "grid"), dims(block, "block"), clock=clock,
                           source="executions", device=device, stream=stream, err_ns=0.0)
        # The executions' own placement errors, in the trace's (start) order.
        order = np.argsort(start, kind="stable")
        kt.executions["start_err_ns"] = executions["start_err_ns"][order]
        kt.executions["end_err_ns"] = executions["end_err_ns"][order]
        return kt

    def iteration(self) -> np.ndarray:
        """Per execution, the index into :attr:`steps` of the iteration that launched it (-1: none).

        A kernel belongs to the step during which the CPU launched it (the
        GPU runs it later, often in the next step's CPU time); without a
        launch record, to the step its start falls in.
        """
        out = np.full(len(self.executions), -1, dtype=np.int64)
        if len(self.steps) == 0:
            return out
        t = np.where(self.launch_ns != NO_LAUNCH, self.launch_ns, self.executions["start_ns"].astype(np.int64))
        k = np.searchsorted(self.steps["start_ns"], t, side="right") - 1
        ok = (k >= 0) & (t < self.steps["end_ns"][np.clip(k, 0, None)])
        out[ok] = k[ok]
        return out

    def concurrent(self) -> np.ndarray:
        """Executions that overlap another on the same device (their power cannot be told apart)."""
        out = np.zeros(len(self.executions), dtype=bool)
        for dev in np.unique(self.device):
            idx = np.flatnonzero(self.device == dev)
            idx = idx[np.argsort(self.executions["start_ns"][idx], kind="stable")]
            s, e = self.executions["start_ns"][idx], self.executions["end_ns"][idx]
            running_end = np.maximum.accumulate(e)
            overlap = s[1:] < running_end[:-1]
            out[idx[1:][overlap]] = True
            # The execution it overlaps is just as ambiguous.
            prev = np.searchsorted(running_end[:-1], s[1:][overlap], side="right")
            out[idx[prev]] = True
        return out


def _load(path: Union[str, os.PathLike[str]]) -> Any:
    p = os.fspath(path)
    try:
        if p.endswith(".gz"):
            with gzip.open(p, "rt", encoding="utf-8") as f:
                return json.load(f, parse_float=Decimal)
        with open(p, encoding="utf-8") as f:
            # Decimal, not float: 1700000000123456.789 us as a float64 is off by tens of ns.
            return json.load(f, parse_float=Decimal)
    except (OSError, EOFError) as exc:
        raise TraceFormatError(f"trace={p!r}: cannot read it ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"trace={p!r}: not JSON ({exc})") from exc


def _dims(value: Any, what: str, i: int) -> tuple[int, int, int]:
    if value is None:
        return (-1, -1, -1)
    if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3 and all(
            isinstance(v, (int, Decimal)) and not isinstance(v, bool) for v in value):
        v = [int(x) for x in value] + [1] * (3 - len(value))
        return (v[0], v[1], v[2])
    raise TraceFormatError(f"trace: kernel event {i} has args.{what}={value!r}; expected up to three integers")


def _us_to_ns(value: Any, what: str, i: int) -> int:
    """Microseconds (a JSON number, parsed as Decimal, or an integer) to exact int64 ns."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise TraceFormatError(f"trace: kernel event {i} has {what}={value!r}; expected microseconds")
    try:
        return int((Decimal(value) * 1000).to_integral_value())
    except (InvalidOperation, ValueError) as exc:
        raise TraceFormatError(f"trace: kernel event {i} has {what}={value!r}; expected microseconds") from exc


def read_kineto_trace(trace: Union[str, os.PathLike[str]]) -> KernelTrace:
    """Read the GPU kernels of a torch.profiler (Kineto) Chrome trace.

    Parameters
    ----------
    trace : str or path
        A ``.json`` or ``.json.gz`` file as ``torch.profiler``'s
        ``export_chrome_trace`` writes it.

    Returns
    -------
    KernelTrace

    Raises
    ------
    TraceFormatError
        Not a readable JSON trace, no ``traceEvents``, no kernel event, or a
        kernel event whose ``ts``, ``dur``, ``grid`` or ``block`` is malformed
        (the message names the event and field).

    Notes
    -----
    In-situ FinGraV: every execution of a kernel in a running application is
    a run at random phase against the power logger (paper Section IV-A's
    protocol, for free), grouped by signature (name, grid, block) so that two
    shapes of one GEMM stay apart (:func:`fingrav_native.insitu.profile_trace`).
    """
    doc = _load(trace)
    if isinstance(doc, list):  # the bare-array form of the Chrome trace format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(f"trace={os.fspath(trace)!r}: no traceEvents list (not a Chrome trace)")
    base = doc.get("baseTimeNanoseconds", 0)
    if isinstance(base, bool) or not isinstance(base, (int, str)):
        raise TraceFormatError(f"trace: baseTimeNanoseconds={base!r}; expected an integer")
    base_ns = int(base)
    rows: list[tuple[int, int, str, tuple[int, int, int], tuple[int, int, int], int, int, int]] = []
    launches: dict[int, int] = {}
    steps: list[tuple[int, int, int]] = []
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        if cat in _RUNTIME_CATS or (cat == "user_annotation" and str(ev.get("name", "")).startswith("ProfilerStep#")):
            # Iterations and launches are optional context: a malformed one is left out, not fatal.
            try:
                ts, d = _us_to_ns(ev.get("ts"), "ts", i), _us_to_ns(ev.get("dur", 0), "dur", i)
            except TraceFormatError:
                continue
            if cat == "user_annotation":
                n = str(ev.get("name", ""))[len("ProfilerStep#"):]
                if n.isdigit():
                    steps.append((int(n), ts, ts + max(d, 0)))
            else:
                a = ev.get("args")
                c = a.get("correlation") if isinstance(a, dict) else None
                if isinstance(c, int) and not isinstance(c, bool):
                    launches.setdefault(c, ts)
            continue
        if cat != "kernel":
            continue
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        start = _us_to_ns(ev.get("ts"), "ts", i)
        dur = _us_to_ns(ev.get("dur"), "dur", i)
        if dur < 0:
            raise TraceFormatError(f"trace: kernel event {i} has dur={ev.get('dur')!r} < 0")

        def num(key: str) -> int:
            v = args.get(key, -1)
            return int(v) if isinstance(v, (int, Decimal)) and not isinstance(v, bool) else -1

        rows.append((start, dur, str(ev.get("name", "")), _dims(args.get("grid"), "grid", i),
                     _dims(args.get("block"), "block", i), num("device"), num("stream"), num("correlation")))
    if not rows:
        raise TraceFormatError(f"trace={os.fspath(trace)!r}: no GPU kernel events (cat 'kernel'); was the "
                               "profiler run with ProfilerActivity.CUDA?")
    # Kineto's kernel times come from CUPTI's activity records: GPU timestamps converted to the host
    # clock, placed to about a microsecond.
    corr = [r[7] for r in rows]
    return KernelTrace.from_rows(
        [base_ns + r[0] for r in rows], [base_ns + r[0] + r[1] for r in rows], [r[2] for r in rows],
        [r[3] for r in rows], [r[4] for r in rows], clock="unix-epoch", source=os.fspath(trace),
        device=[r[5] for r in rows], stream=[r[6] for r in rows], correlation=corr,
        launch_ns=[base_ns + launches[c] if c in launches else NO_LAUNCH for c in corr],
        steps=[(k, base_ns + a, base_ns + b) for k, a, b in steps], err_ns=1000.0)

def write_kineto_trace(path: Union[str, os.PathLike[str]], names: Any, grid: Any, block: Any, start_ns: Any,
                       end_ns: Any, *, base_time_ns: int, device: int = 0, stream: int = 7,
                       launch_ns: Any = None, steps: Any = None) -> str:
    """Write kernel executions as a Kineto-format Chrome trace (the simulator's training loop, tests).

    Parameters
    ----------
    path : str or path
        ``.json`` or ``.json.gz``.
    names, grid, block : sequences
        Per execution: kernel name, grid and block (three integers each).
    start_ns, end_ns : array_like of int
        Per execution, on the trace's (Unix-epoch) clock, in ns.
    base_time_ns : int
        ``baseTimeNanoseconds``: the epoch time ``ts`` counts from.
    device, stream : int
    launch_ns : array_like of int, optional
        Per execution, the CPU time of its launch (epoch ns): written as
        ``cudaLaunchKernel`` runtime events sharing the kernel's correlation id.
    steps : array_like of (start_ns, end_ns), optional
        The loop's iterations on the CPU (epoch ns): written as
        ``ProfilerStep#N`` user annotations, as ``prof.step()`` makes them.

    Returns
    -------
    str
        The path written.
    """
    s = np.asarray(start_ns, dtype=np.int64) - int(base_time_ns)
    e = np.asarray(end_ns, dtype=np.int64) - int(base_time_ns)
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 1.0,
                                     "pid": 1, "tid": 1}]
    if launch_ns is not None:
        lau = np.asarray(launch_ns, dtype=np.int64) - int(base_time_ns)
        if lau.shape != s.shape:
            raise ValueError(f"launch_ns: {lau.shape[0] if lau.ndim else 0} values for {len(s)} executions")
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": _Micro(int(lau[i])), "dur": _Micro(3000), "args": {"correlation": i + 1}}
                   for i in range(len(s))]
    if steps is not None:
        st = np.asarray(steps, dtype=np.int64).reshape(-1, 2) - int(base_time_ns)
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                    "ts": _Micro(int(a)), "dur": _Micro(int(b - a))} for n, (a, b) in enumerate(st)]
    for i in range(len(s)):
        # Microseconds with three decimals, as Kineto writes them.
        events.append({"ph": "X", "cat": "kernel", "name": str(names[i]), "pid": device, "tid": stream,
                       "ts": _Micro(int(s[i])), "dur": _Micro(int(e[i] - s[i])),
                       "args": {"device": device, "stream": stream, "correlation": i + 1,
                                "grid": [int(x) for x in grid[i]], "block": [int(x) for x in block[i]]}})
    doc = {"schemaVersion": 1, "deviceProperties": [], "baseTimeNanoseconds": int(base_time_ns),
           "traceEvents": events, "displayTimeUnit": "ms"}
    p = os.fspath(path)
    # ns as microseconds with three exact decimals, as Kineto writes them (no float rounding): each
    # number is serialised as a string between tokens no kernel name contains, then unquoted.
    token = uuid.uuid4().hex
    text = json.dumps(doc, default=lambda m: f"{token}{m}{token}")
    text = text.replace(f'"{token}', "").replace(f'{token}"', "")
    if p.endswith(".gz"):
        with gzip.open(p, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
    return p


class _Micro:
    """An exact ns count written as a JSON number of microseconds with three decimals."""

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def __str__(self) -> str:
        sign = "-" if self.ns < 0 else ""
        q, r = divmod(abs(self.ns), 1000)
        return f"{sign}{q}.{r:03d}"
