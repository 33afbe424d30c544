"""The FinGraV method (paper Section IV-B): from runs to a profile.

``guidance`` (Table I) -> runs -> ``golden`` (execution-time binning) ->
``align`` (LOI/TOI through the clock map) -> ``stitch``; ``steady`` finds the
SSE and SSP executions; ``results`` holds the frozen result types;
``profile`` orchestrates the eight steps on any backend, with ``campaign``
(folders on disk, resume), ``progress`` and ``agreement`` (decisions shared by
the ranks of a collective). ``records`` defines the array layouts every step
consumes.

This package's ``__init__`` imports nothing, so any module of the package can
import any lower one without a circle; the public names are re-exported by
:mod:`fingrav_native`.
"""
