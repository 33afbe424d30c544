"""Sensors are part of the measurement: what a log is, and how to find out.

:class:`SensorModel` and the vendors' presets say what window, filter or counter a log
stands for; ``semantics`` records, per power mode, whether each figure is documented,
measured or assumed; the counter helpers turn energy-counter reads into logs with exact
windows, and :class:`EnergyCounter` holds a counter's readings; the characterisation fits (period, step and load response) measure a sensor
from logs taken under a known load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.sensors._characterize import (
        Characterisation,
        PeriodEstimate,
        counter_resolution,
        estimate_period,
    )
    from fingrav_native.sensors._counter import (
        COUNTER_LOG_DTYPE,
        CounterDiscontinuityWarning,
        CounterLogs,
        counter_to_logs,
    )
    from fingrav_native.sensors._energy_counter import EnergyCounter
    from fingrav_native.sensors._from_logs import SplitDisagreementWarning, characterize_logs
    from fingrav_native.sensors._model import SENSOR_PRESETS, SensorModel, SensorPresetName, sensor_preset
    from fingrav_native.sensors._response_fit import (
        GAPLESS_LEVEL,
        StepFit,
        fit_load_response,
        fit_meter_response,
        fit_step_response,
    )
    from fingrav_native.sensors._semantics import FIGURES, PROVENANCES, SensorSemantics

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "COUNTER_LOG_DTYPE": "_counter",
    "GAPLESS_LEVEL": "_response_fit",
    "Characterisation": "_characterize",
    "CounterDiscontinuityWarning": "_counter",
    "CounterLogs": "_counter",
    "EnergyCounter": "_energy_counter",
    "FIGURES": "_semantics",
    "PROVENANCES": "_semantics",
    "PeriodEstimate": "_characterize",
    "SENSOR_PRESETS": "_model",
    "SensorModel": "_model",
    "SensorPresetName": "_model",
    "SensorSemantics": "_semantics",
    "SplitDisagreementWarning": "_from_logs",
    "StepFit": "_response_fit",
    "characterize_logs": "_from_logs",
    "counter_resolution": "_characterize",
    "counter_to_logs": "_counter",
    "estimate_period": "_characterize",
    "fit_load_response": "_response_fit",
    "fit_meter_response": "_response_fit",
    "fit_step_response": "_response_fit",
    "sensor_preset": "_model",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
