"""The ``fingrav`` commands that draw, export and attribute saved files: ``plot``, ``export``, ``trace``."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import os
import re
import sys
import warnings
from typing import Any, Optional

import numpy as np

from fingrav_native.app import _plot as fplot
from fingrav_native.app._cli_common import EXIT_FAILURE, EXIT_OK, interruptible
from fingrav_native.app._progress import PhaseProgress
from fingrav_native.app._trace import load_power, profile_trace
from fingrav_native.files._annotate import annotate_trace, check_annotation_out
from fingrav_native.files._outputs import (
    Writes,
    check_distinct_outputs,
    check_output_path,
    write_atomically,
    write_json,
)
from fingrav_native.files._parquet import PYARROW_MISSING, export_parquet, pyarrow_missing
from fingrav_native.files._power_logs import power_log_summary
from fingrav_native.files._profiles import load_profile
from fingrav_native.files._run_folder import is_run_folder, run_folder_paths
from fingrav_native.files._trace import export_trace
from fingrav_native.insitu._closure import EnergyClosureWarning
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.method._results import InterleavedProfile, Profile


def _load(path: str) -> object:
    """A saved profile (a Profile or an InterleavedProfile)."""
    return load_profile(path)


def _figure_stem(path: str) -> str:
    """What a profile's figures are named after: its file, or for a campaign's profile.fgprof its folder."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "profile":
        # A campaign folder's profile.fgprof: name its figures after the folder.
        stem = os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
    return stem


@interruptible("plot")
def plot_command(args: argparse.Namespace) -> int:
    """``fingrav plot``: every figure of each profile, and with several kernels one side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [args.profile] if isinstance(args.profile, str) else list(args.profile)
    # Before any profile is read or drawn: a folder that cannot be written is found first.
    check_output_path(args.out, "--out", folder=True)
    os.makedirs(args.out, exist_ok=True)
    figures = []
    kernels = []  # (name, ExecutionProfile) of every profile, for the side-by-side figure
    for path in paths:
        prof = _load(path)
        stem = _figure_stem(path)
        if isinstance(prof, InterleavedProfile):
            figures.append((stem, "interleaved", fplot.plot_interleaved(prof).figure))
            prof = prof.reference
        assert isinstance(prof, Profile)
        if prof.whole_run is not None:
            figures.append((stem, "whole_run", fplot.plot_whole_run(prof).figure))
        for label, ep in prof.profiles.items():
            figures.append((stem, f"kernel_{label}", fplot.plot_kernel(ep).figure))
            kernels.append((f"{prof.kernel} {label.upper()}" if len(paths) > 1 else label.upper(), ep))
        if prof.ssp_search is not None:
            figures.append((stem, "ssp_search", fplot.plot_ssp_search(prof.ssp_search).figure))
    if len(kernels) > 1:
        # Paper Figures 8 and 10: kernels (or SSE vs SSP) side by side, one panel per component.
        stem = _figure_stem(paths[0]) if len(paths) == 1 else "kernels"
        figures.append((stem, "by_component", fplot.figure_kernels_by_component(kernels)))
    outputs = [os.path.join(args.out, f"{stem}_{name}.{args.format}") for stem, name, _ in figures]
    for path in outputs:
        check_output_path(path, "--out", protect=paths, shown=f"--out={args.out!r}: {os.path.basename(path)}")
    for path, (_, _, fig) in zip(outputs, figures):
        write_atomically(path, functools.partial(fig.savefig, dpi=args.dpi, format=args.format))
        plt.close(fig)
        print(path)
    return EXIT_OK


def _summary(prof: object) -> dict[str, Any]:
    """``fingrav export --summary``: the error budget, settings and per-profile figures."""
    extra: dict[str, Any] = {}
    if isinstance(prof, InterleavedProfile):
        extra = {"preceded_by": [list(x) for x in prof.preceded_by], "power_ratio": prof.power_ratio}
        prof = prof.reference
    assert isinstance(prof, Profile)
    out = {
        "kernel": prof.kernel, "mode": prof.mode, "runs": prof.runs, "backend": dataclasses.asdict(prof.backend),
        "settings": prof.settings, "error_budget_ns": dataclasses.asdict(prof.error_budget),
        "clock": prof.clock, "versions": prof.versions, **extra,
        "profiles": {
            label: {"execution_index": ep.execution_index, "executions_per_run": ep.executions_per_run,
                    "golden_runs": ep.golden.count, "runs": ep.golden.total, "lois": int(len(ep.lois)),
                    "loi_target": ep.loi_target, "duration_ns": ep.duration_ns,
                    "energy_j": {k: e.energy_j for k, e in ep.energy.items()},
                    "energy_uncertainty_j": {k: e.uncertainty_j for k, e in ep.energy.items()}}
            for label, ep in prof.profiles.items()},
    }
    return out


def summary_json(value: object) -> object:
    """A summary's value as standard JSON: non-finite floats as null, arrays and numpy scalars as numbers."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): summary_json(x) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return [summary_json(x) for x in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _export_outputs(args: argparse.Namespace) -> None:
    """``--trace``, ``--summary`` and ``--parquet`` checked before the profile is read: none overwrites its input."""
    if args.trace is None and args.parquet is None and args.summary is None:
        raise ValueError("nothing to export: give --trace, --parquet and/or --summary")
    for option in ("trace", "summary"):
        path = getattr(args, option)
        if path is not None:
            check_output_path(path, f"--{option}", protect=[args.profile])
    if args.parquet is not None:
        check_output_path(args.parquet, "--parquet", folder=True)
        if pyarrow_missing():  # before any output is written: none or all of them
            raise ImportError(f"--parquet: {PYARROW_MISSING}")
    check_distinct_outputs({"--trace": args.trace, "--summary": args.summary})


