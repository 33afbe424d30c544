"""Captures built from the simulator's loops for the in-situ tests (shared, so each test states only its case)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native.files import PowerCapture


def host_stamped_capture(loop: Any) -> PowerCapture:
    """The loop's logs stamped with the host clock itself: a map from bracketed reads only (bound ~0.1 us)."""
    logs = loop.gpu.logs()
    s = np.zeros(len(logs), dtype=SAMPLE_DTYPE)
    s["source_ts"] = s["host_ns"] = logs["sample_ns"]
    s["seq"] = np.arange(len(s))
    for c in ("total", "compute", "io", "memory"):
        s[c] = logs[c]
    return PowerCapture(samples=s, epoch_brackets=loop.epoch_brackets,
                        source={"name": "host-stamped", "clock_domain": "host-monotonic-raw", "tick_ns": 1.0,
                                "native_period_ns": 1_000_000, "window_ns": 0, "channels": ["total"]},
                        sensor=loop.sensor, period_ns=1_000_000, stats={}, meta={},
                        clock_brackets=loop.clock_brackets)
