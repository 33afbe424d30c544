"""The streaming Kineto reader reads what a whole-document json.loads reads, chunk by chunk, in bounded memory.

The reference here is the plain reading the streaming scanner replaced: the
whole document through ``json.loads`` with numbers as ``Decimal``, then each
event checked in Python. Random documents (numbers of many digits, escapes,
duplicate keys, categories in any case, malformed kernel fields, runtime
calls and ProfilerSteps) must give the same KernelTrace, to the bit, or the
same refusal, word for word; any split of the bytes into chunks must give the
same arrays; what the reader keeps is bounded by the kernels, not by the
document.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import os
import unicodedata
from decimal import Decimal, DecimalException, InvalidOperation
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fingrav_native._checks import short_repr
from fingrav_native.files import _kineto, read_kineto_trace
from fingrav_native.insitu import KernelTrace, TraceFormatError
from fingrav_native.insitu._trace import NO_LAUNCH, STEP_DTYPE, printable_name, signature_dtype
from fingrav_native.records import EXECUTION_DTYPE
from real_data import require

KINETO_FILES = ["hta/sampled_rank-0.json.gz", "hta/nccl_data.ProfilerStep5.json.gz", "hta/inference_rank_1.json.gz",
                "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "kineto/gpu_metrics_input.json",
                "kineto/resnet50_worker0.1623143089861.ProfilerStep6.pt.trace.json.gz"]
DOCS = settings(max_examples=150, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# --------------------------------------------------------------------------- the reference reading

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
MAX_US = Decimal(2**63) / 1000
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime")
STEP_CATS = ("user_annotation", "operator", "cpu_op")


def _bad(where: str, what: str) -> TraceFormatError:
    return TraceFormatError(f"{where}: {what}")


def _int64(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, Decimal):
        try:
            if not v.is_finite() or abs(v) > I64_MAX or v != v.to_integral_value():
                return None
        except DecimalException:  # abs(1E+999999999) overflows the context (it escaped as decimal.Overflow)
            return None
        v = int(v)
    return v if isinstance(v, int) and I64_MIN <= v <= I64_MAX else None


def _us(v: Any, what: str, i: int, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, Decimal)):
        raise _bad(where, f"kernel event {i} has {what}={short_repr(v)}; expected microseconds")
    try:
        d = Decimal(v)
        if not d.is_finite() or abs(d) >= MAX_US:
            raise InvalidOperation
        return int((d * 1000).to_integral_value())
    except (DecimalException, ValueError):
        raise _bad(where, f"kernel event {i} has {what}={short_repr(v)}; expected microseconds that fit "
                   "int64 ns") from None


def _dims(v: Any, what: str, i: int, where: str) -> tuple[int, int, int]:
    if v is None:
        return (-1, -1, -1)
    if isinstance(v, list) and 1 <= len(v) <= 3:
        got = [x for x in (_int64(x) for x in v) if x is not None] + [1] * (3 - len(v))
        if len(got) == 3:
            return (got[0], got[1], got[2])
    raise _bad(where, f"kernel event {i} has args.{what}={short_repr(v)}; expected up to three integers")


def _type_shown(v: Any) -> str:
    """The type a refusal names (lists and dicts are already described by short_repr)."""
    if isinstance(v, (list, dict)):
        return ""
    if v is None:
        return " (null)"
    return {bool: " (a boolean)", str: " (a string)", float: " (a non-finite number)"}.get(type(v), " (a number)")


def _reference_kernel(ev: dict[str, Any], i: int, base: int, where: str) -> tuple[Any, ...]:
    if "name" not in ev:
        raise _bad(where, f"kernel event {i} has no name; every Kineto kernel event names its kernel")
    name = ev["name"]
    if not isinstance(name, str):
        raise _bad(where, f"kernel event {i} has name={short_repr(name)}; expected a string")
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    start, dur = _us(ev.get("ts"), "ts", i, where), _us(ev.get("dur"), "dur", i, where)
    if dur < 0:
        raise _bad(where, f"kernel event {i} has dur={short_repr(ev.get('dur'))} < 0")
    if not (I64_MIN <= base + start <= I64_MAX and I64_MIN <= base + start + dur <= I64_MAX):
        raise _bad(where, f"kernel event {i}: ts + dur + baseTimeNanoseconds does not fit int64 ns")
    if ev.get("args") is not None and not isinstance(ev["args"], dict):
        raise _bad(where, f"kernel event {i} has args={short_repr(ev['args'])}{_type_shown(ev['args'])}; expected "
                   "an object of the launch's ids and dimensions")
    grid, block = _dims(args.get("grid"), "grid", i, where), _dims(args.get("block"), "block", i, where)
    ids = []
    for key in ("device", "stream", "correlation"):
        v = args.get(key)
        if v is None:  # absent or null: the trace does not say
            ids.append(-1)
        elif isinstance(v, bool) or not isinstance(v, (int, Decimal)):
            raise _bad(where, f"kernel event {i} has args.{key}={short_repr(v)}{_type_shown(v)}; expected an "
                       "integer (Kineto writes ids as JSON numbers)")
        elif _int64(v) is None:
            raise _bad(where, f"kernel event {i} has args.{key}={short_repr(v)}; expected an integer that fits int64")
        else:
            ids.append(_int64(v))
    return (base + start, base + start + dur, name, grid, block, *ids)


def _reference_context(ev: dict[str, Any], cat: str, name: str, base: int, launches: dict[int, int],
                       steps: list[tuple[int, int, int]]) -> None:
    try:
        ts, d = _us(ev.get("ts"), "ts", 0, ""), _us(ev.get("dur", 0), "dur", 0, "")
    except TraceFormatError:
        return
    if not (I64_MIN <= base + ts <= I64_MAX and I64_MIN <= base + ts + max(d, 0) <= I64_MAX):
        return
    if cat in STEP_CATS:
        n = name[len("ProfilerStep#"):]
        if n.isascii() and n.isdigit() and len(n) <= 18:
            steps.append((int(n), base + ts, base + ts + max(d, 0)))
    else:
        a = ev.get("args")
        c = _int64(a.get("correlation")) if isinstance(a, dict) else None
        if c is not None:
            launches.setdefault(c, base + ts)


def _reference_base(doc: dict[str, Any], where: str) -> int:
    base = doc.get("baseTimeNanoseconds", 0)
    if isinstance(base, str) and base.isascii() and base.isdigit() and len(base) <= 19:
        base = int(base)
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base <= I64_MAX:
        raise _bad(where, f"baseTimeNanoseconds={short_repr(base)}; expected an integer of ns that fits int64")
    return base


def reference_read(path: str) -> KernelTrace:
    """The whole document through json.loads (numbers as Decimal), each event checked in Python."""
    where = f"trace={path!r}"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        text = f.read().decode("utf-8")
    try:
        doc = json.loads(text, parse_float=Decimal, parse_constant=float)
    except ValueError as exc:
        raise _bad(where, f"the file: not JSON ({exc})") from None
    doc = {"traceEvents": doc} if isinstance(doc, list) else doc
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise _bad(where, "no traceEvents list (not a Chrome trace)")
    base = _reference_base(doc, where)
    rows, launches, steps = [], {}, []  # type: ignore[var-annotated]
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat", "").lower() if isinstance(ev.get("cat", ""), str) else ""
        name = ev.get("name", "") if isinstance(ev.get("name", ""), str) else ""
        if cat in RUNTIME_CATS or (cat in STEP_CATS and name.startswith("ProfilerStep#")):
            _reference_context(ev, cat, name, base, launches, steps)
        elif cat == "kernel":
            rows.append(_reference_kernel(ev, i, base, where))
    if not rows:
        raise _bad(where, "no GPU kernel events (cat 'kernel'); was the profiler run with ProfilerActivity.CUDA?")
    return _reference_trace(rows, launches, steps, path)


def _reference_trace(rows: list[tuple[Any, ...]], launches: dict[int, int], steps: list[tuple[int, int, int]],
                     source: str) -> KernelTrace:
    """KernelTrace.from_rows as it was, one Python row at a time."""
    start = np.array([r[0] for r in rows], dtype=np.int64)
    order = np.argsort(start, kind="stable")
    origin = int(start[order[0]])
    sig_of: dict[Any, int] = {}
    kid = [sig_of.setdefault((rows[i][2], rows[i][3], rows[i][4]), len(sig_of)) for i in order]
    shown = {key: printable_name(key[0]) for key in sig_of}
    sigs = np.zeros(len(sig_of), dtype=signature_dtype(max(len(v) for v in shown.values())))
    for key, k in sig_of.items():
        sigs[k] = (k, shown[key], key[1], key[2])
    ex = np.zeros(len(rows), dtype=EXECUTION_DTYPE)
    ex["run"] = np.arange(len(rows))
    ex["kernel_id"] = kid
    ex["start_ns"] = start[order] - origin
    ex["end_ns"] = np.array([r[1] for r in rows], dtype=np.int64)[order] - origin
    ex["start_err_ns"] = ex["end_err_ns"] = 1000.0
    col = np.array([r[5:] for r in rows], dtype=np.int64)[order]
    launch = np.array([launches.get(int(c), NO_LAUNCH) for c in col[:, 2]], dtype=np.int64)
    st_rows, last = [], {}  # type: ignore[var-annotated]
    for k, a, b in sorted(steps, key=lambda x: (x[1], x[0])):
        # One step listed under two categories meets itself in time; the same number elsewhere is another step.
        if k in last and (a == last[k][0] or a < last[k][1]):
            continue
        last[k] = (a, b)
        st_rows.append((k, a, b))
    return KernelTrace(executions=ex, signatures=sigs, device=col[:, 0], stream=col[:, 1], correlation=col[:, 2],
                       origin_ns=origin, clock="unix-epoch", source=source,
                       launch_ns=np.where(launch != NO_LAUNCH, launch - origin, NO_LAUNCH),
                       steps=np.array([(k, a - origin, b - origin) for k, a, b in st_rows], dtype=STEP_DTYPE))


def _same(a: KernelTrace, b: KernelTrace) -> bool:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            if not (x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()):
                return False
        elif x != y:
            return False
    return True


def _outcome(read: Any, path: str) -> Any:
    try:
        return read(path)
    except TraceFormatError as exc:
        return str(exc)


def _assert_same_outcome(path: str) -> Any:
    ours, ref = _outcome(read_kineto_trace, path), _outcome(reference_read, path)
    if isinstance(ref, str) or isinstance(ours, str):
        # Where the JSON breaks is said in bytes here, in characters by json: only the refusal must agree.
        assert ours.split("not JSON (")[0] == ref.split("not JSON (")[0] if "not JSON" in ref else ours == ref
    else:
        assert _same(ours, ref)
    return ours


# --------------------------------------------------------------------------- documents
# Hypothesis validates a strategy object the first time it is drawn from, which costs more than the draw: the
# strategies below are built once (the same strategies draw the same documents) rather than at every draw.


@functools.lru_cache(maxsize=None, typed=True)
def _one_of(*elements: Any) -> Any:
    """``st.sampled_from(elements)``, one object per set of elements."""
    return st.sampled_from(elements)

def _number(draw: Any) -> str:
    """A JSON number as text: small and int64-edge integers, decimals of up to 40 digits, exponents."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return str(draw(st.integers(-10**6, 10**6)))
    if kind == 1:
        return str(draw(_one_of(2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 9223372036854775807000,
                                          9223372036854775, 9223372036854776)))
    digits = draw(st.text("0123456789", min_size=1, max_size=40))
    digits = digits.lstrip("0") or "0"
    sign = draw(_one_of("", "-"))
    frac = draw(st.text("0123456789", min_size=1, max_size=40)) if kind >= 3 else ""
    exp = draw(_one_of("", "", "e3", "E-3", "e+2", "e-30", "e20", "E999999999")) if kind >= 4 else ""
    if kind == 2:
        return sign + digits + "." + draw(_one_of("0", "5", "500", "4999999999999999999999999999999",
                                                           "5000000000000000000000000000001", "25", "75"))
    return sign + digits + ("." + frac if frac else "") + exp


