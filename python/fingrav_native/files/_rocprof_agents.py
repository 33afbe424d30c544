"""What rocprofv3's agent numbers and timestamps are: GPU ordinals from agents, and the trace's clock.

Read from ROCprofiler-SDK's source at ``ROCm/rocm-systems`` commit
``1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992`` (2025-08-09, ``projects/rocprofiler-sdk``;
the SDK moved there from ``ROCm/rocprofiler-sdk``, whose snapshot ``8ab1ed78`` of
2024-10-10 agrees on everything below unless said):

* **Agents.** ``source/lib/rocprofiler-sdk/agent.cpp`` enumerates the KFD topology
  nodes in order and gives each agent ``node_id`` (the KFD node),
  ``logical_node_id`` (its rank among all agents, CPUs included) and
  ``logical_node_type_id`` (its rank among agents of its type: the first GPU is
  0, the second 1, whatever CPUs come before; ``include/rocprofiler-sdk/agent.h``
  says it is meant for indexing ``HIP_VISIBLE_DEVICES``/``ROCR_VISIBLE_DEVICES``).
  The handle in JSON records is ``logical_node_id`` plus an offset. A trace's
  agent numbers are therefore not GPU ordinals: on a two-socket host the first
  GPU is agent 2. The GPU ordinal is ``logical_node_type_id``, or where a file
  does not carry it (JSON before it was serialised, ``agent_info.csv``) the
  GPU's rank among the GPU agents by ``logical_node_id``, which is how
  ``agent.cpp`` assigns it. It equals the HIP device ordinal when no
  ``*_VISIBLE_DEVICES`` mask hides a GPU.
* **CSV agent ids.** ``source/lib/output/generateCSV.cpp`` writes
  ``Agent_Id`` through ``metadata::get_agent_index`` (``metadata.cpp``):
  ``"Agent <logical_node_id>"`` by default (``ROCPROF_AGENT_INDEX=relative``),
  ``"Agent <node_id>"`` for ``absolute`` and ``"GPU <logical_node_type_id>"``
  for ``type-relative``; the 2024 snapshot wrote the bare ``logical_node_id``.
* **Clock.** Every timestamp is CLOCK_BOOTTIME ns: ``source/lib/common/utility.hpp``
  (``default_clock_id = CLOCK_BOOTTIME``) for the SDK's own stamps, and a
  dispatch's start and end come from ``hsa_amd_profiling_get_dispatch_time``
  "in the HSA system clock domain" (``hsa_ext_amd.h``), which ROCr reads as
  ``os::ReadSystemClock`` = ``clock_gettime(CLOCK_BOOTTIME)``
  (``projects/rocr-runtime/runtime/hsa-runtime/core/util/lnx/os_linux.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from fingrav_native.insitu._trace import TraceFormatError

#: The clock rocprofv3's and rocpd's timestamps are on (module docstring).
ROCPROF_CLOCK = "CLOCK_BOOTTIME"


#: Where the formats were read (cited by the readers and the writer).
UPSTREAM = "ROCm/rocm-systems@1b1610fc2b2a projects/rocprofiler-sdk"


#: :attr:`KernelTrace.device_numbering` of a CSV whose agent numbers could not be mapped to GPUs.
AGENT_NUMBERING = ("rocprofv3 agent numbers (logical node ids, CPUs counted), not GPU ordinals: no "
                   "agent_info.csv beside the trace")


@dataclass(frozen=True)
class Agent:
    """One agent as a trace describes it.

    Attributes
    ----------
    key : int
        What the trace's kernel records call it (a JSON handle, a rocpd
        agent id, a CSV agent number).
    gpu : bool
        A GPU (type 2 / ``"GPU"``), not a CPU.
    logical_node_id : int
    type_index : int or None
        ``logical_node_type_id`` where the file carries it.
    """

    key: int
    gpu: bool
    logical_node_id: int
    type_index: Optional[int] = None


def gpu_ordinals(agents: Sequence[Agent], where: str) -> dict[int, int]:
    """Each GPU agent's key -> its GPU ordinal (``logical_node_type_id``, else its rank among GPUs).

    Parameters
    ----------
    agents : sequence of Agent
    where : str
        The file, for messages.

    Returns
    -------
    dict of int to int
        GPU agents only.

    Raises
    ------
    TraceFormatError
        Two GPU agents with one key or one ordinal.
    """
    gpus = sorted((a for a in agents if a.gpu), key=lambda a: a.logical_node_id)
    out: dict[int, int] = {}
    for rank, a in enumerate(gpus):
        if a.key in out:
            raise TraceFormatError(f"{where}: two GPU agents are both agent {a.key}")
        out[a.key] = a.type_index if a.type_index is not None and a.type_index >= 0 else rank
    if len(set(out.values())) != len(out):
        raise TraceFormatError(f"{where}: two GPU agents have one logical_node_type_id ({sorted(out.values())})")
    return out
