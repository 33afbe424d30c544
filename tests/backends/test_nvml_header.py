"""Our locally declared NVML ABI against the real nvml.h.

The core declares the few NVML types, constants and prototypes it uses instead
of including nvml.h (the package builds with only a compiler). These tests
compile those declarations, as the core exposes them, against the header from
PyPI's nvidia-nvml-dev wheel (the `test-full` extra), so a wrong enum value,
struct layout or parameter list fails here rather than on a GPU. Marked
`optional`, so the default run leaves them out; selected (`-m optional`, as
.ci/run does), a missing header is a failure, not a skip.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fingrav_native import _core

pytestmark = pytest.mark.optional  # needs nvidia-nvml-dev (the test-full extra)

HEADER_DISTRIBUTIONS = ("nvidia-nvml-dev", "nvidia-nvml-dev-cu12")


def find_nvml_header() -> Path:
    override = os.environ.get("FINGRAV_NVML_HEADER")
    if override:
        return Path(override)
    for dist in HEADER_DISTRIBUTIONS:
        try:
            files = importlib.metadata.files(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in files:
            if f.name == "nvml.h":
                return Path(str(f.locate()))
    pytest.fail(
        "nvml.h not found: install the test-full extra (pip install '.[test-full]', which brings nvidia-nvml-dev) "
        "or set FINGRAV_NVML_HEADER to an nvml.h"
    )


@pytest.fixture(scope="module")
def header() -> Path:
    h = find_nvml_header()
    assert h.is_file(), f"{h} does not exist"
    return h


def c_compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail("no C compiler (cc, gcc or clang) found: the header check compiles against nvml.h")
    return cc


def check_program(prototypes: list[tuple[str, str, str, bool]]) -> str:
    """C source: a static assertion per prototype, and a main printing constants and layouts."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <nvml.h>", ""]
    for name, ret, params, _ in prototypes:
        # Type-compatible function pointer types: same return and parameter types.
        lines.append(
            f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), {ret} (*){params}), "
            f'"prototype of {name} differs from nvml.h");'
        )
    lines += ["", "int main(void) {"]
    for name in _core._nvml_constants():
        lines.append(f'  printf("const {name} %lld\\n", (long long)({name}));')
    for typ, member, _ in _core._nvml_layouts():
        if member:
            lines.append(f'  printf("layout {typ} {member} %zu\\n", offsetof({typ}, {member}));')
        else:
            lines.append(f'  printf("layout {typ} - %zu\\n", sizeof({typ}));')
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def compile_and_run(source: str, header: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "nvml_check.c"
    exe = tmp_path / "nvml_check"
    src.write_text(source)
    build = subprocess.run(
        [c_compiler(), "-std=gnu11", "-Werror", "-I", str(header.parent), "-o", str(exe), str(src)],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        return build
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True)


def test_every_resolved_function_is_declared_in_the_header(header):
    # e.g. "nvmlReturn_t DECLDIR nvmlInit_v2(void);", "const DECLDIR char* nvmlErrorString(...)"
    text = header.read_text(errors="replace")
    for name, _, _, _ in _core._nvml_prototypes():
        assert re.search(r"\bDECLDIR\b[^;(]*\b" + re.escape(name) + r"\s*\(", text), f"{name} is not declared in {header}"


def test_prototypes_constants_and_layouts_match_the_header(header, tmp_path):
    protos = _core._nvml_prototypes()
    names = [p[0] for p in protos]
    # The functions poll() and the probes depend on are all in the table.
    for needed in (
        "nvmlInit_v2",
        "nvmlShutdown",
        "nvmlErrorString",
        "nvmlDeviceGetCount_v2",
        "nvmlDeviceGetHandleByIndex_v2",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetSamples",
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPowerUsage",
    ):
        assert needed in names
    res = compile_and_run(check_program(protos), header, tmp_path)
    assert res.returncode == 0, f"compiling our NVML declarations against {header} failed:\n{res.stderr}"

    got_consts: dict[str, int] = {}
    got_layouts: dict[tuple[str, str], int] = {}
    for line in res.stdout.splitlines():
        kind, *rest = line.split()
        if kind == "const":
            got_consts[rest[0]] = int(rest[1])
        else:
            got_layouts[(rest[0], "" if rest[1] == "-" else rest[1])] = int(rest[2])
    ours_consts = _core._nvml_constants()
    assert ours_consts == got_consts
    ours_layouts = {(t, m): v for t, m, v in _core._nvml_layouts()}
    assert ours_layouts == got_layouts
    # The layouts the source relies on, spelled out.
    assert ours_layouts[("nvmlSample_t", "")] == 16 and ours_layouts[("nvmlFieldValue_t", "")] == 40
    assert ours_layouts[("nvmlFieldValue_t", "value")] == 32


def test_the_check_catches_a_wrong_parameter_list(header, tmp_path):
    # The same program with one parameter type changed must not compile,
    # so the test above cannot pass vacuously.
    protos = list(_core._nvml_prototypes())
    i = next(k for k, p in enumerate(protos) if p[0] == "nvmlDeviceGetSamples")
    name, ret, params, req = protos[i]
    protos[i] = (name, ret, params.replace("unsigned long long lastSeenTimeStamp", "unsigned int lastSeenTimeStamp"), req)
    assert protos[i][2] != params
    res = compile_and_run(check_program(protos), header, tmp_path)
    assert res.returncode != 0 and "prototype of nvmlDeviceGetSamples differs" in res.stderr
