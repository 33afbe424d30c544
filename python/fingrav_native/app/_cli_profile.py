"""``fingrav profile``: a campaign into its folder, and ``--resume`` of an interrupted one."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, cast

from fingrav_native._checks import fraction
from fingrav_native.app._cli_common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    DeviceChoice,
    SigintOnce,
    choose_device,
    make_backend,
    resolve_kernel,
)
from fingrav_native.app._cli_files import plot_command
from fingrav_native.app._cli_ranges import DEVICE, EXECUTIONS, MARGIN, RUNS, SEED, within
from fingrav_native.app._profile import profile
from fingrav_native.app._progress import ProgressReporter, TerminalProgress
from fingrav_native.backends._registry import kinds
from fingrav_native.files._campaign import (
    COMMAND_FILE,
    PROFILE_FILE,
    CampaignFormatError,
    campaign_contents,
    read_json_file,
    run_files,
    tag_nonfinite,
)
from fingrav_native.files._campaign_lock import in_use, lock_campaign, lock_holder
from fingrav_native.files._outputs import COMMAND_FORMAT, check_output_path, write_json
from fingrav_native.files._trace import export_trace
from fingrav_native.method._phase_modes import PHASES
from fingrav_native.method._results import Profile

#: What ``--mode`` takes.
_MODES = ("sse", "ssp", "both")


#: command.json's fields: what each must be (as the options that wrote them), in words for the message.
_COMMAND_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "kernel": (lambda v: isinstance(v, str) and v != "", "a kernel name"),
    "backend": (lambda v: v in kinds(), f"one of {', '.join(kinds())}"),
    "device": (lambda v: within(DEVICE, v), f"{DEVICE}"),
    "mode": (lambda v: v in _MODES, f"one of {', '.join(_MODES)}"),
    "runs": (lambda v: within(RUNS, v, optional=True), f"{RUNS} or null"),
    "margin": (lambda v: within(MARGIN, v, optional=True, number=True), f"{MARGIN} or null"),
    "executions": (lambda v: within(EXECUTIONS, v, optional=True), f"{EXECUTIONS} or null"),
    "seed": (lambda v: within(SEED, v), f"{SEED}"),
}


def _read_command(path: str) -> dict[str, Any]:
    """``command.json`` of a campaign folder, every field checked (CampaignFormatError names file and field)."""
    # Through the guarded reader: a link to /dev/zero or a FIFO in its place is named, not read without end.
    saved = read_json_file(path, "restore it to resume")
    if not isinstance(saved, dict):
        raise CampaignFormatError(f"{path}: must be a JSON object of the command's settings, "
                                  f"not a {type(saved).__name__}; restore it to resume")
    # Folders written before phase steering existed ran at random phase.
    fields = {**_COMMAND_FIELDS, "phase": (lambda v: v in PHASES, f"one of {', '.join(PHASES)}"),
              "device_mode": (lambda v: v is None or (isinstance(v, str) and v.isidentifier()),
                              "a power mode of the device string (nvidia:0:instant) or null")}
    saved.setdefault("phase", "random")
    # Folders started with --backend/--device N (or before device strings) name no mode: the backend's default.
    saved.setdefault("device_mode", None)
    for key, (ok, what) in fields.items():
        if key not in saved or not ok(saved[key]):
            got = "missing" if key not in saved else f"not {repr(saved[key])[:60]}"
            raise CampaignFormatError(f"{path}: field {key!r} must be {what} ({got}); restore it to resume")
    return {key: saved[key] for key in fields}


def _refuse_a_campaign(out: str) -> None:
    """A new campaign never goes into a folder that holds one (``--out``); one another process is writing is in use."""
    if os.path.lexists(os.path.join(out, COMMAND_FILE)) or campaign_contents(out):
        # Started moments ago by another process (a start racing this one):
        # the folder is in use, as the lock would say, not a campaign to resume.
        holder = lock_holder(out)
        if holder is not None:
            raise in_use(out, holder)
    if os.path.exists(os.path.join(out, COMMAND_FILE)):
        raise ValueError(f"--out={out!r}: already holds a campaign; continue it with --resume {out} "
                         "or choose another folder")
    held = campaign_contents(out)
    if held:
        raise ValueError(f"--out={out!r}: already holds a campaign ({' and '.join(held)}, written by "
                         "profile(out_dir=...)); choose another folder")


def _write_json_atomic(path: str, value: dict[str, Any]) -> None:
    """``value`` as JSON at ``path``, whole or not at all: a resume never reads half of it."""
    write_json(path, tag_nonfinite(value))


def profile_command(args: argparse.Namespace, *, as_program: bool = False) -> int:
    """``fingrav profile``; Ctrl-C ends it with exit code 130 and says how to resume."""
    with SigintOnce(keep_ignoring=as_program) as sigint:
        try:
            return _run_profile_command(args)
        except KeyboardInterrupt:
            sigint.ignore()
            out = _campaign_folder(args)
            if out and os.path.exists(os.path.join(out, COMMAND_FILE)):
                # Counted by name: reading every run would widen the window for another Ctrl-C for nothing.
                done = len(run_files(out))
                print(f"fingrav profile: interrupted; {done} completed runs are in {out}/runs/. "
                      f"Continue with: fingrav profile --resume {out}", file=sys.stderr)
            else:
                print("fingrav profile: interrupted before the campaign started", file=sys.stderr)
            return EXIT_INTERRUPTED


def _campaign_folder(args: argparse.Namespace) -> str | None:
    """The folder `fingrav profile` works in (None without a kernel, --out or --resume)."""
    # An option given empty is not the option left out: it is refused, not replaced by the default.
    if args.resume is not None:
        return str(args.resume)
    if args.out is not None:
        return str(args.out)
    return f"fingrav-{args.kernel.replace(':', '-').replace('.', '-')}" if args.kernel else None


def _run_profile_command(args: argparse.Namespace) -> int:
    """The command's work: check the request, open the device and folder, profile, print and write."""
    resume = args.resume is not None
    request, out = _resumed_request(args) if resume else _new_request(args)
    _check_request(request)
    # The folder first: it is checked before a workload module is imported
    # and its function called (user code), and before a device is opened.
    option = "--resume" if resume else "--out"
    check_output_path(out, option, folder=True)
    if not resume:
        _refuse_a_campaign(out)
    kernel = resolve_kernel(request["backend"], request["kernel"])
    backend = make_backend(request["backend"], request["device"], request["seed"], request["device_mode"])
    _make_folder(out, option)
    reporter = ProgressReporter() if args.quiet else TerminalProgress()
    # The folder is locked before anything is written in it (command.json
    # included) and until the profile is saved: a second process, starting or
    # resuming, is refused with the holder's pid and writes nothing.
    with lock_campaign(out):
        if not resume:
            _refuse_a_campaign(out)  # again under the lock: another process may have started one meanwhile
            # Its format named, so the output guard knows the file by its content wherever it is copied.
            # The mode only where one was named: a folder without it reads as before.
            written = {k: v for k, v in request.items() if k != "device_mode" or v is not None}
            _write_json_atomic(os.path.join(out, COMMAND_FILE), {"format": COMMAND_FORMAT, **written})
        prof = profile(kernel, backend, mode=request["mode"], runs=request["runs"],  # type: ignore[arg-type]
                       margin=request["margin"], executions=request["executions"], seed=request["seed"],
                       out_dir=out, resume=resume, progress=reporter, phase=request["phase"])
    _print_profile(prof, out)
    if args.trace:
        print(export_trace(prof, os.path.join(out, "profile.trace.json")))
    if args.plots:
        plot_command(argparse.Namespace(profile=[os.path.join(out, PROFILE_FILE)], out=out, format="png",
                                        dpi=120))
    return EXIT_OK