@st.composite
def numbers(draw: Any) -> str:
    return _number(draw)



numbers = functools.lru_cache(maxsize=None)(numbers)

def _string(draw: Any, text: str) -> str:
    """``text`` as a JSON string, escaped one of several ways."""
    how = draw(st.integers(0, 2))
    if how == 0:
        return json.dumps(text, ensure_ascii=False)
    if how == 1:
        return json.dumps(text, ensure_ascii=True)
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x10000 else c for c in text) + '"'


@st.composite
def values(draw: Any, kind: str) -> Optional[str]:
    """A field's value as JSON text (None: the key is left out); mostly well formed, sometimes not."""
    pick = draw(st.integers(0, 99))
    if pick == 0:
        return None
    if pick <= 2:
        return draw(_one_of("null", "true", "false", "NaN", "-Infinity", "[1]", "[]", '{"a": 1, "b": [2]}',
                                     '"soon"', '"12"'))
    if kind == "number":
        return _number(draw) if pick < 15 else str(draw(st.integers(-1, 300)))
    if kind == "dims":
        if pick < 10:
            items = draw(st.lists(st.one_of(numbers(), _one_of("true", "null", '"8"', "[1]", "1.0", "2e1")),
                                  min_size=0, max_size=4))
        else:
            items = [str(draw(_one_of(1, 2, 8, 256, 1024))) for _ in range(draw(st.integers(1, 3)))]
        return "[" + ", ".join(items) + "]"
    if kind == "name":
        return _string(draw, draw(st.text(st.characters(codec="utf-8"), max_size=12) if pick < 30 else
                                  _one_of("gemm", "gemv", "ProfilerStep#3", "a\x00b", "a\\x00b", "\u00e9")))
    if kind == "cat":
        return _string(draw, draw(_one_of("kernel", "Kernel", "KERNEL", "\u212aernel", "kernel ",
                                                   "cuda_runtime", "CUDA_Runtime", "hip_runtime", "runtime",
                                                   "cuda_driver", "user_annotation", "Operator", "cpu_op",
                                                   "gpu_user_annotation", "python_function", "\u0130kernel")
                                  if pick < 30 else _one_of("kernel", "cuda_runtime", "user_annotation")))
    return _string(draw, draw(_one_of("B", "i", "x") if pick < 6 else st.just("X")))



