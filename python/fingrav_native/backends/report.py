"""What a backend reports about this machine: the libraries, device files and devices it found.

Every backend module (sim, amd, nvidia) has a ``report()`` that returns a
:class:`BackendReport`; :mod:`fingrav_native.backends.devices` gathers them
for ``fingrav devices``. Nothing here raises for a missing GPU: a report that
says why is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Component", "DeviceEntry", "BackendReport"]


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
        Which hardware this backend has been verified on (README's table).
    """

    backend: str
    available: bool
    devices: tuple[DeviceEntry, ...] = ()
    components: tuple[Component, ...] = ()
    reason: str = ""
    verified_on: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``fingrav devices --json``)."""
        return {
            "backend": self.backend,
            "available": self.available,
            "reason": self.reason,
            "verified_on": self.verified_on,
            "devices": [{"index": d.index, "name": d.name, **d.details} for d in self.devices],
            "components": [{"name": c.name, "found": c.found, "detail": c.detail, "required": c.required}
                           for c in self.components],
        }
