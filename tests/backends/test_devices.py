"""``fingrav devices`` and the backend reports behind it."""

from __future__ import annotations

import json

import pytest

from fingrav_native.app import _cli as cli
from fingrav_native.backends import BackendReport, Component, DeviceEntry
from fingrav_native.backends import _devices as devices
from fingrav_native.backends import _registry as registry
from fingrav_native.sensors import FIGURES, SensorSemantics


def test_sim_is_always_available():
    (r,) = devices.list_backends(["sim"])
    assert r.backend == "sim" and r.available and r.reason == ""
    assert r.devices[0].details["kernels"] == 14
    assert r.devices[0].details["logger_period_us"] == pytest.approx(1000.0)


def test_every_backend_reports_even_without_hardware():
    reports = devices.list_backends()
    assert [r.backend for r in reports] == ["sim", "amd", "nvidia"]
    for r in reports:
        # An unavailable backend must say why, and never claims devices.
        if not r.available:
            assert r.reason, r
            assert r.devices == ()


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="backends: unknown backend 'intel'"):
        devices.list_backends(["intel"])


def test_a_backend_that_breaks_is_reported_not_raised(monkeypatch):
    def broken() -> BackendReport:
        raise OSError("libbroken.so: cannot open shared object file")

    # A kind is added to the device registry, the one table fingrav devices reads.
    monkeypatch.setitem(registry.DEVICES, "broken", registry.DeviceKind("broken", "a broken backend", False,
                                                                       lambda n, m: None, report=broken))
    (r,) = devices.list_backends(["broken"])
    assert not r.available
    assert "OSError" in r.reason and "libbroken.so" in r.reason


LOADER_DETAIL = ("could not load libx (the X driver); tried:\n"
                 "  libx.so.1: cannot open shared object file: No such file or directory\n"
                 "  /opt/x/lib/libx.so.1: cannot open shared object file: No such file or directory\n"
                 "Install the X driver (it ships libx.so.1). "
                 "Set FINGRAV_X_LIBRARY to the library's full path to use another copy.")
X_FIX = ("Install the X driver (it ships libx.so.1). "
         "Set FINGRAV_X_LIBRARY to the library's full path to use another copy.")


def test_a_loader_message_splits_into_summary_and_fix():
    c = Component("libx", False, LOADER_DETAIL)
    assert c.summary == "could not load libx (the X driver)"
    assert c.fix == X_FIX
    # A message that is not a loader's names no fix; a part that loaded needs none.
    assert Component("/dev/x", False, "absent: the x driver is not loaded").fix == ""
    assert Component("/dev/x", False, "absent").summary == "absent"
    assert Component("libx", True, "/usr/lib/libx.so.1").fix == ""


def test_the_one_fix_is_the_first_missing_required_parts():
    second = LOADER_DETAIL.replace("X driver", "Y runtime").replace("FINGRAV_X_", "FINGRAV_Y_")
    r = BackendReport(backend="x", available=False, reason="no driver", components=(
        Component("optional", False, LOADER_DETAIL.replace("X driver", "extra"), required=False),
        Component("devices", False, "no device"),
        Component("libx", False, LOADER_DETAIL),
        Component("liby", False, second)))
    assert r.fix == X_FIX
    assert BackendReport(backend="x", available=False, reason="no device",
                         components=(Component("devices", False, "no device"),)).fix == ""
    assert BackendReport(backend="x", available=True, components=r.components).fix == ""


def test_default_text_is_a_line_per_backend_and_device_and_the_fix():
    r = BackendReport(
        backend="x", available=False, reason="no driver",
        components=(Component("libx", False, LOADER_DETAIL),
                    Component("extra", False, "absent", required=False)),
        verified_on="nothing yet")
    ok = BackendReport(backend="y", available=True, devices=(DeviceEntry(0, "GPU Y", {"pci": "0000:01:00.0"}),),
                       components=(Component("liby", True, "/usr/lib/liby.so.1"),), verified_on="Y hardware")
    assert devices.format_reports([ok, r]).splitlines() == [
        "y: available, 1 device(s)",
        "  [0] GPU Y (pci=0000:01:00.0)",
        "x: unavailable (no driver)",
        f"  fix: {X_FIX}",
        "(fingrav devices --verbose: every part looked for and every library path tried)",
    ]
    # Nothing to look up when everything works.
    assert devices.format_reports([ok]).splitlines() == ["y: available, 1 device(s)", "  [0] GPU Y (pci=0000:01:00.0)"]
    found = BackendReport(backend="z", available=False, reason="HIP sees 0 device(s), sysfs 1",
                          devices=(DeviceEntry(0, "GPU Z"),))
    assert devices.format_reports([found]).splitlines()[:2] == [
        "z: unavailable, 1 device(s) found (HIP sees 0 device(s), sysfs 1)", "  [0] GPU Z"]


