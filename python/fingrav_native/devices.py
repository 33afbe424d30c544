"""What this machine can profile: every backend, what was found, and why not.

``fingrav devices`` prints :func:`list_backends`. Each backend module reports
through :class:`BackendReport`: the libraries and device files it looked for
(with the path found, or the loader's error naming the paths tried and what
to install), and the devices it can drive. Nothing here raises for a missing
GPU: a report that says why is the answer.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Optional

__all__ = ["Component", "DeviceEntry", "BackendReport", "list_backends", "format_reports", "BACKENDS"]

#: Backend name -> module whose ``report()`` describes it.
BACKENDS: dict[str, str] = {
    "sim": "fingrav_native.devices",
    "amd": "fingrav_native.amd",
    "nvidia": "fingrav_native.nvidia",
}


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
    details: dict = field(default_factory=dict)


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

    def as_dict(self) -> dict:
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


def report() -> BackendReport:
    """The simulated device's report: always available.

    Returns
    -------
    BackendReport

    Notes
    -----
    The simulator stands in for the paper's MI300X (Section V) wherever no
    GPU is present; it needs nothing beyond the package itself.
    """
    from .sim import SimGPU

    gpu = SimGPU(seed=0)
    p = gpu.params
    return BackendReport(
        backend="sim",
        available=True,
        devices=(DeviceEntry(0, "simulated MI300X-class GPU", {
            "logger_period_us": float(p["logger_period_ns"]) / 1e3,
            "kernels": len(gpu.kernel_names()),
        }),),
        components=(Component("fingrav_native._core (simulator)", True, "built in"),),
        verified_on="simulated device (ground truth for every test)",
    )


def _report_of(name: str, module: str) -> BackendReport:
    try:
        mod = importlib.import_module(module)
        fn: Optional[Callable[[], BackendReport]] = getattr(mod, "report", None)
        if fn is None:
            raise AttributeError(f"{module} has no report()")
        return fn()
    except Exception as exc:  # a broken backend must not hide the others
        return BackendReport(backend=name, available=False,
                             reason=f"the {name} backend failed to report: {type(exc).__name__}: {exc}")


def list_backends(backends: Optional[list[str]] = None) -> list[BackendReport]:
    """Report every backend (or the named ones): what was found and why any is unavailable.

    Parameters
    ----------
    backends : list of str, optional
        Subset of :data:`BACKENDS`; default all.

    Returns
    -------
    list of BackendReport

    Notes
    -----
    FinGraV needs, per device, a power logger, a device clock to map onto
    host time, and GPU-side execution markers (paper Section IV-A); a report
    lists each of them.
    """
    names = list(BACKENDS) if backends is None else list(backends)
    for n in names:
        if n not in BACKENDS:
            raise ValueError(f"backends: unknown backend {n!r}; choose from {sorted(BACKENDS)}")
    return [_report_of(n, BACKENDS[n]) for n in names]


def format_reports(reports: list[BackendReport]) -> str:
    """Human-readable text of :func:`list_backends` (what ``fingrav devices`` prints).

    Parameters
    ----------
    reports : list of BackendReport

    Returns
    -------
    str
    """
    lines: list[str] = []
    for r in reports:
        state = f"available, {len(r.devices)} device(s)" if r.available else "unavailable"
        lines.append(f"{r.backend}: {state}")
        if r.reason:
            lines.append(f"  why: {r.reason}")
        for d in r.devices:
            extra = ", ".join(f"{k}={v}" for k, v in d.details.items())
            lines.append(f"  [{d.index}] {d.name}" + (f" ({extra})" if extra else ""))
        for c in r.components:
            mark = "ok " if c.found else ("-- " if not c.required else "NO ")
            detail = c.detail.replace("\n", "\n        ")
            lines.append(f"  {mark} {c.name}: {detail}")
        if r.verified_on:
            lines.append(f"  verified on: {r.verified_on}")
    return "\n".join(lines)
