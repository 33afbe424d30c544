"""The ``fingrav`` commands that measure a device: ``sync``, ``characterize``, ``devices``."""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from fingrav_native.app._characterize import characterize
from fingrav_native.app._cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    choose_device,
    interruptible,
    make_backend,
    resolve_kernel,
)
from fingrav_native.app._cli_ranges import CHARACTERIZE_MAX_RUN_MS, SYNC_MAX_READS
from fingrav_native.app._plot import plot_sync_error
from fingrav_native.app._sync import sync_report
from fingrav_native.backends._devices import format_reports, list_backends
from fingrav_native.backends._registry import DEVICES
from fingrav_native.files._characterisation import read_logs_csv, save_characterisation
from fingrav_native.files._outputs import check_output_path, strict_json, write_atomically
from fingrav_native.sensors._from_logs import characterize_logs

#: The figure formats ``sync --out`` takes, by the file name's extension.
_FIGURE_FORMATS = (".png", ".pdf", ".svg")


def _check_plot(path: str | None) -> str | None:
    """``--out FILE`` (or ``--plot``): a file the figure can go to, its format named by its extension (checked before any read)."""
    if path is None:
        return None
    check_output_path(path, "--out")
    ext = os.path.splitext(path)[1].lower()
    if ext not in _FIGURE_FORMATS:
        # matplotlib would add ".png" to a name without one (and print nothing of it): the file named is the file.
        raise ValueError(f"--out={path!r}: give a file name ending {', '.join(_FIGURE_FORMATS)} (the format is "
                         "read from it)")
    return ext[1:]


@interruptible("sync")
def sync_command(args: argparse.Namespace) -> int:
    """``fingrav sync``: the clock-sync report, as text or JSON, and the figure asked for."""
    figure_format = _check_plot(args.plot)
    # Each option is in range (parse time); together they must not ask for
    # more reads than memory holds. sync_report takes this many bursts.
    bursts = max(2, int(args.seconds / (args.interval_ms / 1e3)) + 1)
    if bursts * args.burst > SYNC_MAX_READS:
        raise ValueError(f"--seconds={args.seconds:g}, --interval-ms={args.interval_ms:g}, --burst={args.burst}: "
                         f"{bursts:,} bursts of {args.burst} reads is more than {SYNC_MAX_READS:,}; take fewer "
                         "seconds, a longer interval or smaller bursts")
    choice = choose_device(args.backend, args.device, args.seed)
    backend = make_backend(choice.kind, choice.index, choice.seed, choice.mode)
    report = sync_report(backend, seconds=args.seconds, burst=args.burst, interval_s=args.interval_ms / 1e3)
    if args.json:
        print(json.dumps(strict_json(report.as_dict()), indent=1, allow_nan=False))
    else:
        print(report.format())
    if args.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = plot_sync_error(report.brackets, report.piecewise or report.linear)
        write_atomically(args.plot, lambda tmp: ax.figure.savefig(tmp, dpi=120, format=figure_format))
        plt.close(ax.figure)
        print(args.plot)
    return EXIT_OK


#: What ``fingrav characterize`` runs a device with, and each option's default (None in the parser: given or not;
#: the device's defaults are choose_device's).
_DEVICE_OPTIONS = {"backend": None, "device": None, "seed": None, "kernel": "cb-8k-gemm", "light": "mb-2k-gemv",
                   "runs": 40, "cycles": 4, "half_period_ms": None}


def _characterize_options(args: argparse.Namespace) -> None:
    """The device options, defaults filled in; with ``--logs`` (no device runs) any given is refused, not ignored."""
    if args.logs is None and (args.load is not None or args.meter is not None):
        raise ValueError(f"--{'load' if args.load is not None else 'meter'}: describes logs recorded elsewhere; "
                         "give --logs with it")
    if args.logs is not None and args.load is None and args.meter is None:
        raise ValueError("--logs, --load: give both (logs recorded elsewhere and the load's on-intervals) or neither; "
                         "with a reference meter's log (--meter) the load may be left out")
    given = [name for name in _DEVICE_OPTIONS if getattr(args, name) is not None]
    if args.logs is not None and given:
        raise ValueError(f"--{given[0].replace('_', '-')}: runs a device; with --logs the logs are characterised "
                         "as recorded, no device runs: leave it out")
    for name, default in _DEVICE_OPTIONS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.logs is None:
        # The device as one choice (a device string, or --backend/--device/--seed): the rest of the command reads it.
        choice = choose_device(args.backend, args.device, args.seed)
        args.backend, args.device, args.seed, args.device_mode = choice.kind, choice.index, choice.seed, choice.mode


