"""Sensors are part of the measurement: models (``model``), energy counters (``counter``), deconvolution (``deconvolve``).

A log of a real sensor averages a window, passes a filter or differences an
energy counter; ``model`` says which, ``counter`` turns counter reads into
logs with exact windows, and ``deconvolve`` recovers an execution's curve
from such logs instead of pretending each is an instant (DESIGN.md,
"Sensors are part of the measurement"). ``semantics`` records, per power
mode, what a log is and whether each figure is documented, measured or
assumed.
"""