def test_verbose_text_lists_every_part_and_path_tried():
    r = BackendReport(
        backend="x", available=False, reason="no driver",
        components=(Component("libx", False, LOADER_DETAIL),
                    Component("extra", False, "absent", required=False)),
        verified_on="nothing yet")
    text = devices.format_reports([r], verbose=True)
    assert text.splitlines()[0] == "x: unavailable"
    assert "  why: no driver" in text
    assert "NO  libx: could not load libx (the X driver); tried:" in text
    assert "/opt/x/lib/libx.so.1: cannot open shared object file" in text
    assert "--  extra: absent" in text  # optional parts are not marked as failures
    assert "verified on: nothing yet" in text
    ok = BackendReport(backend="y", available=True, devices=(DeviceEntry(0, "GPU Y", {"pci": "0000:01:00.0"}),))
    assert "[0] GPU Y (pci=0000:01:00.0)" in devices.format_reports([ok], verbose=True)


def test_sensor_lines_say_what_a_log_is_and_where_each_figure_comes_from():
    s = SensorSemantics("x counter", "energy differences over the gap between logs",
                        (("period", "measured", "at start"), ("window", "measured", "= the period"),
                         ("delay", "assumed", "0"), ("tick", "documented", "1 ns: the header")))
    other = SensorSemantics("x instant", "instantaneous", (("window", "documented", "0"),))
    r = BackendReport(backend="x", available=True, devices=(DeviceEntry(0, "GPU X"),), sensors=(s, other))
    assert devices.format_reports([r]).splitlines() == [
        "x: available, 1 device(s)",
        "  [0] GPU X",
        "  sensor: x counter: energy differences over the gap between logs",
        "    period measured   at start",
        "    window measured   = the period",
        "    delay  assumed    0",
        "    tick   documented 1 ns: the header",
    ]
    verbose = devices.format_reports([r], verbose=True).splitlines()
    assert "  also: x instant: instantaneous" in verbose and "    window documented 0" in verbose
    assert s.provenance == {"period": "measured", "window": "measured", "delay": "assumed", "tick": "documented"}
    assert r.as_dict()["sensors"][1] == {"mode": "x instant", "semantics": "instantaneous",
                                         "figures": {"window": {"provenance": "documented", "detail": "0"}}}
    with pytest.raises(ValueError, match=r"figures: \('lag', 'measured'\)"):
        SensorSemantics("x", "y", (("lag", "measured", "0"),))
    with pytest.raises(ValueError, match=r"figures: \('delay', 'guessed'\)"):
        SensorSemantics("x", "y", (("delay", "guessed", "0"),))


def test_json_form():
    r = BackendReport(backend="x", available=False, reason="no driver",
                      components=(Component("libx", False, LOADER_DETAIL),))
    d = r.as_dict()
    assert d["fix"] == X_FIX and d["components"][0]["detail"] == LOADER_DETAIL
    ok = BackendReport(backend="y", available=True, devices=(DeviceEntry(0, "GPU Y", {"pci": "0000:01:00.0"}),))
    d = ok.as_dict()
    assert d["devices"] == [{"index": 0, "name": "GPU Y", "pci": "0000:01:00.0"}] and d["fix"] == ""
    json.dumps(d)


@pytest.fixture
def no_nvidia_libraries(monkeypatch, tmp_path):
    """The NVIDIA libraries made absent, so the answer is the same on any machine."""
    cuda, nvml = tmp_path / "libcuda.so.1", tmp_path / "libnvidia-ml.so.1"
    monkeypatch.setenv("FINGRAV_CUDA_LIBRARY", str(cuda))
    monkeypatch.setenv("FINGRAV_NVML_LIBRARY", str(nvml))
    return str(cuda), str(nvml)


