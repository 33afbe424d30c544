"""``fingrav record`` and ``fingrav run``: the recorder (and the launch capture) around any application."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Optional

from fingrav_native.app._child import (
    CommandNotRunnableError,
    ForwardedSignals,
    exit_status,
    find_command,
)
from fingrav_native.app._cli_common import EXIT_FAILURE, EXIT_OK
from fingrav_native.app._recorder import PowerRecorder
from fingrav_native.files._outputs import check_output_path
from fingrav_native.files._run_folder import has_launch_files, run_folder_paths

__all__ = ["DEFAULT_LAUNCH_CAPACITY", "attribute_run", "child_command", "launch_environment", "record_command",
           "recorded_out", "report_launches", "run_child", "run_command", "say"]


def say(command: str, text: str) -> None:
    """One of fingrav's own lines: on stderr, prefixed, so the application's output stays as it is."""
    print(f"fingrav {command}: {text}", file=sys.stderr, flush=True)


def child_command(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse keeps the ``--`` in a remainder when it opens it)."""
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return cmd


def recorded_out(path: str, force: bool, option: str = "--out") -> str:
    """The capture's path, checked before anything runs: an existing file only with ``--force``, and only a capture."""
    return check_output_path(path, option, writes="capture", overwrite=force,
                             why="a capture is not written over unless asked")


def _record_args(args: argparse.Namespace) -> tuple[list[str], str]:
    """The command and the capture's path of ``fingrav record``, checked by name."""
    cmd = child_command(args)
    if cmd and args.seconds is not None:
        raise ValueError(f"--seconds={args.seconds:g}: records for a time without a command; with a command the "
                         "recording lasts as long as the command: give one or the other")
    if not cmd and args.seconds is None:
        raise ValueError("no command: give the command to record around after -- (fingrav record --device DEV "
                         "--out power.npz -- CMD [ARGS]), or --seconds N to record for a time")
    return cmd, recorded_out(args.out, args.force)


def record_command(args: argparse.Namespace) -> int:
    """``fingrav record``: the device's power saved around CMD (its exit status returned) or for ``--seconds``."""
    cmd, out = _record_args(args)
    if cmd:
        try:
            find_command(cmd)
        except CommandNotRunnableError as exc:
            say("record", f"{exc}; nothing was recorded")
            return exc.exit_code
    try:
        with ForwardedSignals() as signals, PowerRecorder(args.device, out) as rec:
            code = run_child(cmd, signals) if cmd else _wait(float(args.seconds), signals)
    except CommandNotRunnableError as exc:
        say("record", f"{exc}; the capture of the time it took is saved to {out}")
        return exc.exit_code
    capture = rec.capture
    span = (int(capture.epoch_brackets[-1, 1]) - int(capture.epoch_brackets[0, 1])) / 1e9
    say("record", f"{len(capture)} power logs over {span:.2f} s saved to {out}")
    return code


def run_child(cmd: list[str], signals: ForwardedSignals, env: Optional[dict[str, str]] = None) -> int:
    """Run ``cmd`` to its end with the signals forwarded; its exit status as a shell reports it."""
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as exc:  # found on PATH, refused by exec (a script without its interpreter, ENOEXEC)
        raise CommandNotRunnableError(f"{cmd[0]}: cannot be executed ({exc.strerror or exc})", 126) from exc
    signals.attach(child)
    return exit_status(child.wait())


def _wait(seconds: float, signals: ForwardedSignals) -> int:
    """Sleep ``seconds`` (a forwarded signal ends it early: 128 + its number, as for a command it ended)."""
    end = time.monotonic() + seconds
    while not signals.received:
        left = end - time.monotonic()
        if left <= 0:
            return EXIT_OK
        time.sleep(min(left, 0.05))
    return 128 + signals.received[0]


