"""The ``fingrav`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import re
import sys
from typing import Any, Callable, Sequence, cast

import numpy as np

from fingrav_native.app import _plot as fplot
from fingrav_native.app._characterize import characterize
from fingrav_native.app._demo import DemoInterrupted, run_demo, run_sim_demo, run_synthetic_demo
from fingrav_native.app._open import open_device
from fingrav_native.app._plot import plot_sync_error
from fingrav_native.app._profile import profile
from fingrav_native.app._progress import ProgressReporter, TerminalProgress
from fingrav_native.app._sync import sync_report
from fingrav_native.app._trace import profile_trace
from fingrav_native.backends._base import Backend
from fingrav_native.backends._devices import format_reports, list_backends
from fingrav_native.backends._workloads import resolve_workload, torch_gemm, torch_gemv
from fingrav_native.files._campaign import (
    PROFILE_FILE,
    CampaignFormatError,
    CampaignMismatchError,
    campaign_contents,
    lock_campaign,
    run_files,
)
from fingrav_native.files._capture import CaptureFormatError, load_capture
from fingrav_native.files._parquet import export_parquet
from fingrav_native.files._profiles import ProfileFormatError, load_profile
from fingrav_native.files._trace import export_trace
from fingrav_native.insitu._trace import TraceFormatError
from fingrav_native.method._align import NoLogsInExecutionsError
from fingrav_native.method._phase import PHASES
from fingrav_native.method._results import InterleavedProfile, Profile
from fingrav_native.sim._device import kernel_presets

EXIT_OK = 0


EXIT_FAILURE = 1


EXIT_USAGE = 2


#: Interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _shown(text: str) -> str:
    """``text`` as the error quotes it: repr, cut short (a 5000-digit number is not worth echoing)."""
    return repr(text) if len(text) <= 40 else repr(text[:37]) + "..."


def _bound(x: float) -> str:
    """A range's bound as a person writes it: 1000000, not 1e+06."""
    return str(int(x)) if x == int(x) else f"{x:g}"


class IntRange:
    """An argparse ``type=``: an integer in ``[low, high]``, or a one-line usage error.

    Every integer option of ``fingrav`` has a documented range, so a value
    that could only fail later (a negative seed, ``--executions 100000000``
    exhausting memory) is refused at parse time, with exit code 2 and a
    message naming the option (argparse adds ``argument --NAME:``), the
    value given and the range.

    Parameters
    ----------
    low, high : int
        Inclusive bounds.

    Examples
    --------
    >>> IntRange(2, 100_000)("40")
    40
    >>> str(IntRange(2, 100_000))
    'an integer in [2, 100000]'
    """

    def __init__(self, low: int, high: int) -> None:
        if low > high:
            raise ValueError(f"low={low}, high={high}: low must be <= high")
        self.low = low
        self.high = high

    def __str__(self) -> str:
        return f"an integer in [{self.low}, {self.high}]"

    def __call__(self, text: str) -> int:
        """Parse ``text`` (a decimal integer; "5.0", "1e3" and "nan" are not).

        Parameters
        ----------
        text : str
            The value as typed.

        Returns
        -------
        int

        Raises
        ------
        argparse.ArgumentTypeError
            Not an integer, or outside the range; argparse turns it into
            exit code 2.
        """
        try:
            value = int(text)
        except ValueError:  # also a number of more than 4300 digits
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not an integer; must be {self}") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; must be {self}")
        return value


class FloatRange:
    """An argparse ``type=``: a finite number within bounds, or a one-line usage error.

    NaN and infinities are refused whatever the bounds (``sync --seconds inf``
    overflowed, ``demo --live --period-us nan`` reached the sampler), and so
    is anything past ``high``: every float option has a documented maximum.

    Parameters
    ----------
    low, high : float
        Bounds.
    low_open : bool
        ``low`` itself is refused (default: a positive quantity, > low).
    high_open : bool
        ``high`` itself is refused (default: accepted).
    unit : str
        Unit named after the range in the message (``"s"``, ``"ms"``, ``"us"``).

    Examples
    --------
    >>> FloatRange(0, 3600, unit="s")("2.5")
    2.5
    >>> str(FloatRange(0, 1, high_open=True))
    'a number in (0, 1)'
    """

    def __init__(self, low: float, high: float, *, low_open: bool = True, high_open: bool = False,
                 unit: str = "") -> None:
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"low={low}, high={high}: must be finite with low < high")
        self.low = low
        self.high = high
        self.low_open = low_open
        self.high_open = high_open
        self.unit = unit

    def __str__(self) -> str:
        text = (f"a number in {'(' if self.low_open else '['}{_bound(self.low)}, {_bound(self.high)}"
                f"{')' if self.high_open else ']'}")
        return f"{text} {self.unit}" if self.unit else text

    def __call__(self, text: str) -> float:
        """Parse ``text`` (a decimal or exponent number; "nan", "inf", "0x10" are refused).

        Parameters
        ----------
        text : str
            The value as typed.

        Returns
        -------
        float

        Raises
        ------
        argparse.ArgumentTypeError
            Not a finite number, or outside the range; argparse turns it
            into exit code 2.
        """
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number; must be {self}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not finite; must be {self}")
        above_low = value > self.low if self.low_open else value >= self.low
        below_high = value < self.high if self.high_open else value <= self.high
        if not (above_low and below_high):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; must be {self}")
        return value


# The range of every numeric option, one place each (the help texts quote
# them). Upper bounds keep a typo from exhausting memory or running for
# days; each is far above what the method needs.
#: Seeds of the simulated device: the simulator keeps seeds as float64, so
#: past 2**53 two seeds would silently give one device; 32 bits are plenty.
SEED = IntRange(0, 2**32 - 1)