values = functools.lru_cache(maxsize=None)(values)

def _object(draw: Any, members: list[tuple[str, Optional[str]]]) -> str:
    """An object's text, its members shuffled, some keys written twice (the last one counts) or escaped."""
    members = [(k, v) for k, v in members if v is not None]
    if members and draw(st.integers(0, 5)) == 0:
        k, _ = draw(_one_of(*members))
        members.insert(0, (k, draw(values("number")) or "0"))  # a duplicate the later one overrides
    members = draw(st.permutations(members))
    ws = draw(_one_of("", " ", "\n  ", "\t"))
    return "{" + ("," + ws).join(f"{_string(draw, k)}:{ws}{v}" for k, v in members) + "}"


@st.composite
def events(draw: Any, i: int) -> str:
    if draw(st.integers(0, 30)) == 0:
        return draw(_one_of("null", "[]", '"X"', "7", '[{"ph": "X", "cat": "kernel"}]'))
    cat = draw(values("cat"))
    name = draw(values("name"))
    if cat is not None and "tion" in cat and draw(st.integers(0, 3)) > 0:
        name = json.dumps(f"ProfilerStep#{draw(_one_of('0', '1', '2', '3', '02', '', 'x'))}")
    args = _object(draw, [("device", draw(values("number"))), ("stream", draw(values("number"))),
                          ("correlation", draw(_one_of(str(i % 7), str(i % 5 + 1)))
                           if draw(st.integers(0, 3)) else draw(values("number"))),
                          ("grid", draw(values("dims"))), ("block", draw(values("dims"))),
                          ("junk", draw(_one_of('{"x": [[[]]], "y": "\\u00e9"}', "[1.5e300, -0]", '""')))])
    if draw(st.integers(0, 20)) == 0:
        args = draw(_one_of("[]", "null", '"args"'))
    ts = draw(_one_of(str(1000 + 7 * i), f"{1000 + 7 * i}.{draw(st.integers(0, 999)):03d}")) \
        if draw(st.integers(0, 9)) else draw(values("number"))
    dur = draw(_one_of("2.5", "0", "10", "3.25")) if draw(st.integers(0, 9)) else draw(values("number"))
    return _object(draw, [("ph", draw(values("ph"))), ("cat", cat), ("name", name), ("ts", ts), ("dur", dur),
                          ("args", args), ("pid", "1"), ("tid", '"stream 7"')])



