"""``fingrav devices`` and the backend reports behind it."""

from __future__ import annotations

import json

import pytest

from fingrav_native.app import cli
from fingrav_native.backends import devices
from fingrav_native.backends.report import BackendReport, Component, DeviceEntry


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

    monkeypatch.setitem(devices.BACKENDS, "broken", broken)
    (r,) = devices.list_backends(["broken"])
    assert not r.available
    assert "OSError" in r.reason and "libbroken.so" in r.reason


def test_text_and_json_forms():
    r = BackendReport(
        backend="x", available=False, reason="no driver",
        components=(Component("libx.so", False, "could not load libx\n  tried: a"),
                    Component("extra", False, "absent", required=False)),
        verified_on="nothing yet")
    text = devices.format_reports([r])
    assert text.splitlines()[0] == "x: unavailable"
    assert "  why: no driver" in text
    assert "NO  libx.so: could not load libx" in text
    assert "--  extra: absent" in text  # optional parts are not marked as failures
    assert "verified on: nothing yet" in text
    ok = BackendReport(backend="y", available=True, devices=(DeviceEntry(0, "GPU Y", {"pci": "0000:01:00.0"}),))
    assert "[0] GPU Y (pci=0000:01:00.0)" in devices.format_reports([ok])
    d = ok.as_dict()
    assert d["devices"] == [{"index": 0, "name": "GPU Y", "pci": "0000:01:00.0"}]
    json.dumps(d)


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