#: What a ``fingrav run`` folder may already hold for ``--force`` to reuse it: the files an earlier run wrote.
_RUN_FILES = ("power.npz", "launches", "power_trace.json.gz", "kernels.json")
_RUN_PREFIXES = ("energy_by_kernel.", "top_kernels.", "sim.device")

#: The launch ring's capacity when ``FINGRAV_LAUNCH_CAPACITY`` is not set (the contract's default, records).
DEFAULT_LAUNCH_CAPACITY = 1 << 16


def _run_folder(path: str, force: bool) -> str:
    """``--out`` of ``fingrav run``: a new folder, or with ``--force`` one an earlier run wrote (its launch files go)."""
    out = check_output_path(path, "--out", folder=True)
    entries = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if entries and not force:
        raise ValueError(f"--out={out!r}: exists and is not empty; a run's records are never mixed with or written "
                         "over others: choose another folder, or give --force to replace an earlier fingrav run's")
    foreign = [e for e in entries if e not in _RUN_FILES and not e.startswith(_RUN_PREFIXES)]
    if foreign:
        raise ValueError(f"--out={out!r}: holds {foreign[0]!r}, which no fingrav run wrote; --force replaces only "
                         "an earlier run's files: choose another folder")
    power, launches = run_folder_paths(out)
    if os.path.isdir(launches):
        for name in os.listdir(launches):
            if name.startswith("launches.") and name.endswith(".journal"):
                os.unlink(os.path.join(launches, name))  # an earlier run's records, replaced as --force asks
    if os.path.lexists(power):
        recorded_out(power, force=True, option="--out")
    for name in entries:
        if name.startswith("sim.device"):  # an earlier run's shared simulated GPU and its truth, as --force asks
            target = os.path.join(out, name)
            shutil.rmtree(target) if os.path.isdir(target) else os.unlink(target)
    os.makedirs(launches, exist_ok=True)
    return out


def _default_device() -> str:
    """The first GPU found, NVIDIA's then AMD's (``--device`` left out)."""
    from fingrav_native.app._open import resolve_device

    tried = []
    for device in ("nvidia:0", "amd:0"):
        try:
            resolve_device(device)
            return device
        except (RuntimeError, OSError) as exc:
            tried.append(f"{device}: {exc}")
    raise ValueError("--device: no GPU found here (" + "; ".join(tried) + "); give --device (sim for the simulated "
                     "GPU)")


def _tool(vendor: str) -> str:
    """The installed launch-capture tool library for ``vendor`` (a FileNotFoundError names it and how to build it)."""
    from fingrav_native._tools import tool_library

    return tool_library(vendor)


def _has_tool(vendor: str) -> bool:
    """Whether ``vendor``'s tool is installed (the CUPTI one is built only where CUPTI's headers were found)."""
    try:
        _tool(vendor)
    except FileNotFoundError:
        return False
    return True


def launch_environment(device: str, launches: str, env: dict[str, str]) -> dict[str, str]:
    """The variables ``fingrav run`` sets for the application on ``device``: the launch folder and the tool.

    ROCm loads a tool library through ``ROCP_TOOL_LIBRARIES`` (appended to a
    value already there: rocprofiler-sdk loads each), CUDA through
    ``CUDA_INJECTION64_PATH`` (one library: one already set is refused,
    never replaced). ``sim`` sets both (the CUDA one where its tool was
    built) for the stand-in runtimes of the simulated application.
    ``sim-live`` runs inside fingrav, so only the launch folder is set: an
    application writes its own launch file there.
    """
    from fingrav_native.app._open import parse_device

    vendor = parse_device(device).vendor
    out = {"FINGRAV_LAUNCH_DIR": launches}
    if vendor in ("amd", "sim"):
        lib, previous = _tool("rocm"), env.get("ROCP_TOOL_LIBRARIES")
        out["ROCP_TOOL_LIBRARIES"] = f"{previous}:{lib}" if previous else lib
    if vendor == "nvidia" or (vendor == "sim" and _has_tool("cuda")):
        lib, previous = _tool("cuda"), env.get("CUDA_INJECTION64_PATH")
        if previous and previous != lib:
            raise ValueError(f"CUDA_INJECTION64_PATH={previous!r} is set already (another CUDA injection: Nsight, "
                             "a profiler); CUDA loads one, and replacing it would silently drop that tool: unset "
                             "it to run under fingrav run")
        out["CUDA_INJECTION64_PATH"] = lib
    return out