events = functools.lru_cache(maxsize=None)(events)

@st.composite
def documents(draw: Any) -> str:
    evs = [draw(events(i)) for i in range(draw(st.integers(0, 16)))]
    if draw(st.integers(0, 4)) == 0:
        # A kernel that always reads, so more documents get past "no kernel events".
        evs.append('{"ph": "X", "cat": "kernel", "name": "k", "ts": 5.5, "dur": 1}')
    array = "[" + ", ".join(evs) + "]"
    if draw(st.integers(0, 15)) == 0:
        return array  # the bare-array form
    base = draw(_one_of(None, "1763900000123456789", '"1763900000123456789"', "0", "1763900000123456789")
                if draw(st.integers(0, 5)) else
                _one_of("-1", '"12a"', "1.5", "9223372036854775807", "9223372036854775808", "null", "[]"))
    members = [("schemaVersion", "1"), ("traceEvents", array), ("baseTimeNanoseconds", base),
               ("deviceProperties", '[{"name": "GPU", "totalGlobalMem": 85899345920}]')]
    if draw(st.integers(0, 10)) == 0:
        members.append(("traceEvents", draw(_one_of("[]", "{}", array))))
    members = draw(st.permutations(members))
    return "{" + ", ".join(f'"{k}": {v}' for k, v in members if v is not None) + "}"


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", KINETO_FILES)
def test_real_traces_read_as_the_whole_document_reads_them(name: str) -> None:
    path = require(f"traces/{name}")
    assert isinstance(_assert_same_outcome(path), KernelTrace)


