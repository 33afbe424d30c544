"""A campaign fits each run's clock maps a bounded number of times, however often its progress is counted.

The progress line counts the golden runs' LOIs at every tenth of the runs.
Refitting the clock maps of every run so far at each count made a campaign
fit each run about five and a half times (nine counts over a growing prefix,
then the profile's own fit): on hardware, with thousands of runs, seconds of
CPU between runs that should be waiting for the device. Each count now fits
only the runs since the last one.
"""

from __future__ import annotations

from typing import Any

import pytest

import fingrav_native as fg
from fingrav_native.app import CampaignProgress, ProgressReporter, _campaign
from fingrav_native.backends import SimBackend

RUNS = 40


class _Lines(ProgressReporter):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)

    def update(self, state: CampaignProgress) -> None:
        pass


def test_slow_progress_fits_each_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    fitted: list[int] = []
    fit = _campaign.Campaign.timeline

    def counted(self: Any, records: Any) -> Any:
        fitted.append(len(records))
        return fit(self, records)

    monkeypatch.setattr(_campaign.Campaign, "timeline", counted)
    said = _Lines()
    prof = fg.profile("cb-4k-gemm", SimBackend(seed=3), mode="sse", runs=RUNS, top_up=False, phase="random",
                      progress=said)
    assert prof.runs == RUNS + 1  # and the timing run
    # Nine counts (after runs 4, 8, ..., 36), each fitting the four runs since the last; then the profile's fit.
    assert fitted == [4] * 9 + [RUNS], fitted
    # The counts still reach the progress line, growing with the runs.
    counts = [int(line.split("LOIs ")[1].split("/")[0]) for line in said.lines if line.startswith("  runs ")]
    assert len(counts) == 10 and counts == sorted(counts) and counts[-2] > 0, said.lines
