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
from decimal import Decimal, DecimalException, InvalidOperation
from typing import Any, Union

import numpy as np

from fingrav_native.files._safe import loads_json, read_file, short_repr
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
        ex["run"] = np.arange(n)  # each execution is a run of one
        ex["kernel_id"] = kid
        ex["start_ns"] = start[order] - origin  # int64 - int: exact
        ex["end_ns"] = end[order] - origin
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
        executions = validate_executions(executions, exclusive=False)
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
        start = base + executions["start_ns"]
        end = base + executions["end_ns"]
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


#: Most bytes a trace's JSON may have (after gunzip): torch.profiler traces of long runs reach a few
#: hundred MB; past 4 GiB the parse would need tens of GiB of memory, and a gzip bomb stops here.
MAX_TRACE_BYTES = 4 << 30
# Times in us whose ns do not fit int64 (2**63 ns) are not times.
_MAX_US = Decimal(2**63) / 1000
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _load(path: Union[str, os.PathLike[str]]) -> Any:
    p = os.fspath(path)

    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"trace={p!r}: {what}")

    raw = read_file(p, bad, MAX_TRACE_BYTES, gzipped=p.endswith(".gz"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"not JSON (not UTF-8 text: {exc})") from None
    # Decimal, not float: 1700000000123456.789 us as a float64 is off by tens of ns. NaN tokens
    # (not JSON, but some exporters write them in arguments) stay floats, as json reads them. Nesting
    # is not walked (a trace has millions of nodes): nothing here recurses into what it does not read,
    # and what it reads must be a number, a string or a short list.
    return loads_json(text, bad, "the file", parse_float=Decimal, parse_constant=float, depth=None)


def _dims(value: Any, what: str, i: int, where: str = "trace") -> tuple[int, int, int]:
    if value is None:
        return (-1, -1, -1)
    if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3:
        ints = [_integer(x) for x in value]
        v = [x for x in ints if x is not None] + [1] * (3 - len(value))
        if len(v) == 3:
            return (v[0], v[1], v[2])
    raise TraceFormatError(f"{where}: kernel event {i} has args.{what}={short_repr(value)}; "
                           "expected up to three integers")


def _integer(value: Any) -> int | None:
    """A JSON integer (int, or an integral Decimal) that fits int64, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        if not value.is_finite() or abs(value) > _INT64_MAX or value != value.to_integral_value():
            return None
        value = int(value)
    if isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return None


def _us_to_ns(value: Any, what: str, i: int, where: str = "trace") -> int:
    """Microseconds (a JSON number, parsed as Decimal, or an integer) to exact int64 ns."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise TraceFormatError(f"{where}: kernel event {i} has {what}={short_repr(value)}; expected microseconds")
    try:
        d = Decimal(value)
        # Checked before any arithmetic: 1e999999999 us would overflow the context or build a huge int.
        if not d.is_finite() or abs(d) >= _MAX_US:
            raise InvalidOperation
        return int((d * 1000).to_integral_value())
    except (DecimalException, ValueError):
        raise TraceFormatError(f"{where}: kernel event {i} has {what}={short_repr(value)}; expected microseconds "
                               "that fit int64 ns") from None


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
        Naming the file: not readable (a directory, a damaged or truncated
        gzip stream, more than :data:`MAX_TRACE_BYTES` of JSON), not JSON or
        nested deeper than 64 levels, no ``traceEvents``, no kernel event, a
        kernel event whose ``name``, ``ts``, ``dur``, ``grid``, ``block`` or
        integer ``args`` are malformed or do not fit int64 ns (the message
        names the event and field), or kernel records that contradict each
        other.
    ValueError
        ``trace`` is not a path.

    Notes
    -----
    In-situ FinGraV: every execution of a kernel in a running application is
    a run at random phase against the power logger (paper Section IV-A's
    protocol, for free), grouped by signature (name, grid, block) so that two
    shapes of one GEMM stay apart (:func:`fingrav_native.insitu.profile_trace`).
    """
    if not isinstance(trace, (str, os.PathLike)):
        raise ValueError(f"trace={trace!r}: must be a file path")
    p = os.fspath(trace)
    where = f"trace={p!r}"
    doc = _load(p)
    if isinstance(doc, list):  # the bare-array form of the Chrome trace format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(f"{where}: no traceEvents list (not a Chrome trace)")
    base = doc.get("baseTimeNanoseconds", 0)
    if isinstance(base, str) and base.isascii() and base.isdigit() and len(base) <= 19:
        base = int(base)
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base <= _INT64_MAX:
        raise TraceFormatError(f"{where}: baseTimeNanoseconds={short_repr(base)}; expected an integer of ns "
                               "that fits int64")
    base_ns = base

    def on_clock(t: int) -> bool:
        return _INT64_MIN <= base_ns + t <= _INT64_MAX

    rows: list[tuple[int, int, str, tuple[int, int, int], tuple[int, int, int], int, int, int]] = []
    launches: dict[int, int] = {}
    steps: list[tuple[int, int, int]] = []
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat_value, name_value = ev.get("cat", ""), ev.get("name", "")
        cat = cat_value.lower() if isinstance(cat_value, str) else ""
        name = name_value if isinstance(name_value, str) else ""
        if cat in _RUNTIME_CATS or (cat == "user_annotation" and name.startswith("ProfilerStep#")):
            # Iterations and launches are optional context: a malformed one is left out, not fatal.
            try:
                ts, d = _us_to_ns(ev.get("ts"), "ts", i, where), _us_to_ns(ev.get("dur", 0), "dur", i, where)
            except TraceFormatError:
                continue
            if not (on_clock(ts) and on_clock(ts + max(d, 0))):
                continue
            if cat == "user_annotation":
                n = name[len("ProfilerStep#"):]
                if n.isascii() and n.isdigit() and len(n) <= 18:
                    steps.append((int(n), ts, ts + max(d, 0)))
            else:
                a = ev.get("args")
                c = _integer(a.get("correlation")) if isinstance(a, dict) else None
                if c is not None:
                    launches.setdefault(c, ts)
            continue
        if cat != "kernel":
            continue
        if not isinstance(name_value, str):
            raise TraceFormatError(f"{where}: kernel event {i} has name={short_repr(name_value)}; expected a string")
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        start = _us_to_ns(ev.get("ts"), "ts", i, where)
        dur = _us_to_ns(ev.get("dur"), "dur", i, where)
        if dur < 0:
            raise TraceFormatError(f"{where}: kernel event {i} has dur={short_repr(ev.get('dur'))} < 0")
        if not (on_clock(start) and on_clock(start + dur)):
            raise TraceFormatError(f"{where}: kernel event {i}: ts + dur + baseTimeNanoseconds does not fit "
                                   "int64 ns")

        def num(key: str) -> int:
            v = args.get(key, -1)
            if isinstance(v, bool) or not isinstance(v, (int, Decimal)):
                return -1  # absent or not a number: the trace does not say
            got = _integer(v)
            if got is None:
                raise TraceFormatError(f"{where}: kernel event {i} has args.{key}={short_repr(v)}; "
                                       "expected an integer that fits int64")
            return got

        rows.append((start, dur, name, _dims(args.get("grid"), "grid", i, where),
                     _dims(args.get("block"), "block", i, where), num("device"), num("stream"), num("correlation")))
    if not rows:
        raise TraceFormatError(f"{where}: no GPU kernel events (cat 'kernel'); was the "
                               "profiler run with ProfilerActivity.CUDA?")
    # Kineto's kernel times come from CUPTI's activity records: GPU timestamps converted to the host
    # clock, placed to about a microsecond.
    corr = [r[7] for r in rows]
    try:
        return KernelTrace.from_rows(
            [base_ns + r[0] for r in rows], [base_ns + r[0] + r[1] for r in rows], [r[2] for r in rows],
            [r[3] for r in rows], [r[4] for r in rows], clock="unix-epoch", source=p,
            device=[r[5] for r in rows], stream=[r[6] for r in rows], correlation=corr,
            launch_ns=[base_ns + launches[c] if c in launches else NO_LAUNCH for c in corr],
            steps=[(k, base_ns + a, base_ns + b) for k, a, b in steps], err_ns=1000.0)
    except (ValueError, OverflowError) as exc:
        # The records themselves are inconsistent (what make_executions refuses): the file is at fault.
        raise TraceFormatError(f"{where}: {exc}") from None


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
