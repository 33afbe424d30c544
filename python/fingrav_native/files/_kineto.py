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
from decimal import Decimal
from typing import Any, Union

from fingrav_native._checks import file_path, integer_in, whole_numbers
from fingrav_native.files._safe import loads_json, read_file, short_repr
from fingrav_native.insitu._trace import (
    INT64_MAX,
    INT64_MIN,
    NO_LAUNCH,
    RUNTIME_CATS,
    KernelTrace,
    TraceFormatError,
    json_int64,
    launch_dims,
    row_columns,
    us_to_ns,
)

#: Most bytes a trace's JSON may have (after gunzip): torch.profiler traces of long runs reach a few
#: hundred MB; past 4 GiB the parse would need tens of GiB of memory, and a gzip bomb stops here.
MAX_TRACE_BYTES = 4 << 30


def _load(path: Union[str, os.PathLike[str]]) -> Any:
    """The trace's JSON document, read within :data:`MAX_TRACE_BYTES`, its numbers as Decimal."""
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
    p = file_path(trace, "trace")
    where = f"trace={p!r}"
    doc = _load(p)
    if isinstance(doc, list):  # the bare-array form of the Chrome trace format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(f"{where}: no traceEvents list (not a Chrome trace)")
    base_ns = _base_time_ns(doc, where)
    rows: list[_Row] = []
    launches: dict[int, int] = {}
    steps: list[tuple[int, int, int]] = []
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat_value, name_value = ev.get("cat", ""), ev.get("name", "")
        cat = cat_value.lower() if isinstance(cat_value, str) else ""
        name = name_value if isinstance(name_value, str) else ""
        if cat in RUNTIME_CATS or (cat in STEP_CATS and name.startswith("ProfilerStep#")):
            _context_event(ev, i, cat, name, base_ns, where, launches, steps)
        elif cat == "kernel":
            rows.append(_kernel_row(ev, i, name_value, base_ns, where))
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


#: The CPU-side categories ``ProfilerStep#N`` comes under: ``user_annotation`` since PyTorch 1.9,
#: ``Operator`` in 1.8 (the kineto tb_plugin samples), ``cpu_op`` in some builds. Not the GPU-side
#: ``gpu_user_annotation`` copy, whose times are the GPU's span of the step.
STEP_CATS = ("user_annotation", "operator", "cpu_op")


#: One kernel event: start and duration (ns from the base time), name, grid, block, device, stream, correlation.
_Row = tuple[int, int, str, tuple[int, int, int], tuple[int, int, int], int, int, int]


def _base_time_ns(doc: dict[str, Any], where: str) -> int:
    """``baseTimeNanoseconds`` (0 when absent), an integer or a string of digits that fits int64."""
    base = doc.get("baseTimeNanoseconds", 0)
    if isinstance(base, str) and base.isascii() and base.isdigit() and len(base) <= 19:
        base = int(base)
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base <= INT64_MAX:
        raise TraceFormatError(f"{where}: baseTimeNanoseconds={short_repr(base)}; expected an integer of ns "
                               "that fits int64")
    return base


def _on_clock(base_ns: int, t: int) -> bool:
    """Whether ``t`` ns after the base time is an int64 epoch time."""
    return INT64_MIN <= base_ns + t <= INT64_MAX


def _context_event(ev: dict[str, Any], i: int, cat: str, name: str, base_ns: int, where: str,
                   launches: dict[int, int], steps: list[tuple[int, int, int]]) -> None:
    """A runtime call (a launch, by correlation id) or a ``ProfilerStep#N`` iteration, kept in ``launches``/``steps``.

    Iterations and launches are optional context: a malformed one is left out, not fatal.
    """
    try:
        ts, d = us_to_ns(ev.get("ts"), "ts", i, where), us_to_ns(ev.get("dur", 0), "dur", i, where)
    except TraceFormatError:
        return
    if not (_on_clock(base_ns, ts) and _on_clock(base_ns, ts + max(d, 0))):
        return
    if cat in STEP_CATS:
        n = name[len("ProfilerStep#"):]
        # One iteration per N: a trace that tags it under two categories lists it once.
        if n.isascii() and n.isdigit() and len(n) <= 18 and all(k != int(n) for k, _, _ in steps[-4:]):
            steps.append((int(n), ts, ts + max(d, 0)))
    else:
        a = ev.get("args")
        c = json_int64(a.get("correlation")) if isinstance(a, dict) else None
        if c is not None:
            launches.setdefault(c, ts)


