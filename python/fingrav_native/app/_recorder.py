"""Live recording of a GPU's power beside a running application: :func:`record`, :class:`PowerRecorder`, :func:`record_torch`."""

from __future__ import annotations

import math
import os
import signal
import socket
import sys
import threading
import time
import uuid
import warnings
from typing import Any, Callable, Literal, Optional, Sequence, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in, positive_number
from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native._version import __version__
from fingrav_native.app._counter_recorder import CounterRecorder, counter_spec, logs_counter, start_counter
from fingrav_native.app._open import resolve_device
from fingrav_native.clocks._epoch import HOST_CLOCK
from fingrav_native.clocks._maps import MIN_BRACKETS
from fingrav_native.files._capture import (
    CAPTURE_FORMAT,
    CAPTURE_VERSION,
    HOST_CLOCK_DOMAINS,
    OTHER_CLOCK_MEMBERS,
    REALTIME_CLOCK_DOMAINS,
    PowerCapture,
    clock_offsets,
    journal_header,
    source_dict,
)
from fingrav_native.files._capture_counter import CapturedCounter
from fingrav_native.files._journal import Journal, encode_array, encode_json, journal_path
from fingrav_native.files._outputs import check_output_path, write_atomically
from fingrav_native.sensors._model import SensorModel

# The most irrational fraction: polls at (4 + it) per logger period sweep
# the logs' phase evenly (a low-discrepancy sequence) instead of locking to it.
_GOLDEN_FRACTION = (math.sqrt(5.0) - 1.0) / 2.0

#: The journal is written at least this often (s), whatever ``brackets_every_s``: a kill loses at most this.
JOURNAL_EVERY_S = 1.0

#: The signals that close a recording as Ctrl-C does (where their default action, ending the process, is in place).
CLOSING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

#: The journal record of each bracketed clock's burst.
_BRACKET_TAGS = {"CLOCK_REALTIME": b"BRRT", "CLOCK_BOOTTIME": b"BRBT", "CLOCK_MONOTONIC": b"BRMO"}


