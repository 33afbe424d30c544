"""Result types of a FinGraV campaign: what :func:`~fingrav_native.profile` returns.

They sit below both the orchestrator (:func:`fingrav_native.profile`)
and the file layer (:mod:`fingrav_native.files`), so either can use them
without importing the other. Each is a frozen dataclass: once made, a result
does not change under whoever holds it (a plot, a file writer, another rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from fingrav_native.method._deconvolved import Deconvolution
from fingrav_native.method._golden import GoldenSelection
from fingrav_native.method._guidance import Guidance
from fingrav_native.method._steady import SspSearch
from fingrav_native.method._stitched import EnergyEstimate, StitchedProfile
from fingrav_native.method._whole_run import WholeRunView
from fingrav_native.records._log_layouts import PLACED_LOG_DTYPE
from fingrav_native.records._recording import Capabilities, Recording


@dataclass(frozen=True)
class ErrorBudget:
    """How far a LOI's time of interest can be off, and why: the bounds :func:`~fingrav_native.method.place_logs` adds.

    All figures are half-widths in ns, medians over the profile's LOIs.

    Attributes
    ----------
    clock_map_ns : float
        Error bound of the logger-clock map at the logs (for a logger stamped
        by the device clock: the device map).
    marker_ns : float
        Kernel start localisation: the GPU-side marker's own error plus the
        device-clock map's bound at the start.
    logger_window_ns : float
        Half the logger's averaging window (0 for instantaneous logs).
    total_ns : float
        Median of the per-LOI combined uncertainty (``LOI_DTYPE.uncert_ns``).
    """

    clock_map_ns: float
    marker_ns: float
    logger_window_ns: float
    total_ns: float


#: A power log placed on host time (CampaignTimeline.logs): an alias of
#: :data:`fingrav_native.records.PLACED_LOG_DTYPE`, the same object (not the simulated device's raw log,
#: ``native.LOG_DTYPE``, which is :data:`fingrav_native.records.SIM_LOG_DTYPE`).
LOG_DTYPE = PLACED_LOG_DTYPE


@dataclass(frozen=True)
class CampaignTimeline:
    """Every run of a campaign on the host timeline: what trace export shows.

    Attributes
    ----------
    executions : numpy.ndarray
        EXECUTION_DTYPE, every execution of every kept run, placed through
        the device-clock map (paper Section IV-B step 2).
    logs : numpy.ndarray
        LOG_DTYPE, every power log, placed through the logger-clock map.
    golden_runs : numpy.ndarray
        Run ids in the golden bin of any execution of interest (step 5).
    """

    executions: np.ndarray
    logs: np.ndarray
    golden_runs: np.ndarray

    def to_recording(self) -> Recording:
        """The campaign's placed logs and executions as a :class:`Recording` on the host clock.

        The logs are already on host time, so each log's ``source_ts`` is its
        host time rounded to the nanosecond and the clock domain says so.
        """
        samples = np.zeros(len(self.logs), dtype=[("source_ts", "<i8"), ("host_ns", "<f8"), ("window_ns", "<f8"),
                                                  ("total", "<f4"), ("compute", "<f4"), ("io", "<f4"),
                                                  ("memory", "<f4")])
        samples["source_ts"] = np.rint(self.logs["host_ns"]).astype(np.int64)
        for name in ("host_ns", "window_ns", "total", "compute", "io", "memory"):
            samples[name] = self.logs[name]
        return Recording(samples=samples, executions=self.executions, source={"clock_domain": "host (placed)"},
                         provenance={"golden_runs": np.asarray(self.golden_runs)})



@dataclass(frozen=True)
class ExecutionProfile:
    """The stitched profile of one execution of interest (SSE or SSP).

    Attributes
    ----------
    label : str
        ``"sse"``, ``"ssp"`` or a scenario name.
    execution_index : int
        Index of the execution of interest within each run.
    executions_per_run : int
        Executions in each run.
    golden : GoldenSelection
        The golden-run bin (step 5).
    lois : numpy.ndarray
        LOI_DTYPE records from the golden runs (step 6).
    stitched : StitchedProfile
        Binned means with intervals and a smooth fit, per channel (step 8).
    duration_ns : float
        Median duration of the execution of interest in the golden runs.
    energy : dict of str to EnergyEstimate
        Energy per execution with its uncertainty, per channel.
    loi_target : int
        LOIs the guidance asks for (Table I density x duration).
    top_up_runs : int
        Runs added in step 7 to approach that target.
    deconvolution : Deconvolution or None
        Present when the logs average windows wider than the profile's
        resolution: ``stitched`` and ``energy`` then come from the
        window-aware deconvolution (its resolution, assumptions and
        warnings are here), and ``lois`` keep the old point attribution
        for comparison.
    """

    label: str
    execution_index: int
    executions_per_run: int
    golden: GoldenSelection
    lois: np.ndarray
    stitched: StitchedProfile
    duration_ns: float
    energy: dict[str, EnergyEstimate]
    loi_target: int
    top_up_runs: int
    deconvolution: Optional[Deconvolution] = None

    def __repr__(self) -> str:
        tot = self.energy.get("total")
        e = f", energy {tot.energy_j * 1e3:.3f} +- {tot.uncertainty_j * 1e3:.3f} mJ" if tot else ""
        return (f"ExecutionProfile({self.label}: execution {self.execution_index} of {self.executions_per_run}, "
                f"{self.golden.count}/{self.golden.total} golden runs, {len(self.lois)} LOIs of {self.loi_target} "
                f"wanted, duration {self.duration_ns / 1e3:.1f} us{e})")


@dataclass(frozen=True)
class Profile:
    """The result of :func:`profile`: settings, raw LOIs, golden runs, curves, budget.

    Attributes
    ----------
    kernel : str
        Kernel profiled.
    backend : Capabilities
        What the logger, clocks and markers were.
    mode : str
        ``"sse"``, ``"ssp"`` or ``"both"``.
    guidance : Guidance
        Table I row used (step 1).
    settings : dict
        Every setting the campaign ran with.
    profiles : dict of str to ExecutionProfile
        ``"sse"`` and/or ``"ssp"``.
    ssp_search : SspSearch or None
        The SSP binary search and its trace (step 3).
    whole_run : WholeRunView
        All logs of the golden runs on time since run start, with execution
        boundaries and the warm-up / SSE / SSP marks (Figures 5-7).
    clock : dict
        Parameters of the fitted device and logger clock maps.
    error_budget : ErrorBudget
        How far a time of interest can be off, and why.
    runs : int
        Runs executed in all (timing, SSP search, campaign, top-up).
    versions : dict
        Package and format versions.
    timeline : CampaignTimeline or None
        All runs' executions and logs on host time (for trace export).
    """

    kernel: str
    backend: Capabilities
    mode: str
    guidance: Guidance
    settings: dict[str, Any]
    profiles: dict[str, ExecutionProfile]
    ssp_search: Optional[SspSearch]
    whole_run: Optional[WholeRunView]
    clock: dict[str, Any]
    error_budget: ErrorBudget
    runs: int
    versions: dict[str, Any] = field(default_factory=dict)
    timeline: Optional[CampaignTimeline] = None

    def _repr_html_(self) -> str:
        """A table for notebooks: each execution of interest, its golden runs, LOIs, energy, and the budget."""
        from html import escape

        b = self.error_budget
        rows = []
        for p in self.profiles.values():
            tot = p.energy.get("total")
            energy = (f"{tot.energy_j * 1e3:.3f} &plusmn; {tot.uncertainty_j * 1e3:.3f} mJ" if tot else "&ndash;")
            rows.append(
                f"<tr><td>{escape(p.label.upper())}</td><td>{p.execution_index} of {p.executions_per_run}</td>"
                f"<td>{p.golden.count}/{p.golden.total}</td><td>{len(p.lois)} / {p.loi_target}</td>"
                f"<td>{p.duration_ns / 1e3:.1f} us</td><td>{energy}</td></tr>")
        return (
            f"<div><b>{escape(self.kernel)}</b> on {escape(self.backend.device)} &middot; mode {escape(self.mode)} "
            f"&middot; {self.runs} runs<table>"
            "<tr><th>profile</th><th>execution</th><th>golden runs</th><th>LOIs / wanted</th>"
            "<th>duration</th><th>energy per execution</th></tr>" + "".join(rows) + "</table>"
            f"<small>timing error budget (ns, half-widths): clock map {b.clock_map_ns:.0f}, kernel start "
            f"{b.marker_ns:.0f}, logger window {b.logger_window_ns:.0f}, per LOI {b.total_ns:.0f}</small></div>")

    def __repr__(self) -> str:
        lines = [f"Profile({self.kernel!r} on {self.backend.name}: {self.mode}, {self.runs} runs, "
                 f"timing error +-{self.error_budget.total_ns:.0f} ns)"]
        for p in self.profiles.values():
            lines.append(f"  {p!r}")
        return "\n".join(lines)


@dataclass(frozen=True)
class InterleavedProfile:
    """A kernel profiled after other kernels, next to its own SSP (Section V-C3).

    Attributes
    ----------
    scenario : ExecutionProfile
        The kernel's single execution after the preceding kernels.
    reference : Profile
        The kernel's own SSP profile.
    preceded_by : tuple of (str, int)
        What ran before it, in order.
    power_ratio : float
        Mean total power of the scenario over the reference SSP's.
    """

    scenario: ExecutionProfile
    reference: Profile
    preceded_by: tuple[tuple[str, int], ...]
    power_ratio: float
