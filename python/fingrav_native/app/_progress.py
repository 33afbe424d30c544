"""Progress of a profiling campaign: runs done, LOIs against the guidance target, ETA.

A campaign of a few hundred runs on real hardware takes minutes (each run
waits for the device to return to idle, paper Section IV-B step 2), so the
user wants to see it advance. :func:`~fingrav_native.app.profile`
reports to a :class:`ProgressReporter`: free-form lines (the SSP search's
probes, top-ups) and structured :class:`CampaignProgress` updates after
every run. :class:`TerminalProgress` draws them as one status line on a
terminal and says nothing at all when its stream is not a terminal (a log
file, a pipe, CI), so scripted use stays quiet.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Callable, Optional, TextIO, Type, Union

from fingrav_native._checks import flag, positive_number, short_repr


@dataclass(frozen=True)
class CampaignProgress:
    """Where a campaign stands (paper Section IV-B, steps 1-7).

    Attributes
    ----------
    kernel : str
        The kernel being profiled.
    phase : str
        ``"timing"`` (step 1), ``"ssp-search"`` (step 3), ``"runs"``
        (step 4), ``"top-up"`` (step 7) or ``"done"``.
    runs_done : int
        Runs completed in the whole campaign so far (every phase; replayed
        runs of a resumed campaign included).
    runs_planned : int or None
        Runs the campaign expects in all at this point; ``None`` while the
        SSP search is still deciding.
    lois : int
        LOIs gathered in the execution(s) of interest of the golden runs, as
        of the last count (the fewest over SSE and SSP); counted at every
        tenth of the runs, not after each one.
    loi_target : int
        LOIs the guidance asks for (Table I density times the duration);
        0 before the kernel is timed.
    elapsed_s : float
        Wall time since the campaign started.
    eta_s : float or None
        Estimated wall time to the planned end (``None`` when unknown).
    replayed : int
        Runs read back from disk instead of executed (``resume``).
    """

    kernel: str
    phase: str
    runs_done: int
    runs_planned: Optional[int]
    lois: int
    loi_target: int
    elapsed_s: float
    eta_s: Optional[float]
    replayed: int = 0

    def format(self) -> str:
        """One status line, e.g. ``cb-4k-gemm runs 120/200  LOIs 31/47  ETA 0:42``."""
        runs = f"{self.runs_done}/{self.runs_planned}" if self.runs_planned else f"{self.runs_done}"
        parts = [f"{self.kernel} {self.phase}", f"runs {runs}"]
        if self.loi_target:
            parts.append(f"LOIs {self.lois}/{self.loi_target}")
        if self.replayed:
            parts.append(f"{self.replayed} replayed")
        parts.append(f"elapsed {_clock(self.elapsed_s)}")
        if self.eta_s is not None:
            parts.append(f"ETA {_clock(self.eta_s)}")
        return "  ".join(parts)


def _clock(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressReporter:
    """What :func:`~fingrav_native.app.profile` reports to; the base class ignores everything.

    Subclass and override :meth:`line` and/or :meth:`update`.
    """

    def line(self, text: str) -> None:
        """A free-form line (an SSP-search probe, a top-up decision)."""

    def update(self, state: CampaignProgress) -> None:
        """The campaign advanced (called after every run)."""

    def close(self) -> None:
        """The campaign ended (normally or not)."""


class LineProgress(ProgressReporter):
    """Forwards the lines to a callable (``print``, a logger's ``info``); ignores updates."""

    def __init__(self, fn: Callable[[str], None]) -> None:
        if not callable(fn):
            raise ValueError(f"fn={short_repr(fn)}: must be a callable taking a line (print, a logger's info)")
        self._fn = fn

    def line(self, text: str) -> None:
        self._fn(text)


class TerminalProgress(ProgressReporter):
    """A status line redrawn in place on a terminal; silent when ``stream`` is not one.

    Parameters
    ----------
    stream : text stream, optional
        Where to draw (default ``sys.stderr``, so stdout stays clean for
        results).
    min_interval_s : float
        Fewest seconds between redraws (phase changes always redraw).
    force : bool, optional
        Draw (True) or stay silent (False) whatever ``stream`` is; default:
        draw only when ``stream.isatty()``.
    """

    def __init__(self, stream: Optional[TextIO] = None, *, min_interval_s: float = 0.1,
                 force: Optional[bool] = None) -> None:
        interval = positive_number(min_interval_s, "min_interval_s", allow_zero=True)
        if force is not None:
            flag(force, "force")
        if stream is not None and not callable(getattr(stream, "write", None)):
            raise ValueError(f"stream={short_repr(stream)}: must be a text stream (with write), or None for stderr")
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(force) if force is not None else bool(isatty and isatty())
        self._interval = interval
        self._last = -float("inf")
        self._phase = ""
        self._width = 0

    def _draw(self, text: str, end: str = "") -> None:
        # Pad over the previous status line, which may have been longer.
        pad = max(0, self._width - len(text))
        self.stream.write("\r" + text + " " * pad + end)
        self.stream.flush()
        self._width = 0 if end else len(text)

    def line(self, text: str) -> None:
        if self.enabled:
            self._draw(text, end="\n")

    def update(self, state: CampaignProgress) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if state.phase == self._phase and state.phase != "done" and now - self._last < self._interval:
            return
        self._last, self._phase = now, state.phase
        self._draw(state.format(), end="\n" if state.phase == "done" else "")

    def close(self) -> None:
        if self.enabled and self._width:
            self._draw("", end="")
            self.stream.write("\r")
            self.stream.flush()
            self._width = 0


class PhaseProgress:
    """What a command is doing, as one status line redrawn on stderr once it has run past ``after_s`` seconds.

    A command whose steps give no count (reading a trace, profiling every signature of it) still shows
    that it advances: the phase and the time elapsed, redrawn every ``interval_s`` from a background
    thread, on a terminal only (as :class:`TerminalProgress`), and cleared when the phase ends, so what
    the command prints to stdout afterwards starts on a clean line and a pipe or a log file gets nothing.

    Parameters
    ----------
    command : str
        Shown first (``fingrav trace``).
    stream : text stream, optional
        Where to draw (default ``sys.stderr``).
    force : bool, optional
        Draw (True) or stay silent (False) whatever ``stream`` is; default: only on a terminal.
    after_s : float
        Seconds before the line first shows (a quick command draws nothing).
    interval_s : float
        Seconds between redraws.
    """

    def __init__(self, command: str, *, stream: Optional[TextIO] = None, force: Optional[bool] = None,
                 after_s: float = 2.0, interval_s: float = 0.25) -> None:
        self._after = positive_number(after_s, "after_s", allow_zero=True)
        self._interval = positive_number(interval_s, "interval_s")
        self._term = TerminalProgress(stream, force=force)
        self._command = str(command)
        self._phase = ""
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if self._term.enabled:
            self._thread = threading.Thread(target=self._run, name="fingrav-progress", daemon=True)
            self._thread.start()

    @property
    def enabled(self) -> bool:
        """Whether the line is drawn at all."""
        return self._term.enabled

    def phase(self, text: str) -> None:
        """The step under way, in a few words (``profiling the trace``)."""
        with self._lock:
            self._phase = str(text)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            elapsed = time.monotonic() - self._t0
            if elapsed >= self._after:
                with self._lock:
                    self._term._draw(f"{self._command}: {self._phase}  elapsed {_clock(elapsed)}")

    def close(self) -> None:
        """Stop redrawing and clear the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self._term.close()

    def __enter__(self) -> "PhaseProgress":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()


ProgressLike = Union[None, bool, Callable[[str], None], ProgressReporter]


def as_reporter(progress: ProgressLike) -> ProgressReporter:
    """The reporter for ``profile(progress=...)``.

    Parameters
    ----------
    progress : None, bool, callable or ProgressReporter
        ``None``/``False``: silent; ``True``: a :class:`TerminalProgress` on
        stderr (silent when stderr is not a terminal); a callable: gets each
        line (``print``); a :class:`ProgressReporter`: used as is.

    Returns
    -------
    ProgressReporter
    """
    if progress is None or progress is False:
        return ProgressReporter()
    if progress is True:
        return TerminalProgress()
    if isinstance(progress, ProgressReporter):
        return progress
    if callable(progress):
        return LineProgress(progress)
    raise ValueError(f"progress={progress!r}: must be None, a bool, a callable taking a line, "
                     "or a ProgressReporter")
