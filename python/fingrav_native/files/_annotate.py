"""The power written back into the user's own trace: their Kineto trace, every event kept, with power added.

``fingrav trace --annotate OUT`` and :func:`annotate_trace` write the
application's torch.profiler (Kineto) Chrome trace again with, added and
nothing else changed:

* in each GPU kernel event's ``args``: its signature's energy per execution
  (``fingrav_energy_j``), the 95 % half-width (``fingrav_energy_half_width_j``)
  and mean power (``fingrav_power_w``) from the profile's table, the table
  row (``fingrav_row``), and ``fingrav_warmup`` / ``fingrav_concurrent`` for
  executions the table's energy does not describe (before the steady state,
  beside another kernel); a kernel of zero recorded duration gets
  ``fingrav_note`` instead;
* power counter tracks (``"ph": "C"``, the Trace Event Format's counter
  events) under the GPU's own ``pid``, so they sit beside its kernels in
  Perfetto, TensorBoard or HTA: one per channel of the power logs, each log at
  the middle of what it measures, on the trace's clock (``ts`` in
  microseconds from ``baseTimeNanoseconds``, after the clock map and the
  measured offset);
* a top-level ``fingrav`` object saying what was added (the sensor, the
  energy closure when there is one).

Every original byte outside those insertions is copied as it was read
(numbers are not re-serialised), so every original event is the same value
in the output with only the added ``args`` keys. The copy streams: the trace
is read in chunks and each event decoded by :class:`json.JSONDecoder` on its
own, so memory holds one chunk and one event, not the document (the reader
that made the profile, :func:`~fingrav_native.files.read_kineto_trace`, is
what caps a trace's size, at its ``MAX_TRACE_BYTES``). ``baseTimeNanoseconds``
is where Kineto writes it, after the events: it is found by a first pass that
only scans the text, and checked against the document's own when the copy
reaches it (a mismatch leaves nothing written).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
from dataclasses import asdict
from decimal import Decimal
from typing import IO, Any, Iterable, Iterator, Optional, Union, cast

import numpy as np

from fingrav_native._checks import file_path, flag
from fingrav_native._version import __version__
from fingrav_native.files._outputs import OutputPathError, atomic_output, check_output_path
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.insitu._trace import TraceFormatError, json_int64, us_to_ns

#: The keys added to a kernel event's ``args``; a trace that has any of them already is refused (annotated).
ANNOTATION_KEYS = ("fingrav_energy_j", "fingrav_energy_half_width_j", "fingrav_power_w", "fingrav_row",
                   "fingrav_warmup", "fingrav_concurrent", "fingrav_note")

_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_BASE = re.compile(r'"baseTimeNanoseconds"[ \t\n\r]*:[ \t\n\r]*("?)([0-9]{1,19})\1')
_FAST = json.JSONDecoder()
_EXACT = json.JSONDecoder(parse_float=Decimal, parse_constant=float)

Path = Union[str, "os.PathLike[str]"]


def check_annotation_out(trace: Path, out: Path, *, overwrite: bool = False, name: str = "out",
                         protect: Iterable[Path] = ()) -> str:
    """``out`` as a file an annotated copy of ``trace`` may be written to, checked before any work; its path.

    Parameters
    ----------
    trace : str or path
        The trace to annotate (a Kineto ``.json`` or ``.json.gz``).
    out : str or path
        Where the annotated copy goes (gzipped when it ends in ``.gz``).
    overwrite : bool
        Replace an existing file, if it is a Chrome trace this package
        wrote or a plain file of no measured kind; never the trace, one of
        ``protect``, a capture, a measured trace or any other file the
        package's output guard spares (:func:`~fingrav_native.files._outputs.check_output_path`).
    name : str
        How messages name ``out`` (``"--annotate"`` for the command).
    protect : iterable of paths
        The command's other inputs (the power capture): never written over.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        Naming ``name``: not a path, a folder, a missing or unwritable
        folder, the trace itself or another input, a measured or saved file,
        an existing file without ``overwrite``; or a trace that is not a
        Kineto JSON file (a rocprofv3 CSV).
    """
    o, t = file_path(out, name), file_path(trace, "trace")
    overwrite = flag(overwrite, "overwrite")
    if not t.endswith((".json", ".json.gz")):
        raise ValueError(f"{name}: {t!r} is not a torch.profiler (Kineto) .json or .json.gz trace; only those "
                         "are annotated (a rocprofv3 CSV has no place for counter tracks)")
    if os.path.isdir(o):
        raise ValueError(f"{name}={o!r}: is a folder; give the annotated trace's file name (.json or .json.gz)")
    folder = os.path.dirname(os.path.abspath(o))
    if not os.path.isdir(folder):
        raise ValueError(f"{name}={o!r}: its folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{name}={o!r}: its folder {folder!r} is not writable")
    if os.path.abspath(o) == os.path.abspath(t) or (os.path.exists(o) and os.path.exists(t)
                                                    and os.path.samefile(o, t)):
        raise OutputPathError(f"{name}={o!r}: is the trace itself; the annotated trace is written beside it, "
                              "never over it")
    check_output_path(o, name, writes="trace", protect=[t, *protect], overwrite=overwrite)
    return o


def _open_text(path: str) -> IO[str]:
    raw = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    return io.TextIOWrapper(cast(IO[bytes], raw), encoding="utf-8")


def scan_base_time(path: str) -> Optional[int]:
    """The last ``"baseTimeNanoseconds": N`` in the file's text (None: none); the copy checks it is the document's."""
    found: Optional[int] = None
    tail = ""
    with _open_text(path) as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                return found
            text = tail + chunk
            for m in _BASE.finditer(text):
                found = int(m.group(2))
            tail = text[-80:]


class _Stream:
    """A JSON text read in chunks: the buffer, the position read to, and the position copied out to."""

    def __init__(self, f: IO[str], out: IO[str], where: str) -> None:
        self.f, self.out, self.where = f, out, where
        self.buf, self.pos, self.copied, self.eof = "", 0, 0, False

    def more(self) -> bool:
        """Read on (at least as much again as is buffered past ``pos``, so a long value costs linear time)."""
        if self.eof:
            return False
        chunk = self.f.read(max(_CHUNK, len(self.buf) - self.pos))
        if not chunk:
            self.eof = True
            return False
        # What was read is copied out and dropped: insertions go at or after ``pos`` (inside the value being
        # read, or after it), so the buffer holds one chunk and the value under way, however long the stretch
        # between two insertions.
        self.copy_to(self.pos)
        self.buf, self.pos, self.copied = self.buf[self.pos:] + chunk, 0, 0
        return True

    def skip_ws(self) -> str:
        """Skip whitespace; the next character ('' at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos:self.pos + 1]

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if not c or c not in chars:
            raise TraceFormatError(f"{self.where}: not JSON at character {self.pos} of the document (expected "
                                   f"{' or '.join(repr(x) for x in chars)}, found {c!r}); a truncated trace?")
        self.pos += 1
        return c

    def value(self, decoder: json.JSONDecoder = _FAST) -> tuple[Any, int, int]:
        """The next JSON value, its start and end in the buffer (read on until it is whole); read past it."""
        self.skip_ws()
        while True:
            try:
                obj, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.more():
                    continue
                raise TraceFormatError(f"{self.where}: not JSON ({exc.msg} near character {self.pos} of what is "
                                       "left); a truncated trace?") from None
            if end == len(self.buf) and self.more():
                continue  # a number may go on in the next chunk
            start, self.pos = self.pos, end
            return obj, start, end

    def copy_to(self, i: int, insert: str = "") -> None:
        """Write the input up to buffer index ``i``, then ``insert``."""
        self.out.write(self.buf[self.copied:i])
        self.out.write(insert)
        self.copied = i


