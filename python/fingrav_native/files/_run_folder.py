"""The folder ``fingrav run`` writes: the power capture and the native launch records, read as one capture.

``DIR/power.npz`` is the recorder's capture (:mod:`fingrav_native.files._capture`)
and ``DIR/launches/launches.<pid>.journal`` the launch-capture tool's files
(:func:`fingrav_native.files.read_launches`). Each launch file brackets its
own record clock (CLOCK_BOOTTIME for rocprofiler-sdk, CLOCK_REALTIME for
CUPTI) against CLOCK_MONOTONIC_RAW, the sampler's clock, from the
application's process; the capture brackets the same clocks from fingrav's.
The launch file's brackets map the logs onto the records' clock where it has
enough of them (they were read beside the records); the capture's own are
the fallback, and a disagreement between the two maps beyond their bounds is
a :class:`~fingrav_native.insitu.ClockMismatchWarning`, never passed over.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import warnings
from typing import Any, Union

import numpy as np

from fingrav_native.clocks._epoch import fit_epoch_map
from fingrav_native.clocks._maps import MIN_BRACKETS
from fingrav_native.files._capture import PowerCapture
from fingrav_native.files._capture_read import load_capture
from fingrav_native.insitu._align import ClockMismatchWarning

__all__ = ["RUN_LAUNCHES", "RUN_POWER", "has_launch_files", "is_run_folder", "launch_capture", "load_run_folder",
           "run_folder_paths"]

#: The power capture inside a ``fingrav run`` folder.
RUN_POWER = "power.npz"

#: The folder of launch files inside it (``FINGRAV_LAUNCH_DIR`` for the application).
RUN_LAUNCHES = "launches"

#: The launch records' clocks, as the capture names its bracketed clocks.
_RECORD_CLOCKS = {"CLOCK_BOOTTIME": "CLOCK_BOOTTIME", "CLOCK_REALTIME": "CLOCK_REALTIME",
                  "unix-epoch": "CLOCK_REALTIME"}


def run_folder_paths(folder: Union[str, "os.PathLike[str]"]) -> tuple[str, str]:
    """The capture's path and the launch files' folder inside a ``fingrav run`` folder."""
    f = os.fspath(folder)
    return os.path.join(f, RUN_POWER), os.path.join(f, RUN_LAUNCHES)


def is_run_folder(path: Any) -> bool:
    """Whether ``path`` is a folder ``fingrav run`` wrote (its launch folder and its capture or journal)."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        return False
    power, launches = run_folder_paths(path)
    return os.path.isdir(launches) and (os.path.exists(power) or os.path.exists(power + ".journal"))


def has_launch_files(launches: str) -> bool:
    """Whether the launch folder holds at least one launch file (none: the tool never loaded)."""
    return bool(glob.glob(os.path.join(glob.escape(launches), "launches.*.journal")))


def load_run_folder(folder: Union[str, "os.PathLike[str]"]) -> tuple[Any, PowerCapture]:
    """The launch records and the power capture of a ``fingrav run`` folder (the capture's journal if it was killed).

    Raises
    ------
    ValueError
        Naming the folder: not a ``fingrav run`` folder, or one without any
        launch file.
    """
    from fingrav_native.files._launches import read_launches

    f = os.fspath(folder)
    if not is_run_folder(f):
        raise ValueError(f"trace={f!r}: not a folder fingrav run wrote (it holds no {RUN_LAUNCHES}/ folder beside "
                         f"{RUN_POWER})")
    power, launches = run_folder_paths(f)
    if not has_launch_files(launches):
        raise ValueError(f"trace: {launches!r} holds no launch file (launches.<pid>.journal): the "
                         "launch-capture tool never loaded in the application, so there are no kernels to attribute")
    return read_launches(launches), load_capture(power)


