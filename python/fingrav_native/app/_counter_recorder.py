"""The energy counter a :class:`~fingrav_native.app.PowerRecorder` records beside the power logs.

The energy closure of an in-situ profile needs the device's energy
counter over the trace: AMD's ``energy_accumulator`` (``gpu_metrics``, 2^-16 J,
stamped by the firmware's clock) or NVML's total energy (mJ, stamped by NVML
where its field API answers). :class:`CounterSpec` says where a device's counter
is; :class:`CounterRecorder` polls it on a second native
:class:`~fingrav_native.Sampler` (the counter's own power source in energy
mode, whose readings are its steps) and hands the capture a
:class:`~fingrav_native.files.CapturedCounter`. A counter that fails while
recording costs the counter, with a warning, never the capture.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from fingrav_native import _core
from fingrav_native._checks import integer_in
from fingrav_native.files._capture import HOST_CLOCK_DOMAINS, source_dict
from fingrav_native.files._capture_counter import CapturedCounter

#: How often the counter's sampler polls by default (ns): NVML's counter refreshes every 10-100 ms and
#: AMD's table every 1-5 ms; a read whose value the reader stamps is at most this stale.
COUNTER_PERIOD_NS = 2_000_000


#: AMD's ``energy_accumulator`` step (``gpu_metrics``: 15.259 uJ) and NVML's total energy step (mJ).
AMD_COUNTER_QUANTUM_J = 2.0 ** -16
NVML_COUNTER_QUANTUM_J = 1e-3


@dataclass(frozen=True)
class CounterSpec:
    """Where a device's energy counter is.

    Attributes
    ----------
    source : PowerSource or None
        A power source whose readings are the counter's steps (an energy
        mode); None when the recorded logs already are.
    quantum_j : float
        The counter's step.
    scope : str
        What it measures ("socket", "gpu", "module"; "" unknown).
    stamped : bool
        Whether the counter stamps its values (else the read is stamped, and a
        value is up to one poll period stale).
    """

    source: Optional[_core.PowerSource]
    quantum_j: float
    scope: str
    stamped: bool


def counter_spec(counter: Any, found: Optional[CounterSpec]) -> Optional[CounterSpec]:
    """The counter a recorder records: ``"auto"`` (the device's, ``found``), None (none) or a power source."""
    if counter is None:
        return None
    if isinstance(counter, str):
        if counter != "auto":
            raise ValueError(f"counter={counter!r}: must be 'auto', None or a PowerSource whose readings are an "
                             "energy counter's steps")
        return found
    if isinstance(counter, CounterSpec):
        return counter
    if isinstance(counter, _core.PowerSource):
        if counter.in_use:
            raise ValueError(f"counter: its power source {counter.info.name!r} is already polled by another Sampler")
        return CounterSpec(counter, 0.0, "", str(counter.info.clock_domain) not in HOST_CLOCK_DOMAINS)
    raise ValueError(f"counter={counter!r}: must be 'auto', None or a PowerSource whose readings are an energy "
                     "counter's steps")


class CounterRecorder:
    """A second sampler on an energy counter's source, drained with the power logs (see the module)."""

    def __init__(self, spec: CounterSpec, period_ns: Optional[int]) -> None:
        assert spec.source is not None
        self.spec = spec
        self.period_ns = COUNTER_PERIOD_NS if period_ns is None else integer_in(
            period_ns, "counter_period_ns", _core.MIN_PERIOD_NS, _core.MAX_PERIOD_NS)
        # 65536 slots: minutes of readings at the default period, however long the drain thread stalls.
        self._sampler = _core.Sampler(spec.source, period_ns=self.period_ns, capacity=1 << 16)
        self._chunks: list[np.ndarray] = []
        self._failed: Optional[BaseException] = None

    def start(self) -> None:
        """Start polling (after the logs' sampler, so the logs never wait on the counter)."""
        try:
            self._sampler.start()
        except Exception as exc:  # the counter is optional: the capture goes on without it
            self._failed = exc

    @property
    def failed(self) -> bool:
        """Whether the counter failed (it is then left out of the capture)."""
        return self._failed is not None

    def header(self) -> dict[str, Any]:
        """The capture header's ``counter`` as known when recording starts (its stats come at the end)."""
        assert self.spec.source is not None
        return {"of_logs": False, "source": source_dict(self.spec.source), "quantum_j": float(self.spec.quantum_j),
                "stale_ns": 0.0 if self.spec.stamped else float(self.period_ns), "scope": self.spec.scope,
                "period_ns": int(self.period_ns), "stats": {}}

    def stats(self) -> dict[str, Any]:
        """Its sampler's counters now."""
        return dict(self._sampler.stats().as_dict())

    def drain(self) -> Optional[np.ndarray]:
        """Take what the sampler buffered (the recorder's drain thread calls this at every wake); return it."""
        if self._failed is None and self._sampler.available:
            chunk = self._sampler.drain()
            self._chunks.append(chunk)
            return chunk
        return None

    def stop(self) -> Optional[CapturedCounter]:
        """Stop, take the rest and build the capture's counter; None (with a warning) if the counter failed."""
        if self._failed is None:
            try:
                self._sampler.stop()
            except _core.SamplerError as exc:
                self._failed = exc
        if self._failed is None and self._sampler.available:
            self._chunks.append(self._sampler.drain())
        if self._failed is not None:
            name = self.spec.source.info.name if self.spec.source is not None else "?"
            warnings.warn(f"PowerRecorder: the energy counter ({name}) failed and is not in the capture: "
                          f"{self._failed}", RuntimeWarning, stacklevel=3)
            return None
        samples = np.concatenate(self._chunks) if self._chunks else np.empty(0, dtype=_core.SAMPLE_DTYPE)
        assert self.spec.source is not None
        return CapturedCounter(samples=samples, source=source_dict(self.spec.source), quantum_j=self.spec.quantum_j,
                               stale_ns=0.0 if self.spec.stamped else float(self.period_ns), scope=self.spec.scope,
                               period_ns=self.period_ns, stats=dict(self._sampler.stats().as_dict()))


def logs_counter(spec: Optional[CounterSpec], period_ns: int) -> Optional[CapturedCounter]:
    """The capture's counter when its own logs are the counter's steps (None otherwise)."""
    if spec is None or spec.source is not None:
        return None
    return CapturedCounter(samples=None, source=None, quantum_j=spec.quantum_j,
                           stale_ns=0.0 if spec.stamped else float(period_ns), scope=spec.scope)


def start_counter(spec: Optional[CounterSpec], period_ns: Optional[int]) -> Union[CounterRecorder, None]:
    """A started recorder of the counter's own source (None: none, or the logs are the counter)."""
    if spec is None or spec.source is None:
        return None
    rec = CounterRecorder(spec, period_ns)
    rec.start()
    return rec