@DOCS
@given(doc=documents(), gz=st.booleans())
def test_random_documents_read_as_the_whole_document_reads_them(tmp_path, doc: str, gz: bool) -> None:
    path = str(tmp_path / ("t.json.gz" if gz else "t.json"))
    with (gzip.open(path, "wt", encoding="utf-8") if gz else open(path, "w", encoding="utf-8")) as f:
        f.write(doc)
    _assert_same_outcome(path)


@DOCS
@given(doc=documents(), chunk=st.integers(1, 64))
def test_any_split_into_chunks_reads_the_same(tmp_path, monkeypatch, doc: str, chunk: int) -> None:
    # Every token (a number, an escape, a UTF-8 character, a literal) is split somewhere across chunks.
    path = str(tmp_path / "t.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
    whole = _outcome(read_kineto_trace, path)
    monkeypatch.setattr(_kineto, "_CHUNK", chunk)
    cut = _outcome(read_kineto_trace, path)
    assert cut == whole if isinstance(whole, str) else _same(cut, whole)


def test_a_real_trace_read_a_byte_at_a_time_is_the_same(monkeypatch) -> None:
    path = require("traces/kineto/gpu_metrics_input.json")
    whole = read_kineto_trace(path)
    monkeypatch.setattr(_kineto, "_CHUNK", 1)
    assert _same(read_kineto_trace(path), whole)


@pytest.mark.parametrize("text", [
    "", "   ", "{", '{"traceEvents": [', '{"traceEvents": []', '{"traceEvents": [] ,}', '{"traceEvents": [1,]}',
    '{"traceEvents": [01]}', '{"traceEvents": [1.]}', '{"traceEvents": [1e]}', '{"traceEvents": [-]}',
    '{"traceEvents": [tru]}', '{"traceEvents": [nul]}', '{"traceEvents": [-Inf]}', '{"traceEvents": ["\\x"]}',
    '{"traceEvents": ["\\u12g4"]}', '{"traceEvents": ["a\nb"]}', '{"traceEvents": ["abc]}', "{'traceEvents': []}",
    '{"traceEvents": []} x', '{"traceEvents": [] "b": 1}', '{"traceEvents" []}', '{"traceEvents": [}]',
    '\ufeff{"traceEvents": []}', '{"traceEvents": [1 2]}', '{"traceEvents": [' + "9" * 4301 + "]}",
])
def test_what_is_not_json_is_refused_naming_the_file(tmp_path, text: str) -> None:
    path = str(tmp_path / "broken.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    with pytest.raises(TraceFormatError, match=r"trace='.*broken\.json': .*not JSON"):
        read_kineto_trace(path)
    with pytest.raises(TraceFormatError, match="not JSON"):
        reference_read(path)


@pytest.mark.parametrize("raw", [b'{"traceEvents": ["\xff"]}', b'{"traceEvents": ["\xc0\xaf"]}',
                                 b'{"traceEvents": ["\xed\xa0\x80"]}', b'{"traceEvents": ["\xf4\x90\x80\x80"]}',
                                 b'{"traceEvents": ["\xe2\x82"]}', b'{"traceEvents": [] }\x80'])
def test_what_is_not_utf8_is_refused_naming_the_file(tmp_path, raw: bytes) -> None:
    path = tmp_path / "latin.json"
    path.write_bytes(raw)
    with pytest.raises(TraceFormatError, match=r"latin\.json': not JSON \(not UTF-8 text"):
        read_kineto_trace(path)
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")


def test_category_case_folds_as_python_lower_does(tmp_path) -> None:
    # The scanner folds ASCII letters and U+212A KELVIN SIGN (whose lower() is 'k'); every other character
    # lowers to something non-ASCII, so no category of the reader's can match it. Pinned for this Python.
    assert [c for c in range(0x80, 0x110000) if chr(c).lower().isascii()] == [0x212A]
    assert unicodedata.name("\u212a") == "KELVIN SIGN"
    path = str(tmp_path / "kelvin.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": [{"ph": "X", "cat": "\u212aERNEL", "name": "k", "ts": 1, "dur": 2},
                                   {"ph": "X", "cat": "\u0130kernel", "name": "k", "ts": 1, "dur": 2}]}, f)
    assert len(_assert_same_outcome(path)) == 1


def _ops_document(cpu_ops: int, kernels: int) -> str:
    """A trace of ``cpu_ops`` CPU ops with large arguments and ``kernels`` kernels after them."""
    op = ('{"ph": "X", "cat": "cpu_op", "name": "aten::%d", "pid": 1, "tid": 1, "ts": %d.5, "dur": 3, '
          '"args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"], "Call stack": "%s"}}')
    k = ('{"ph": "X", "cat": "kernel", "name": "gemm_%d", "ts": %d, "dur": 2, '
         '"args": {"device": 0, "stream": 7, "correlation": %d, "grid": [8, 1, 1], "block": [256, 1, 1]}}')
    evs = [op % (i, i, "x" * 200) for i in range(cpu_ops)] + [k % (i % 3, 10 * i, i) for i in range(kernels)]
    return '{"traceEvents": [' + ",\n".join(evs) + '], "baseTimeNanoseconds": 1763900000000000000}'


def test_what_is_kept_grows_with_the_kernels_not_the_document(tmp_path) -> None:
    # 40 000 CPU ops (10 MB of JSON) before 3 kernels: the scan keeps the kernels' records, a name table and
    # one event's fields, a few kB, as the same three kernels alone do.
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_text(_ops_document(40_000, 3))
    small.write_text(_ops_document(0, 3))
    kept = {}
    for path in (big, small):
        got = _kineto._scan(str(path), "t")
        assert got["status"] == 0 and len(got["start"]) == 3
        kept[path.name] = got["kept_bytes"]
    assert os.path.getsize(big) > 10_000_000
    assert kept["big.json"] < 4096 and kept["big.json"] <= kept["small.json"] + 512, kept


def test_the_cap_on_what_is_kept_refuses_kernels_not_a_large_document(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(_kineto, "MAX_KEPT_BYTES", 64 << 10)
    path = tmp_path / "ops.json"
    path.write_text(_ops_document(20_000, 10))  # 5 MB of JSON, 10 kernels: read
    assert os.path.getsize(path) > 80 * (64 << 10)
    assert len(read_kineto_trace(path)) == 10
    path.write_text(_ops_document(0, 5_000))  # 5000 kernels keep more than 64 kB: refused, named
    with pytest.raises(TraceFormatError, match=r"ops\.json': what the reader keeps .* passed 65536 bytes"):
        read_kineto_trace(path)
    # One huge token where a field is read (a name, a number's digits) is bounded the same way.
    for field in ('"name": "%s"' % ("n" * (100 << 10)), '"ts": 1.%s' % ("0" * (100 << 10)),
                  '"args": {"grid": [1.%s]}' % ("0" * (100 << 10))):
        path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", %s}]}' % field)
        with pytest.raises(TraceFormatError, match=r"what the reader keeps .* passed 65536 bytes"):
            read_kineto_trace(path)


def test_a_damaged_gzip_stream_is_named_as_such_even_where_its_json_breaks_first(tmp_path) -> None:
    # The scan stops at the JSON's first fault, but the gzip stream is read on: its damage is the cause.
    raw = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"}, ' * 5000 + b"oops]}")
    path = tmp_path / "cut.json.gz"
    path.write_bytes(raw[: len(raw) - 8])
    with pytest.raises(TraceFormatError, match=r"cut\.json\.gz': cannot read it"):
        read_kineto_trace(path)
    path.write_bytes(raw)
    with pytest.raises(TraceFormatError, match=r"cut\.json\.gz': the file: not JSON \(Expecting value"):
        read_kineto_trace(path)


