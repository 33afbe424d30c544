"""The kernels of an application's profiler trace as one value: :class:`KernelTrace`, and what its readers share.

Every trace reader (``files/``: Kineto, rocprofv3 CSV / JSON / rocpd) produces a :class:`KernelTrace`:
executions on the trace's own clock, each kernel's signature (name, grid, block), the iteration steps.
The errors a trace is refused with (:class:`TraceFormatError`) and the row checks the readers share live
here, below the readers, so the analysis never imports a file format.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal, DecimalException, InvalidOperation
from typing import Any, Optional

import numpy as np

from fingrav_native._checks import instance_of, integer_in, short_repr, whole_numbers
from fingrav_native._errors import FingravError
from fingrav_native.records._layouts import EXECUTION_DTYPE, validate_executions
from fingrav_native.records._log_layouts import KERNEL_SIGNATURE_DTYPE as KERNEL_SIGNATURE_DTYPE  # re-exported
from fingrav_native.records._log_layouts import STEP_DTYPE as STEP_DTYPE
from fingrav_native.records._log_layouts import signature_dtype

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1



#: How a trace made of fingrav's own launch records (``fingrav run``, ``files.read_launches``) names its source;
#: the vendor's tool follows in parentheses.
NATIVE_LAUNCH_SOURCE = "fingrav native launch capture"



def printable_name(name: str) -> str:
    """A kernel name as it can be stored and printed: control characters escaped (``\\x00``).

    numpy's fixed-width strings drop trailing NULs, so ``"gemm"`` and ``"gemm\\0"`` would print
    alike and their rows collide; with any control character the whole name is backslash-escaped
    (backslashes doubled too), so distinct names stay distinct.
    """
    if name.isprintable():
        return name
    return name.encode("unicode_escape").decode("ascii")




#: Kineto's categories of runtime calls that launch kernels (CUDA and ROCm builds).
RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime")


#: A launch time the trace does not give.
NO_LAUNCH = np.iinfo(np.int64).min


#: The host clock behind each clock name a trace reader gives (:attr:`KernelTrace.clock`): what a
#: power capture's logs must be mapped onto. Kineto's ``"unix-epoch"`` is CLOCK_REALTIME;
#: rocprofv3 and rocpd stamp on CLOCK_BOOTTIME.
TRACE_CLOCKS = {"unix-epoch": "CLOCK_REALTIME", "CLOCK_REALTIME": "CLOCK_REALTIME",
                "CLOCK_BOOTTIME": "CLOCK_BOOTTIME", "CLOCK_MONOTONIC": "CLOCK_MONOTONIC"}


#: :attr:`KernelTrace.device_numbering` when the devices are GPU ordinals.
GPU_ORDINAL = "GPU ordinal"


class TraceFormatError(ValueError, FingravError):
    """The file is not a Chrome trace with GPU kernel events (the message says what is missing)."""


class TraceFileNotFoundError(TraceFormatError, FileNotFoundError):
    """No file at the trace's path: a FileNotFoundError, as ``open`` raises, and a trace that cannot be read."""