def _resumed_request(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """``--resume DIR``: the request its ``command.json`` records (options given must agree), and DIR."""
    if args.resume == "":
        raise ValueError("--resume='': empty; give the campaign folder fingrav profile wrote")
    if args.out is not None and os.path.abspath(args.out) != os.path.abspath(args.resume):
        raise ValueError(f"--out={args.out!r}: --resume continues in its own folder ({args.resume!r})")
    if os.path.exists(args.resume) and not os.path.isdir(args.resume):
        raise ValueError(f"--resume={args.resume!r}: is a file; give the campaign folder fingrav profile wrote")
    path = os.path.join(args.resume, COMMAND_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"--resume={args.resume!r}: no {COMMAND_FILE} there; not a folder written "
                                "by fingrav profile")
    saved = _read_command(path)
    given = {k: getattr(args, k) for k in ("kernel", "backend", "device", "mode", "runs", "margin",
                                           "executions", "seed", "phase")}
    if isinstance(args.device, str):
        # A device string given on resume must name the device the campaign was started on.
        choice = choose_device(args.backend, args.device, args.seed, seed_used=True)
        started = DeviceChoice(saved["backend"], saved["device"], saved["seed"], saved["device_mode"])
        if choice.string != started.string:
            raise ValueError(f"--device={args.device!r}: the campaign in {args.resume!r} was started on "
                             f"{started.string!r}; --resume uses the settings it was started with")
        given.update(backend=None, device=None)  # --seed, where given, is compared as ever
    for key, value in given.items():
        if value is not None and value != saved.get(key):
            raise ValueError(f"--{key}={value!r}: the campaign in {args.resume!r} was started with "
                             f"{saved.get(key)!r}; --resume uses the settings it was started with")
    return saved, str(args.resume)


def _new_request(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """A new campaign: the request from the options (defaults filled in), and its folder."""
    if not args.kernel:
        raise ValueError("kernel: give a preset or module:function (or --resume DIR)")
    # The seed also seeds the launch-phase dither on hardware: only --device can mean nothing here.
    choice = choose_device(args.backend, args.device, args.seed, seed_used=True)
    if args.executions is not None and args.mode == "sse":
        # SSE runs have the four executions the SSE needs (Section IV-A): a count given would be ignored.
        raise ValueError(f"--executions={args.executions}: sets the executions per run of SSP runs; --mode sse "
                         "profiles the SSE execution of four-execution runs: leave --executions out, or use "
                         "--mode ssp or both")
    request = {"kernel": args.kernel, "backend": choice.kind, "device": choice.index,
               "mode": args.mode or "both", "runs": args.runs, "margin": args.margin,
               "executions": args.executions, "seed": choice.seed,
               "phase": args.phase or "auto", "device_mode": choice.mode}
    return request, cast(str, _campaign_folder(args))


def _check_request(request: dict[str, Any]) -> None:
    """The campaign's numbers, as profile() takes them (a resumed request was checked as read, a new one parsed)."""
    if request["runs"] is not None and request["runs"] < 2:
        raise ValueError(f"--runs={request['runs']}: must be >= 2")
    if request["margin"] is not None:
        fraction(request["margin"], "--margin")
    if request["executions"] is not None and request["executions"] < 4:
        raise ValueError(f"--executions={request['executions']}: must be >= 4")


def _make_folder(out: str, option: str) -> None:
    """Create the campaign folder (checked by ``check_output_path``); one the disk still refuses names the option."""
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise OSError(f"{option}={out!r}: cannot create the folder ({exc.strerror or exc}); "
                      "choose another") from exc


def _print_profile(prof: Profile, out: str) -> None:
    """The profile, its error budget, what the logs were, and where it was saved."""
    print(prof)
    b = prof.error_budget
    print(f"  error budget (median per LOI, +-): clock map {b.clock_map_ns / 1e3:.2f} us, kernel start "
          f"{b.marker_ns / 1e3:.2f} us, logger window {b.logger_window_ns / 1e3:.2f} us -> total "
          f"{b.total_ns / 1e3:.2f} us")
    # What the logs were and where each logger figure came from (documented,
    # measured or assumed): a window nobody published or measured is the
    # budget's silent gap.
    caps = prof.backend
    if caps.sensor_semantics:
        print(f"  sensor: {caps.sensor_semantics}")
    if caps.provenance:
        print(f"  figures: {caps.describe_figures()}")
    print(os.path.join(out, PROFILE_FILE))