def test_cli_devices_is_short_and_names_the_fix(capsys, no_nvidia_libraries):
    cuda, nvml = no_nvidia_libraries
    cli.main(["devices"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    reports = devices.list_backends()
    # Per backend: its status line, one line per device, the sensor in use
    # (what a log is, then one line per figure with its provenance) and the
    # fix when unavailable; the closing line points at --verbose. Nothing
    # else: no paths tried.
    blocks: list[list[str]] = []
    for line in lines[:-1]:
        if line.startswith("  "):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    assert [b[0].split(":")[0] for b in blocks] == [r.backend for r in reports]
    for block, r in zip(blocks, reports):
        sensor = 1 + len(r.sensors[0].figures) if r.sensors else 0
        assert len(block) == 1 + len(r.devices) + sensor + bool(r.fix) <= 2 + len(r.devices) + sensor, block
    assert lines[-1].startswith("(fingrav devices --verbose")
    assert "; tried:" not in out and "cannot open shared object" not in out
    assert cuda not in out and nvml not in out
    (nv,) = [i for i, line in enumerate(lines) if line.startswith("nvidia: ")]
    assert lines[nv].startswith("nvidia: unavailable (CUDA: could not load the CUDA driver (libcuda)")
    # The sensor it would use comes first (what a log is, one line per figure), then the fix.
    assert lines[nv + 1].startswith("  sensor: nvml samples: driver samples (nvmlDeviceGetSamples)")
    fix = nv + 2 + len(FIGURES)
    assert lines[fix].startswith("  fix: Install the NVIDIA driver (it ships libcuda.so.1)")
    assert "FINGRAV_CUDA_LIBRARY" in lines[fix]
    for r in reports:
        status = next(line for line in lines if line.startswith(f"{r.backend}: "))
        assert status.startswith(f"{r.backend}: {'available' if r.available else 'unavailable'}")
        if r.fix:
            assert f"  fix: {r.fix}" in lines


def test_cli_devices_verbose_shows_the_paths_tried(capsys, no_nvidia_libraries):
    cuda, nvml = no_nvidia_libraries
    cli.main(["devices", "--verbose", "--backend", "nvidia"])
    out = capsys.readouterr().out
    assert out.startswith("nvidia: unavailable\n  why: CUDA: could not load the CUDA driver (libcuda)")
    assert "NO  CUDA driver (libcuda): could not load the CUDA driver (libcuda); tried:" in out
    assert f"{cuda}: cannot open shared object file" in out and f"{nvml}: cannot open shared object file" in out
    assert "Set FINGRAV_NVML_LIBRARY to the library's full path" in out
    assert "verified on: " in out
    # --json keeps everything, the fix included.
    cli.main(["devices", "--json", "--backend", "nvidia"])
    (d,) = json.loads(capsys.readouterr().out)
    assert d["fix"].startswith("Install the NVIDIA driver") and cuda in d["components"][0]["detail"]


def test_cli_devices_exit_codes(capsys):
    # The sim alone is available; exit 0 with --backend sim.
    assert cli.main(["devices", "--backend", "sim"]) == cli.EXIT_OK
    assert capsys.readouterr().out.startswith("sim: available, 1 device(s)")
    # Without --backend: 0 only when real hardware is found. This machine's
    # answer must agree with the reports themselves.
    hw = any(r.available for r in devices.list_backends(["amd", "nvidia"]))
    code = cli.main(["devices", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert [r["backend"] for r in out] == ["sim", "amd", "nvidia"]
    assert code == (cli.EXIT_OK if hw else cli.EXIT_FAILURE)


def test_cli_devices_rejects_unknown_backend(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["devices", "--backend", "intel"])
    assert exc.value.code == cli.EXIT_USAGE
    assert "invalid choice: 'intel'" in capsys.readouterr().err


def test_nvidia_sensor_semantics_are_stated_without_a_gpu(capsys, no_nvidia_libraries):
    # Per mode, what a log is and whether each figure is documented,
    # measured (at start) or assumed, before any GPU is there to ask.
    (r,) = devices.list_backends(["nvidia"])
    modes = {m.mode: m for m in r.sensors}
    assert list(modes) == ["nvml samples", "nvml instant", "nvml average", "nvml energy", "nvml usage"]
    assert modes["nvml samples"].provenance == {"period": "measured", "window": "assumed", "delay": "assumed",
                                                "tick": "measured"}
    assert modes["nvml instant"].figures[1][2].startswith("25 ms of every 100 ms on A100/H100")
    assert modes["nvml average"].provenance["window"] == "documented"
    for m in r.sensors:
        assert m.figures[0][2].startswith("at start") and m.figures[3][2] == "the %globaltimer step, at start"
    assert r.as_dict()["sensors"] == [m.as_dict() for m in r.sensors]
    cli.main(["devices", "--backend", "nvidia", "--verbose"])
    out = capsys.readouterr().out
    assert "  also: nvml usage: nvmlDeviceGetPowerUsage: a 1 s average on Ampere and newer but GA100" in out
    assert "  sensor: nvml samples: " in out