def _kernel_row(ev: dict[str, Any], i: int, name_value: Any, base_ns: int, where: str) -> _Row:
    """One kernel event checked: its times fit int64 ns, its name is a string, its launch dimensions parse."""
    if not isinstance(name_value, str):
        raise TraceFormatError(f"{where}: kernel event {i} has name={short_repr(name_value)}; expected a string")
    raw_args = ev.get("args")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    start = us_to_ns(ev.get("ts"), "ts", i, where)
    dur = us_to_ns(ev.get("dur"), "dur", i, where)
    if dur < 0:
        raise TraceFormatError(f"{where}: kernel event {i} has dur={short_repr(ev.get('dur'))} < 0")
    if not (_on_clock(base_ns, start) and _on_clock(base_ns, start + dur)):
        raise TraceFormatError(f"{where}: kernel event {i}: ts + dur + baseTimeNanoseconds does not fit "
                               "int64 ns")

    def num(key: str) -> int:
        v = args.get(key, -1)
        if isinstance(v, bool) or not isinstance(v, (int, Decimal)):
            return -1  # absent or not a number: the trace does not say
        got = json_int64(v)
        if got is None:
            raise TraceFormatError(f"{where}: kernel event {i} has args.{key}={short_repr(v)}; "
                                   "expected an integer that fits int64")
        return got

    return (start, dur, name_value, launch_dims(args.get("grid"), "grid", i, where),
            launch_dims(args.get("block"), "block", i, where), num("device"), num("stream"), num("correlation"))


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
    p = file_path(path, "path")
    base = integer_in(base_time_ns, "base_time_ns", INT64_MIN)
    integer_in(device, "device", 0)
    integer_in(stream, "stream", 0)
    start, end, names, grid, block = row_columns(start_ns, end_ns, names, grid, block)
    s, e = start - base, end - base
    events: list[dict[str, Any]] = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 1.0,
                                     "pid": 1, "tid": 1}]
    if launch_ns is not None:
        lau = whole_numbers(launch_ns, "launch_ns", INT64_MIN, INT64_MAX) - base
        if lau.shape != s.shape:
            raise ValueError(f"launch_ns: {lau.shape[0] if lau.ndim else 0} values for {len(s)} executions")
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                    "ts": _Micro(int(lau[i])), "dur": _Micro(3000), "args": {"correlation": i + 1}}
                   for i in range(len(s))]
    if steps is not None:
        st = whole_numbers(steps, "steps", INT64_MIN, INT64_MAX).reshape(-1, 2) - base
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                    "ts": _Micro(int(a)), "dur": _Micro(int(b - a))} for n, (a, b) in enumerate(st)]
    for i in range(len(s)):
        # Microseconds with three decimals, as Kineto writes them.
        events.append({"ph": "X", "cat": "kernel", "name": str(names[i]), "pid": device, "tid": stream,
                       "ts": _Micro(int(s[i])), "dur": _Micro(int(e[i] - s[i])),
                       "args": {"device": device, "stream": stream, "correlation": i + 1,
                                "grid": [int(x) for x in grid[i]], "block": [int(x) for x in block[i]]}})
    doc = {"schemaVersion": 1, "deviceProperties": [], "baseTimeNanoseconds": base,
           "traceEvents": events, "displayTimeUnit": "ms"}
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
