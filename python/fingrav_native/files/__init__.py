"""Files: one guarded reader and the file formats the package writes and reads.

Versioned profile files (no pickle, checked field by field on load), power captures,
sensor characterisations, campaign folders (run files, manifest, lock), the readers of
power logs other tools write (nvidia-smi, amd-smi, rocm-smi, dcgmi) and of CSV columns, of
application traces (torch.profiler / Kineto JSON; rocprofv3 CSV, JSON and rocpd) and the Perfetto /
Chrome trace export, and the annotated copy of an application's own trace. Every loader goes through the guards of ``_safe`` (size caps,
regular files only, JSON depth, .npy headers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fingrav_native._lazy import attach

if TYPE_CHECKING:
    from fingrav_native.files._annotate import annotate_trace
    from fingrav_native.files._campaign import (
        CAMPAIGN_FILE,
        CAMPAIGN_FORMAT,
        LOCK_FILE,
        PROFILE_FILE,
        CampaignFormatError,
        CampaignLockedError,
        CampaignMismatchError,
        StoredRun,
        campaign_contents,
        load_campaign_runs,
        read_manifest,
        run_files,
        write_manifest,
        write_run,
    )
    from fingrav_native.files._campaign_lock import lock_campaign
    from fingrav_native.files._capture import (
        CAPTURE_FORMAT,
        CAPTURE_VERSION,
        REALTIME_CLOCK_DOMAINS,
        CaptureFormatError,
        PowerCapture,
    )
    from fingrav_native.files._capture_counter import CapturedCounter
    from fingrav_native.files._capture_read import load_capture
    from fingrav_native.files._characterisation import load_characterisation, read_logs_csv, save_characterisation
    from fingrav_native.files._journal import RecoveredCaptureWarning
    from fingrav_native.files._kineto import read_kineto_trace, write_kineto_trace
    from fingrav_native.files._launches import LAUNCHES_FORMAT, LaunchFormatError, LaunchLog, read_launches
    from fingrav_native.files._parquet import export_parquet
    from fingrav_native.files._power_logs import (
        POWER_LOG_KINDS,
        PowerLogFormatError,
        power_log_summary,
        read_power_log,
    )
    from fingrav_native.files._profiles import (
        FORMAT_NAME,
        FORMAT_VERSION,
        ProfileFormatError,
        load_profile,
        save_profile,
    )
    from fingrav_native.files._rocprof import read_rocprof_kernel_trace, read_trace
    from fingrav_native.files._rocprof_write import write_rocprof_trace
    from fingrav_native.files._trace import export_trace, insitu_trace_events, node_trace_events, trace_events

# Each public name -> the private module that defines it. Loaded on first use (PEP 562, as scipy
# and scikit-image do), so importing one module of this package never imports the rest of it.
_WHERE = {
    "annotate_trace": "_annotate",
    "CAMPAIGN_FILE": "_campaign",
    "CAMPAIGN_FORMAT": "_campaign",
    "CAPTURE_FORMAT": "_capture",
    "CAPTURE_VERSION": "_capture",
    "CampaignFormatError": "_campaign",
    "CampaignLockedError": "_campaign",
    "CampaignMismatchError": "_campaign",
    "CapturedCounter": "_capture_counter",
    "CaptureFormatError": "_capture",
    "FORMAT_NAME": "_profiles",
    "FORMAT_VERSION": "_profiles",
    "LAUNCHES_FORMAT": "_launches",
    "LOCK_FILE": "_campaign",
    "LaunchFormatError": "_launches",
    "LaunchLog": "_launches",
    "PROFILE_FILE": "_campaign",
    "PowerCapture": "_capture",
    "POWER_LOG_KINDS": "_power_logs",
    "PowerLogFormatError": "_power_logs",
    "ProfileFormatError": "_profiles",
    "REALTIME_CLOCK_DOMAINS": "_capture",
    "RecoveredCaptureWarning": "_journal",
    "StoredRun": "_campaign",
    "campaign_contents": "_campaign",
    "export_parquet": "_parquet",
    "export_trace": "_trace",
    "insitu_trace_events": "_trace",
    "load_campaign_runs": "_campaign",
    "load_capture": "_capture_read",
    "load_characterisation": "_characterisation",
    "save_characterisation": "_characterisation",
    "load_profile": "_profiles",
    "lock_campaign": "_campaign_lock",
    "node_trace_events": "_trace",
    "read_kineto_trace": "_kineto",
    "power_log_summary": "_power_logs",
    "read_launches": "_launches",
    "read_logs_csv": "_characterisation",
    "read_manifest": "_campaign",
    "read_power_log": "_power_logs",
    "read_rocprof_kernel_trace": "_rocprof",
    "read_trace": "_rocprof",
    "run_files": "_campaign",
    "save_profile": "_profiles",
    "trace_events": "_trace",
    "write_kineto_trace": "_kineto",
    "write_manifest": "_campaign",
    "write_rocprof_trace": "_rocprof_write",
    "write_run": "_campaign",
}

__getattr__, __dir__, __all__ = attach(__name__, _WHERE)