def missing_trace(where: str) -> TraceFileNotFoundError:
    """The error for a trace path that names no file (``where`` is ``"trace='...'"``)."""
    return TraceFileNotFoundError(f"{where}: cannot read it: no such file")


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
        The trace's clock (``"unix-epoch"`` for Kineto, ``"CLOCK_BOOTTIME"``
        for rocprofv3 and rocpd; :data:`TRACE_CLOCKS` names the host clock
        of each).
    source : str
        Where the trace came from.
    launch_ns : numpy.ndarray
        Per execution, the CPU time (relative to ``origin_ns``) of the runtime
        call that launched it, matched by correlation id; :data:`NO_LAUNCH`
        where the trace has none.
    steps : numpy.ndarray
        STEP_DTYPE: the ``ProfilerStep#N`` annotations (``prof.step()`` in the
        loop), in order; empty when the loop did not call it.
    device_numbering : str
        What the numbers in ``device`` are: :data:`GPU_ORDINAL` (the GPU's
        index as torch and HIP number devices), or, where the trace does not
        say (a rocprofv3 CSV without its ``agent_info.csv``), what they are
        instead.
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
    device_numbering: str = GPU_ORDINAL

    def __len__(self) -> int:
        return len(self.executions)

    @classmethod
    def from_rows(cls, start_ns: Any, end_ns: Any = None, names: Any = None, grid: Any = None, block: Any = None,
                  *, clock: Optional[str] = None, source: Optional[str] = None, device: Any = None, stream: Any = None,
                  correlation: Any = None, launch_ns: Any = None, steps: Any = None,
                  err_ns: Any = 1000.0, device_numbering: str = GPU_ORDINAL) -> KernelTrace:
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
        device_numbering : str
            What ``device`` numbers (:attr:`device_numbering`).

        Returns
        -------
        KernelTrace
            Executions in start order, relative to the first start
            (``origin_ns``); times stay int64 until that subtraction.

        Raises
        ------
        ValueError
            A column missing, of the wrong type or length, a fractional or
            non-finite time, a grid or block that is not up to three
            integers, no executions (each named).
        """
        start, end, names, grid, block = row_columns(start_ns, end_ns, names, grid, block)
        n = len(start)
        sig_of: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int] = {}
        sig = np.fromiter((sig_of.setdefault((names[i], tuple(grid[i]), tuple(block[i])), len(sig_of))
                           for i in range(n)), dtype=np.int64, count=n)
        keys = list(sig_of)
        return cls.from_signatures(start, end, sig, [k[0] for k in keys], [k[1] for k in keys],
                                   [k[2] for k in keys], clock=clock, source=source, device=device, stream=stream,
                                   correlation=correlation, launch_ns=launch_ns, steps=steps, err_ns=err_ns,
                                   device_numbering=device_numbering)

    @classmethod
    def from_signatures(cls, start_ns: Any, end_ns: Any, signature: Any, names: Any, grid: Any, block: Any, *,
                        clock: Optional[str], source: Optional[str], device: Any = None, stream: Any = None,
                        correlation: Any = None, launch_ns: Any = None, steps: Any = None, err_ns: Any = 1000.0,
                        device_numbering: str = GPU_ORDINAL) -> KernelTrace:
        """A trace from per-execution columns and a signature index (what :meth:`from_rows` builds, vectorised).

        Parameters
        ----------
        start_ns, end_ns : array_like of int
            Per execution, on ``clock`` (int64 ns, any order).
        signature : array_like of int
            Per execution, an index into ``names``, ``grid`` and ``block``;
            every index names a distinct (name, grid, block).
        names : sequence of str
        grid, block : sequences of three integers
            Per signature.
        clock, source, device, stream, correlation, launch_ns, steps, err_ns
            As :meth:`from_rows`.

        Returns
        -------
        KernelTrace
            As :meth:`from_rows`: executions in start order, signatures
            numbered in order of their first execution.
        """
        start = whole_numbers(start_ns, "start_ns", INT64_MIN, INT64_MAX).ravel()
        end = whole_numbers(end_ns, "end_ns", INT64_MIN, INT64_MAX).ravel()
        if len(start) == 0:
            raise TraceFormatError("start_ns: no executions; a trace needs at least one kernel")
        n = len(start)
        clock = instance_of(clock, "clock", str, "the trace's clock, a str (e.g. 'unix-epoch')")
        source = instance_of(source, "source", str, "where the trace came from, a str")

        def per(v: Any, what: str, default: int) -> np.ndarray:
            out = np.full(n, default, dtype=np.int64) if v is None else whole_numbers(v, what, INT64_MIN, INT64_MAX)
            if out.shape != (n,):
                raise ValueError(f"{what}: {out.shape} values for {n} executions")
            return out

        sig = per(signature, "signature", 0)
        if end.shape != (n,):
            raise ValueError(f"end_ns: one per execution ({n})")
        order = np.argsort(start, kind="stable")
        origin = int(start[order[0]])
        # Signatures numbered by first execution in start order.
        in_order = sig[order]
        used, first = np.unique(in_order, return_index=True)
        old = used[np.argsort(first, kind="stable")]
        new_id = np.zeros(len(names), dtype=np.int32)
        new_id[old] = np.arange(len(old), dtype=np.int32)
        shown = [printable_name(str(names[k])) for k in old.tolist()]
        sigs = np.zeros(len(old), dtype=signature_dtype(max((len(v) for v in shown), default=0)))
        sigs["id"] = np.arange(len(old))
        sigs["name"] = shown
        sigs["grid"] = np.asarray([tuple(grid[k]) for k in old.tolist()], dtype=np.int64).reshape(-1, 3)
        sigs["block"] = np.asarray([tuple(block[k]) for k in old.tolist()], dtype=np.int64).reshape(-1, 3)
        ex = np.zeros(n, dtype=EXECUTION_DTYPE)
        ex["run"] = np.arange(n)  # each execution is a run of one
        ex["kernel_id"] = new_id[in_order]
        ex["start_ns"] = start[order] - origin  # int64 - int: exact
        ex["end_ns"] = end[order] - origin
        err = _errors(err_ns, n)
        ex["start_err_ns"] = err[order]
        ex["end_err_ns"] = err[order]
        launch = per(launch_ns, "launch_ns", NO_LAUNCH)[order]
        launch = np.where(launch != NO_LAUNCH, launch - origin, NO_LAUNCH)
        return cls(executions=ex, signatures=sigs, device=per(device, "device", 0)[order],
                   stream=per(stream, "stream", 0)[order], correlation=per(correlation, "correlation", -1)[order],
                   origin_ns=origin, clock=str(clock), source=str(source), launch_ns=launch,
                   steps=_steps_from(steps, origin), device_numbering=str(device_numbering))

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
        if isinstance(names, (str, bytes, dict)) or not hasattr(names, "__len__"):
            raise ValueError(f"names={short_repr(names)}: one name per execution ({n})")
        if len(names) != n:
            raise ValueError(f"names: {len(names)} names for {n} executions")

        def dims(v: Any, what: str) -> list[Any]:
            if v is None:
                return [(-1, -1, -1)] * n
            if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__") or len(v) != n:
                raise ValueError(f"{what}={short_repr(v)}: one per execution ({n})")
            return list(v)

        base = integer_in(origin_ns, "origin_ns", INT64_MIN)
        clock = instance_of(clock, "clock", str, "the clock's name, a str")
        start = base + executions["start_ns"]
        end = base + executions["end_ns"]
        kt = cls.from_rows(start, end, names, dims(grid, "grid"), dims(block, "block"), clock=clock,
                           source="executions", device=device, stream=stream, err_ns=0.0)
        # The executions' own placement errors, in the trace's (start) order.
        order = np.argsort(start, kind="stable")
        kt.executions["start_err_ns"] = executions["start_err_ns"][order]
        kt.executions["end_err_ns"] = executions["end_err_ns"][order]
        return kt

    def without(self, drop: np.ndarray) -> KernelTrace:
        """This trace without the executions where ``drop`` is true (signatures, steps and origin kept).

        Parameters
        ----------
        drop : numpy.ndarray of bool
            One per execution.

        Returns
        -------
        KernelTrace
        """
        keep = ~np.asarray(drop, dtype=bool)
        if keep.shape != (len(self.executions),):
            raise ValueError(f"drop: one per execution ({len(self.executions)}), got shape {keep.shape}")
        return dataclasses.replace(self, executions=self.executions[keep], device=self.device[keep],
                                   stream=self.stream[keep], correlation=self.correlation[keep],
                                   launch_ns=self.launch_ns[keep])

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
        ex = self.executions
        return overlapping(ex["start_ns"], ex["end_ns"], self.device, np.ones(len(ex), dtype=bool))


def row_columns(start_ns: Any, end_ns: Any, names: Any, grid: Any,
             block: Any) -> tuple[np.ndarray, np.ndarray, list[Any], list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """:meth:`KernelTrace.from_rows`'s columns checked: exact int64 times, names, launch dimensions, one per row."""
    missing = [w for w, v in (("end_ns", end_ns), ("names", names), ("grid", grid), ("block", block)) if v is None]
    if missing:
        raise ValueError(f"{', '.join(missing)}: required; from_rows takes columns, one value per execution "
                         "(start_ns, end_ns, names, grid, block)")
    start = whole_numbers(start_ns, "start_ns", INT64_MIN, INT64_MAX).ravel()
    end = whole_numbers(end_ns, "end_ns", INT64_MIN, INT64_MAX).ravel()
    n = len(start)
    if n == 0:
        raise TraceFormatError("start_ns: no executions; a trace needs at least one kernel")
    cols: dict[str, list[Any]] = {}
    for what, v in (("names", names), ("grid", grid), ("block", block)):
        if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__") or len(v) != n:
            raise ValueError(f"{what}={short_repr(v)}: one per execution ({n})")
        cols[what] = list(v)
    if len(end) != n:
        raise ValueError(f"end_ns: {len(end)} values for {n} executions")
    bad = [i for i, x in enumerate(cols["names"]) if not isinstance(x, str)]
    if bad:
        raise ValueError(f"names: execution {bad[0]} has {short_repr(cols['names'][bad[0]])}, not a str")
    def listed(x: Any) -> Any:
        # numpy integers (a grid column of an array) as the ints launch_dims reads.
        if isinstance(x, (list, tuple, np.ndarray)):
            return [int(e) if isinstance(e, np.integer) else e for e in x]
        return x
    dims = {w: [launch_dims(listed(x), w, i, "from_rows") for i, x in enumerate(cols[w])] for w in ("grid", "block")}
    return start, end, cols["names"], dims["grid"], dims["block"]


