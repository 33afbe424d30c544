"""The device registry: every kind of device a string can name, as data.

One entry per kind (``sim``, ``sim-live``, ``amd``, ``nvidia``) holds its
device-string grammar (what the number is, which modes the third part takes),
how to open its backend, how the recorder reads its power, and the report
``fingrav devices`` prints. :func:`parse_device` and ``open_device``, the
recorder's ``resolve_device``, the ``fingrav`` command's ``--backend`` and
``--device`` and ``fingrav devices`` read this table and nothing else, as
pyvisa's resource-name grammar and zeus's ``get_gpus`` keep one table of
vendors. Adding a backend is one module and one :func:`register` call.

Nothing here imports a backend until it is opened or reported: the
``fingrav`` command's parser reads the table before numpy loads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional, cast, get_args

if TYPE_CHECKING:
    from fingrav_native.backends._base import Backend
    from fingrav_native.backends._report import BackendReport

#: How the recorder reads a kind's power: through the backend opened (its live
#: power source), through the vendor's power source alone (no compute context),
#: or not at all (the reason is the entry's ``not_live``).
LiveRecording = Literal["backend", "source", "none"]


def _no_modes() -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class DeviceKind:
    """One kind of device: its string's grammar, its backend, its recorder and its report.

    Attributes
    ----------
    name : str
        The string's head (``"nvidia"`` in ``"nvidia:0:instant"``); also
        the CLI's ``--backend`` choice.
    described : str
        What it is, in words, for messages (``"CUDA device N, an NVML power mode"``).
    simulated : bool
        True: the number is the simulator's seed (optional, default 0) and
        kernels are the simulator's presets. False: the number is the GPU's
        index in the vendor runtime's order (required) and kernels are
        workloads.
    open : callable
        ``open(number, mode, **options)`` -> the backend.
    modes : callable
        The values the third part may take (``()``: it takes none), read
        when a string is parsed, so the vendor module loads only then.
    mode_word : str
        What the third part is called in messages ("NVML mode", "channel").
    report : callable, optional
        Its ``report()`` for ``fingrav devices``; None when another kind's
        report covers it (``report_as``).
    report_as : str, optional
        The kind whose report covers this one.
    live : {"backend", "source", "none"}
        How the recorder reads its power (:data:`LiveRecording`).
    not_live : str
        Why it cannot be recorded (``live == "none"``).
    """

    name: str
    described: str
    simulated: bool
    open: Callable[..., "Backend"]
    modes: Callable[[], tuple[str, ...]] = _no_modes
    mode_word: str = "mode"
    report: Optional[Callable[[], "BackendReport"]] = None
    report_as: Optional[str] = None
    live: LiveRecording = "backend"
    not_live: str = ""

    def forms(self) -> str:
        """The strings this kind takes, in words (``'nvidia:N' or 'nvidia:N:MODE' (CUDA device N, ...)``)."""
        if self.simulated:
            return f"'{self.name}' or '{self.name}:SEED' ({self.described})"
        word = self.mode_word.split()[-1].upper()
        more = f" or '{self.name}:N:{word}'" if self.modes is not _no_modes else ""
        return f"'{self.name}:N'{more} ({self.described})"


#: Every kind of device, in the order ``fingrav devices`` reports them.
DEVICES: dict[str, DeviceKind] = {}


def register(kind: DeviceKind) -> DeviceKind:
    """Add a kind of device to the registry (the one place a backend is named).

    Parameters
    ----------
    kind : DeviceKind
        Its name must be lower case letters, digits, ``-`` or ``_`` and not
        registered yet; ``report_as`` must name a kind already registered.

    Returns
    -------
    DeviceKind
        ``kind``, registered.
    """
    if not isinstance(kind, DeviceKind):
        raise ValueError(f"kind={kind!r}: must be a DeviceKind")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", kind.name):
        raise ValueError(f"kind.name={kind.name!r}: must be lower case letters, digits, '-' or '_'")
    if kind.name in DEVICES:
        raise ValueError(f"kind.name={kind.name!r}: registered already")
    if kind.report is None and kind.report_as not in DEVICES:
        raise ValueError(f"kind.report_as={kind.report_as!r}: a kind without a report names a registered kind "
                         "whose report covers it")
    DEVICES[kind.name] = kind
    return kind


def kinds() -> tuple[str, ...]:
    """Every registered kind's name: the CLI's ``--backend`` choices."""
    return tuple(DEVICES)


def reported() -> dict[str, Callable[[], "BackendReport"]]:
    """Each kind that reports for itself, and its ``report()``: ``fingrav devices``' lines."""
    return {name: k.report for name, k in DEVICES.items() if k.report is not None}


def device_forms(what: Callable[[DeviceKind], bool] = lambda k: True) -> str:
    """The device strings every registered kind (or those ``what`` keeps) takes, in words, for messages."""
    return ", ".join(k.forms() for k in DEVICES.values() if what(k))


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device string: ``vendor`` (a registered kind's name), ``index`` and ``mode``."""

    vendor: str
    index: int
    mode: Optional[str]


def kind_of(name: str) -> DeviceKind:
    """The registered kind ``name`` (a ValueError naming the registered ones otherwise)."""
    kind = DEVICES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"backend={name!r}: unknown; one of {', '.join(DEVICES)}")
    return kind