def _micro(ns: int) -> str:
    """An exact ns count as microseconds with three decimals, as Kineto writes ``ts``."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(int(ns)), 1000)
    return f"{sign}{q}.{r:03d}"


def _num(v: Any) -> Any:
    v = float(v)
    return v if math.isfinite(v) else None


def profile_device(tp: TraceProfile) -> int:
    """The device the profile's logs belong to: where its golden executions ran."""
    ex, kt = tp.trace.executions, tp.trace
    runs = [np.asarray(ep.golden.run_ids) for ep in tp.profiles if ep.golden.run_ids is not None]
    used = np.isin(ex["run"], np.concatenate(runs)) if runs else np.zeros(len(ex), dtype=bool)
    devices = kt.device[used] if used.any() else kt.device
    values, counts = np.unique(devices, return_counts=True)
    return int(values[np.argmax(counts)])


class _Plan:
    """What each kernel event of the trace gets: its execution in the profile, by device, stream, correlation, times."""

    def __init__(self, tp: TraceProfile, base_ns: int) -> None:
        kt = tp.trace
        ex = kt.executions
        self.tp, self.base_ns, self.origin = tp, int(base_ns), int(kt.origin_ns)
        self.device = profile_device(tp)
        self.row_of = np.full(len(kt.signatures), -1, dtype=np.int64)
        sig_rows = np.asarray(tp.signature_rows, dtype=np.int64)
        own = sig_rows >= 0  # the joint row [g] has no signature of its own to annotate
        self.row_of[sig_rows[own]] = np.flatnonzero(own)
        self.conc = kt.concurrent()
        self.warm = np.zeros(len(ex), dtype=bool)
        for row, sid in enumerate(tp.signature_rows):
            mine = np.flatnonzero((ex["kernel_id"] == sid) & ~self.conc & (kt.device == self.device))
            mine = mine[np.argsort(ex["start_ns"][mine], kind="stable")]
            self.warm[mine[:int(tp.kernels["warmup"][row])]] = True
        # Executions by start (numpy, not a dict of tuples: a million kernels cost 8 bytes each to look up).
        self.order = np.argsort(ex["start_ns"], kind="stable")
        self.starts = np.asarray(ex["start_ns"][self.order], dtype=np.int64)
        self.used = np.zeros(len(ex), dtype=bool)
        self.ends = np.ascontiguousarray(ex["end_ns"], dtype=np.int64)
        self.ids = np.column_stack([kt.device, kt.stream, kt.correlation]).astype(np.int64)
        self.matched, self.unmatched, self.zero, self.annotated = 0, 0, 0, 0
        self.pid: Any = None

    def args_for(self, ev: dict[str, Any], i: int, where: str) -> Optional[dict[str, Any]]:
        """The args to add to kernel event ``ev`` (the ``i``-th event), None when it is not the profile's."""
        raw = ev.get("args")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        ts, dur = us_to_ns(ev.get("ts"), "ts", i, where), us_to_ns(ev.get("dur"), "dur", i, where)

        def num(key: str) -> int:
            v = json_int64(args.get(key, -1))
            return -1 if v is None else v

        rel = self.base_ns + ts - self.origin
        j = self._find(rel, rel + dur, num("device"), num("stream"), num("correlation"))
        if j < 0:
            if dur == 0:  # left out of the profile: below the trace's resolution
                self.zero += 1
                return {"fingrav_note": "zero recorded duration: not attributed; its energy is counted between "
                                        "kernels"}
            self.unmatched += 1
            return None
        self.used[j] = True
        self.matched += 1
        kt = self.tp.trace
        if int(kt.device[j]) == self.device and self.pid is None:
            self.pid = ev.get("pid")
        if int(kt.device[j]) != self.device:
            return {"fingrav_note": f"on another device than the power logs' (device {self.device}): not profiled"}
        row = int(self.row_of[kt.executions["kernel_id"][j]])
        if row < 0:
            return {"fingrav_note": "not profiled (see the profile's skipped signatures)"}
        r = self.tp.kernels[row]
        self.annotated += 1
        out = {"fingrav_energy_j": _num(r["energy_j"]), "fingrav_energy_half_width_j": _num(r["energy_half_width_j"]),
               "fingrav_power_w": _num(r["power_w"]), "fingrav_row": row}
        if self.warm[j]:
            out["fingrav_warmup"] = True
        if self.conc[j]:
            out["fingrav_concurrent"] = True
        return out

    def _find(self, start: int, end: int, device: int, stream: int, correlation: int) -> int:
        """The first unmatched execution with these times, device, stream and correlation id (-1: none)."""
        i = int(self.starts.searchsorted(start))
        while i < len(self.starts) and self.starts[i] == start:
            j = int(self.order[i])
            if not self.used[j] and self.ends[j] == end and self.ids[j].tolist() == [device, stream, correlation]:
                return j
            i += 1
        return -1

    def left(self) -> int:
        """Executions of the profile no kernel event of the trace matched."""
        return int(np.sum(~self.used))


