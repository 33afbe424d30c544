"""Where the launch-capture tool libraries and the stand-in runtimes are found, and what a bad request says."""

from __future__ import annotations

from pathlib import Path

import pytest

from fingrav_native.native import tool_library
from fingrav_native.sim import standin_library


@pytest.mark.parametrize("find", [tool_library, standin_library])
def test_unclear_unknown_vendor_names_the_argument(find) -> None:
    with pytest.raises(ValueError, match=r"vendor='nvidia': expected one of 'rocm', 'cuda'"):
        find("nvidia")


@pytest.mark.parametrize(("find", "name"), [(tool_library, "libfingrav_cupti_tool.so"),
                                            (standin_library, "libfingrav_standin_cupti.so")])
def test_silently_wrong_override_folder_is_searched_first(find, name, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / name).write_bytes(b"")
    monkeypatch.setenv("FINGRAV_NATIVE_LIB_DIR", str(tmp_path))
    assert find("cuda") == str(tmp_path / name)


def test_unclear_missing_cupti_tool_says_how_to_build_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FINGRAV_NATIVE_LIB_DIR", str(tmp_path))
    try:
        path = tool_library("cuda")
    except FileNotFoundError as e:
        message = str(e)
        assert "libfingrav_cupti_tool.so" in message and str(tmp_path) in message
        assert "nvidia-cuda-cupti-cu12" in message and "--no-build-isolation" in message
    else:  # this installation was built with the CUPTI headers: the installed library is found
        assert Path(path).name == "libfingrav_cupti_tool.so" and Path(path).parent.name == "lib"
