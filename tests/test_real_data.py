"""Where the real-data tests find their records, and what they say when the records are not there.

A user's clone has no real-data folder: the tests that need one skip and name the record and its source.
A folder named by the variable must hold them: there a missing record fails (CI never passes by skipping).
"""

from __future__ import annotations

import os

import pytest

import real_data


@pytest.fixture
def no_default(monkeypatch, tmp_path):
    monkeypatch.delenv(real_data.ENV, raising=False)
    monkeypatch.setattr(real_data, "DEFAULT", str(tmp_path / "absent"))


def test_without_the_folder_a_test_skips_naming_the_record_and_its_source(no_default) -> None:
    assert real_data.root() is None
    with pytest.raises(pytest.skip.Exception) as e:
        real_data.require("yang_sc24/3090_5050/load.csv")
    why = str(e.value)
    assert "yang_sc24/3090_5050/load.csv" in why and real_data.ENV in why
    assert "JimZeyuYang/GPU_Power_Benchmark" in why and "4b5c944c2454" in why and "MIT" in why
    with pytest.raises(pytest.skip.Exception, match="facebookresearch/HolisticTraceAnalysis at commit f4d0062c382f"):
        real_data.require("traces/hta/sampled_rank-0.json.gz")


def test_the_default_folder_is_used_when_the_variable_is_unset(no_default, monkeypatch, tmp_path) -> None:
    (tmp_path / "public" / "traces").mkdir(parents=True)
    (tmp_path / "public" / "traces" / "x.csv").write_text("a\n")
    monkeypatch.setattr(real_data, "DEFAULT", str(tmp_path / "public"))
    assert real_data.require("traces/x.csv") == os.path.join(str(tmp_path / "public"), "traces", "x.csv")
    with pytest.raises(pytest.skip.Exception, match="ROCm/rocprofiler-sdk"):
        real_data.require("traces/rocprofv3/kernel_trace.csv")


def test_a_named_folder_that_lacks_a_record_fails_rather_than_skips(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(real_data.ENV, str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=r"missing from FINGRAV_REAL_DATA=.*pytorch/kineto"):
        real_data.require("traces/kineto/gpu_metrics_input.json")


def test_a_named_folder_that_does_not_exist_is_refused_by_name(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(real_data.ENV, str(tmp_path / "nowhere"))
    with pytest.raises(real_data.MissingRealData, match="FINGRAV_REAL_DATA=.*names no folder"):
        real_data.root()