def _member_span(text: str, key: str) -> Optional[tuple[int, int]]:
    """Where the value of member ``key`` (the last, as JSON readers keep it) lies in an object's text."""
    span, i = None, 1
    while True:
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        if text[i] == "}":
            return span
        k, i = _FAST.raw_decode(text, i)
        i = _WS.match(text, i).end() + 1  # type: ignore[union-attr]  # the colon
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        _, j = _FAST.raw_decode(text, i)
        if k == key:
            span = (i, j)
        i = _WS.match(text, j).end()  # type: ignore[union-attr]
        if text[i] == ",":
            i += 1


_LAST_ARGS = re.compile(r'"args"[ \t\n\r]*:[ \t\n\r]*\{')
_CLOSE = re.compile(r"[ \t\n\r]*\}")


def _args_span(text: str, args: Any) -> Optional[tuple[int, int]]:
    """Where the event's ``args`` value lies in its text: found fast where it is the last member, as Kineto writes it.

    The last ``"args": {`` in the text is the member only if its value decodes to the event's ``args`` and
    nothing but the event's closing brace follows it (a nested or quoted one is followed by more); else every
    member is walked.
    """
    found = list(_LAST_ARGS.finditer(text))
    if isinstance(args, dict) and found:
        a = found[-1].end() - 1
        try:
            value, b = _FAST.raw_decode(text, a)
        except json.JSONDecodeError:
            value, b = None, -1
        tail = _CLOSE.match(text, b) if b > 0 else None
        if value == args and tail is not None and tail.end() == len(text):
            return a, b
    return _member_span(text, "args")