@interruptible("export")
def export_command(args: argparse.Namespace) -> int:
    """``fingrav export``: the trace, Parquet tables and/or JSON summary asked for."""
    _export_outputs(args)
    prof = _load(args.profile)
    if args.trace is not None:
        print(export_trace(prof, args.trace))  # type: ignore[arg-type]
    if args.parquet is not None:
        for p in export_parquet(prof, args.parquet):  # type: ignore[arg-type]
            print(p)
    if args.summary is not None:
        print(write_json(args.summary, summary_json(_summary(prof))))
    return EXIT_OK


def _annotation_out(args: argparse.Namespace) -> Optional[str]:
    """``--annotate OUT`` checked (a folder, a missing or unwritable folder, the trace, a file without --force)."""
    if args.annotate is None:
        if args.force:
            raise ValueError("--force: replaces an existing --annotate file; give --annotate OUT")
        return None
    return check_annotation_out(args.trace, args.annotate, overwrite=args.force, name="--annotate",
                                protect=[args.power])


def _closure_doc(tp: TraceProfile) -> Optional[dict[str, Any]]:
    """The energy closure for kernels.json (NaN as null), None without a counter."""
    if tp.closure is None:
        return None
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in dataclasses.asdict(tp.closure).items()}


def _power_log_args(args: argparse.Namespace) -> dict[str, Any]:
    """``--log-*`` and ``--boottime-offset-ns`` as :func:`~fingrav_native.files.read_power_log`'s arguments."""
    given = {"tz": args.log_tz, "start": args.log_start, "period_s": args.log_period,
             "columns": None if args.log_columns is None else args.log_columns.split(","),
             "boottime_offset_ns": args.boottime_offset_ns, "kind": None if args.log_kind == "auto" else args.log_kind}
    start = given["start"]
    if isinstance(start, str) and re.fullmatch(r"\d+(\.\d+)?", start):
        given["start"] = float(start)  # epoch seconds
    return {k: v for k, v in given.items() if v is not None}


def _trace_inputs(args: argparse.Namespace) -> None:
    """``--power`` for a trace file; a ``fingrav run`` folder brings its own capture (``args.power`` set to it)."""
    if is_run_folder(args.trace):
        if args.power is not None:
            raise ValueError(f"--power={args.power!r}: {args.trace!r} is a fingrav run folder, which holds its own "
                             "capture (power.npz); leave --power out")
        args.power = run_folder_paths(args.trace)[0]
    elif args.power is None:
        raise ValueError(f"--power: required with a trace file ({args.trace!r}): the power capture recorded beside "
                         "it; only a fingrav run folder holds its own")