@pytest.mark.parametrize(("ts", "ns"), [
    ("1.0005", 1000), ("1.0015", 1002), ("-1.0005", -1000), ("0.0000001", 0), ("2.5e-3", 2), ("3.5e-3", 4),
    ("1.4999999999999999999999999999999e-3", 2),  # 28 significant digits first (1.500...0), then half-even
    ("9223372036854775.807", 2**63 - 1), ("1E+3", 1_000_000),
    ("123456789012345678901234567890e-15", 123456789012345679),
    ("1e-99999999999999999999", 0),  # past what Decimal() takes (it raised InvalidOperation): read as 0 ns
    ("9223372036854775.807999999999", 2**63),  # below 2^63 / 1000 us, 2^63 ns once rounded: off the clock
    ("9223372036854775.8079999999999", None),  # 29 digits: abs() rounds it to 2^63 / 1000 first
    ("-9223372036854775.808", None), ("1e999999999", None),
])
def test_microseconds_become_ns_as_decimal_rounds_them(tmp_path, ts: str, ns: Optional[int]) -> None:
    try:
        d = Decimal(ts)
        assert ns == (None if abs(d) >= MAX_US else int((d * 1000).to_integral_value()))  # what the old path did
    except DecimalException:  # abs() overflows the context, or Decimal() refuses the exponent
        pass
    path = tmp_path / "ts.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": %s, "dur": 0}]}' % ts)
    if ns is None:
        with pytest.raises(TraceFormatError, match=r"kernel event 0 has ts=.*; expected microseconds that fit int64 ns"):
            read_kineto_trace(path)
    elif ns > I64_MAX:
        with pytest.raises(TraceFormatError, match=r"kernel event 0: ts \+ dur \+ baseTimeNanoseconds does not fit"):
            read_kineto_trace(path)
    else:
        assert read_kineto_trace(path).origin_ns == ns


