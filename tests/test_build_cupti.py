"""The build of the CUPTI consumer: a plain ``pip install .`` on Linux x86_64 builds it, elsewhere one clear message.

The consumer (``libfingrav_cupti_tool.so``) is compiled against the CUPTI headers, which come only in NVIDIA's
wheels: ``pyproject.toml``'s ``[build-system] requires`` must bring them into pip's isolated build environment
where those wheels exist (Linux x86_64, the test-full extra's markers), and never into the package's run-time
requirements (libcupti is dlopen'ed from the user's CUDA install).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_HEADER_WHEELS = {"nvidia-cuda-cupti-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cuda-crt"}
_LINUX_X86_64 = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"}
_ELSEWHERE = [{"sys_platform": "linux", "platform_machine": "aarch64", "platform_system": "Linux"},
              {"sys_platform": "darwin", "platform_machine": "arm64", "platform_system": "Darwin"},
              {"sys_platform": "win32", "platform_machine": "AMD64", "platform_system": "Windows"}]


def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_data_loss_plain_install_brings_the_cupti_headers_on_linux_x86_64_only() -> None:
    from packaging.requirements import Requirement

    doc = _pyproject()
    build = [Requirement(r) for r in doc["build-system"]["requires"]]
    headers = {r.name: r for r in build if r.name in _HEADER_WHEELS}
    assert set(headers) == _HEADER_WHEELS, "a plain pip install would build without the CUPTI headers"
    for r in headers.values():
        assert r.marker is not None and r.marker.evaluate(_LINUX_X86_64), r
        assert not any(r.marker.evaluate(env) for env in _ELSEWHERE), r  # no wheel there: never asked for
    # Built against, never a run-time requirement: libcupti comes from the user's CUDA install.
    assert not [r for r in doc["project"]["dependencies"] if Requirement(r).name.startswith("nvidia-")]


@pytest.mark.slow
def test_unclear_cupti_skip_is_one_message_off_linux_x86_64(tmp_path) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("no cmake on PATH")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(probe NONE)\n"
        f"list(APPEND CMAKE_MODULE_PATH \"{ROOT / 'cmake'}\")\ninclude(FingravCupti)\n")
    done = subprocess.run([cmake, "-S", str(tmp_path), "-B", str(tmp_path / "b"), "-DCMAKE_SYSTEM_NAME=Linux",
                           "-DCMAKE_SYSTEM_PROCESSOR=aarch64", "-DPython_EXECUTABLE=/nonexistent/python"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if "CUPTI" in line]
    assert len(said) == 1, done.stdout
    assert said[0].startswith("-- CUPTI consumer skipped") and "Linux x86_64 only, not on Linux aarch64:" in said[0]
    assert ";" not in said[0].split("):", 1)[1].replace("');", "')"), said[0]  # one sentence, not a CMake list