def parse_device(device: str) -> DeviceSpec:
    """Read a device string (``"sim"``, ``"nvidia:0"``, ``"amd:1:socket"``, ...) by the registry's grammar.

    Parameters
    ----------
    device : str
        ``KIND``, ``KIND:N`` or ``KIND:N:MODE`` for a registered kind
        (:func:`device_forms` lists them). For a simulated kind the number
        is the simulator's seed (default 0) and there is no mode; for
        hardware it is the device's index in the vendor runtime's order
        (CUDA_VISIBLE_DEVICES, HIP's), and required.

    Returns
    -------
    DeviceSpec

    Raises
    ------
    ValueError
        When the string has none of those forms (the message lists them),
        or names a mode its kind does not take.
    """
    if not isinstance(device, str):
        raise ValueError(f"device={device!r}: a device string must be a str; one of {device_forms()}")
    m = re.fullmatch(r"([a-z][a-z0-9_-]*)(?::(\d+))?(?::([a-z_]+))?", device.strip().lower())
    kind = DEVICES.get(m.group(1)) if m is not None else None
    if m is None or kind is None or (kind.simulated and m.group(3) is not None) or (
            not kind.simulated and m.group(2) is None):
        raise ValueError(f"device={device!r}: unknown device string; expected {device_forms()}")
    mode = m.group(3)
    # The mode is checked here, once, for every driver that reads a device string.
    if mode is not None and mode not in kind.modes():
        raise ValueError(f"device={device!r}: unknown {kind.mode_word} {mode!r}; one of {', '.join(kind.modes())}")
    return DeviceSpec(kind.name, int(m.group(2) or 0), mode)


# ------------------------------------------------------------------ the built-in kinds
# Each opener imports its backend when called: reading the table loads none.

def _open_sim(number: int, mode: Optional[str], **options: Any) -> "Backend":
    from fingrav_native.backends._sim import SimBackend

    return SimBackend(seed=number, **options)


def _open_sim_live(number: int, mode: Optional[str], **options: Any) -> "Backend":
    from fingrav_native.backends._sim import LiveSimBackend

    return LiveSimBackend(seed=number, **options)


def _report_sim() -> "BackendReport":
    from fingrav_native.backends._sim import report

    return report()


def _open_amd(number: int, mode: Optional[str], **options: Any) -> "Backend":
    from fingrav_native.backends._amd import AmdBackend

    if mode is not None:
        options.setdefault("channel", mode)
    # AmdBackend takes its own kernel type (a Workload): a Backend in every other respect.
    return cast("Backend", AmdBackend(device=number, **options))


def _amd_modes() -> tuple[str, ...]:
    from fingrav_native.backends._amd_sysfs import AmdChannel

    return tuple(get_args(AmdChannel))


def _report_amd() -> "BackendReport":
    from fingrav_native.backends._amd_report import report

    return report()


def _open_nvidia(number: int, mode: Optional[str], **options: Any) -> "Backend":
    from fingrav_native.backends._nvidia import NvidiaBackend

    if mode is not None:
        options.setdefault("power", mode)
    # NvidiaBackend takes its own kernel type (a Workload): a Backend in every other respect.
    return cast("Backend", NvidiaBackend(device=number, **options))


def _nvidia_modes() -> tuple[str, ...]:
    from fingrav_native.backends._nvidia_sensors import NVML_MODES

    return tuple(NVML_MODES)


def _report_nvidia() -> "BackendReport":
    from fingrav_native.backends._nvidia_report import report

    return report()


register(DeviceKind("sim", "simulated, virtual time", True, _open_sim, report=_report_sim, live="none",
                    not_live="the recorder reads a live power source and the simulator in virtual time has none; "
                             "use 'sim-live', SimGPU(realtime=True) or LiveSimBackend()"))
register(DeviceKind("sim-live", "simulated, real time", True, _open_sim_live, report_as="sim"))
register(DeviceKind("amd", "HIP device N; 'energy' or 'socket'", False, _open_amd, _amd_modes, "channel",
                    report=_report_amd, live="source"))
register(DeviceKind("nvidia", "CUDA device N, an NVML power mode", False, _open_nvidia, _nvidia_modes, "NVML mode",
                    report=_report_nvidia, live="source"))


def device_usage(what: Callable[[DeviceKind], bool] = lambda k: True) -> str:
    """The device strings in a usage line's shorthand: ``sim[:SEED], ..., nvidia:N[:MODE]``."""
    forms = []
    for k in DEVICES.values():
        if not what(k):
            continue
        if k.simulated:
            forms.append(f"{k.name}[:SEED]")
        else:
            word = k.mode_word.split()[-1].upper()
            forms.append(f"{k.name}:N" + (f"[:{word}]" if k.modes is not _no_modes else ""))
    return ", ".join(forms)