@interruptible("characterize")
def characterize_command(args: argparse.Namespace) -> int:
    """``fingrav characterize``: the sensor fitted, printed, and written where asked."""
    _characterize_options(args)
    # Before minutes of runs: an --out the disk refuses would throw them away.
    if args.out is not None:
        check_output_path(args.out, "--out", writes="characterisation", protect=[args.logs, args.load, args.meter])
    # Each option is in range (parse time); together they bound one run's length.
    if args.half_period_ms is not None and 2 * args.cycles * args.half_period_ms > CHARACTERIZE_MAX_RUN_MS:
        raise ValueError(f"--cycles={args.cycles}, --half-period-ms={args.half_period_ms:g}: runs of "
                         f"{2 * args.cycles * args.half_period_ms / 60_000:.1f} minutes (2 x cycles x half period) "
                         f"are longer than the {CHARACTERIZE_MAX_RUN_MS // 60_000} allowed; take fewer cycles or "
                         "a shorter half period")
    if args.logs is not None:
        t, p = read_logs_csv(args.logs, ("t_ns", "power_w"), "--logs")
        # Beside a meter the load only annotates (the fit is to the meter's power), so it may be absent.
        load = (np.column_stack(read_logs_csv(args.load, ("start_ns", "end_ns"), "--load"))
                if args.load is not None else np.zeros((0, 2), dtype=np.int64))
        reference = None
        if args.meter is not None:
            tm, pm = read_logs_csv(args.meter, ("t_ns", "power_w"), "--meter")
            reference = (tm, pm)
        c = characterize_logs(t, p, load, reference=reference, device=f"logs {os.path.basename(args.logs)}")
    else:
        # The kernels before the device: an unknown one is refused without opening anything.
        kernel = resolve_kernel(args.backend, args.kernel)
        light = resolve_kernel(args.backend, args.light)
        backend = make_backend(args.backend, args.device, args.seed, args.device_mode)
        # The hardware backends take a Workload where the protocol says KernelSpec; the runtime contract is
        # the same.
        c = characterize(backend, kernel, light, runs=args.runs, cycles=args.cycles,
                         half_period_ns=None if args.half_period_ms is None else args.half_period_ms * 1e6)
    if args.out is not None:
        save_characterisation(c, args.out)
    if args.json:
        print(json.dumps(strict_json(c.as_dict()), indent=2, allow_nan=False))
        return EXIT_OK
    s, st = c.sensor, c.step
    print(f"sensor of {c.device}: {s.kind}, period {s.period_ns / 1e3:.1f} us "
          f"(+-{c.period.uncertainty_ns / 1e3:.2f}, jitter {c.period.jitter_ns / 1e3:.1f} us)")
    if st is not None:
        length = (f"boxcar window {st.window_ns / 1e3:.1f} +- {st.window_err_ns / 1e3:.1f} us" if st.shape == "boxcar"
                  else f"first-order filter, tau {st.tau_ns / 1e3:.1f} +- {st.tau_err_ns / 1e3:.1f} us")
        print(f"  {length}; delay {st.delay_ns / 1e3:.1f} +- {st.delay_err_ns / 1e3:.1f} us; "
              f"10-90 % rise {st.rise_ns / 1e3:.1f} us")
        print(f"  fit residual {st.residual_w:.1f} W over {st.logs} logs (the other shape: {st.other_residual_w:.1f} W)")
    # What the measurement could not settle (a reader's lag, halves that disagree), as the notes say it.
    for note in c.notes.split("; "):
        if note.startswith("the logs are a host tool's polls") or "halves" in note:
            print(f"  note: {note}")
    if args.out is not None:
        print(f"  written to {args.out}")
    return EXIT_OK


@interruptible("devices")
def devices_command(args: argparse.Namespace) -> int:
    """``fingrav devices``: each backend's report; exit code 0 where the hardware asked about is there."""
    reports = list_backends(args.backend)
    if args.json:
        print(json.dumps(strict_json([r.as_dict() for r in reports]), indent=2, allow_nan=False))
    else:
        print(format_reports(reports, verbose=args.verbose))
    if args.backend:
        return EXIT_OK if all(r.available for r in reports) else EXIT_FAILURE
    # Without --backend the question a script asks is "is there real hardware here?"
    simulated = {name for name, kind in DEVICES.items() if kind.simulated}
    return EXIT_OK if any(r.available for r in reports if r.backend not in simulated) else EXIT_FAILURE