def test_silently_wrong_steps_that_repeat_one_number_are_each_an_iteration(tmp_path) -> None:
    # A profiler started afresh (or a schedule that repeats) names every iteration ProfilerStep#1: 300 of them
    # were read as one iteration. One step listed under two categories (user_annotation and cpu_op, the same
    # interval) is still one.
    events = [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10.0 + 100 * i, "dur": 20.0, "pid": 0, "tid": 7,
               "args": {"device": 0, "stream": 7, "correlation": i + 1, "grid": [1, 1, 1], "block": [64, 1, 1]}}
              for i in range(300)]
    events += [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 100.0 * i, "dur": 90.0,
                "pid": 1, "tid": 1} for i in range(300)]
    events += [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 100.0 * i, "dur": 90.0,
                "pid": 1, "tid": 1} for i in range(0, 300, 7)]
    path = tmp_path / "repeat.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    kt = read_kineto_trace(str(path))
    assert len(kt.steps) == 300
    assert np.all(np.diff(kt.steps["start_ns"]) == 100_000)
    _assert_same_outcome(str(path))  # the whole-document reading agrees


@pytest.mark.parametrize(("args", "message"), [
    ('{"device": "0", "stream": 7, "correlation": 1}', r"args.device='0' \(a string\); expected an integer"),
    ('{"device": 0, "stream": "7", "correlation": 1}', r"args.stream='7' \(a string\); expected an integer"),
    ('{"device": 0, "stream": 7, "correlation": "1"}', r"args.correlation='1' \(a string\); expected an integer"),
    ('{"device": true, "stream": 7}', r"args.device=True \(a boolean\); expected an integer"),
    ('{"device": 0, "stream": [7]}', r"args.stream=a list of 1 items; expected an integer"),
    ('{"device": 0, "correlation": NaN}', r"args.correlation=nan \(a non-finite number\); expected an integer"),
    ('"0"', r"args='0' \(a string\); expected an object"),
    ("[0, 7]", r"args=a list of 2 items; expected an object"),
])
def test_silently_wrong_kineto_ids_of_another_type_are_refused_not_read_as_unknown(tmp_path, args, message):
    # Each was read as -1 ("the trace does not say"): two streams' kernels merged, launches unmatched.
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 2, "args": '
                 f'{{"device": 0, "stream": 7, "correlation": 1}}}}, {{"ph": "X", "cat": "kernel", "name": "gemm", '
                 f'"ts": 5, "dur": 2, "args": {args}}}]}}')
    with pytest.raises(TraceFormatError, match=rf"trace='.*t\.json': kernel event 1 has {message}"):
        read_kineto_trace(p)
    assert _outcome(reference_read, str(p)) == _outcome(read_kineto_trace, str(p))


def test_silently_wrong_kineto_kernel_without_a_name_is_refused_not_named_empty(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2, "args": {"device": 0}}]}')
    with pytest.raises(TraceFormatError, match=r"kernel event 0 has no name"):
        read_kineto_trace(p)


def test_kineto_ids_absent_or_null_stay_unknown(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "g", "ts": 1, "dur": 2, "args": '
                 '{"device": null}}, {"ph": "X", "cat": "kernel", "name": "g", "ts": 5, "dur": 2, "args": null}]}')
    kt = read_kineto_trace(p)
    assert kt.device.tolist() == [-1, -1] and kt.stream.tolist() == [-1, -1]
