"""The device registry: the one table of device kinds that open_device, the recorder, the CLI and `fingrav devices`
read; and the Backend protocol, which declares every call the drivers make."""

from __future__ import annotations

import ast
import json
import pathlib

import pytest

import fingrav_native as fg
from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_parser as cli_parser
from fingrav_native.app import _open
from fingrav_native.backends import BackendReport, BackendWrapper, DeviceEntry, SimBackend
from fingrav_native.backends import _base as base
from fingrav_native.backends import _devices as devices
from fingrav_native.backends import _registry as registry

PACKAGE = pathlib.Path(fg.__file__).parent


def _choices(command: str, option: str) -> tuple[str, ...]:
    parser = cli_parser.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    (action,) = [a for a in sub._actions if option in a.option_strings]
    return tuple(action.choices or ())


def test_unclear_policy_cli_choices_reports_and_device_strings_all_come_from_the_registry():
    kinds = tuple(registry.DEVICES)
    assert kinds == ("sim", "sim-live", "amd", "nvidia")
    for command in ("profile", "sync", "characterize"):
        assert _choices(command, "--backend") == kinds
    reporting = tuple(name for name, k in registry.DEVICES.items() if k.report is not None)
    assert _choices("devices", "--backend") == reporting == tuple(devices.BACKENDS)
    assert [r.backend for r in devices.list_backends()] == list(reporting)
    # Every kind's strings are what parse_device accepts, and the message lists each kind's forms.
    for name, kind in registry.DEVICES.items():
        assert _open.parse_device(f"{name}:1").vendor == name
        assert kind.forms() in registry.device_forms()
    with pytest.raises(ValueError, match="'nvidia:N' or 'nvidia:N:MODE'"):
        _open.parse_device("tpu:0")


def test_unclear_policy_the_vendor_list_is_written_once():
    # The kinds are named as a table in the registry and nowhere else in the device and CLI layers.
    for module in ("app/_open.py", "app/_cli_common.py", "app/_cli_parser.py", "app/_cli_device.py",
                   "app/_cli_profile.py", "backends/_devices.py"):
        text = (PACKAGE / module).read_text()
        assert '"sim-live", "amd", "nvidia"' not in text and '("sim", "amd", "nvidia")' not in text, module
        assert 'startswith("sim")' not in text, module


class _FakeBackend(BackendWrapper):
    """A third-party backend: the simulator behind a new kind's name."""

    opened: list[tuple[int, object]] = []


def _fake_report() -> BackendReport:
    return BackendReport(backend="fake", available=True, devices=(DeviceEntry(0, "Fake GPU 9000"),))


def _open_fake(number: int, mode: object, **options: object) -> _FakeBackend:
    _FakeBackend.opened.append((number, mode))
    return _FakeBackend(SimBackend(seed=number))


@pytest.fixture
def fake_kind(monkeypatch):
    """One registry entry, added in a test: the whole of what a new backend needs to be reachable."""
    _FakeBackend.opened = []
    kind = registry.DeviceKind("fake", "a fake GPU N", False, _open_fake, lambda: ("turbo", "eco"), "power mode",
                               report=_fake_report)
    monkeypatch.setitem(registry.DEVICES, "fake", kind)
    return kind


def test_unclear_policy_a_backend_added_by_one_registry_entry_is_reached_everywhere(fake_kind, capsys):
    # open_device
    b = fg.open_device("fake:2:turbo")
    assert isinstance(b, _FakeBackend) and _FakeBackend.opened == [(2, "turbo")]
    with pytest.raises(ValueError, match="unknown power mode 'warp'; one of turbo, eco"):
        fg.open_device("fake:0:warp")
    # the CLI's --device (and --backend, its choices read when the parser is built)
    assert cli.main(["sync", "--device", "fake:1", "--seconds", "0.2", "--interval-ms", "50", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert cli.main(["sync", "--backend", "fake", "--device", "3", "--seconds", "0.2", "--interval-ms", "50"]) == 0
    assert _FakeBackend.opened[1:] == [(1, None), (3, None)]
    capsys.readouterr()
    # fingrav devices
    assert cli.main(["devices", "--backend", "fake"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("fake: available, 1 device(s)") and "[0] Fake GPU 9000" in out
    # the recorder: a kind whose power is read through its backend (this one has no live source)
    with pytest.raises(ValueError, match="backend with a live power source"):
        fg.record("fake:0")


def test_unclear_option_a_kind_is_registered_once_and_named():
    kind = registry.DEVICES["sim"]
    with pytest.raises(ValueError, match="kind.name='sim': registered already"):
        registry.register(kind)
    with pytest.raises(ValueError, match="kind.name='Bad Name'"):
        registry.register(registry.DeviceKind("Bad Name", "x", True, _open_fake, report=_fake_report))
    with pytest.raises(ValueError, match="kind.report_as=None"):
        registry.register(registry.DeviceKind("quiet", "x", True, _open_fake))
    with pytest.raises(ValueError, match="kind="):
        registry.register("sim")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the Backend protocol

#: What the drivers hold a backend as, in the modules that drive one.
_DRIVERS = ("app/_campaign.py", "app/_profile.py", "app/_sync.py", "app/_characterize.py")


def _calls_on_backend(path: pathlib.Path) -> set[str]:
    """Every attribute the module reads off a name or attribute called ``backend``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            holder = node.value
            name = holder.attr if isinstance(holder, ast.Attribute) else getattr(holder, "id", None)
            if name == "backend":
                found.add(node.attr)
    return found


def test_unclear_contract_the_protocol_declares_every_call_the_drivers_make():
    declared = {name for proto in (base.Backend, base.Steerable, base.ArmedRelease, base.VirtualTime)
                for name in base.protocol_members(proto)}
    for module in _DRIVERS:
        called = _calls_on_backend(PACKAGE / module)
        assert called <= declared, (module, sorted(called - declared))
    # And the drivers check the optional ones through the protocol, never by a getattr of a name.
    for module in _DRIVERS:
        text = (PACKAGE / module).read_text()
        for name in ("wait_until", "release_at", "advance_to"):
            assert f'getattr(backend, "{name}"' not in text and f'getattr(self.backend, "{name}"' not in text


class _Hiding(BackendWrapper):
    def __init__(self, inner: SimBackend, hidden: str) -> None:
        super().__init__(inner)
        self._hidden = hidden

    def __getattr__(self, name: str) -> object:
        if name == self._hidden:
            raise AttributeError(name)
        return super().__getattr__(name)


def test_silently_wrong_capability_a_wrapper_offers_what_its_backend_offers_and_no_more():
    sim = SimBackend(seed=1)
    wrapped = BackendWrapper(sim)
    assert base.is_backend(sim) and base.is_backend(wrapped)
    assert base.can_steer(wrapped) and base.can_arm_release(wrapped) and base.can_advance(wrapped)
    assert not base.can_steer(_Hiding(sim, "wait_until"))
    assert not base.can_arm_release(_Hiding(sim, "release_at"))
    assert not base.can_advance(_Hiding(sim, "advance_to"))
    assert not base.is_backend(object())


class _NoClocks:
    """Runs kernels but cannot read its clock: a campaign could not map its markers onto host time."""

    capabilities = SimBackend(seed=1).capabilities

    def execute_run(self, kernel: object, executions: int, run: int) -> None: ...

    def wait_idle(self) -> int:
        return 0


def test_unclear_contract_open_device_refuses_an_object_short_of_the_protocol_naming_what_it_lacks():
    with pytest.raises(ValueError, match="kernel_name, new_run_id, read_clocks"):
        fg.open_device(_NoClocks())