def _literal(v: Any) -> str:
    """A JSON literal of an added value (None, bool, int, finite float, str)."""
    if v is None or isinstance(v, (bool, str)):
        return json.dumps(v)
    return repr(v) if isinstance(v, float) else str(int(v))


def _insertion(text: str, add: dict[str, Any], ev: dict[str, Any], i: int, where: str) -> tuple[int, str]:
    """Where in an event's text the added args go (an offset), and the text to insert there."""
    members = ", ".join(f'"{k}": {_literal(v)}' for k, v in add.items())
    span = _args_span(text, ev["args"]) if "args" in ev else None
    if span is None:
        return len(text) - 1, f', "args": {{{members}}}'
    a, b = span
    if text[a] != "{":
        raise TraceFormatError(f"{where}: kernel event {i} has args that are not an object; it cannot take the "
                               "energy without changing them")
    empty = _WS.match(text, a + 1).end() == b - 1  # type: ignore[union-attr]
    return b - 1, ("" if empty else ", ") + members


def _is_kernel(ev: Any) -> bool:
    cat = ev.get("cat", "") if isinstance(ev, dict) else ""
    return isinstance(ev, dict) and ev.get("ph") == "X" and isinstance(cat, str) and cat.lower() == "kernel"


def _counter_events(plan: _Plan) -> Iterator[str]:
    """The power logs as counter events under the GPU's pid, on the trace's clock (exact ns as Kineto's ``ts``).

    A generator: an hour of 1 kHz logs is half a GB of text, written as it is made.
    """
    logs = plan.tp.logs
    pid = json.dumps(plan.pid if plan.pid is not None else plan.device)
    shift = plan.origin - plan.base_ns
    for ch in ("total", "compute", "io", "memory"):
        v = np.asarray(logs[ch], dtype=np.float64)
        ok = np.isfinite(v) & np.isfinite(logs["t_ns"])
        name = json.dumps(f"fingrav power {ch} (W)")
        ts = shift + np.rint(np.asarray(logs["t_ns"], dtype=np.float64)[ok]).astype(np.int64)
        w = v[ok]
        for k in range(0, len(ts), 8192):  # Python numbers a block at a time
            for t, x in zip(ts[k:k + 8192].tolist(), w[k:k + 8192].tolist()):
                yield (f'{{"ph": "C", "cat": "fingrav_power", "name": {name}, "pid": {pid}, "tid": 0, '
                       f'"ts": {_micro(t)}, "args": {{"power_w": {x!r}}}}}')


