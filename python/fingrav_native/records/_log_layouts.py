"""The record layouts of logs and result tables: one module holds every numpy record dtype the analyses share.

Logs take several layouts on their way through the package, and each has its
own name here, so two layouts never share one (``method.LOG_DTYPE``, a log
placed on host time, and ``native.LOG_DTYPE``, the simulated device's raw log,
once did; both old names stay as aliases of the names below):

* :data:`PLACED_LOG_DTYPE`: a power log placed on host time
  (``CampaignTimeline.logs``; paper Section IV-B step 6 places logs so);
* :data:`TRACE_LOG_DTYPE`: a power log on an application trace's timeline
  (``TraceProfile.logs``);
* :data:`COUNTER_LOG_DTYPE`: a windowed log made from two energy-counter
  reads (``sensors.counter_logs``);
* :data:`ANALYTIC_LOG_DTYPE`: a log the analytic sensor study observes
  (``sim.observe``);
* :data:`SIM_LOG_DTYPE`, :data:`SIM_EXEC_DTYPE`, :data:`SIM_FIRMWARE_DTYPE`:
  the simulated device's raw logs, executions and firmware samples, as the
  C++ core lays them out.

The in-situ tables (:data:`KERNEL_TABLE_DTYPE`, :data:`ITERATION_DTYPE`,
:data:`STEP_DTYPE`, :data:`KERNEL_SIGNATURE_DTYPE`) and the simulator's
truth tables (:data:`COLLECTIVE_TRUTH_DTYPE`, :data:`SCORE_DTYPE`) are here
too. The layouts of executions, samples, markers, launches and logs of
interest are in :mod:`fingrav_native.records._layouts`.
"""

from __future__ import annotations

import numpy as np

from fingrav_native import _core

#: A power log placed on host time (``CampaignTimeline.logs``). ``method.LOG_DTYPE`` is this layout.
PLACED_LOG_DTYPE = np.dtype([
    ("host_ns", "<f8"),    # host time of the log (the end of its window if windowed)
    ("window_ns", "<f8"),  # averaging window ending at host_ns (0 = instantaneous)
    ("total", "<f4"), ("compute", "<f4"), ("io", "<f4"), ("memory", "<f4"),
])

#: The power logs on the trace's timeline (what the Perfetto export draws as counter tracks).
TRACE_LOG_DTYPE = np.dtype([
    ("t_ns", "<f8"),       # middle of what the log measures, relative to the trace's origin
    ("total", "<f4"),
    ("compute", "<f4"),
    ("io", "<f4"),
    ("memory", "<f4"),
])

#: Windowed logs made from counter reads: the window ends at ``source_ts``.
COUNTER_LOG_DTYPE = np.dtype([("source_ts", "<i8"), ("window_ns", "<u4"), ("total", "<f4"),
                              ("energy_j", "<f8"), ("quantum_w", "<f4")])

#: What the analytic study's ``observe`` returns: a log's host-time stamp, its value (W) and, for boxcar and
#: counter logs, the window it averages (0 for instants and filters).
ANALYTIC_LOG_DTYPE = np.dtype([("source_ts", "<i8"), ("total", "<f4"), ("window_ns", "<u4")])

#: The simulated device's raw power log (``SimDevice.logs()``). ``native.LOG_DTYPE`` and ``sim.LOG_DTYPE``
#: are this layout (not :data:`PLACED_LOG_DTYPE`).
SIM_LOG_DTYPE = _core.LOG_DTYPE

#: The simulated device's executions (``SimDevice.executions()``): ``native.EXEC_DTYPE``, ``sim.EXEC_DTYPE``.
SIM_EXEC_DTYPE = _core.EXEC_DTYPE

#: The simulated device's firmware samples: ``native.FIRMWARE_DTYPE``, ``sim.FIRMWARE_DTYPE``.
SIM_FIRMWARE_DTYPE = _core.FIRMWARE_DTYPE

