"""GPU kernels from a torch.profiler (Kineto) Chrome trace, as executions the method consumes.

torch.profiler exports its trace as Chrome trace JSON (``export_chrome_trace``,
optionally gzipped). GPU kernels are complete events (``"ph": "X"``) with
``"cat": "kernel"``, ``ts`` and ``dur`` in microseconds, and ``args`` carrying
``device``, ``stream``, ``correlation``, ``grid`` and ``block``; the top-level
``baseTimeNanoseconds`` is the Unix-epoch time the ``ts`` values count from
(Kineto's ``ChromeTraceLogger``; PyTorch documents the format only through the
exporter). Runtime calls (the launch of each kernel, by correlation id) and
``ProfilerStep#N`` annotations are read as context; everything else (CPU ops,
flows, metadata) is checked as JSON and dropped as it streams past.

The document is not loaded whole: the C++ core's scanner
(``csrc/fingrav/kineto_scan.hpp``) walks its token stream chunk by chunk and
keeps only the kernels' columns, so a trace of 10^7 kernels (tens of GB of
JSON) is read in the memory its kernels need. Two caps bound what a file can
cost: :data:`MAX_TRACE_BYTES` of JSON (time: a gzip bomb of whitespace) and
:data:`MAX_KEPT_BYTES` kept (memory: a bomb of kernel events).

Times are kept exact: ``ts`` is parsed relative to ``baseTimeNanoseconds`` and
the executions are returned relative to an int64 ``origin_ns``, so no float64
ever holds an epoch time (at 1.8e18 ns a float64 resolves only 256 ns).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import uuid
import zlib
from decimal import Decimal, DecimalException
from typing import Any, Union

import numpy as np

from fingrav_native._checks import file_path, integer_in, whole_numbers
from fingrav_native.files._outputs import check_output_path, write_text
from fingrav_native.files._safe import file_problem, loads_json, read_file, short_repr
from fingrav_native.insitu._trace import INT64_MAX, INT64_MIN, KernelTrace, TraceFormatError, missing_trace, row_columns

#: Most bytes of JSON (after gunzip) a trace may have. The reader streams, so this bounds the time a
#: file can take (a gzip bomb of whitespace), not memory: 10^7 kernels with their CPU side are about
#: 10 GB, and the scan runs at several hundred MB/s.
MAX_TRACE_BYTES = 256 << 30

#: Most bytes the reader may keep while it scans: per kernel event about 60 bytes (its times,
#: signature and ids), per runtime call with a correlation id and per ProfilerStep 24, the distinct
#: kernel names twice, and the current event's fields. 4 GiB is some 60 million kernels; a document
#: that needs more (a name of gigabytes, a bomb of kernel events) is refused, whatever its size.
MAX_KEPT_BYTES = 4 << 30

#: Deepest nesting of lists and objects the scan follows: what Python's json parser reached before its
#: recursion limit (a trace nests about 5 levels; a deeper document is not a trace).
MAX_TRACE_DEPTH = 1000

#: Bytes read (and scanned) at a time.
_CHUNK = 4 << 20

# The scanner's statuses and kernel-event problems (csrc/fingrav/kineto_scan.hpp).
_OK, _SYNTAX, _UTF8, _DEPTH, _KEPT, _NO_EVENTS, _BAD_BASE, _BAD_KERNEL, _NO_KERNELS = range(9)
_PROBLEMS = {
    1: "{field}={value}; expected a string",
    2: "{field}={value}; expected microseconds",
    3: "{field}={value}; expected microseconds that fit int64 ns",
    4: "{field}={value} < 0",
    6: "{field}={value}; expected up to three integers",
    7: "{field}={value}; expected an integer that fits int64",
    8: "{field}={value}{kind}; expected an integer (Kineto writes ids as JSON numbers)",
    9: "{field}={value}{kind}; expected an object of the launch's ids and dimensions",
}

# The type of a value the scanner refused, by its ValueKind (kineto_scan.hpp); lists and objects are shown
# as such already.
_KINDS = {0: " (absent)", 1: " (null)", 2: " (a boolean)", 3: " (a boolean)", 4: " (a number)", 5: " (a string)",
          6: "", 7: "", 8: " (a non-finite number)"}


#: Most bytes a JSON document read whole may have (:func:`load_trace_json`: a rocprofv3 JSON output, which
#: nests its records and is read as one document): past 4 GiB the parse would need tens of GiB.
MAX_DOCUMENT_BYTES = 4 << 30


def load_trace_json(path: Union[str, os.PathLike[str]]) -> Any:
    """The trace's JSON document, read within :data:`MAX_DOCUMENT_BYTES`, its numbers as Decimal."""
    p = os.fspath(path)

    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"trace={p!r}: {what}")

    raw = read_file(p, bad, MAX_DOCUMENT_BYTES, gzipped=p.endswith(".gz"))
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
        nested deeper than :data:`MAX_TRACE_DEPTH` levels, more kernel
        records than :data:`MAX_KEPT_BYTES` holds, no ``traceEvents``, no
        kernel event, a kernel event without a ``name`` or whose ``name``,
        ``ts``, ``dur``, ``args``, ``grid``, ``block``, ``device``,
        ``stream`` or ``correlation`` is of another type than Kineto writes
        (ids written as strings included), malformed or out of int64 (the
        message names the event, the field and its type), or kernel records
        that contradict each other.
    ValueError
        ``trace`` is not a path.

    Notes
    -----
    In-situ FinGraV: every execution of a kernel in a running application is
    a run at random phase against the power logger (paper Section IV-A's
    protocol, for free), grouped by signature (name, grid, block) so that two
    shapes of one GEMM stay apart (:func:`fingrav_native.profile_trace`).

    The file is streamed through the C++ core's scanner
    (``_core.KinetoScanner``) in chunks of a few MB: memory grows with the
    kernels kept, not with the document (a trace of 10^6 kernels, about 1 GB
    of JSON, is read in a few hundred MB). The document is read as Python's
    ``json`` reads it (strict JSON plus ``NaN``/``Infinity``; of duplicate
    keys the last) and every number the trace's kernels need is exact: ``ts``
    and ``dur`` as ``int((Decimal(text) * 1000).to_integral_value())``.
    """
    p = file_path(trace, "trace")
    where = f"trace={p!r}"
    got = _scan(p, where)
    _raise_refusal(got, where)
    names = [_decoded(raw) for raw in got["names"]]
    # One signature per (name, grid, block) as Python compares them: two spellings of one name (an
    # escape) are one kernel.
    canon: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int] = {}
    grid, block = got["sig_grid"].reshape(-1, 3), got["sig_block"].reshape(-1, 3)
    remap = np.array([canon.setdefault((names[n], tuple(g.tolist()), tuple(b.tolist())), len(canon))
                      for n, g, b in zip(got["sig_name"].tolist(), grid, block)], dtype=np.int64)
    first = np.unique(remap, return_index=True)[1]
    steps = np.stack([got["step"], got["step_start"], got["step_end"]], axis=1)
    # Kineto's kernel times come from CUPTI's activity records: GPU timestamps converted to the host
    # clock, placed to about a microsecond.
    try:
        return KernelTrace.from_signatures(
            got["start"], got["end"], remap[got["signature"]], [names[n] for n in got["sig_name"][first]],
            grid[first], block[first], clock="unix-epoch", source=p, device=got["device"], stream=got["stream"],
            correlation=got["correlation"], launch_ns=got["launch"], steps=steps, err_ns=1000.0)
    except (ValueError, OverflowError) as exc:
        # The records themselves are inconsistent (what make_executions refuses): the file is at fault.
        raise TraceFormatError(f"{where}: {exc}") from None


def _scan(p: str, where: str) -> dict[str, Any]:
    """The scanner's result for the file at ``p``: its bytes (gunzipped for ``.gz``) fed in chunks."""
    from fingrav_native._core import KinetoScanner

    def bad(what: str) -> TraceFormatError:
        return TraceFormatError(f"{where}: {what}")

    try:
        problem = file_problem(p)
    except FileNotFoundError:
        raise missing_trace(where) from None
    if problem is not None:
        raise bad(problem)
    gz, limit = p.endswith(".gz"), MAX_TRACE_BYTES
    scanner = KinetoScanner(MAX_KEPT_BYTES, MAX_TRACE_DEPTH, sys.get_int_max_str_digits())
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    got = 0
    try:
        with (gzip.open(p, "rb") if gz else open(p, "rb", buffering=0)) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                got += n
                if got > limit:
                    raise bad(f"expands past {limit} bytes, more than a file of this kind may hold" if gz
                              else f"is larger than the {limit} bytes a file of this kind may hold")
                if not scanner.failed:
                    scanner.feed(view[:n])
                elif not gz:
                    break  # refused; a gzip stream is read on, so that damage to it is what is reported
    except (OSError, EOFError, zlib.error) as exc:
        raise bad(f"cannot read it ({exc})") from None
    result: dict[str, Any] = scanner.finish()
    return result