#: GPU index (amd/nvidia).
DEVICE = IntRange(0, 1023)


#: Campaign runs (profile, characterize), as characterize() checks them.
RUNS = IntRange(2, 100_000)


#: Executions per run: SSE needs 4; the SSP search stops at 512, so 10000 is 20 times that.
EXECUTIONS = IntRange(4, 10_000)


#: Golden-run bin margin, a fraction.
MARGIN = FloatRange(0, 1, high_open=True)


#: demo --live: the C++ sampler's period limits (20 us to 1 s).
SAMPLER_PERIOD_US = FloatRange(20, 1_000_000, low_open=False, unit="us")


#: demo --live --source synthetic: the synthetic source needs >= 1 us.
SOURCE_PERIOD_US = FloatRange(1, 1_000_000, low_open=False, unit="us")


#: demo --live --source synthetic --seconds: a demo, whose samples are kept in memory.
DEMO_SECONDS = FloatRange(0, 60, unit="s")


#: sync --seconds: an hour of reads (about 2 GB on the simulator, which keeps its history).
SYNC_SECONDS = FloatRange(0, 3600, unit="s")


#: sync --burst: reads per burst.
SYNC_BURST = IntRange(2, 10_000)


#: sync --interval-ms: time between bursts, 1 ms to 1 minute.
SYNC_INTERVAL_MS = FloatRange(1, 60_000, low_open=False, unit="ms")


#: sync: the most reads in all (bursts x burst), 240 MB of int64 triples.
SYNC_MAX_READS = 10_000_000


#: characterize --cycles, as characterize() checks them.
CYCLES = IntRange(1, 1_000)


#: characterize --half-period-ms: up to 10 s, for sensors that average over a second.
HALF_PERIOD_MS = FloatRange(0, 10_000, unit="ms")


#: characterize: the longest run (2 x cycles x half period), 10 minutes.
CHARACTERIZE_MAX_RUN_MS = 600_000


#: plot --dpi.
DPI = IntRange(10, 600)


#: trace --top: kernels drawn, one panel each.
TOP = IntRange(1, 100)


#: trace --min-executions: as profile_trace() checks it (>= 2).
MIN_EXECUTIONS = IntRange(2, 1_000_000_000)


class _StoreOne(argparse.Action):
    """argparse's plain store, except that an option never ends up holding an empty list.

    Python 3.11's argparse drops a ``--`` given as an option's value
    (``--runs=--``) and stores ``[]`` without calling ``type=``: a range
    check never ran and a later comparison raised TypeError.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self.nargs is None and isinstance(values, list):
            must = f"; must be {self.type}" if isinstance(self.type, (IntRange, FloatRange)) else ""
            parser.error(f"argument {option_string or self.dest}: expected one value{must}")
        setattr(namespace, self.dest, values)


class _Parser(argparse.ArgumentParser):
    """The parser of ``fingrav`` and (through ``add_subparsers``) of each command: stores with :class:`_StoreOne`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOne)
        self.register("action", "store", _StoreOne)


_Command = Callable[[argparse.Namespace], int]