class _Terminated(BaseException):
    """SIGTERM or SIGHUP arrived inside a recording: raised in the main thread to end the ``with`` block.

    A BaseException, as KeyboardInterrupt is, so the application's own
    ``except Exception`` does not take it for one of its errors.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _default_period_ns(info: _core.SourceInfo) -> int:
    """The poll period a recorder uses by default (see PowerRecorder's Notes: never a whole fraction of the logger's)."""
    if info.clock_domain in REALTIME_CLOCK_DOMAINS or info.clock_domain in HOST_CLOCK_DOMAINS:
        return 1_000_000  # stamped with a host clock: nothing to fit, the poll only has to keep up
    native = int(info.native_period_ns)
    period = native / (4.0 + _GOLDEN_FRACTION) if native > 0 else 1e6 * _GOLDEN_FRACTION
    return int(min(max(round(period), _core.MIN_PERIOD_NS), 1_000_000))


def _read_clock_brackets(clock: str, n: int) -> np.ndarray:
    """``n`` reads of host clock ``clock``, each between two reads of the sampler's CLOCK_MONOTONIC_RAW.

    ``time.clock_gettime_ns`` calls clock_gettime(2) on the same clocks the
    native sampler reads (csrc/fingrav/host_clock.hpp): a bracket is a few
    hundred ns wide here against ~50 ns from C++, and the map keeps the
    tightest, far below a kernel trace's microseconds.
    """
    clock_id = {"CLOCK_BOOTTIME": time.CLOCK_BOOTTIME, "CLOCK_MONOTONIC": time.CLOCK_MONOTONIC}[clock]
    raw, get = time.CLOCK_MONOTONIC_RAW, time.clock_gettime_ns
    rows = []
    for _ in range(n):
        before = get(raw)
        read = get(clock_id)
        rows.append((before, read, get(raw)))
    return np.array(rows, dtype=np.int64).reshape(n, 3)


def _measured_period_ns(samples: np.ndarray, tick_ns: float) -> float:
    """The logger's period from the logs' own timestamps (median step between distinct logs); 0 if unknown."""
    if len(samples) < 3:
        return 0.0
    steps = np.diff(np.unique(np.asarray(samples["source_ts"], dtype=np.int64))).astype(np.float64) * tick_ns
    return float(np.median(steps)) if steps.size else 0.0


class PowerRecorder:
    """Record a GPU's power live while an application runs, with what maps it onto the trace's clock.

    A context manager. Inside the ``with`` block a native
    :class:`~fingrav_native.Sampler` thread polls the device's power source
    into a lock-free ring, and one Python thread wakes every
    ``brackets_every_s`` to drain the ring (so a capture of hours never
    overflows it) and take a burst of brackets of every host clock a trace
    may stamp on (CLOCK_REALTIME for torch.profiler, CLOCK_BOOTTIME for
    rocprofv3, CLOCK_MONOTONIC), so the map onto the trace's clock follows
    NTP's drift. On exit the capture is
    built (:attr:`capture`) and, given a ``path``, saved. An exception in
    the ``with`` block still stops both threads and saves what was recorded
    (the block's exception is the one raised), and SIGTERM and SIGHUP do
    the same (see Notes); a failure of the sampler
    (``SamplerError``) or of the drain thread is raised on exit; a capture
    that cannot be written raises too, and :attr:`capture` still holds it.

    Parameters
    ----------
    device : PowerSource, SimGPU, SharedSimGPU, LiveSimBackend, NvidiaBackend, AmdBackend or str
        What to record: a power source; a real-time
        :class:`~fingrav_native.sim.SimGPU` or a
        :class:`~fingrav_native.sim.SharedSimGPU` (its logger, sensor model
        included); a hardware or live-sim backend (its power source and
        ``capabilities.sensor``); or ``"nvidia:N"`` (NVML power of CUDA
        device N as torch numbers it; ``"nvidia:N:MODE"`` picks an NVML mode
        such as ``instant``) or ``"amd:N"`` (``gpu_metrics``, else hwmon, of
        HIP device N; ``"amd:N:socket"`` for socket power).
    path : str or path-like, optional
        Where the capture is saved on exit.
    period_ns : int, optional
        Sampler poll period in ``[MIN_PERIOD_NS, MAX_PERIOD_NS]``. Default
        (None): 1 ms for sources stamped with a host clock (NVML, hwmon);
        for a logger with its own clock, its period divided by 4.618 (a
        golden-ratio dither, 216.5 us for a 1 ms logger; see Notes), or
        0.618 ms when the period is unknown.
    brackets_every_s : float
        How often the Python thread drains and takes epoch brackets, s
        (default 0.5; 0.01 to 60).
    brackets_per_read : int
        Epoch brackets per burst (default 8; at least 8 are taken at the
        start and at the end, so any capture can be fitted).
    capacity : int, optional
        Sampler ring slots (a power of two). Default: 8 times what one
        interval can bring, at least 65536, so the drain thread may stall
        for seconds (a main thread holding the GIL) without a drop.
    counter : {"auto"}, PowerSource or None
        The energy counter recorded beside the logs, for the energy closure
        of :func:`~fingrav_native.profile_trace`: ``"auto"`` the device's
        (AMD's ``energy_accumulator``, NVML's total energy; none for hwmon
        or the simulator), None none, or a power source whose readings are a
        counter's steps. Where the logs already are the counter's steps
        (``"amd:N"``, ``"nvidia:N:energy"``) nothing more is polled.
    counter_period_ns : int, optional
        The counter's poll period (default 2 ms); refused where no counter
        is polled (``counter=None``, a device without one, logs that are
        the counter's steps).

    Raises
    ------
    ValueError
        Naming the argument: a period, interval, burst or capacity out of
        range; an unknown device string; a virtual-time SimGPU.
    LibraryNotFoundError, DeviceUnavailableError
        ``"nvidia:N"`` / ``"amd:N"`` without the driver or the device; the
        message says which library or device and how to get it.

    Notes
    -----
    What survives a kill. With a ``path``, everything the capture will
    hold is appended as it is read to ``PATH.journal`` beside it
    (:mod:`fingrav_native.files._journal`): the header, every drain's logs
    and counter readings, every burst of clock brackets, the sampler's
    counters. The drain thread writes it at least once a second (every
    ``brackets_every_s`` when shorter) and ``fsync``s it at most once a
    second; when the block ends the capture is written beside ``path`` and
    renamed over it, and the journal removed. So SIGKILL, an out-of-memory
    kill or a crash loses at most the last second: :func:`fingrav_native.load`
    of ``path`` rebuilds the capture from the journal with a
    :class:`~fingrav_native.files.RecoveredCaptureWarning` naming the span
    recovered (also ``capture.recovered``); a last record written in part
    is dropped and said. A capture the disk refuses at the end keeps its
    journal (the error says where). A journal already beside ``path`` (a
    killed recording not yet read back) is never written over: the
    recorder refuses the path.

    SIGTERM (``kill``, ``timeout``, Slurm, systemd) and SIGHUP (a closed
    terminal) end the block as Ctrl-C does: the capture is written whole,
    then the signal is delivered again with its default action, so the
    process ends as that signal ends it (a shell reports 128 + the signal's
    number: 143, 129) and outer ``finally`` blocks do not run, as they would
    not under the signal itself. The handlers are installed only from the
    main thread and only over the default action (a program's own handler,
    or a signal ignored under ``nohup``, is kept), and the previous ones are
    put back when the block ends.

    In-situ profiling is the paper's Section IV-A protocol run by the
    application itself: each execution is one run at a random phase
    against the logger. The recorder takes no part in the application's
    timing: its threads sleep between polls and drains (see
    ``bench/insitu_overhead.py`` for the cost).

    Why the default poll period is not a round number: a logger with its
    own clock is mapped onto host time from when each log was first seen
    (a one-sided fit: the lower envelope of read delays). Polling at the
    logger's own period, or a whole fraction of it, locks the polls to the
    logs' phase, so every log is seen the same (unknown) delay late: on
    the simulated 1 ms logger, 1 ms polls placed every log ~660 us late and
    100 us polls ~64 us late, where 216.5 us polls (4.618 per log, an
    irrational ratio, so the phase sweeps every offset) found the envelope
    within ~5 us of the logger's publication delay.

    Examples
    --------
    >>> from fingrav_native.sim import SimGPU
    >>> gpu = SimGPU(realtime=True, seed=1)
    >>> with PowerRecorder(gpu) as rec:
    ...     _ = gpu.run("cb-4k-gemm", 20)
    >>> len(rec.capture) > 0
    True
    """

    def __init__(
        self,
        device: Any,
        path: Optional[Union[str, os.PathLike[str]]] = None,
        *,
        period_ns: Optional[int] = None,
        brackets_every_s: float = 0.5,
        brackets_per_read: int = 8,
        capacity: Optional[int] = None,
        counter: Any = "auto",
        counter_period_ns: Optional[int] = None,
    ) -> None:
        if period_ns is not None:
            period_ns = integer_in(period_ns, "period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)
        self._every_s = positive_number(brackets_every_s, "brackets_every_s", upper=60.0)
        if self._every_s < 0.01:
            raise ValueError(f"brackets_every_s={brackets_every_s!r}: must be >= 0.01 (each wake-up costs CPU)")
        self._per_read = integer_in(brackets_per_read, "brackets_per_read", 1, 4096)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path or None")
        if path is not None:
            # Found now, not when a long recording ends and cannot be written: a missing folder, a read-only
            # one, a directory, a campaign's run file or a saved profile in the capture's place.
            check_output_path(path, "path", writes="capture")
            if os.path.lexists(journal_path(os.fspath(path))):
                raise ValueError(f"path={os.fspath(path)!r}: {journal_path(os.fspath(path))!r} beside it holds a "
                                 "recording to this name that did not end; fingrav_native.load the capture (it "
                                 "reads the journal) and save it elsewhere, or remove the journal, before recording "
                                 "to this name again")
        if capacity is not None:
            capacity = integer_in(capacity, "capacity", _core.MIN_CAPACITY, 1 << 26)
            if capacity & (capacity - 1):
                raise ValueError(f"capacity={capacity}: must be a power of two >= {_core.MIN_CAPACITY}")
        self._path = None if path is None else os.fspath(path)
        self._resolved = resolve_device(device)
        info = self._resolved.source.info
        self._period_ns = period_ns if period_ns is not None else _default_period_ns(info)
        if capacity is None:
            fastest = min(self._period_ns, int(info.native_period_ns) or self._period_ns)
            need = 8 * self._every_s * 1e9 / fastest
            capacity = max(1 << 16, 1 << int(math.ceil(math.log2(max(need, 1.0)))))
        self._capacity = int(capacity)
        self._state = "new"
        self._sampler: Optional[_core.Sampler] = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._chunks: list[np.ndarray] = []
        self._brackets: list[np.ndarray] = []
        # The other host clocks traces stamp on (rocprofv3: CLOCK_BOOTTIME), bracketed in the same bursts.
        self._clock_brackets: dict[str, list[np.ndarray]] = {c: [] for c in OTHER_CLOCK_MEMBERS}
        self._error: Optional[BaseException] = None
        self._drains = 0
        self._thread_cpu_ns = 0
        self._capture: Optional[PowerCapture] = None
        self._trace_path: Optional[str] = None
        # The device's energy counter, polled beside the logs (app/_counter_recorder.py).
        self._counter_spec = counter_spec(counter, self._resolved.counter)
        self._counter_period_ns = None if counter_period_ns is None else integer_in(
            counter_period_ns, "counter_period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)
        if self._counter_period_ns is not None and (self._counter_spec is None or self._counter_spec.source is None):
            why = ("counter=None" if counter is None else "the logs themselves are the counter's steps"
                   if self._counter_spec is not None else f"{self._resolved.description} has no energy counter")
            raise ValueError(f"counter_period_ns={counter_period_ns!r}: no counter is polled ({why}); leave it out")
        self._counter: Optional[CounterRecorder] = None
        self._captured_counter: Optional[CapturedCounter] = None
        # The journal beside the capture (files/_journal.py): what a killed recorder leaves.
        self._journal: Optional[Journal] = None
        self._journal_lock = threading.Lock()
        self._journal_error: Optional[OSError] = None
        self._sensor_journaled = False
        self._counter_journaled = 0
        self._recording_id = uuid.uuid4().hex
        self._previous_handlers: dict[int, Any] = {}
        self._closing = False
        self._pending_signal: Optional[int] = None

    # ------------------------------------------------------------------ state
    @property
    def path(self) -> Optional[str]:
        """Where the capture is saved on exit (None: not saved)."""
        return self._path

    @property
    def period_ns(self) -> int:
        """The sampler's poll period, ns."""
        return self._period_ns

    @property
    def capacity(self) -> int:
        """The sampler ring's slots."""
        return self._capacity

    @property
    def source(self) -> _core.PowerSource:
        """The power source being recorded."""
        return self._resolved.source

    @property
    def capture(self) -> PowerCapture:
        """The capture, once the ``with`` block has ended."""
        if self._capture is None:
            raise RuntimeError("PowerRecorder.capture: there is no capture yet; it exists after the with block "
                               "ends (and not when the recording failed)")
        return self._capture

    @property
    def trace_path(self) -> Optional[str]:
        """The Chrome trace written by :meth:`attach`, if any."""
        return self._trace_path

    # ------------------------------------------------------------------ recording
    def _burst(self, n: int) -> list[bytes]:
        """A burst of brackets of every host clock, kept and returned as journal records."""
        realtime = _core.read_epoch_brackets(n)
        self._brackets.append(realtime)
        records = [encode_array(_BRACKET_TAGS["CLOCK_REALTIME"], realtime)]
        for clock, reads in self._clock_brackets.items():
            reads.append(_read_clock_brackets(clock, n))
            records.append(encode_array(_BRACKET_TAGS[clock], reads[-1]))
        return records

    def _drain(self, *, burst: bool) -> None:
        """Take the ring's samples and the counter's readings (and a burst of brackets), then journal them."""
        assert self._sampler is not None
        records: list[bytes] = []
        # A sampler whose thread failed refuses a drain once empty; the failure itself is reported on exit.
        if self._sampler.available:
            self._chunks.append(self._sampler.drain())
            records.append(encode_array(b"SMPL", self._chunks[-1]))
        if self._counter is not None:
            chunk = self._counter.drain()
            if chunk is not None:
                self._counter_journaled += len(chunk)
                records.append(encode_array(b"CNTR", chunk))
        if burst:
            records += self._burst(self._per_read)
        self._journal_append(records)

    def _journal_append(self, records: list[bytes], *, sync: bool = False) -> None:
        """Append to the journal with the sampler's counters; a journal the disk refuses is given up, not the recording."""
        if self._journal is None or self._journal_error is not None:
            return
        assert self._sampler is not None
        stats: dict[str, Any] = {"stats": dict(self._sampler.stats().as_dict())}
        if self._counter is not None:
            stats["counter_stats"] = self._counter.stats()
        records.append(encode_json(b"STAT", stats))
        if not self._sensor_journaled:
            sensor = self._sensor_for(np.concatenate(self._chunks) if self._chunks else None)
            if sensor is not None:
                records.append(encode_json(b"SENS", {"sensor": sensor.as_dict()}))
                self._sensor_journaled = True
        try:
            with self._journal_lock:
                self._journal.append(records, sync=sync)
        except OSError as exc:
            self._journal_error = exc

    def _loop(self) -> None:
        cpu0 = time.thread_time_ns()
        # With a journal the thread wakes at least once a second, so a kill loses at most that.
        wake = min(self._every_s, JOURNAL_EVERY_S) if self._journal is not None else self._every_s
        next_burst = time.monotonic() + self._every_s
        try:
            # wait() returns True when stop is set: the main thread then takes
            # the final drain and brackets itself, after the sampler stopped.
            while not self._stop.wait(wake):
                now = time.monotonic()
                burst = now >= next_burst - 0.5 * wake
                if burst:
                    next_burst = max(next_burst + self._every_s, now)
                self._drain(burst=burst)
                self._drains += 1
        except BaseException as exc:  # surfaced on exit, never lost with the thread
            self._error = exc
        finally:
            self._thread_cpu_ns = time.thread_time_ns() - cpu0

    def __enter__(self) -> PowerRecorder:
        if self._state != "new":
            raise RuntimeError("PowerRecorder: a recorder records once; create a new one")
        source = self._resolved.source
        if source.in_use:
            raise ValueError(f"device: its power source {source.info.name!r} is already polled by another Sampler "
                             "(a backend's run in progress?)")
        self._sampler = _core.Sampler(source, period_ns=self._period_ns, capacity=self._capacity)
        # Brackets first, so the epoch map covers the first sample.
        first = self._burst(max(self._per_read, MIN_BRACKETS))
        self._sampler.start()
        try:
            self._counter = start_counter(self._counter_spec, self._counter_period_ns)
            if self._path is not None:
                self._open_journal(first)
            self._state = "recording"
            self._thread = threading.Thread(target=self._loop, name="fingrav-power-recorder", daemon=True)
            self._thread.start()
        except BaseException:
            self._sampler.stop()
            if self._counter is not None:
                self._counter.stop()
            if self._journal is not None:
                self._journal.remove()
            self._state = "failed"
            raise
        self._install_signal_handlers()
        return self

    def _open_journal(self, first_burst: list[bytes]) -> None:
        """Start the journal beside the capture (files/_journal.py): the header and the first burst, on disk."""
        assert self._path is not None
        header = {"format": CAPTURE_FORMAT, "version": CAPTURE_VERSION, "source": source_dict(self._resolved.source),
                  "sensor": None, "period_ns": int(self._period_ns), "stats": {}, "meta": self._meta(),
                  "clocks": ["CLOCK_REALTIME", *OTHER_CLOCK_MEMBERS]}
        if self._counter is not None and not self._counter.failed:
            header["counter"] = self._counter.header()
        elif self._counter is None and self._counter_spec is not None and self._counter_spec.source is None:
            header["counter"] = logs_counter(self._counter_spec, self._period_ns).header()  # type: ignore[union-attr]
        try:
            self._journal = Journal(journal_path(self._path), journal_header(header))
        except FileExistsError:
            raise ValueError(f"path={self._path!r}: {journal_path(self._path)!r} appeared beside it since the "
                             "recorder was made (another recording to this name?); choose another name") from None
        self._journal_append(first_burst, sync=True)

    # ------------------------------------------------------------------ signals
    def _install_signal_handlers(self) -> None:
        """SIGTERM and SIGHUP end the block as Ctrl-C does, where their default (ending the process) is in place.

        Only in the main thread (where Python runs handlers), and only over
        the default action: a signal the program ignores (``nohup``) or
        handles itself keeps its handler.
        """
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in CLOSING_SIGNALS:
            if signal.getsignal(signum) == signal.SIG_DFL:
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._closing:
            self._pending_signal = signum  # the capture is being written: delivered once it is
            return
        raise _Terminated(signum)

    def _restore_signal_handlers(self) -> None:
        for signum, previous in self._previous_handlers.items():
            if signal.getsignal(signum) == self._on_signal:  # one the block installed itself stays
                signal.signal(signum, previous)
        self._previous_handlers = {}

    def _deliver(self, signum: int) -> None:
        """End the process as ``signum``'s default action does, now that the capture is written."""
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        # Still here: the signal is blocked in every thread. Exit with the status a shell reports for it.
        raise SystemExit(128 + signum)

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Any) -> Literal[False]:
        if self._state != "recording":
            return False
        self._closing = True
        try:
            self._close(exc_type)
        finally:
            installed = bool(self._previous_handlers)
            self._restore_signal_handlers()
            signum = exc.signum if isinstance(exc, _Terminated) else self._pending_signal
            if installed and signum is not None:
                self._deliver(signum)
        return False

    def _close(self, exc_type: Optional[type[BaseException]]) -> None:
        """Stop, take the rest, write the capture whole and drop the journal (kept when the capture is not written)."""
        assert self._sampler is not None and self._thread is not None
        self._stop.set()
        self._thread.join()
        self._captured_counter = self._counter.stop() if self._counter is not None else \
            logs_counter(self._counter_spec, self._period_ns)
        sampler_error: Optional[BaseException] = None
        try:
            self._sampler.stop()
        except _core.SamplerError as err:
            sampler_error = err
        # After the stop nothing more enters the ring: this drain takes the rest
        # (a stopped sampler refuses a drain with nothing left, hence the check).
        records: list[bytes] = []
        if self._sampler.available:
            self._chunks.append(self._sampler.drain())
            records.append(encode_array(b"SMPL", self._chunks[-1]))
        cc = self._captured_counter
        if cc is not None and cc.samples is not None and len(cc.samples) > self._counter_journaled:
            records.append(encode_array(b"CNTR", np.asarray(cc.samples[self._counter_journaled:])))
        self._journal_append(records + self._burst(max(self._per_read, MIN_BRACKETS)), sync=True)
        self._state = "done"
        # The sampler's own failure first: a drain thread error may only follow from it.
        failure: Optional[BaseException] = sampler_error
        if failure is None and self._error is not None:
            failure = RuntimeError(f"PowerRecorder: the drain thread failed: {self._error!r}")
            failure.__cause__ = self._error
        if failure is not None:
            self._state = "failed"
            self._keep_journal("the recording failed")
            if exc_type is None:
                raise failure
            return  # the with block's own exception goes first
        try:
            self._capture = self._build()
            if self._path is not None:
                self._capture.save(self._path)
        except Exception as err:
            kept = self._keep_journal("the capture could not be written")
            if exc_type is None:
                if kept:
                    err.add_note(kept)
                    warnings.warn(f"PowerRecorder: {kept}", RuntimeWarning, stacklevel=3)
                raise
            # The block already failed; its exception is the one to see.
            warnings.warn(f"PowerRecorder: the capture could not be saved after the with block raised: {err!r}"
                          f"{'; ' + kept if kept else ''}", RuntimeWarning, stacklevel=3)
            return
        if self._journal is not None:
            self._journal.remove()
        if self._journal_error is not None:
            warnings.warn(f"PowerRecorder: the journal {journal_path(self._path or '')!r} could not be written "
                          f"({self._journal_error}); the capture is whole, but a kill would have lost the "
                          "recording", RuntimeWarning, stacklevel=3)

    def _keep_journal(self, why: str) -> str:
        """Close the journal and keep it; say where the recording is ("" without one)."""
        if self._journal is None:
            return ""
        try:
            self._journal.close()
        except OSError:
            pass
        return (f"{why}: what was recorded is in the journal {self._journal.path!r}; "
                f"fingrav_native.load({self._path!r}) reads it")

    def _sensor_for(self, samples: Optional[np.ndarray]) -> Optional[SensorModel]:
        """The sensor model: the device's, or the one its measured log period gives (None: not known yet)."""
        if self._resolved.sensor is not None or self._resolved.sensor_for_period is None:
            return self._resolved.sensor
        source = self._resolved.source.info
        period = float(source.native_period_ns)
        if not period:
            if samples is None or len(samples) < 3:
                return None
            period = _measured_period_ns(samples, float(source.tick_ns))
        return self._resolved.sensor_for_period(period)

    def _meta(self) -> dict[str, Any]:
        """The capture's metadata known at the start (the end's is added by :meth:`_build`)."""
        return {
            "device": self._resolved.description,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            # From the epoch brackets themselves: the realtime of the first (and, on build, the
            # last) reads, which enclose every sample's read.
            "started_epoch_ns": int(self._brackets[0][0, 1]),
            "fingrav_native_version": __version__,
            "python": sys.version.split()[0],
            "host_clock": HOST_CLOCK,
            # Names the recording in its journal too: a journal beside a capture of the same id is stale.
            "recording_id": self._recording_id,
        }

    def _build(self) -> PowerCapture:
        assert self._sampler is not None
        samples = np.concatenate(self._chunks) if self._chunks else np.empty(0, dtype=SAMPLE_DTYPE)
        stats: dict[str, Any] = dict(self._sampler.stats().as_dict())
        if len(samples) != stats["drained"]:
            raise RuntimeError(f"PowerRecorder: kept {len(samples)} samples but the sampler drained "
                               f"{stats['drained']}; a sample was lost between ring and capture")
        brackets = np.concatenate(self._brackets).astype(np.int64, copy=False)
        others = {c: np.concatenate(b).astype(np.int64, copy=False) for c, b in self._clock_brackets.items()}
        stats.update(drain_thread_cpu_ns=int(self._thread_cpu_ns), drains=int(self._drains),
                     epoch_bracket_reads=int(brackets.shape[0]), capacity=self._capacity,
                     brackets_every_s=self._every_s)
        if stats["drops"]:
            warnings.warn(f"PowerRecorder: {stats['drops']} sample(s) were dropped because the ring "
                          f"(capacity={self._capacity}) was full; pass a larger capacity or a shorter "
                          "brackets_every_s", RuntimeWarning, stacklevel=4)
        sensor = self._sensor_for(samples)
        meta = {**self._meta(), "stopped_epoch_ns": int(brackets[-1, 1]),
                # Each clock minus the host clock at the start and the end (tightest brackets), for reading.
                "clock_offsets": clock_offsets({"CLOCK_REALTIME": brackets, **others})}
        if self._trace_path is not None:
            meta["trace"] = os.path.basename(self._trace_path)
        return PowerCapture(samples=samples, epoch_brackets=brackets, source=source_dict(self._resolved.source),
                            sensor=sensor, period_ns=self._period_ns, stats=stats, meta=meta, clock_brackets=others,
                            counter=self._captured_counter)

    # ------------------------------------------------------------------ traces
    def attach(self, prof: Any, path: Optional[Union[str, os.PathLike[str]]] = None) -> str:
        """Export a finished torch.profiler run's Chrome trace next to the capture; return its path.

        Parameters
        ----------
        prof : torch.profiler.profile
            A profiler whose ``with`` block has ended.
        path : str or path-like, optional
            Where to write the trace (``.json`` or gzipped ``.json.gz``).
            Default: the capture's path with ``.trace.json.gz`` for its
            extension.

        Returns
        -------
        str

        Raises
        ------
        ValueError
            ``prof`` has no ``export_chrome_trace``; no ``path`` and a
            recorder without one.

        Notes
        -----
        The trace stamps kernels on CLOCK_REALTIME (Kineto's
        ``baseTimeNanoseconds`` plus ``ts``), which the capture's
        :meth:`PowerCapture.logger_map` maps the power logs onto. Written to
        a temporary name and renamed, like the capture. Attached before the
        ``with`` block ends, the capture's ``meta["trace"]`` names it.
        """
        if not callable(getattr(prof, "export_chrome_trace", None)):
            raise ValueError(f"prof={prof!r}: must be a finished torch.profiler.profile (no export_chrome_trace)")
        if path is None:
            if self._path is None:
                raise ValueError("path: this recorder saves no capture to put the trace next to; pass path=")
            stem = self._path[:-4] if self._path.endswith(".npz") else self._path
            path = stem + ".trace.json.gz"
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path={path!r}: must be a file path")
        path = check_output_path(path, "path")
        if self._path is not None and os.path.abspath(path) == os.path.abspath(self._path):
            raise ValueError(f"path={path!r}: is where this recorder saves its capture; give the trace its own name")
        # torch gzips when the name ends in .gz: the writer's temporary name keeps the suffix.
        write_atomically(path, prof.export_chrome_trace)
        self._trace_path = path
        if self._state == "recording":
            self._journal_append([encode_json(b"META", {"trace": os.path.basename(path)})])
        return path


def record(
    device: Any,
    path: Optional[Union[str, os.PathLike[str]]] = None,
    *,
    period_ns: Optional[int] = None,
    brackets_every_s: float = 0.5,
    brackets_per_read: int = 8,
    capacity: Optional[int] = None,
    counter: Any = "auto",
    counter_period_ns: Optional[int] = None,
) -> PowerRecorder:
    """Record a device's power while an application runs: a context manager giving a capture.

    ``with record("nvidia:0", "power.npz") as rec: ...`` samples the device's
    power sensor on a native thread and brackets the host clocks, so the logs
    land on the application's profiler trace (``profile_trace``).

    Parameters
    ----------
    device : str, backend, SimGPU or PowerSource
        What to record (a device string as :func:`open_device` reads it:
        ``"nvidia:0"``, ``"nvidia:0:instant"``, ``"amd:0"``; or a
        ``SimGPU(realtime=True)``, a ``LiveSimBackend``, a hardware backend).
    path : str or path-like, optional
        Where the capture is written when the block ends (journaled beside
        it, ``PATH.journal``, while the block runs: see :class:`PowerRecorder`).
    period_ns, brackets_every_s, brackets_per_read, capacity, counter, counter_period_ns
        As :class:`PowerRecorder` takes them, each checked by name.

    Returns
    -------
    PowerRecorder
        Not started: enter it with ``with``.
    """
    return PowerRecorder(device, path, period_ns=period_ns, brackets_every_s=brackets_every_s,
                         brackets_per_read=brackets_per_read, capacity=capacity, counter=counter,
                         counter_period_ns=counter_period_ns)


def record_torch(
    step: Callable[[], Any],
    steps: int,
    device: Any,
    out_dir: Union[str, os.PathLike[str]],
    *,
    warmup_steps: int = 1,
    period_ns: Optional[int] = None,
    activities: Optional[Sequence[Any]] = None,
    tail_s: Optional[float] = None,
) -> tuple[str, str]:
    """Run a training step under torch.profiler while recording power: the in-situ inputs in one call.

    Parameters
    ----------
    step : callable
        One step of the application (forward, backward, optimiser), no
        arguments.
    steps : int
        Profiled steps (>= 1); ``prof.step()`` follows each.
    device
        What :class:`PowerRecorder` records (``"nvidia:0"``, a backend, ...).
    out_dir : str or path-like
        Folder for ``trace.json.gz`` and ``power.npz`` (created if missing).
    warmup_steps : int
        Steps run first, recorded for power but outside the profiler, so
        one-off costs (allocation, autotuning, lazy init) stay out of the
        trace (default 1).
    period_ns : int, optional
        Sampler poll period (default: :class:`PowerRecorder`'s).
    activities : sequence of torch.profiler.ProfilerActivity, optional
        Default CPU and CUDA.
    tail_s : float, optional
        Power kept recording after the last step, s, so the logs of its
        last kernels arrive (a window or publication delay). Default: two
        logger periods plus the logger's window, at least 10 ms, at most 3 s.

    Returns
    -------
    (str, str)
        The trace's path and the capture's path.

    Notes
    -----
    The paper's Section IV-A protocol in situ: each kernel execution in
    the steps is one run at a random phase against the logger, and
    :func:`fingrav_native.profile_trace` turns the pair into
    per-kernel profiles. torch is imported here, not with the package.
    """
    import torch

    steps = integer_in(steps, "steps", 1)
    warmup_steps = integer_in(warmup_steps, "warmup_steps", 0)
    if not callable(step):
        raise ValueError(f"step={step!r}: must be a callable taking no arguments")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise ValueError(f"out_dir={out_dir!r}: must be a folder path")
    if tail_s is not None:
        tail_s = positive_number(tail_s, "tail_s", upper=60.0, allow_zero=True)
    acts = list(activities) if activities is not None else [torch.profiler.ProfilerActivity.CPU,
                                                          torch.profiler.ProfilerActivity.CUDA]
    if not acts:
        raise ValueError("activities: at least one ProfilerActivity is needed")
    out = check_output_path(out_dir, "out_dir", folder=True)
    os.makedirs(out, exist_ok=True)
    power_path = os.path.join(out, "power.npz")
    trace_path = os.path.join(out, "trace.json.gz")
    cuda = torch.profiler.ProfilerActivity.CUDA in acts and torch.cuda.is_available()

    def sync() -> None:
        # Kernels are asynchronous: wait so the profiler and the logs see them finish.
        if cuda:
            torch.cuda.synchronize()

    with PowerRecorder(device, power_path, period_ns=period_ns) as rec:
        info = rec.source.info
        if tail_s is None:
            period = float(info.native_period_ns) or float(rec.period_ns)
            tail_s = min(3.0, max(0.01, (2 * period + float(info.window_ns)) / 1e9))
        for _ in range(warmup_steps):
            step()
        sync()
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(steps):
                step()
                prof.step()
            sync()
        rec.attach(prof, trace_path)
        time.sleep(tail_s)
    return trace_path, power_path