#: One row per kernel signature, in descending order of total energy. A profile's table is as wide in
#: ``name`` as its longest name (``insitu.kernel_table_dtype``), so a name is never cut; this is the narrowest.
KERNEL_TABLE_DTYPE = np.dtype([
    ("name", "U256"),
    ("grid", "<i8", (3,)),
    ("block", "<i8", (3,)),
    ("count", "<i8"),              # executions in the trace
    ("golden", "<i8"),             # golden executions the profile used
    ("warmup", "<i8"),             # executions left out as warm-up
    ("duration_ns", "<f8"),        # median of the golden executions
    ("power_w", "<f8"),            # mean power over an execution
    ("energy_j", "<f8"),           # per execution
    ("energy_half_width_j", "<f8"),  # 95 % interval half-width
    ("share", "<f8"),              # of all kernels' energy (count x energy_j)
    ("joint", "?"),                # a joint attribution: a communication kernel's additive level, or a coarse level
])

#: One iteration of the loop (``ProfilerStep#N``) on the GPU's timeline.
ITERATION_DTYPE = np.dtype([
    ("step", "<i8"),
    ("start_ns", "<i8"),          # first kernel it launched starts (relative to the trace's origin)
    ("end_ns", "<i8"),            # the next iteration's first kernel starts (the last: its last kernel ends)
    ("kernels", "<i8"),           # executions it launched
    ("busy_ns", "<i8"),           # time with a kernel running
    ("logs", "<i8"),              # power logs attributed to it (by the middle of what each log measures)
    ("energy_j", "<f8"),          # mean of its logs x its duration (NaN without a log; noisy alone)
    ("kernel_energy_j", "<f8"),   # its executions x their signature's energy per execution
    ("steady", "?"),              # past every signature's warm-up
])

#: One iteration of the application as the profiler marked it (``ProfilerStep#N``), on the CPU.
STEP_DTYPE = np.dtype([
    ("step", "<i8"),       # N of ProfilerStep#N
    ("start_ns", "<i8"),   # relative to the trace's origin_ns
    ("end_ns", "<i8"),
])


def signature_dtype(width: int) -> np.dtype:
    """:data:`KERNEL_SIGNATURE_DTYPE` with names ``width`` characters wide (at least 256)."""
    return np.dtype([("id", "<i4"), ("name", f"U{max(int(width), 256)}"), ("grid", "<i8", (3,)),
                     ("block", "<i8", (3,))])


#: One kernel signature: launches of one kernel with one grid and block shape. A trace whose names are
#: longer than 256 characters (about half of real C++ template kernel names) gets the same fields with a
#: name as wide as its longest (:func:`signature_dtype`): a name is never cut.
KERNEL_SIGNATURE_DTYPE = signature_dtype(256)

#: One row per (collective execution, rank) of the simulated fabric: where it really started and ended.
COLLECTIVE_TRUTH_DTYPE = np.dtype([
    ("run", "<i4"),
    ("index", "<i4"),            # execution index within the run
    ("kernel_id", "<i4"),        # node kernel id of the collective
    ("rank", "<i4"),
    ("start_true_ns", "<i8"),    # the rank arrived: its execution began (spin)
    ("transfer_true_ns", "<i8"), # the data exchange began, on every rank
    ("end_true_ns", "<i8"),      # the execution ended (same on every rank, within a few ns)
    ("start_host_ns", "<i8"),    # start, in this rank's host clock
    ("end_host_ns", "<i8"),      # end, in this rank's host clock
])

#: One row of the shared simulator's ``SharedSimTruth.score``.
SCORE_DTYPE = np.dtype([("kernel", "U64"), ("executions", np.int64), ("golden", np.int64), ("estimate_j", np.float64),
                        ("half_width_j", np.float64), ("truth_golden_j", np.float64), ("truth_all_j", np.float64),
                        ("error", np.float64), ("error_all", np.float64), ("covered", np.bool_)])