def _interruptible(command: str) -> Callable[[_Command], _Command]:
    """Ctrl-C ends ``fingrav COMMAND`` with exit code 130 and one line instead of a traceback.

    Only where the command owns SIGINT (Python's own handler was in place):
    called inside another command (``profile --plots`` draws with ``_plot``)
    or a program with its own handler, the KeyboardInterrupt goes on up.
    """
    def wrap(fn: _Command) -> _Command:
        @functools.wraps(fn)
        def run(args: argparse.Namespace) -> int:
            with _SigintOnce(keep_ignoring=False) as sigint:
                try:
                    return fn(args)
                except KeyboardInterrupt:
                    if not sigint.installed:
                        raise
                    sigint.ignore()
                    print(f"fingrav {command}: interrupted; the files it named are whole, one it was writing "
                          "may be cut short", file=sys.stderr)
                    return EXIT_INTERRUPTED
        return run
    return wrap


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for ``fingrav`` and its subcommands."""
    parser = _Parser(
        prog="fingrav",
        description="Fine-grain GPU power profiles of sub-millisecond kernels (FinGraV).",
        epilog="examples:\n  fingrav demo\n  fingrav demo --live --source synthetic --seconds 1 --period-us 100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Each command's parser is a _Parser too (add_subparsers makes its own class); the builders take any.
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND"))
    demo = sub.add_parser(
        "demo",
        help="profile the paper's CB-4K GEMM (SSE, SSP) and MB->2K on the simulated GPU; write files and figures",
        description=(
            "Profile CB-4K GEMM (its SSE and SSP executions) and the paper's interleaved MB->2K case "
            "on the simulated MI300X-class GPU in virtual time (deterministic, a few seconds), write "
            "the profiles (.fgprof), a Perfetto trace and PNG figures into --out, and print a short "
            "summary with the timing error budget. --live instead polls a simulated GPU running in "
            "real time (or, with --source synthetic, the synthetic test source) with the C++ sampler."
        ),
        epilog="examples:\n  fingrav demo\n  fingrav demo --out demo-figs --seed 3\n"
               "  fingrav demo --live --seed 3 --period-us 100\n"
               "  fingrav demo --live --source synthetic --seconds 2 --period-us 100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--out", default="fingrav-demo", metavar="DIR",
                      help="folder for the demo's files (default ./fingrav-demo)")
    demo.add_argument("--seed", type=SEED, default=0, help=f"seed of the simulated GPU, {SEED} (default 0)")
    demo.add_argument("--live", action="store_true",
                      help="the live sampling demo instead (real time; writes no files)")
    demo.add_argument("--source", choices=("sim", "synthetic"), default=None,
                      help="--live only: what to sample (default sim)")
    demo.add_argument("--seconds", type=DEMO_SECONDS, default=None,
                      help=f"--live --source synthetic only: how long to sample, {DEMO_SECONDS} (default 1)")
    demo.add_argument("--period-us", type=SAMPLER_PERIOD_US, default=None,
                      help=f"--live only: sampler period, {SAMPLER_PERIOD_US} (default 250)")
    demo.add_argument("--source-period-us", type=SOURCE_PERIOD_US, default=None,
                      help=f"--live --source synthetic only: how often it produces a reading, {SOURCE_PERIOD_US} "
                           "(default 1000)")
    devices = sub.add_parser(
        "devices",
        help="list every backend, what was found, and why any is unavailable",
        description=(
            "Report each backend (sim, amd, nvidia): whether it can profile here, the devices it "
            "found, and for an unavailable one why and the one fix (what to install or set). "
            "--verbose adds every library and device file looked for, with the path that loaded or "
            "every path tried. Exit code 0 when at least one hardware backend (or, with "
            "--backend, every named one) is available, 1 otherwise; the simulator is always available."
        ),
        epilog="examples:\n  fingrav devices\n  fingrav devices --verbose --backend nvidia\n  fingrav devices --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    devices.add_argument("--json", action="store_true", help="print the reports as JSON (always in full)")
    devices.add_argument("-v", "--verbose", action="store_true",
                         help="also list every library and device file looked for and every path tried")
    devices.add_argument("--backend", action="append", choices=("sim", "amd", "nvidia"),
                         help="report only this backend (repeatable)")
    plot = sub.add_parser(
        "plot",
        help="draw a saved profile's figures (whole run, kernel per component, SSP search)",
        description="Write PNG figures of a profile saved by save_profile / fingrav profile.",
        epilog="examples:\n  fingrav plot cb-4k.fgprof --out figs/\n  fingrav plot cb-4k.fgprof --out figs/ --format pdf\n  fingrav plot cb-8k.fgprof cb-4k.fgprof cb-2k.fgprof --out figs/   # Figure 8: side by side",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plot.add_argument("profile", nargs="+",
                      help="saved profile(s) (.fgprof); with several, also their kernels side by side per component")
    plot.add_argument("--out", default=".", help="folder for the figures (default: current folder)")
    plot.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    plot.add_argument("--dpi", type=DPI, default=120, help=f"resolution of raster images, {DPI} (default 120)")
    export = sub.add_parser(
        "export",
        help="export a saved profile as a Perfetto trace, Parquet tables or a JSON summary",
        description=("Export a saved profile: --trace writes trace-event JSON for ui.perfetto.dev or "
                     "chrome://tracing; --parquet writes LOI, curve and timeline tables (needs pyarrow); "
                     "--summary writes the error budget, settings and per-profile figures as JSON."),
        epilog=("examples:\n  fingrav export cb-4k.fgprof --trace cb-4k.trace.json\n"
                "  fingrav export cb-4k.fgprof --parquet tables/ --summary summary.json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("profile", help="a saved profile (.fgprof)")
    export.add_argument("--trace", metavar="FILE", help="write a trace-event JSON file")
    export.add_argument("--parquet", metavar="DIR", help="write Parquet tables into DIR")
    export.add_argument("--summary", metavar="FILE", help="write a JSON summary")
    _add_profile_parser(sub)
    _add_sync_parser(sub)
    _add_characterize_parser(sub)
    _add_trace_parser(sub)
    return parser


def _add_trace_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    trace = sub.add_parser(
        "trace",
        help="per-kernel power and energy of an application from its torch.profiler trace and a power capture",
        description=(
            "In-situ FinGraV: read a torch.profiler (Kineto) trace and the power logs a PowerRecorder "
            "captured while it ran, profile every kernel signature (name, grid, block) over its own "
            "executions, print the top-kernels table and the energy per iteration, and write a Perfetto "
            "trace with power counter tracks over the kernel slices, figures, and the table as JSON."
        ),
        epilog=("examples:\n  fingrav trace trace.json.gz --power power.npz --out insitu/\n"
                "  fingrav trace trace.json.gz --power power.npz --top 6 --format pdf"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trace.add_argument("trace", help="a torch.profiler Chrome trace (.json or .json.gz)")
    trace.add_argument("--power", required=True, metavar="CAPTURE",
                       help="the power capture recorded beside it (PowerRecorder's .npz)")
    trace.add_argument("--out", default="fingrav-trace", metavar="DIR",
                       help="folder for the Perfetto trace, figures and table (default ./fingrav-trace)")
    trace.add_argument("--top", type=TOP, default=4,
                       help=f"kernels whose stitched profiles are drawn, {TOP} (default 4)")
    trace.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    trace.add_argument("--min-executions", type=MIN_EXECUTIONS, default=20,
                       help=f"signatures with fewer executions are listed as not profiled, {MIN_EXECUTIONS} "
                            "(default 20)")
    trace.add_argument("--sensor", default=None, metavar="PRESET",
                       help="what each log measures, if not the capture's own sensor model (a preset name)")


BACKENDS = ("sim", "sim-live", "amd", "nvidia")


def _add_profile_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    prof = sub.add_parser(
        "profile",
        help="profile a kernel (the paper's eight steps) into a campaign folder; Ctrl-C keeps the runs",
        description=(
            "Profile one kernel with FinGraV: time it, pick runs and margin from the paper's Table I, find "
            "the steady-state-power execution by binary search, run the campaign, keep the golden runs, "
            "place and stitch the power logs. Every completed run is written to OUT/runs/ as it finishes, "
            "so Ctrl-C (exit code 130) loses at most the run under way; --resume OUT continues the campaign "
            "with the settings it was started with. The profile is saved as OUT/profile.fgprof.\n\n"
            "KERNEL is a simulator preset (cb-{8k,4k,2k}-gemm, mb-{8k,4k,2k}-gemv, allgather-64k, ...; see "
            "fingrav_native.sim.kernel_presets()) or, for amd/nvidia, 'module:function' naming a function "
            "that returns a fingrav_native.backends.workloads.Workload; on amd/nvidia the GEMM/GEMV presets run as "
            "PyTorch fp16 GEMMs/GEMVs of that size."),
        epilog=("examples:\n  fingrav profile cb-4k-gemm --out cb4k/\n"
                "  fingrav profile mb-2k-gemv --mode sse --runs 400 --margin 0.02 --out gemv/ --plots --trace\n"
                "  fingrav profile mymodels.layers:attention_workload --backend nvidia --device 1 --out attn/\n"
                "  fingrav profile --resume cb4k/\n\n"
                "exit codes: 0 done, 1 the campaign failed (device, library, no logs, folder in use or damaged), "
                "2 bad usage (a number out of range, an unknown kernel, other settings on --resume), "
                "130 interrupted (resume with --resume)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prof.add_argument("kernel", nargs="?", help="a preset name or module:function (not needed with --resume)")
    prof.add_argument("--backend", choices=BACKENDS, default=None,
                      help="where to run (default sim: the simulated GPU in virtual time)")
    prof.add_argument("--device", type=DEVICE, default=None, help=f"GPU index for amd/nvidia, {DEVICE} (default 0)")
    prof.add_argument("--mode", choices=("sse", "ssp", "both"), default=None,
                      help="execution(s) of interest (default both)")
    prof.add_argument("--runs", type=RUNS, default=None,
                      help=f"runs in the campaign, {RUNS} (default: Table I guidance)")
    prof.add_argument("--margin", type=MARGIN, default=None,
                      help=f"golden-run bin margin, {MARGIN} (default: Table I guidance)")
    prof.add_argument("--executions", type=EXECUTIONS, default=None,
                      help=f"executions per run, {EXECUTIONS}, skipping the SSP search (default: found by the search)")
    prof.add_argument("--seed", type=SEED, default=None, help=f"seed of the simulated device, {SEED} (default 0)")
    prof.add_argument("--phase", choices=PHASES, default=None,
                      help="launch phase of the campaign runs: steered (equivalent-time sampling), random (the "
                           "paper's protocol), or auto (default: steered where the sensor is predictable)")
    prof.add_argument("--out", metavar="DIR", help="campaign folder (default: ./fingrav-<kernel>)")
    prof.add_argument("--resume", metavar="DIR",
                      help="continue the interrupted campaign in DIR with the settings it was started with")
    prof.add_argument("--plots", action="store_true", help="also write the figures into the folder")
    prof.add_argument("--trace", action="store_true", help="also write a Perfetto trace (profile.trace.json)")
    prof.add_argument("--quiet", action="store_true", help="no progress (progress is shown only on a terminal)")


def _add_device_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--backend (default sim), --device and --seed, as `sync` and `characterize` take them."""
    parser.add_argument("--backend", choices=BACKENDS, default="sim", help=f"which {what} (default sim)")
    parser.add_argument("--device", type=DEVICE, default=0, help=f"GPU index for amd/nvidia, {DEVICE} (default 0)")
    parser.add_argument("--seed", type=SEED, default=0, help=f"seed of the simulated device, {SEED} (default 0)")