def _raise_refusal(got: dict[str, Any], where: str) -> None:
    """The scanner's refusal as the TraceFormatError that names the file (nothing when it read the trace)."""
    status, message = got["status"], got["message"]
    if status == _OK:
        return
    if status == _SYNTAX:
        what = f"the file: not JSON ({message})"
    elif status == _UTF8:
        what = f"not JSON (not UTF-8 text: {message})"
    elif status == _DEPTH:
        what = f"the file: nests deeper than the JSON parser goes ({message}; a trace nests a few levels)"
    elif status == _KEPT:
        what = f"{message}; more than a trace's kernels need (at most {MAX_KEPT_BYTES} bytes are kept)"
    elif status == _NO_EVENTS:
        what = "no traceEvents list (not a Chrome trace)"
    elif status == _BAD_BASE:
        what = f"baseTimeNanoseconds={_shown(got['value'])}; expected an integer of ns that fits int64"
    elif status == _NO_KERNELS:
        what = "no GPU kernel events (cat 'kernel'); was the profiler run with ProfilerActivity.CUDA?"
    elif got["problem"] == 5:
        what = f"kernel event {got['event']}: ts + dur + baseTimeNanoseconds does not fit int64 ns"
    elif got["field"] == "name" and got["value"]["kind"] == 0:
        what = f"kernel event {got['event']} has no name; every Kineto kernel event names its kernel"
    else:
        what = f"kernel event {got['event']} has " + _PROBLEMS[got["problem"]].format(
            field=got["field"], value=_shown(got["value"]), kind=_KINDS[got["value"]["kind"]])
    raise TraceFormatError(f"{where}: {what}")


