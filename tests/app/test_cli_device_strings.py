"""Device strings on the command line: every command that opens a device takes ``--device KIND[:N[:MODE]]``, the old
``--backend NAME --device N --seed S`` still works, and mixing the two is refused by name."""

from __future__ import annotations

import json
import os

import pytest

from fingrav_native import DeviceUnavailableError
from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_device, _cli_profile, _open

SYNC = ["--seconds", "0.2", "--interval-ms", "50"]


class _Opened(Exception):
    """Raised by the spy: the test wants to know what would be opened, not to open it."""


@pytest.fixture
def opened(monkeypatch):
    """What each command asks open_device for: (device, seed); hardware is reported missing (exit 1)."""
    seen: list[tuple[object, object]] = []
    real = _open.open_device

    def spy(device="sim", *, seed=None, **options):
        seen.append((device, seed))
        if isinstance(device, str) and not device.startswith("sim"):
            raise DeviceUnavailableError(f"no such GPU here: {device}")
        return real(device, seed=seed, **options)

    monkeypatch.setattr(_open, "open_device", spy)
    # A hardware kernel needs torch: the kernel is taken as named, so the device is what the test sees.
    for module in (_cli_device, _cli_profile):
        monkeypatch.setattr(module, "resolve_kernel", lambda backend, spec: spec)
    return seen


@pytest.mark.parametrize("command", [
    ["sync", *SYNC],
    ["characterize", "--kernel", "cb-4k-gemm", "--light", "mb-2k-gemv"],
    ["profile", "cb-4k-gemm"],
])
def test_unclear_option_every_command_that_opens_a_device_takes_a_device_string(tmp_path, monkeypatch, capsys,
                                                                                opened, command):
    monkeypatch.chdir(tmp_path)
    # A hardware string with its power mode reaches the resolver whole (the spy says the GPU is missing: exit 1).
    assert cli.main([*command, "--device", "nvidia:1:instant"]) == cli.EXIT_FAILURE
    assert opened == [("nvidia:1:instant", None)]
    assert "no such GPU here: nvidia:1:instant" in capsys.readouterr().err
    # The old flags name the same device.
    assert cli.main([*command, "--backend", "amd", "--device", "2"]) == cli.EXIT_FAILURE
    assert opened[1] == ("amd:2", None)


def test_unclear_option_the_simulators_seed_is_the_strings_number(opened, capsys):
    assert cli.main(["sync", *SYNC, "--device", "sim:3"]) == cli.EXIT_OK
    assert cli.main(["sync", *SYNC, "--backend", "sim", "--seed", "3"]) == cli.EXIT_OK
    assert cli.main(["sync", *SYNC]) == cli.EXIT_OK  # the default: sim, seed 0
    assert cli.main(["sync", *SYNC, "--device", "sim-live:2"]) == cli.EXIT_OK
    assert opened == [("sim", 3), ("sim", 3), ("sim", 0), ("sim-live", 2)]


def test_data_loss_a_profile_started_on_a_device_string_resumes_on_that_device(tmp_path, monkeypatch, opened, capsys):
    monkeypatch.chdir(tmp_path)
    # The request written before any run: the power mode is kept for --resume (a spy stops it at the device).
    assert cli.main(["profile", "cb-4k-gemm", "--device", "nvidia:0:instant", "--out", "c"]) == cli.EXIT_FAILURE
    capsys.readouterr()
    os.makedirs("d")
    saved = {"format": "fingrav-command", "kernel": "cb-4k-gemm", "backend": "nvidia", "device": 0, "mode": "sse",
             "runs": None, "margin": None, "executions": None, "seed": 0, "phase": "auto", "device_mode": "instant"}
    with open("d/command.json", "w") as f:
        json.dump(saved, f)
    assert cli.main(["profile", "--resume", "d"]) == cli.EXIT_FAILURE
    assert opened[-1] == ("nvidia:0:instant", None)
    # The device string given again agrees; another one is refused by name.
    assert cli.main(["profile", "--resume", "d", "--device", "nvidia:0:instant"]) == cli.EXIT_FAILURE
    capsys.readouterr()
    assert cli.main(["profile", "--resume", "d", "--device", "nvidia:0:average"]) == cli.EXIT_USAGE
    assert "--device='nvidia:0:average': the campaign in 'd' was started on 'nvidia:0:instant'" in \
        capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["sync", "--backend", "amd", "--device", "nvidia:0"], "--backend=amd: --device='nvidia:0' names the device"),
    (["profile", "cb-4k-gemm", "--backend", "sim", "--device", "sim:2"], "--backend=sim: --device='sim:2' names"),
    (["sync", "--device", "sim:3", "--seed", "4"], "--seed=4: --device='sim:3' names the simulator"),
    (["profile", "cb-4k-gemm", "--device", "sim", "--seed", "4"], "--seed=4: --device='sim' names the simulator"),
    (["characterize", "--device", "amd:0", "--seed", "4"], "--seed=4: seeds the simulated device; amd has none"),
    (["sync", "--device", "tpu:0"], "--device='tpu:0': unknown device string; expected 'sim' or 'sim:SEED'"),
    (["sync", "--device", "nvidia:0:bogus"], "--device='nvidia:0:bogus': unknown NVML mode 'bogus'"),
    (["characterize", "--device", "amd:0:bogus"], "--device='amd:0:bogus': unknown channel 'bogus'"),
    (["characterize", "--device", "nvidia"], "--device='nvidia': unknown device string"),
])
def test_unclear_option_a_device_string_mixed_with_the_old_flags_or_malformed_is_refused_by_name(
        tmp_path, monkeypatch, capsys, opened, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert opened == [] and os.listdir(tmp_path) == []


def test_unclear_option_a_device_index_out_of_range_is_still_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["sync", "--backend", "amd", "--device", "-1"])
    assert info.value.code == cli.EXIT_USAGE and "--device" in capsys.readouterr().err
