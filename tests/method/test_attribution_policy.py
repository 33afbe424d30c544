"""One attribution policy: ``profile`` and ``stitch_logs`` attribute the same logs alike.

A 25 ms window every 100 ms over a sub-millisecond kernel leaves a dozen
runs no window edge inside the execution: nothing to deconvolve. With
``attribution="auto"`` both entry points stitch the logs at their instants
and say so (``SensorResolutionWarning``), and the result carries no
deconvolution; with ``attribution="deconvolve"`` both refuse.
"""

from __future__ import annotations

import ast
import os
import warnings
from typing import Any

import pytest

import fingrav_native as fg
from fingrav_native.app import _campaign
from fingrav_native.backends import SimBackend
from fingrav_native.method import SensorResolutionWarning
from package_sources import package_sources

SENSOR = "part-time-100ms"
SSE_INDEX = 3


def _campaign_and_its_logs(monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[Any, Any, list[str]]:
    """A short campaign under the coarse sensor, the timeline its profile was made from, and its warnings."""
    seen = []
    fit = _campaign.Campaign.timeline

    def keep(self: Any, records: Any) -> Any:
        seen.append(fit(self, records))
        return seen[-1]

    monkeypatch.setattr(_campaign.Campaign, "timeline", keep)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = fg.profile("cb-4k-gemm", SimBackend(seed=1, sensor=SENSOR), mode="sse", runs=12, top_up=False,
                          phase="random", **options)
    said = [str(w.message) for w in caught if issubclass(w.category, SensorResolutionWarning)]
    return prof, seen[-1], said


def test_silently_inconsistent_profile_and_stitch_logs_fall_back_alike_on_the_same_logs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    prof, tl, said_by_profile = _campaign_and_its_logs(monkeypatch)
    ep = prof.profiles["sse"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        own = fg.stitch_logs(tl.samples, tl.executions, tl.logger_map, execution_of_interest=SSE_INDEX,
                             margin=ep.golden.margin, sensor=SENSOR)
    said_by_stitch = [str(w.message) for w in caught if issubclass(w.category, SensorResolutionWarning)]
    # Neither could deconvolve; both said so, and both hold the logs stitched at their instants.
    assert any("cannot deconvolve" in m for m in said_by_profile), said_by_profile
    assert any("cannot deconvolve" in m for m in said_by_stitch), said_by_stitch
    assert ep.deconvolution is None and own.deconvolution is None
    assert ep.stitched.smoother == own.stitched.smoother == "local"


def test_silently_inconsistent_an_explicit_deconvolution_is_refused_by_both(monkeypatch: pytest.MonkeyPatch) -> None:
    _, tl, _ = _campaign_and_its_logs(monkeypatch)
    with pytest.raises(ValueError, match="window edges"):
        fg.stitch_logs(tl.samples, tl.executions, tl.logger_map, execution_of_interest=SSE_INDEX, sensor=SENSOR,
                       attribution="deconvolve")
    with pytest.raises(ValueError, match="window edges"):
        _campaign_and_its_logs(monkeypatch, attribution="deconvolve")


def _attribution_literals(text: str) -> int:
    """How many ``Literal["auto", "instant", "deconvolve"]`` a module declares."""
    n = 0
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if {e.value for e in elts if isinstance(e, ast.Constant)} == {"auto", "instant", "deconvolve"}:
                n += 1
    return n


def test_unclear_the_attribution_literal_and_the_fallback_are_written_once() -> None:
    sources = package_sources()
    literals = {path: n for path, text in sources.items() if "Literal" in text and "deconvolve" in text
                and (n := _attribution_literals(text))}
    assert literals == {os.path.join("method", "_pipeline.py"): 1}, literals
    fallbacks = [path for path, text in sources.items() if "cannot deconvolve (" in text]
    assert fallbacks == [os.path.join("method", "_pipeline.py")], fallbacks
