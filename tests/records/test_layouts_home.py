"""Every numpy record layout the package defines lives in records/, each layout under a name of its own.

Two layouts under one name (``method.LOG_DTYPE``, a log placed on host time; ``native.LOG_DTYPE``, the
simulated device's raw log) let code written against one take the other's arrays; and a layout defined
beside the code that fills it is one that a reader in another layer copies.
"""

from __future__ import annotations

import os
import re

import fingrav_native
from fingrav_native import insitu, method, native, records, sensors, sim


def test_unclear_every_record_layout_is_defined_in_records() -> None:
    root = os.path.dirname(fingrav_native.__file__)
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(folder, name), root)
            if name.endswith(".py") and not rel.startswith("records" + os.sep):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    found += [f"{rel}: {m}" for m in re.findall(r"(?m)^(\w+)\s*=\s*np\.dtype\(", f.read())]
    assert found == []


def test_unclear_distinct_layouts_have_distinct_names_and_the_old_names_are_the_same_objects() -> None:
    assert records.PLACED_LOG_DTYPE != records.SIM_LOG_DTYPE
    assert method.LOG_DTYPE is records.PLACED_LOG_DTYPE
    assert native.LOG_DTYPE is records.SIM_LOG_DTYPE and sim.LOG_DTYPE is records.SIM_LOG_DTYPE
    assert native.EXEC_DTYPE is records.SIM_EXEC_DTYPE is sim.EXEC_DTYPE
    assert native.FIRMWARE_DTYPE is records.SIM_FIRMWARE_DTYPE is sim.FIRMWARE_DTYPE
    assert insitu.TRACE_LOG_DTYPE is records.TRACE_LOG_DTYPE
    assert sensors.COUNTER_LOG_DTYPE is records.COUNTER_LOG_DTYPE
    from fingrav_native.sim import _analytic

    assert _analytic.ANALYTIC_LOG_DTYPE is records.ANALYTIC_LOG_DTYPE
    assert sim.COLLECTIVE_TRUTH_DTYPE is records.COLLECTIVE_TRUTH_DTYPE
    assert insitu.KERNEL_SIGNATURE_DTYPE is records.KERNEL_SIGNATURE_DTYPE


def test_unclear_the_kernel_description_lives_below_backends_and_sim_under_its_public_names() -> None:
    # backends/ and sim/ take what a kernel is from records/, not from each other; the names users import
    # from backends/ are the same objects.
    from fingrav_native import backends

    assert backends.KernelSpec is records.KernelSpec
    assert backends.execution_plan is records.execution_plan and backends.wait_for_idle is records.wait_for_idle
    assert backends.sim_markers is sim.sim_markers
    assert records.execution_plan([("a", 2), ("b", 3)], 5) == [("a", 2), ("b", 3)]