def _add_sync_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    sync = sub.add_parser(
        "sync",
        help="clock-sync report: read latency, floor, skew, drift and error bound of a backend's clock map",
        description=(
            "Take bursts of bracketed device-clock reads (host before, device, host after) for a while and "
            "report the read latency, the floor no calibration removes (half the best round trip), the "
            "fitted skew, the error bound of the map at the end, and how far a drift-following piecewise "
            "map departs from a single line. On the simulator the true error is reported as well."),
        epilog=("examples:\n  fingrav sync\n  fingrav sync --backend nvidia --seconds 10 --json\n"
                "  fingrav sync --backend amd --device 1 --plot sync.png"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_device_arguments(sync, "clock")
    sync.add_argument("--seconds", type=SYNC_SECONDS, default=2.0,
                      help=f"how long to take reads, {SYNC_SECONDS} (default 2)")
    sync.add_argument("--burst", type=SYNC_BURST, default=32, help=f"reads per burst, {SYNC_BURST} (default 32)")
    sync.add_argument("--interval-ms", type=SYNC_INTERVAL_MS, default=100.0,
                      help=f"time between bursts, {SYNC_INTERVAL_MS} (default 100); at most "
                           f"{SYNC_MAX_READS:,} reads in all")
    sync.add_argument("--json", action="store_true", help="print the report as JSON")
    sync.add_argument("--plot", metavar="FILE", help="also draw each read's distance from the map (PNG/PDF/SVG)")


def _add_characterize_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    ch = sub.add_parser(
        "characterize",
        help="measure a backend's power sensor (period, window or filter, delay) with a load square wave",
        description=(
            "Run a heavy and a light kernel in alternation (a square wave of load, as Yang et al., SC'24) "
            "over many runs at random phase against the sensor, place every log on the host timeline, "
            "and fit the sensor: update period, boxcar window or first-order filter, delay. The result "
            "is a sensor file that profiles use (stitch_logs(sensor=load_characterisation(FILE).sensor)). "
            "The GPU's own power must follow the load faster than the sensor averages; where it does "
            "not (clock ramps, heating), the fitted window includes the GPU's response."),
        epilog=("examples:\n  fingrav characterize --out sim-sensor.json\n"
                "  fingrav characterize --backend nvidia --kernel cb-8k-gemm --light mb-2k-gemv --out h100.json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_device_arguments(ch, "device")
    ch.add_argument("--kernel", default="cb-8k-gemm", help="the heavy kernel (default cb-8k-gemm)")
    ch.add_argument("--light", default="mb-2k-gemv", help="the light kernel (default mb-2k-gemv)")
    ch.add_argument("--runs", type=RUNS, default=40, help=f"runs, {RUNS} (default 40)")
    ch.add_argument("--cycles", type=CYCLES, default=4, help=f"heavy/light cycles per run, {CYCLES} (default 4)")
    ch.add_argument("--half-period-ms", type=HALF_PERIOD_MS, default=None,
                    help=f"length of each level, {HALF_PERIOD_MS}, a run at most "
                         f"{CHARACTERIZE_MAX_RUN_MS // 60_000} minutes (default: from the declared sensor)")
    ch.add_argument("--out", metavar="FILE", help="write the characterisation (JSON) here")
    ch.add_argument("--json", action="store_true", help="print the characterisation as JSON")


@_interruptible("characterize")
def _characterize(args: argparse.Namespace) -> int:
    import json

    # Each option is in range (parse time); together they bound one run's length.
    if args.half_period_ms is not None and 2 * args.cycles * args.half_period_ms > CHARACTERIZE_MAX_RUN_MS:
        raise ValueError(f"--cycles={args.cycles}, --half-period-ms={args.half_period_ms:g}: runs of "
                         f"{2 * args.cycles * args.half_period_ms / 60_000:.1f} minutes (2 x cycles x half period) "
                         f"are longer than the {CHARACTERIZE_MAX_RUN_MS // 60_000} allowed; take fewer cycles or "
                         "a shorter half period")
    backend = _make_backend(args.backend, args.device, args.seed)
    kernel = _resolve_kernel(args.kernel, args.backend)
    light = _resolve_kernel(args.light, args.backend)
    # The hardware backends take a Workload where the protocol says KernelSpec; the runtime contract is the same.
    c = characterize(cast(Backend, backend), kernel, light, runs=args.runs, cycles=args.cycles,
                     half_period_ns=None if args.half_period_ms is None else args.half_period_ms * 1e6)
    if args.out:
        c.save(args.out)
    if args.json:
        print(json.dumps(c.as_dict(), indent=2))
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
    if args.out:
        print(f"  written to {args.out}")
    return EXIT_OK


def _make_backend(name: str, device: int, seed: int) -> object:
    if device < 0:
        raise ValueError(f"--device={device}: must be >= 0")
    if seed < 0:
        raise ValueError(f"--seed={seed}: must be >= 0")
    # One resolver for every driver (open_device): the CLI's --backend/--device/--seed are its string.
    if name in ("sim", "sim-live"):
        return open_device(name, seed=seed)
    return open_device(f"{name}:{device}")


_HW_PRESET = re.compile(r"^(cb|mb)-(\d+)k-(gemm|gemv)$")


def _resolve_kernel(spec: str, backend_name: str) -> object:
    """A kernel for the backend from the command line's KERNEL."""
    if ":" in spec:
        if backend_name.startswith("sim"):
            raise ValueError(f"kernel={spec!r}: a module:function workload runs on amd or nvidia; "
                             "the simulator runs its presets (fingrav_native.sim.kernel_presets())")
        return resolve_workload(spec)
    if backend_name.startswith("sim"):
        names = [k["name"] for k in kernel_presets()]
        if spec not in names:
            raise ValueError(f"kernel={spec!r}: not a simulator preset; choose one of {', '.join(names)}")
        return spec
    m = _HW_PRESET.match(spec)
    if m is None:
        raise ValueError(f"kernel={spec!r}: on {backend_name} give module:function, or a GEMM/GEMV preset "
                         "such as cb-4k-gemm or mb-8k-gemv")
    n = int(m.group(2)) * 1024
    return torch_gemm(n, n, n) if m.group(3) == "gemm" else torch_gemv(n, n)


#: What `fingrav profile` records next to the campaign, so --resume can rebuild the same request.
COMMAND_FILE = "command.json"


_MODES = ("sse", "ssp", "both")


def _is_int(value: object) -> bool:
    # JSON true/false are bools, which Python counts as ints.
    return isinstance(value, int) and not isinstance(value, bool)


def _within(value_range: IntRange | FloatRange, value: object, *, optional: bool = False,
            number: bool = False) -> bool:
    """Whether a value read from a file is one the option's range takes (None where optional)."""
    if value is None:
        return optional
    if not (_is_int(value) or (number and isinstance(value, float))):
        return False
    try:
        value_range(str(value))
    except argparse.ArgumentTypeError:
        return False
    return True


#: command.json's fields: what each must be (as the options that wrote them), in words for the message.
_COMMAND_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "kernel": (lambda v: isinstance(v, str) and v != "", "a kernel name"),
    "backend": (lambda v: v in BACKENDS, f"one of {', '.join(BACKENDS)}"),
    "device": (lambda v: _within(DEVICE, v), f"{DEVICE}"),
    "mode": (lambda v: v in _MODES, f"one of {', '.join(_MODES)}"),
    "runs": (lambda v: _within(RUNS, v, optional=True), f"{RUNS} or null"),
    "margin": (lambda v: _within(MARGIN, v, optional=True, number=True), f"{MARGIN} or null"),
    "executions": (lambda v: _within(EXECUTIONS, v, optional=True), f"{EXECUTIONS} or null"),
    "seed": (lambda v: _within(SEED, v), f"{SEED}"),
}


def _read_command(path: str) -> dict[str, Any]:
    """``command.json`` of a campaign folder, every field checked (CampaignFormatError names file and field)."""
    import json

    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        raise CampaignFormatError(f"{path}: not readable JSON ({exc}); restore it to resume") from exc
    if not isinstance(saved, dict):
        raise CampaignFormatError(f"{path}: must be a JSON object of the command's settings, "
                                  f"not a {type(saved).__name__}; restore it to resume")
    # Folders written before phase steering existed ran at random phase.
    fields = {**_COMMAND_FIELDS, "phase": (lambda v: v in PHASES, f"one of {', '.join(PHASES)}")}
    saved.setdefault("phase", "random")
    for key, (ok, what) in fields.items():
        if key not in saved or not ok(saved[key]):
            got = "missing" if key not in saved else f"not {repr(saved[key])[:60]}"
            raise CampaignFormatError(f"{path}: field {key!r} must be {what} ({got}); restore it to resume")
    return {key: saved[key] for key in fields}


def _refuse_a_campaign(out: str) -> None:
    """A new campaign never goes into a folder that holds one (``--out``)."""
    import os

    if os.path.exists(os.path.join(out, COMMAND_FILE)):
        raise ValueError(f"--out={out!r}: already holds a campaign; continue it with --resume {out} "
                         "or choose another folder")
    held = campaign_contents(out)
    if held:
        raise ValueError(f"--out={out!r}: already holds a campaign ({' and '.join(held)}, written by "
                         "profile(out_dir=...)); choose another folder")


def _write_json_atomic(path: str, value: dict[str, Any]) -> None:
    import json
    import os

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)  # whole or not at all: a resume never reads half of it


class _SigintOnce:
    """Ctrl-C raises KeyboardInterrupt once; further ones are ignored while the command winds down.

    Without this a second Ctrl-C during the first one's clean-up (the
    manifest written, the message printed) gives a second traceback. With
    ``keep_ignoring`` (``fingrav`` run as the program) SIGINT stays ignored
    after an interrupt until the process exits; otherwise the handler found
    is put back.
    """

    def __init__(self, keep_ignoring: bool) -> None:
        self.keep_ignoring = keep_ignoring
        self.installed = False
        self.fired = False
        self.previous: Any = None

    def __enter__(self) -> "_SigintOnce":
        import signal
        import threading

        # Only Python's own handler is replaced: an embedding program's, or
        # SIGINT ignored (nohup, background jobs), is left as it is.
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.previous = signal.signal(signal.SIGINT, self._handle)
            self.installed = True
        return self

    def _handle(self, signum: int, frame: object) -> None:
        self.ignore()
        raise KeyboardInterrupt

    def ignore(self) -> None:
        """From now on Ctrl-C does nothing (the command is ending)."""
        import signal

        self.fired = True
        if self.installed:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.installed and not (self.fired and self.keep_ignoring):
            signal.signal(signal.SIGINT, self.previous)


def _profile(args: argparse.Namespace, *, as_program: bool = False) -> int:
    import os

    with _SigintOnce(keep_ignoring=as_program) as sigint:
        try:
            return _profile_command(args)
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
    if args.resume:
        return str(args.resume)
    if args.out:
        return str(args.out)
    return f"fingrav-{args.kernel.replace(':', '-').replace('.', '-')}" if args.kernel else None


def _profile_command(args: argparse.Namespace) -> int:
    import os

    if args.resume:
        if args.out and os.path.abspath(args.out) != os.path.abspath(args.resume):
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
        for key, value in given.items():
            if value is not None and value != saved.get(key):
                raise ValueError(f"--{key}={value!r}: the campaign in {args.resume!r} was started with "
                                 f"{saved.get(key)!r}; --resume uses the settings it was started with")
        request, out = saved, args.resume
    else:
        if not args.kernel:
            raise ValueError("kernel: give a preset or module:function (or --resume DIR)")
        request = {"kernel": args.kernel, "backend": args.backend or "sim",
                   "device": 0 if args.device is None else args.device,
                   "mode": args.mode or "both", "runs": args.runs, "margin": args.margin,
                   "executions": args.executions, "seed": 0 if args.seed is None else args.seed,
                   "phase": args.phase or "auto"}
        out = cast(str, _campaign_folder(args))
        if os.path.exists(out) and not os.path.isdir(out):
            raise ValueError(f"--out={out!r}: is a file, not a folder; give a folder for the campaign "
                             "(it is created if missing)")
    if request["runs"] is not None and request["runs"] < 2:
        raise ValueError(f"--runs={request['runs']}: must be >= 2")
    if request["margin"] is not None and not 0 < request["margin"] < 1:
        raise ValueError(f"--margin={request['margin']}: must be in (0, 1)")
    if request["executions"] is not None and request["executions"] < 4:
        raise ValueError(f"--executions={request['executions']}: must be >= 4")
    kernel = _resolve_kernel(request["kernel"], request["backend"])
    if not args.resume:
        _refuse_a_campaign(out)  # at once, before a device is opened
    backend = _make_backend(request["backend"], request["device"], request["seed"])
    option = "--resume" if args.resume else "--out"
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{option}={out!r}: cannot create the folder ({exc.strerror or exc}); "
                         "choose another") from exc
    reporter = ProgressReporter() if args.quiet else TerminalProgress()
    # The folder is locked before anything is written in it (command.json
    # included) and until the profile is saved: a second process, starting or
    # resuming, is refused with the holder's pid and writes nothing.
    with lock_campaign(out):
        if not args.resume:
            _refuse_a_campaign(out)  # again under the lock: another process may have started one meanwhile
            _write_json_atomic(os.path.join(out, COMMAND_FILE), request)
        prof = profile(kernel, backend, mode=request["mode"], runs=request["runs"],  # type: ignore[arg-type]
                       margin=request["margin"], executions=request["executions"], seed=request["seed"],
                       out_dir=out, resume=bool(args.resume), progress=reporter, phase=request["phase"])
    print(prof)
    b = prof.error_budget
    print(f"  error budget (median per LOI, +-): clock map {b.clock_map_ns / 1e3:.2f} us, kernel start "
          f"{b.marker_ns / 1e3:.2f} us, logger window {b.logger_window_ns / 1e3:.2f} us -> total "
          f"{b.total_ns / 1e3:.2f} us")
    # What the logs were and where each logger figure came from (issue 19):
    # a window nobody published or measured is the budget's silent gap.
    caps = prof.backend
    if caps.sensor_semantics:
        print(f"  sensor: {caps.sensor_semantics}")
    if caps.provenance:
        print(f"  figures: {caps.describe_figures()}")
    print(os.path.join(out, PROFILE_FILE))
    if args.trace:
        print(export_trace(prof, os.path.join(out, "profile.trace.json")))
    if args.plots:
        _plot(argparse.Namespace(profile=[os.path.join(out, PROFILE_FILE)], out=out, format="png",
                                 dpi=120))
    return EXIT_OK


@_interruptible("sync")
def _sync(args: argparse.Namespace) -> int:
    import json

    # Each option is in range (parse time); together they must not ask for
    # more reads than memory holds. sync_report takes this many bursts.
    bursts = max(2, int(args.seconds / (args.interval_ms / 1e3)) + 1)
    if bursts * args.burst > SYNC_MAX_READS:
        raise ValueError(f"--seconds={args.seconds:g}, --interval-ms={args.interval_ms:g}, --burst={args.burst}: "
                         f"{bursts:,} bursts of {args.burst} reads is more than {SYNC_MAX_READS:,}; take fewer "
                         "seconds, a longer interval or smaller bursts")
    backend = _make_backend(args.backend, args.device, args.seed)
    report = sync_report(backend, seconds=args.seconds, burst=args.burst,  # type: ignore[arg-type]
                         interval_s=args.interval_ms / 1e3)
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        print(report.format())
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ax = plot_sync_error(report.brackets, report.piecewise or report.linear)
        ax.figure.savefig(args.plot, dpi=120)
        plt.close(ax.figure)
        print(args.plot)
    return EXIT_OK


def _load(path: str) -> object:
    return load_profile(path)


def _figure_stem(path: str) -> str:
    import os

    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "profile":
        # A campaign folder's profile.fgprof: name its figures after the folder.
        stem = os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
    return stem


@_interruptible("plot")
def _plot(args: argparse.Namespace) -> int:
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [args.profile] if isinstance(args.profile, str) else list(args.profile)
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
    for stem, name, fig in figures:
        path = os.path.join(args.out, f"{stem}_{name}.{args.format}")
        fig.savefig(path, dpi=args.dpi)
        plt.close(fig)
        print(path)
    return EXIT_OK


def _summary(prof: object) -> dict[str, Any]:
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


@_interruptible("export")
def _export(args: argparse.Namespace) -> int:
    import json
    import math

    if not (args.trace or args.parquet or args.summary):
        raise ValueError("nothing to export: give --trace, --parquet and/or --summary")
    prof = _load(args.profile)
    if args.trace:
        print(export_trace(prof, args.trace))  # type: ignore[arg-type]
    if args.parquet:
        for p in export_parquet(prof, args.parquet):  # type: ignore[arg-type]
            print(p)
    if args.summary:
        def clean(v: object) -> object:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        with open(args.summary, "w") as f:
            json.dump(clean(_summary(prof)), f, indent=1, allow_nan=False)
        print(args.summary)
    return EXIT_OK


@_interruptible("trace")
def _trace(args: argparse.Namespace) -> int:
    import json
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tp = profile_trace(args.trace, load_capture(args.power), min_executions=args.min_executions, sensor=args.sensor)
    print(tp)
    os.makedirs(args.out, exist_ok=True)
    written = [export_trace(tp, os.path.join(args.out, "power_trace.json.gz"))]
    fig = fplot.plot_kernel_energy(tp).figure
    for name, f in (("energy_by_kernel", fig), ("top_kernels", fplot.figure_trace_profiles(tp, top=args.top))):
        path = os.path.join(args.out, f"{name}.{args.format}")
        f.savefig(path, dpi=120)
        plt.close(f)
        written.append(path)
    rows = [{"name": str(r["name"]), "grid": r["grid"].tolist(), "block": r["block"].tolist(),
             **{k: (r[k].item() if np.isfinite(r[k]) else None) if r[k].dtype.kind == "f" else int(r[k])
                for k in ("count", "golden", "warmup", "duration_ns", "power_w", "energy_j",
                          "energy_half_width_j", "share")}}
            for r in tp.kernels]
    doc = {"trace": os.path.abspath(args.trace), "power": os.path.abspath(args.power), "sensor": tp.sensor,
           "kernels": rows, "concurrent": tp.concurrent, "skipped": tp.skipped,
           "iterations": None if tp.summary is None else dataclasses.asdict(tp.summary)}
    path = os.path.join(args.out, "kernels.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    written.append(path)
    for p in written:
        print(p)
    print("open power_trace.json.gz in https://ui.perfetto.dev")
    return EXIT_OK


@_interruptible("devices")
def _devices(args: argparse.Namespace) -> int:
    import json

    reports = list_backends(args.backend)
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], indent=2))
    else:
        print(format_reports(reports, verbose=args.verbose))
    if args.backend:
        return EXIT_OK if all(r.available for r in reports) else EXIT_FAILURE
    # Without --backend the question a script asks is "is there real hardware here?"
    return EXIT_OK if any(r.available for r in reports if r.backend != "sim") else EXIT_FAILURE


