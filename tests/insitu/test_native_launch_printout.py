"""The printout of a table made from fingrav's own launch records (``fingrav run``) names them as its source.

Such records are kernel dispatches only; the line on iterations must say so, not blame a rocprofv3 trace
the user never wrote.
"""

from __future__ import annotations

import dataclasses

from fingrav_native import profile_trace
from fingrav_native.app import simulate_training_loop
from fingrav_native.files import read_trace
from fingrav_native.insitu._trace import NATIVE_LAUNCH_SOURCE


def test_unclear_no_iterations_line_names_the_native_launch_records(tmp_path) -> None:
    loop = simulate_training_loop(120, seed=3)
    kt = read_trace(loop.write_rocprof_trace(tmp_path / "kernel_trace.csv"))
    native = dataclasses.replace(kt, source=f"{NATIVE_LAUNCH_SOURCE} (rocm)")
    text = str(profile_trace(native, loop.capture(), min_executions=20))
    line = next(ln for ln in text.splitlines() if ln.startswith("no iterations"))
    assert "rocprofv3" not in line
    assert f"{NATIVE_LAUNCH_SOURCE} (rocm)" in line and "kernel dispatches only" in line


def test_unclear_table_says_its_energy_is_per_golden_execution_not_the_mean_of_all(tmp_path) -> None:
    loop = simulate_training_loop(120, seed=3)
    tp = profile_trace(loop.write_rocprof_trace(tmp_path / "kernel_trace.csv"), loop.capture(), min_executions=20)
    assert (tp.kernels["golden"] < tp.kernels["count"]).any()
    text = " ".join(str(tp).split())  # the printout wraps its footnotes
    assert "mJ/exec: per execution of the golden duration class" in text
    assert "not the mean over all 'count' executions" in text