def _decoded(raw: bytes) -> str:
    """A JSON string's contents (already checked by the scanner) as Python's json reads them."""
    if b"\\" not in raw:
        return raw.decode("utf-8")
    out: str = json.loads(b'"' + raw + b'"')
    return out


def _shown(value: dict[str, Any]) -> str:
    """``short_repr`` of the value Python's json (numbers as Decimal) would have read, from the scanner's record."""
    kind, text = value["kind"], str(value["text"].decode("utf-8"))
    if kind in (0, 1):  # absent, null
        return short_repr(None)
    if kind in (2, 3):
        return short_repr(kind == 2)
    if kind == 4:
        try:
            return short_repr(int(text) if value["integer"] else Decimal(text))
        except (ValueError, DecimalException):  # past what Python's int or Decimal converts
            return text if len(text) <= 80 else text[:77] + "..."
    if kind == 5:
        return short_repr(_decoded(value["text"]))
    if kind in (6, 7):
        return f"a {'list' if kind == 6 else 'dict'} of {value['items']} items"
    return short_repr(float(text))  # NaN, Infinity, -Infinity


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
    p = check_output_path(path, "path", writes="kineto")
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
    return write_text(p, text)


class _Micro:
    """An exact ns count written as a JSON number of microseconds with three decimals."""

    def __init__(self, ns: int) -> None:
        self.ns = ns

    def __str__(self) -> str:
        sign = "-" if self.ns < 0 else ""
        q, r = divmod(abs(self.ns), 1000)
        return f"{sign}{q}.{r:03d}"