@interruptible("trace")
def trace_command(args: argparse.Namespace) -> int:
    """``fingrav trace``: the in-situ profile printed; its Perfetto trace, figures and kernel table written."""
    import matplotlib

    matplotlib.use("Agg")

    _trace_inputs(args)
    # The folder and the files it will hold, before the trace is read and profiled: none is an input.
    check_output_path(args.out, "--out", folder=True)
    names: dict[str, Writes] = {"power_trace.json.gz": "trace", f"energy_by_kernel.{args.format}": "file",
             f"top_kernels.{args.format}": "file", "kernels.json": "file"}
    for name, kind in names.items() if os.path.isdir(args.out) else ():
        check_output_path(os.path.join(args.out, name), "--out", protect=[args.trace, args.power],
                          writes=kind, shown=f"--out={args.out!r}: {name}")
    annotate = _annotation_out(args)  # before the work: a refused output costs nothing
    # --annotate is none of --out's files: the second written would replace the first after all the work.
    check_distinct_outputs({"--annotate": annotate,
                            **{f"--out {name}": os.path.join(args.out, name) for name in names}})
    quiet = False if args.quiet else None
    try:
        with warnings.catch_warnings(), PhaseProgress("fingrav trace", force=quiet) as progress:
            # Said below, in the command's words, not as a Python warning with a source line.
            warnings.simplefilter("ignore", EnergyClosureWarning)
            progress.phase("reading the power capture")
            capture = load_power(args.power, device=args.device, sensor=args.sensor, power_log=_power_log_args(args))
            summary = power_log_summary(capture)
            if summary is not None:  # what the tool's log is taken to be: its clock, unit, bound and sensor
                print(summary)
            sensor = None if summary is not None else args.sensor  # the log's reader took --sensor
            progress.phase("reading and profiling the trace")
            tp = profile_trace(args.trace, capture, min_executions=args.min_executions,
                               sensor=sensor, device=args.device)
    except ValueError as exc:
        # The data, not the command line: logs that miss the trace, a capture without the trace's clock.
        if str(exc).startswith(("samples:", "trace:")):
            print(f"fingrav trace: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        raise
    report_trace_profile(args, tp, annotate, quiet, "trace")
    return EXIT_OK


def report_trace_profile(args: argparse.Namespace, tp: TraceProfile, annotate: Optional[str], quiet: Optional[bool],
                         command: str) -> None:
    """Print the per-kernel table and write ``fingrav trace``'s files (``fingrav run`` reports the same way).

    ``args`` holds ``out``, ``format``, ``top``, ``trace``, ``power``,
    ``device`` and ``force`` as ``fingrav trace`` parses them.
    """
    print(tp)
    if tp.closure is not None and not tp.closure.agrees:
        print(f"fingrav {command}: warning: {tp.closure.explain()}", file=sys.stderr)
    with PhaseProgress(f"fingrav {command}", force=quiet) as progress:
        written = _trace_outputs(args, tp, annotate, progress)
    for p in written:
        print(p)
    print("open power_trace.json.gz in https://ui.perfetto.dev")


def _trace_outputs(args: argparse.Namespace, tp: TraceProfile, annotate: Optional[str],
                   progress: PhaseProgress) -> list[str]:
    """``fingrav trace``'s files: the Perfetto trace, the figures, kernels.json and the annotated trace."""
    import matplotlib.pyplot as plt

    os.makedirs(args.out, exist_ok=True)
    progress.phase("writing the Perfetto trace")
    written = [export_trace(tp, os.path.join(args.out, "power_trace.json.gz"))]
    progress.phase("drawing the figures")
    fig = fplot.plot_kernel_energy(tp).figure
    for name, f in (("energy_by_kernel", fig), ("top_kernels", fplot.figure_trace_profiles(tp, top=args.top))):
        path = os.path.join(args.out, f"{name}.{args.format}")
        write_atomically(path, functools.partial(f.savefig, dpi=120, format=args.format))
        plt.close(f)
        written.append(path)
    progress.phase("writing kernels.json")
    rows = [{"name": str(r["name"]), "grid": r["grid"].tolist(), "block": r["block"].tolist(),
             **{k: (r[k].item() if np.isfinite(r[k]) else None) if r[k].dtype.kind == "f" else int(r[k])
                for k in ("count", "golden", "warmup", "duration_ns", "power_w", "energy_j",
                          "energy_half_width_j", "share")},
             # A communication kernel beside compute: its additive level x its duration (the table's [j]); a coarse
             # row [c]; the joint row [g] of the signatures without a row of their own (their labels in "members").
             "joint": bool(r["joint"]) if "joint" in (r.dtype.names or ()) else False,
             **({"members": tp.joint_members()} if int(sid) < 0 else {})}
            for r, sid in zip(tp.kernels, tp.signature_rows)]
    # Without --device the trace held one GPU's kernels.
    device = args.device if args.device is not None else int(np.unique(tp.trace.device)[0])
    doc = {"trace": os.path.abspath(args.trace), "power": os.path.abspath(args.power), "sensor": tp.sensor,
           "trace_clock": tp.trace.clock, "device": device,
           "device_numbering": tp.trace.device_numbering,
           "kernels": rows, "concurrent": tp.concurrent, "skipped": tp.skipped,
           "skipped_by_reason": {words: len(labels) for words, labels in tp.skipped_by_reason()},
           "warnings": list(tp.warnings),
           "iterations": None if tp.summary is None else dataclasses.asdict(tp.summary),
           "span": None if tp.span is None else summary_json(dataclasses.asdict(tp.span)),
           # Compute kernels on several streams: their spans' energy, split per row (row_* follow "kernels").
           "concurrency": None if tp.concurrency is None else summary_json(dataclasses.asdict(tp.concurrency)),
           "closure": _closure_doc(tp)}
    # Strict JSON: a value not determined (NaN) is null, as in every JSON file the package writes.
    written.append(write_json(os.path.join(args.out, "kernels.json"), doc))
    if annotate is not None:
        progress.phase("annotating the trace")
        written.append(annotate_trace(args.trace, tp, annotate, overwrite=args.force))
    return written
