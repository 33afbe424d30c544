"""The kernel table's rows as the attribution builds them: a typed record whose fields are the table's,
amended by name, and the words a signature is keyed by."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fingrav_native.insitu import KERNEL_SIGNATURE_DTYPE, KERNEL_TABLE_DTYPE, signature_label
from fingrav_native.insitu._results import kernel_table_dtype
from fingrav_native.insitu._signatures import KernelRow


def test_silently_wrong_a_kernel_row_amended_by_name_lands_in_its_own_column() -> None:
    # A row patched by position (r[8] = energy) puts a value in the wrong column the day a field is added;
    # the typed row's fields are the table's, in order, so a list of rows is the structured array.
    assert KernelRow._fields == KERNEL_TABLE_DTYPE.names
    row = KernelRow(name="gemm", grid=np.array([128, 1, 1]), block=np.array([256, 1, 1]), count=40, golden=30,
                    warmup=2, duration_ns=400_000.0, power_w=500.0, energy_j=0.2, energy_half_width_j=0.01,
                    share=0.0, joint=False)
    amended = row._replace(power_w=612.5, energy_j=0.245, energy_half_width_j=0.003, joint=True)
    table = np.array([row, amended], dtype=kernel_table_dtype(len(row.name)))
    assert table["energy_j"].tolist() == [0.2, 0.245]
    assert table["power_w"].tolist() == [500.0, 612.5]
    assert table["energy_half_width_j"].tolist() == [0.01, 0.003]
    assert table["joint"].tolist() == [False, True]
    assert table["warmup"].tolist() == [2, 2] and table["golden"].tolist() == [30, 30]
    assert table["grid"][1].tolist() == [128, 1, 1] and not math.isnan(table["duration_ns"][1])


def test_unclear_a_signature_label_refuses_what_is_not_a_signature() -> None:
    sig = np.zeros(1, dtype=KERNEL_SIGNATURE_DTYPE)[0]
    sig["name"], sig["grid"], sig["block"] = "gemm", (128, 1, 1), (256, 1, 1)
    assert signature_label(sig) == "gemm grid=(128, 1, 1) block=(256, 1, 1)"
    for bad in (5, "gemm", {"name": "gemm"}, np.zeros(1, dtype=[("x", "<i8")])[0]):
        with pytest.raises(ValueError, match="^sig: "):
            signature_label(bad)