#: The shared simulated GPU's file in a ``fingrav run --device sim`` folder (its truth is written beside it).
SIM_DEVICE_FILE = "sim.device"


def _recorded_device(device: str, out: str, env: dict[str, str]) -> object:
    """What the recorder records for ``device``: for ``sim`` the shared simulated GPU, made in ``out`` and named in
    ``env`` (``FINGRAV_SIM_DEVICE``) for the simulated application."""
    from fingrav_native.app._open import parse_device
    from fingrav_native.sim._shared import SharedSimGPU

    if parse_device(device).vendor != "sim":
        return device
    gpu = SharedSimGPU.create(os.path.join(os.path.abspath(out), SIM_DEVICE_FILE), seed=parse_device(device).index)
    env["FINGRAV_SIM_DEVICE"] = gpu.path
    return gpu


def run_command(args: argparse.Namespace) -> int:
    """``fingrav run``: CMD with the launch capture injected and its power recorded; the per-kernel table."""
    cmd = child_command(args)
    if not cmd:
        raise ValueError("no command: give the application after -- (fingrav run --device DEV --out DIR -- CMD "
                         "[ARGS])")
    from fingrav_native.app._open import parse_device

    device = args.device if args.device is not None else _default_device()
    parse_device(device)  # an unknown device string refused before the folder is made
    try:
        find_command(cmd)
    except CommandNotRunnableError as exc:
        say("run", f"{exc}; nothing was run or recorded")
        return exc.exit_code
    # The tool's variables first (a tool missing, an injection already set): refused before the folder is made.
    injected = launch_environment(device, run_folder_paths(os.path.abspath(args.out))[1], dict(os.environ))
    out = _run_folder(args.out, args.force)
    power, launches = run_folder_paths(out)
    recorded = _recorded_device(device, out, injected)
    try:
        with ForwardedSignals() as signals, PowerRecorder(recorded, power):
            code = run_child(cmd, signals, {**os.environ, **injected})
    except CommandNotRunnableError as exc:
        say("run", f"{exc}; the power of the time it took is saved to {power}")
        return exc.exit_code
    if code != EXIT_OK:
        say("run", f"the application exited with status {code}; its launch records and power are attributed")
    attributed = attribute_run(args, out, injected)
    return code if code != EXIT_OK else attributed


def _no_launches(launches: str, injected: dict[str, str], notes: list[dict[str, str]]) -> int:
    """Say plainly that no launch record came, which variable was set and what to check; exit 1."""
    tools = [f"{k}={v}" for k, v in injected.items() if k != "FINGRAV_LAUNCH_DIR"]
    said = (f"no kernel launch was recorded in {launches}: the launch-capture tool did not load in the application, "
            "or the application launched no kernel. ")
    if tools:
        said += (f"{' and '.join(tools)} and FINGRAV_LAUNCH_DIR={launches} were set for it: check that it runs on "
                 "the GPU runtime that loads the tool (ROCm 6.2+ with rocprofiler-sdk; CUDA with CUPTI), and that "
                 "no launcher script or container clears those variables")
    else:
        said += (f"FINGRAV_LAUNCH_DIR={launches} was set for it; on this device nothing else loads a tool: the "
                 "application writes its launch file itself")
    for note in notes:
        said += f"; the tool noted {note.get('key')}: {note.get('text')}"
    say("run", said + f". The power recorded is kept in {os.path.join(os.path.dirname(launches), 'power.npz')}")
    return EXIT_FAILURE