def _copy_events(st: _Stream, plan: _Plan) -> int:
    """Copy the ``traceEvents`` array, the kernel events' args extended and the counters appended; events read."""
    st.expect("[")
    n = 0
    while True:
        c = st.skip_ws()
        if c == "]":
            break
        if n:
            st.expect(",")
        ev, a, b = st.value()
        if _is_kernel(ev):
            text = st.buf[a:b]
            exact = _EXACT.decode(text)
            old = exact.get("args") if isinstance(exact.get("args"), dict) else {}
            there = [k for k in ANNOTATION_KEYS if k in old]
            if there:
                raise ValueError(f"{st.where}: kernel event {n} already has args.{there[0]}: this trace was annotated "
                                 "already; annotate the trace torch.profiler wrote")
            add = plan.args_for(exact, n, st.where)
            if add:
                off, ins = _insertion(text, add, ev, n, st.where)
                st.copy_to(a + off, ins)
        n += 1
    st.copy_to(st.pos)
    for k, event in enumerate(_counter_events(plan)):
        st.out.write(", " + event if n or k else event)
    st.pos += 1
    return n


def _copy_document(st: _Stream, plan: _Plan, meta: dict[str, Any]) -> Optional[int]:
    """Copy the whole document (top-level ``fingrav`` added); the ``baseTimeNanoseconds`` it holds (None: none)."""
    if st.skip_ws() == "[":  # the bare-array form of the Chrome trace format
        _copy_events(st, plan)
        base = None
    else:
        st.expect("{")
        base, first, events = None, True, False
        while st.skip_ws() != "}":
            if not first:
                st.expect(",")
            first = False
            key, _, _ = st.value()
            st.expect(":")
            if key == "traceEvents":
                _copy_events(st, plan)
                events = True
                continue
            value, _, _ = st.value(_EXACT)
            if key == "fingrav":
                raise ValueError(f"{st.where}: has a top-level 'fingrav' already: this trace was annotated already; "
                                 "annotate the trace torch.profiler wrote")
            if key == "baseTimeNanoseconds":
                base = int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None
        if not events:
            raise TraceFormatError(f"{st.where}: no traceEvents list (not a Chrome trace)")
        meta["kernel_events_annotated"] = plan.annotated
        st.copy_to(st.pos, ', "fingrav": ' + json.dumps(meta, allow_nan=False))
        st.pos += 1
    if st.skip_ws():
        raise TraceFormatError(f"{st.where}: more after the JSON document ends; not one Chrome trace")
    st.copy_to(len(st.buf))
    return base


