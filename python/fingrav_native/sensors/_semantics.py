"""What a power logger's logs are, and where each of its figures comes from.

A sensor is part of the measurement (an averaging or late log taken for an
instantaneous one is a silent error): a backend states, for the power mode
it uses, what one log is and whether its period, averaging window, reporting
delay and timestamp tick are documented by the vendor, measured on the
device, or assumed. The same
:class:`SensorSemantics` fills ``Capabilities.sensor_semantics`` and
``Capabilities.provenance`` (:mod:`fingrav_native.records`) and the
``sensors`` of a backend's report (``fingrav devices``), so a saved profile
and ``fingrav devices`` say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The logger figures whose source a backend records (Capabilities.provenance).
FIGURES = ("period", "window", "delay", "tick")


#: Where a figure comes from.
PROVENANCES = ("documented", "measured", "assumed")


@dataclass(frozen=True)
class SensorSemantics:
    """What one power mode's logs are, and where each logger figure comes from.

    Attributes
    ----------
    mode : str
        The power mode (``"gpu_metrics energy"``, ``"hwmon power1_average"``).
    semantics : str
        What one log is, in words.
    figures : tuple of (str, str, str)
        ``(figure, provenance, detail)`` for each of :data:`FIGURES`: the
        provenance is one of :data:`PROVENANCES`, the detail the value and
        its source (or "at start" for a figure measured then).

    Notes
    -----
    The same record fills a backend's ``Capabilities.sensor_semantics`` and
    ``Capabilities.provenance``, so ``fingrav devices`` and a saved profile
    say the same thing.
    """

    mode: str
    semantics: str
    figures: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        for fig, prov, _ in self.figures:
            if fig not in FIGURES or prov not in PROVENANCES:
                raise ValueError(f"figures: ({fig!r}, {prov!r}) is not one of {FIGURES} with one of {PROVENANCES}")

    @property
    def provenance(self) -> dict[str, str]:
        """Figure -> provenance, as ``Capabilities.provenance`` takes it."""
        return {fig: prov for fig, prov, _ in self.figures}

    def lines(self) -> list[str]:
        """The text ``fingrav devices`` prints: the semantics, then one line per figure."""
        out = [f"{self.mode}: {self.semantics}"]
        out += [f"  {fig:<7}{prov:<11}{detail}" for fig, prov, detail in self.figures]
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"mode": self.mode, "semantics": self.semantics,
                "figures": {fig: {"provenance": prov, "detail": detail} for fig, prov, detail in self.figures}}