def _errors(err_ns: Any, n: int) -> np.ndarray:
    """Placement errors: a number or one per execution, finite and >= 0."""
    if isinstance(err_ns, (str, bytes, bool)) or err_ns is None:
        raise ValueError(f"err_ns={short_repr(err_ns)}: must be a number of ns or one per execution")
    try:
        err = np.broadcast_to(np.asarray(err_ns, dtype=np.float64), (n,))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"err_ns: must be a number of ns or one per execution ({exc})") from None
    if not np.all(np.isfinite(err)) or np.any(err < 0):
        raise ValueError("err_ns: must be finite and >= 0")
    return err


def overlapping(start: np.ndarray, end: np.ndarray, device: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Executions in ``among`` that overlap another execution in ``among`` on the same device."""
    out = np.zeros(len(start), dtype=bool)
    for dev in np.unique(device[among]):
        idx = np.flatnonzero(among & (device == dev))
        idx = idx[np.argsort(start[idx], kind="stable")]
        s, e = start[idx], end[idx]
        running_end = np.maximum.accumulate(e)
        hit = s[1:] < running_end[:-1]
        out[idx[1:][hit]] = True
        # The execution it overlaps is just as ambiguous.
        out[idx[np.searchsorted(running_end[:-1], s[1:][hit], side="right")]] = True
    return out


def launch_dims(value: Any, what: str, i: int, where: str = "trace") -> tuple[int, int, int]:
    if value is None:
        return (-1, -1, -1)
    if isinstance(value, (list, tuple)) and 1 <= len(value) <= 3:
        ints = [json_int64(x) for x in value]
        v = [x for x in ints if x is not None] + [1] * (3 - len(value))
        if len(v) == 3:
            return (v[0], v[1], v[2])
    raise TraceFormatError(f"{where}: kernel event {i} has args.{what}={short_repr(value)}; "
                           "expected up to three integers")


def json_int64(value: Any) -> int | None:
    """An integer (not a bool) that fits int64, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
        return value
    return None


def _steps_from(steps: Any, origin: int) -> np.ndarray:
    """STEP_DTYPE rows from (step, start_ns, end_ns) on the clock, by start, relative to ``origin``."""
    if steps is None or len(steps) == 0:
        return np.zeros(0, dtype=STEP_DTYPE)
    st = np.asarray(steps, dtype=np.int64).reshape(-1, 3)
    st = st[np.lexsort((st[:, 0], st[:, 1]))]  # by start: iteration() searches them
    o = np.int64(origin)
    out = np.zeros(len(st), dtype=STEP_DTYPE)
    out["step"] = st[:, 0]
    for field, col in (("start_ns", 1), ("end_ns", 2)):
        x = st[:, col]
        d = x - o
        # int64 subtraction wraps: the sign rule finds the times that do not fit relative to the origin.
        if np.any(((x ^ o) & (x ^ d)) < 0):
            raise OverflowError("a ProfilerStep's times, relative to the first kernel, do not fit int64 ns")
        out[field] = d
    return out


#: Microseconds whose ns do not fit int64 (exclusive bound): what us_to_ns refuses.
MAX_US = Decimal(2**63) / 1000


def us_to_ns(value: Any, what: str, i: int, where: str = "trace") -> int:
    """Microseconds (a JSON number, parsed as Decimal, or an integer) to exact int64 ns."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise TraceFormatError(f"{where}: kernel event {i} has {what}={short_repr(value)}; expected microseconds")
    try:
        d = Decimal(value)
        # Checked before any arithmetic: 1e999999999 us would overflow the context or build a huge int.
        if not d.is_finite() or abs(d) >= MAX_US:
            raise InvalidOperation
        return int((d * 1000).to_integral_value())
    except (DecimalException, ValueError):
        raise TraceFormatError(f"{where}: kernel event {i} has {what}={short_repr(value)}; expected microseconds "
                               "that fit int64 ns") from None