def launch_capture(capture: PowerCapture, launches: Any) -> PowerCapture:
    """``capture`` with the launch records' own brackets for their record clock, where they have enough.

    Parameters
    ----------
    capture : PowerCapture
        The power recorded beside the application.
    launches : LaunchLog
        Its launch records (:func:`fingrav_native.files.read_launches`):
        ``clock`` and ``brackets`` ((n, 3) int64 rows ``(raw_before,
        clock_read, raw_after)``) are used.

    Returns
    -------
    PowerCapture
        The same capture, the brackets of the records' clock replaced by the
        launch file's when it has at least :data:`MIN_BRACKETS` rows (and the
        capture's kept otherwise).

    Warns
    -----
    ClockMismatchWarning
        The two maps of the record clock (the launch file's and the
        capture's) disagree by more than the sum of their error bounds over
        the records' span: a clock stepped between the two processes' reads,
        or a launch file of another host or boot. The launch file's map is
        used, and the figure said.

    Notes
    -----
    The records' clock is read from the application's process beside the
    records, so its brackets place the records with the error they were
    stamped with; the recorder's brackets of the same clock are the check
    (FinGraV places logs by bracketed reads of each clock, paper Section IV-A).
    """
    clock = _RECORD_CLOCKS.get(str(launches.clock))
    if clock is None:
        raise ValueError(f"launches.clock={launches.clock!r}: not a record clock a capture brackets (one of "
                         f"{', '.join(_RECORD_CLOCKS)})")
    own = np.asarray(launches.brackets, dtype=np.int64).reshape(-1, 3)
    if own.shape[0] < MIN_BRACKETS:
        return capture
    theirs = capture.brackets(clock) if clock in capture.clocks else None
    if theirs is not None and theirs.shape[0] >= MIN_BRACKETS and len(launches.records):
        _check_agreement(own, theirs, clock, launches.records)
    if clock == "CLOCK_REALTIME":
        return dataclasses.replace(capture, epoch_brackets=own)
    return dataclasses.replace(capture, clock_brackets={**capture.clock_brackets, clock: own})


def _check_agreement(own: np.ndarray, theirs: np.ndarray, clock: str, records: np.ndarray) -> None:
    """Warn when the launch file's map of ``clock`` and the capture's differ beyond their bounds, over the records."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a step inside either is its own warning where the map is used
        a = fit_epoch_map(own, clock=clock)
        try:
            b = fit_epoch_map(theirs, clock=clock)
        except ValueError as exc:
            # The capture's map is only the check here: the records are placed by their own brackets, so a
            # capture whose brackets cannot be fitted leaves the check undone, said, and the table made.
            b = None
            why = str(exc)
    if b is None:
        warnings.warn(f"clock check skipped: the power capture's own {clock} brackets could not be fitted ({why}); "
                      f"the launch records' {clock} brackets, read in the application, place them unchecked",
                      ClockMismatchWarning, stacklevel=3)
        return
    # Host times of the records' first start and last end, through the launch file's own map.
    span = np.array([int(np.min(records["start_ns"])), int(np.max(records["end_ns"]))], dtype=np.int64)
    raw = own[:, 0] + (own[:, 2] - own[:, 0]) // 2
    offset = float(np.median(own[:, 1] - raw))
    host = (span - offset).astype(np.int64)
    on_a, on_b = np.asarray(a.to_host_ns(host), dtype=np.int64), np.asarray(b.to_host_ns(host), dtype=np.int64)
    gap = np.abs(on_a - on_b).astype(np.float64)
    # Each map's bound is stated where it lands, on the record clock.
    bound = np.asarray(a.error_bound_at(on_a), dtype=np.float64) + np.asarray(b.error_bound_at(on_b), dtype=np.float64)
    worst = int(np.argmax(gap - bound))
    if gap[worst] > bound[worst]:
        warnings.warn(f"clock mismatch: the launch records' {clock} brackets (read in the application) and the power "
                      f"capture's (read by the recorder) map the host clock {gap[worst] / 1e3:.1f} us apart over the "
                      f"records, beyond their bounds ({bound[worst] / 1e3:.1f} us together); a clock stepped "
                      "between the reads, or the launch files come from another host or boot. The launch "
                      "records' own brackets are used", ClockMismatchWarning, stacklevel=3)