def _demo_interrupted(args: argparse.Namespace, exc: KeyboardInterrupt) -> str:
    """The one line `fingrav demo` prints on Ctrl-C: what it wrote, and what it left."""
    if args.live:
        return "fingrav demo: interrupted; the live demo writes no files"
    if not isinstance(exc, DemoInterrupted):  # before run_demo made its folder
        return "fingrav demo: interrupted before any file was written; nothing was created"
    if exc.files:
        n = len(exc.files)
        return (f"fingrav demo: interrupted; kept the {n} {'file' if n == 1 else 'files'} it had completed in "
                f"{exc.out_dir}/: " + ", ".join(exc.files))
    if exc.removed_folder:
        return (f"fingrav demo: interrupted before any file was written; removed the folder {exc.out_dir} "
                "it had created")
    return f"fingrav demo: interrupted before any file was written; {exc.out_dir}/ holds nothing new"


def _demo(parser: argparse.ArgumentParser, args: argparse.Namespace, *, as_program: bool = False) -> int:
    live_only = [f"--{name.replace('_', '-')}" for name in ("source", "seconds", "period_us", "source_period_us")
                 if getattr(args, name) is not None]
    # Each number is in range (parse time); what is left is which go together.
    with _SigintOnce(keep_ignoring=as_program) as sigint:
        try:
            if not args.live:
                # Live-only options would be silently ignored by the profiling demo.
                if live_only:
                    raise ValueError(f"{live_only[0]}: only with --live")
                run_demo(args.out, seed=args.seed)
                return EXIT_OK
            period_ns = int(round((250.0 if args.period_us is None else args.period_us) * 1000))
            if args.source in (None, "sim"):
                if args.seconds is not None or args.source_period_us is not None:
                    raise ValueError(f"{'--seconds' if args.seconds is not None else '--source-period-us'}: "
                                     "only with --source synthetic")
                run_sim_demo(seed=args.seed, period_ns=period_ns)
            else:
                run_synthetic_demo(
                    seconds=1.0 if args.seconds is None else args.seconds,
                    period_ns=period_ns,
                    source_period_ns=int(round((1000.0 if args.source_period_us is None
                                                else args.source_period_us) * 1000)),
                )
        except KeyboardInterrupt as exc:
            # Whatever was completed stays (run_demo says what); a second
            # Ctrl-C while this is said is ignored, not a second traceback.
            sigint.ignore()
            print(_demo_interrupted(args, exc), file=sys.stderr)
            return EXIT_INTERRUPTED
        except ValueError as exc:
            print(f"fingrav demo: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except OSError as exc:  # --out not writable, disk full
            print(f"fingrav demo: {exc}", file=sys.stderr)
            return EXIT_FAILURE
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fingrav`` command; returns the process exit code.

    Exit codes (the README's table has them per command): 0 done, 1 the
    command failed, 2 bad usage, 130 interrupted by Ctrl-C. A number out
    of its option's range is bad usage refused by argparse, which raises
    ``SystemExit(2)`` instead of returning (as for any unparseable argument).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``fingrav`` (default ``sys.argv[1:]``: run as
        the program, when a second Ctrl-C stays ignored until exit).

    Returns
    -------
    int
        The exit code.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "demo":
        return _demo(parser, args, as_program=argv is None)
    if args.command == "devices":
        return _devices(args)
    if args.command == "trace":
        try:
            return _trace(args)
        except (FileNotFoundError, OSError) as exc:
            print(f"fingrav trace: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            # A malformed trace or capture is named by its own error (TraceFormatError, CaptureFormatError).
            print(f"fingrav trace: {exc}", file=sys.stderr)
            return EXIT_FAILURE if isinstance(exc, (TraceFormatError, CaptureFormatError)) else EXIT_USAGE
    if args.command in ("plot", "export"):
        try:
            return _plot(args) if args.command == "plot" else _export(args)
        # An output the disk refuses (a file where a folder goes, no permission, disk full) is a failure to
        # write, like a damaged profile a failure to read.
        except (ProfileFormatError, OSError) as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.command == "profile":
        try:
            return _profile(args, as_program=argv is None)
        # A campaign folder in use (CampaignLockedError), a missing library or
        # device (LibraryNotFoundError, DeviceUnavailableError: RuntimeErrors),
        # a damaged or incomplete folder, a disk that refuses a write: the
        # command failed, the usage was fine.
        # A campaign that gave no logs (NoLogsInExecutionsError, a ValueError)
        # is a failed run, not bad usage.
        except (CampaignMismatchError, CampaignFormatError, NoLogsInExecutionsError, OSError, ImportError,
                RuntimeError) as exc:
            print(f"fingrav profile: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav profile: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.command in ("sync", "characterize"):
        try:
            return _characterize(args) if args.command == "characterize" else _sync(args)
        # A missing library or device (LibraryNotFoundError, DeviceUnavailableError
        # are RuntimeErrors) or module is a failure to run, not bad usage.
        except (OSError, ImportError, RuntimeError) as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except ValueError as exc:
            print(f"fingrav {args.command}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE  # pragma: no cover - parser.error exits
