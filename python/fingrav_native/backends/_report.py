"""What a backend reports about this machine: the libraries, device files and devices it found.

Every backend module (sim, amd, nvidia) has a ``report()`` that returns a
:class:`BackendReport`; :mod:`fingrav_native.backends` gathers them
for ``fingrav devices``. Nothing here raises for a missing GPU: a report that
says why is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fingrav_native.sensors._semantics import SensorSemantics


@dataclass(frozen=True)
class Component:
    """One library or device file a backend needs.

    Attributes
    ----------
    name : str
        What it is (``"NVML"``, ``"/dev/kfd"``, ``"hiprtc"``).
    found : bool
        Whether it loaded / exists and answered.
    detail : str
        The path that loaded, or why it did not (the loader's message).
    required : bool
        False for optional parts (a second marker source, a fallback logger).
    """

    name: str
    found: bool
    detail: str
    required: bool = True

    @property
    def summary(self) -> str:
        """The detail without the list of paths tried: its first line.

        A loader's message reads ``could not load X; tried:``, one indented
        line per path, then what to install (``csrc/fingrav/dynlib.cpp``).
        """
        first = self.detail.split("\n", 1)[0]
        return first[: -len("; tried:")] if first.endswith("; tried:") else first

    @property
    def fix(self) -> str:
        """What to install or set to make this part work; empty when the message names none.

        The unindented lines after a loader's list of paths tried (its
        "Install ..." and "Set ``FINGRAV_..._LIBRARY`` ..." sentences).
        """
        if self.found:
            return ""
        lines = self.detail.split("\n")
        if not lines[0].endswith("; tried:"):
            return ""
        return " ".join(line.strip() for line in lines[1:] if line and not line.startswith(" "))


@dataclass(frozen=True)
class DeviceEntry:
    """One device a backend can drive.

    Attributes
    ----------
    index : int
        Index the backend takes (``AmdBackend(device=index)``).
    name : str
        Product name.
    details : dict
        Backend-specific facts (PCI address, UUID, logger period, formats).
    """

    index: int
    name: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendReport:
    """What one backend found on this machine.

    Attributes
    ----------
    backend : str
        ``"sim"``, ``"amd"`` or ``"nvidia"``.
    available : bool
        True when at least one device can be profiled.
    devices : tuple of DeviceEntry
        Devices found.
    components : tuple of Component
        Libraries and device files looked for.
    reason : str
        Why the backend is unavailable (empty when available).
    verified_on : str
        Which hardware this backend has been verified on (docs/reference/hardware.md).
    sensors : tuple of SensorSemantics
        The power modes the backend can log with, the one it would use
        first; empty when the backend does not say.
    """

    backend: str
    available: bool
    devices: tuple[DeviceEntry, ...] = ()
    components: tuple[Component, ...] = ()
    reason: str = ""
    verified_on: str = ""
    sensors: tuple[SensorSemantics, ...] = ()

    @property
    def fix(self) -> str:
        """The one fix ``fingrav devices`` shows for an unavailable backend; empty if none is known.

        The install hint of the first required part that is missing: parts
        are listed in the order the backend needs them, and one vendor
        package usually brings the later parts too (the NVIDIA driver ships
        both libcuda and NVML).
        """
        if self.available:
            return ""
        return next((c.fix for c in self.components if c.required and c.fix), "")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``fingrav devices --json``)."""
        return {
            "backend": self.backend,
            "available": self.available,
            "reason": self.reason,
            "fix": self.fix,
            "verified_on": self.verified_on,
            "devices": [{"index": d.index, "name": d.name, **d.details} for d in self.devices],
            "components": [{"name": c.name, "found": c.found, "detail": c.detail, "required": c.required}
                           for c in self.components],
            "sensors": [s.as_dict() for s in self.sensors],
        }