def _clean(v: Any) -> Any:
    """A value JSON can hold: NaN and infinities as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def _meta(tp: TraceProfile, device: int) -> dict[str, Any]:
    return {"generator": f"fingrav-native {__version__}", "device": device, "sensor": tp.sensor,
            "kernel_args": {"fingrav_energy_j": "the signature's energy per execution (J), from the kernel table",
                            "fingrav_energy_half_width_j": "its 95 % interval's half-width (J)",
                            "fingrav_power_w": "the signature's mean power over an execution (W)",
                            "fingrav_row": "its row in the kernel table (descending total energy)",
                            "fingrav_warmup": "an execution before the signature's steady state",
                            "fingrav_concurrent": "an execution beside another kernel on the device"},
            "power_counters": "cat fingrav_power: each power log at the middle of what it measures, on this trace's "
                              "clock (ts in us from baseTimeNanoseconds, after the clock map and measured offset)",
            "closure": None if tp.closure is None else _clean(asdict(tp.closure))}


def annotate_trace(trace: Path, profile: TraceProfile, out: Path, *, overwrite: bool = False) -> str:
    """Write a Kineto trace again with the profile's power in it: energies in kernel args, power counter tracks.

    Parameters
    ----------
    trace : str or path
        The torch.profiler (Kineto) Chrome trace the profile was made from
        (``.json`` or ``.json.gz``).
    profile : TraceProfile
        From :func:`~fingrav_native.profile_trace` on that trace.
    out : str or path
        The annotated copy (gzipped when it ends in ``.gz``); checked first
        (:func:`check_annotation_out`).
    overwrite : bool
        Replace an existing ``out`` (never the trace itself).

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        ``out`` refused (named); ``profile`` not a TraceProfile; a trace
        annotated already; a profile made from another trace (its kernels
        and the trace's do not match, counted).
    TraceFormatError
        The trace is not a readable Chrome trace (truncated, not JSON), or
        its ``baseTimeNanoseconds`` is not the one its text first gave.
    FileNotFoundError
        No such trace.

    Notes
    -----
    What is added, and why the copy streams, is in the module's docstring
    (:mod:`fingrav_native.files._annotate`). Counter events follow the Trace
    Event Format (``"ph": "C"``, process-scoped: ``name`` and ``pid`` make
    the track, each ``args`` key a series); kernel events are matched to the
    profile's executions by device, stream, correlation id and their exact
    start and end (``ts`` and ``dur`` in integer ns from
    ``baseTimeNanoseconds``, as the reader placed them). Written to a
    temporary file in the same folder and renamed, so a failure leaves
    nothing under ``out``.
    """
    if not isinstance(profile, TraceProfile):
        raise ValueError(f"profile: expected a TraceProfile (from profile_trace), got {type(profile).__name__}")
    o = check_annotation_out(trace, out, overwrite=overwrite)
    t = os.fspath(trace)
    if not os.path.isfile(t):
        raise FileNotFoundError(f"trace={t!r}: no such trace file")
    where = f"trace={t!r}"
    plan = _Plan(profile, scan_base_time(t) or 0)
    meta = _meta(profile, plan.device)
    # The package's one writer (files/_outputs.py): written beside and renamed, a plain file's permissions.
    with atomic_output(o) as fh:
        # Closing the text layer closes the gzip layer (its trailer written); the file closes after.
        raw = gzip.GzipFile(fileobj=fh, mode="wb") if o.endswith(".gz") else fh
        with _open_text(t) as f, io.TextIOWrapper(cast(IO[bytes], raw), encoding="utf-8") as w:
            try:
                base = _copy_document(_Stream(f, w, where), plan, meta)
            except (UnicodeDecodeError, EOFError, gzip.BadGzipFile, OSError) as exc:
                raise TraceFormatError(f"{where}: not readable ({exc})") from None
        _check_done(plan, base, where)
    return o


def _check_done(plan: _Plan, base: Optional[int], where: str) -> None:
    """The copy placed every kernel where the reader did, and met every execution of the profile."""
    if (base or 0) != plan.base_ns:
        raise TraceFormatError(f"{where}: baseTimeNanoseconds is {base} in the document but {plan.base_ns} in its "
                               "text; a trace that names it twice cannot be annotated")
    if plan.unmatched or plan.left():
        raise ValueError(f"profile: {plan.unmatched} kernel events of {where} are not in the profile's trace and "
                         f"{plan.left()} of its executions are not in this trace ({plan.matched} matched): the "
                         "profile was made from another trace")
