"""Runs on the host timeline: clock maps fitted on their own reads, executions and logs placed through them.

Paper Section IV-A (CPU-GPU sync): markers stay in device ticks and logs in
the logger's clock until the whole set of runs' bracketed reads is fitted,
so drift is mapped by the reads around each run, not one offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, TypeVar, Union

import numpy as np

from fingrav_native._checks import (
    clock_map,
    instance_of,
    positive_number,
    short_repr,
    structured,
    tick_length,
    whole_numbers,
)
from fingrav_native.clocks._maps import ClockMap, ClockMapLike, PiecewiseClockMap, host_ns_exact
from fingrav_native.clocks._onesided import fit_one_sided_clock_map
from fingrav_native.clocks._piecewise import fit_piecewise_clock_map
from fingrav_native.clocks._twosided import fit_clock_map
from fingrav_native.records._layouts import EXECUTION_DTYPE
from fingrav_native.records._recording import Capabilities, Recording, RunRecord
from fingrav_native.sensors._model import SensorModel

#: Campaigns longer than this (host ns) get a piecewise clock map.
_PIECEWISE_AFTER_NS = 2e9


#: A device map of any kind: the logger map is that map itself when the logger reads the device clock.
_Map = TypeVar("_Map", bound=ClockMapLike)


@dataclass(frozen=True)
class Timeline:
    """A set of runs placed on the host timeline through clock maps fitted on their own reads.

    Attributes
    ----------
    samples : numpy.ndarray
        The runs' power logs (SAMPLE_DTYPE, logger clock).
    executions : numpy.ndarray
        EXECUTION_DTYPE on host time.
    device_map, logger_map : ClockMap or PiecewiseClockMap
        Device ticks and logger timestamps onto host ns.
    """

    samples: np.ndarray
    executions: np.ndarray
    device_map: Union[ClockMap, PiecewiseClockMap]
    logger_map: Union[ClockMap, PiecewiseClockMap]

    def to_recording(self, sensor: Optional[SensorModel] = None) -> Recording:
        """The runs as one :class:`Recording`: their logs and their executions already on host time."""
        return Recording(samples=self.samples, executions=self.executions, sensor=sensor,
                         provenance={"device_map": repr(self.device_map), "logger_map": repr(self.logger_map)})



def timeline_of(records: Sequence[RunRecord], caps: Capabilities) -> Timeline:
    """Steps 5-6's inputs for ``records``: their logs and executions on host time.

    Parameters
    ----------
    records : sequence of RunRecord
    caps : Capabilities
        The backend's (device tick, logger clock and tick, marker error).

    Returns
    -------
    Timeline
    """
    if isinstance(records, (str, bytes, dict)) or not isinstance(records, (list, tuple)) or not records or not all(
            isinstance(r, RunRecord) for r in records):
        raise ValueError(f"records={short_repr(records)}: must be a non-empty sequence of RunRecord")
    instance_of(caps, "caps", Capabilities, "the backend's Capabilities")
    samples = _concatenate([r.samples for r in records])
    markers = _concatenate([r.markers for r in records])
    brackets = _concatenate([r.brackets for r in records])
    tick = caps.device_tick_ns
    # The clock's update step (e.g. %globaltimer moving once a microsecond) widens the map's bound.
    dmap = fit_device_map(brackets, tick, caps.device_resolution_ticks)
    # The logs' own tick: PMFW 10 ns, NVML 1 us, host-stamped 1 ns.
    lmap = fit_logger_map(caps, dmap, samples, caps.logger_tick_ns or tick)
    return Timeline(samples, executions_from_markers(markers, dmap, caps.marker_err_ns), dmap, lmap)


def _concatenate(arrays: list[np.ndarray]) -> np.ndarray:
    """The runs' arrays joined; one layout shared by all is named, so numpy copies without promoting.

    Without ``dtype`` numpy promotes a structured dtype field by field across every
    array joined, several times the copy itself for a campaign of hundreds of runs;
    arrays of differing layouts are left to numpy's promotion as they are.
    """
    first = arrays[0].dtype
    same = all(a.dtype == first for a in arrays)
    return np.concatenate(arrays, dtype=first if same else None)


def nominal_durations(markers: np.ndarray, tick_ns: float) -> np.ndarray:
    """Execution durations (ns) from GPU-side markers at the nominal tick (timing runs, step 1)."""
    structured(markers, "markers", ("begin_ticks", "end_ticks"), "GPU-side markers (MARKER_RECORD_DTYPE)")
    # A tick of over a second is no GPU clock's (and durations would overflow to inf).
    tick_ns = tick_length(tick_ns, "tick_ns")
    return np.asarray(markers["end_ticks"] - markers["begin_ticks"], dtype=np.float64) * tick_ns


def _segment_ns(brackets: np.ndarray) -> float:
    """Knot spacing of the piecewise map: 1 s, or longer when the bursts of reads are further apart.

    Reads come in bursts around each run. A piece needs reads spread over
    half its spacing on both sides of its knot, so when runs are seconds
    apart (a sensor with a 100 ms period needs long idle between runs to
    show idle again) the spacing must exceed the gap between bursts: 2.5x
    the typical (90th percentile) gap, so even the end pieces, which see
    one side only, hold two bursts. Skew wanders over tens of seconds (a
    crystal's temperature), so pieces of a few seconds still follow it.
    """
    hb = np.sort(brackets[:, 0].astype(np.float64))
    gaps = np.diff(hb)
    between = gaps[gaps > 1e6]  # gaps between bursts, not within one
    if len(between) == 0:
        return 1e9
    return max(1e9, 2.5 * float(np.quantile(between, 0.9)))


def fit_device_map(brackets: np.ndarray, tick_ns: float,
                   resolution_ticks: float = 1.0) -> ClockMap | PiecewiseClockMap:
    """The device clock's map onto host time; piecewise over campaigns longer than 2 s (drift).

    The pieces are 1 s apart, or further when the runs' bursts of reads are
    (:func:`_segment_ns`; paper Section IV-A syncs once, drift is this
    package's addition). ``resolution_ticks`` is the clock's update step in
    ticks (``Capabilities.device_resolution_ticks``): a read ``N`` happened
    somewhere in ``[N, N + step)``, which the bound must cover.
    """
    arr = whole_numbers(brackets, "brackets", -(2**63), 2**63 - 1)
    if arr.ndim != 2 or arr.shape[1] != 3 or len(arr) == 0:
        raise ValueError(f"brackets: an (n, 3) array of (host before, device ticks, host after), got shape {arr.shape}")
    brackets = arr
    span = float(brackets[:, 0].max() - brackets[:, 0].min())
    if span > _PIECEWISE_AFTER_NS:
        return fit_piecewise_clock_map(brackets, tick_ns=tick_ns, segment_ns=_segment_ns(brackets),
                                       resolution_ticks=resolution_ticks)
    return fit_clock_map(brackets, tick_ns=tick_ns, resolution_ticks=resolution_ticks)


def fit_logger_map(caps: Capabilities, device_map: _Map, samples: np.ndarray, tick_ns: float) -> Union[_Map, ClockMap]:
    """The logger clock's map: the device map, or fitted one-sidedly when the logger has its own clock."""
    instance_of(caps, "caps", Capabilities, "the backend's Capabilities")
    clock_map(device_map, "device_map", ("to_host", "error_bound_at"))
    structured(samples, "samples", ("source_ts", "host_ns"), "the run's logs (SAMPLE_DTYPE)")
    tick_length(tick_ns, "tick_ns")  # as every clock fit
    if caps.logger_clock == "device":
        return device_map
    # The logger has its own clock: fit it one-sidedly from the logs
    # themselves (a log precedes the read that saw it).
    return fit_one_sided_clock_map(samples["host_ns"], samples["source_ts"], tick_ns=tick_ns)


def executions_from_markers(markers: np.ndarray, device_map: ClockMapLike, marker_err_ns: float) -> np.ndarray:
    """GPU-side markers as EXECUTION_DTYPE on host time, with each end's error bound."""
    structured(markers, "markers", ("run", "index", "kernel_id", "begin_ticks", "end_ticks"),
               "GPU-side markers (MARKER_RECORD_DTYPE)")
    clock_map(device_map, "device_map", ("to_host", "error_bound_at"))
    # An error of more than 1000 s is no marker's (and overflows the float32 error fields).
    marker_err_ns = positive_number(marker_err_ns, "marker_err_ns", allow_zero=True, upper=1e12)
    ex = np.zeros(len(markers), dtype=EXECUTION_DTYPE)
    ex["run"] = markers["run"]
    ex["index"] = markers["index"]
    ex["kernel_id"] = markers["kernel_id"]
    # Integer ns from integer ticks: the map is evaluated relative to its anchor, exactly.
    ex["start_ns"] = host_ns_exact(device_map, markers["begin_ticks"])
    ex["end_ns"] = host_ns_exact(device_map, markers["end_ticks"])
    # Markers bracket the kernel from outside by up to marker_err_ns; the
    # device map adds its own bound.
    ex["start_err_ns"] = marker_err_ns + device_map.error_bound_at(ex["start_ns"])
    ex["end_err_ns"] = marker_err_ns + device_map.error_bound_at(ex["end_ns"])
    return ex
