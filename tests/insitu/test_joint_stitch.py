"""Under an averaging sensor the joint timeline fit replaces every stitched curve and energy: the
per-signature stitch before it gives only the golden executions, the warm-up and the placement, so it
bins the logs (what the stitch refuses is still refused) and never runs the curve smoother."""

from __future__ import annotations

import numpy as np
import pytest

import fingrav_native.insitu._joint_attribution as joint_module
import fingrav_native.method._stitch as stitch_module
from fingrav_native import sensor_preset
from fingrav_native.insitu._profile import attribute_trace
from fingrav_native.sim import Identity, logged_loop

AVG_1MS = sensor_preset("amd-1ms-average")


class _Stop(Exception):
    """Raised where the joint fit would start: what came before it is what the test measures."""


def test_wasted_work_the_joint_fit_does_not_smooth_curves_it_replaces(monkeypatch) -> None:
    loop = logged_loop(AVG_1MS, seed=1, iterations=96)
    smoothed: list[int] = []

    def counted(real):
        def wrapper(*args, **kwargs):
            smoothed.append(1)
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(stitch_module, "local_fit", counted(stitch_module.local_fit))
    monkeypatch.setattr(stitch_module, "auto_windows", counted(stitch_module.auto_windows))
    seen: list[int] = []

    def joint_fit(*args, **kwargs):
        seen.append(len(kwargs["durations_ns"]))
        raise _Stop

    monkeypatch.setattr(joint_module, "fit_timeline", joint_fit)
    with pytest.raises(_Stop):
        attribute_trace(loop.trace, loop.samples, Identity(), sensor=AVG_1MS, min_executions=5)
    assert seen and seen[0] >= len(np.unique(loop.trace.executions["kernel_id"])) - 1
    assert not smoothed, f"the stitch smoothed {len(smoothed)} curves the joint fit replaces"