def report_launches(log: Any, launches: str) -> None:
    """The launch records in one line: how many, from which processes, on which clock; drops and notes, each said."""
    processes = len(getattr(log, "pids", ()) or (1,))
    say("run", f"{len(log.records)} kernel executions of {len(set(log.names))} kernel name(s) recorded by the "
               f"{log.vendor} tool in {processes} process(es), stamped on {log.clock}, beside the power in "
               f"{os.path.join(os.path.dirname(launches), 'power.npz')}")
    if len(log.brackets):
        from fingrav_native.clocks._record_clocks import record_clock_error

        e = record_clock_error(log.brackets, log.clock)
        # The record clock is placed on the sampler's through these brackets: their width bounds each
        # placement, their offset spread is what a constant offset misses (NTP slew, a wall-clock step).
        say("run", f"launch clock {log.clock} against the sampler's CLOCK_MONOTONIC_RAW: {e.reads} bracketed reads "
                   f"over {e.span_ns / 1e9:.2f} s, width median {e.width_p50_ns:.0f} ns (max {e.width_max_ns:.0f} "
                   f"ns), offset spread {e.offset_spread_ns:.0f} ns")
    dropped, vendor_dropped = int(log.dropped), int(log.vendor_dropped)
    if dropped:
        heads: tuple[dict[str, Any], ...] = tuple(getattr(log, "heads", ())) or ({},)
        capacity = heads[0].get("capacity") or DEFAULT_LAUNCH_CAPACITY
        say("run", f"warning: {dropped} launch record(s) were dropped: the tool's ring (capacity {capacity} records) "
                   "was full; set FINGRAV_LAUNCH_CAPACITY to a larger power of two and run again. The kernels "
                   "dropped are missing from the table")
    if vendor_dropped:
        say("run", f"warning: the {log.vendor} runtime itself reported {vendor_dropped} launch record(s) lost; "
                   "those kernels are missing from the table")
    for note in log.notes:
        say("run", f"note from the tool ({note.get('key')}): {note.get('text')}")
    if not log.closed:
        say("run", f"warning: a launch file in {launches} was not closed (the application was killed?); the records "
                   "up to its last flush are used")


def attribute_run(args: argparse.Namespace, out: str, injected: dict[str, str]) -> int:
    """Read the launch records of a ``fingrav run`` folder, attribute its power, print and write as ``fingrav trace``."""
    import warnings

    from fingrav_native.app._cli_files import report_trace_profile
    from fingrav_native.app._trace import profile_trace
    from fingrav_native.clocks._epoch import ClockStepWarning
    from fingrav_native.files._launches import read_launches
    from fingrav_native.insitu._align import ClockMismatchWarning

    power, launches = run_folder_paths(out)
    if not has_launch_files(launches):
        return _no_launches(launches, injected, [])
    log = read_launches(launches)
    if not len(log.records):
        return _no_launches(launches, injected, list(log.notes))
    report_launches(log, launches)
    with warnings.catch_warnings(record=True) as caught:
        # The record clock's two warnings are the run's own findings (a clock stepped in the application, the
        # launch file's clock against the recorder's): said as fingrav's lines, never Python's warning format.
        warnings.simplefilter("always", ClockMismatchWarning)
        warnings.simplefilter("always", ClockStepWarning)
        try:
            tp = profile_trace(out, min_executions=args.min_executions)
        except ValueError as exc:
            if str(exc).startswith(("samples:", "trace:")):
                say("run", str(exc))
                return EXIT_FAILURE
            raise
    for w in caught:
        if issubclass(w.category, (ClockMismatchWarning, ClockStepWarning)):
            say("run", f"warning: {w.message}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    view = argparse.Namespace(out=out, format=args.format, top=args.top, trace=out, power=power, device=None,
                              force=False)
    report_trace_profile(view, tp, None, False if args.quiet else None, "run")
    return EXIT_OK
