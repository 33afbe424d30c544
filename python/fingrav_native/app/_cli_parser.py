"""The argument parser of ``fingrav``: one builder per command."""

from __future__ import annotations

import argparse
import re
from typing import Any, Union, cast

from fingrav_native.app._cli_ranges import (
    BOOTTIME_OFFSET_NS,
    CHARACTERIZE_MAX_RUN_MS,
    CYCLES,
    DEMO_SECONDS,
    DEVICE,
    DPI,
    EXECUTIONS,
    HALF_PERIOD_MS,
    LOG_PERIOD_S,
    MARGIN,
    MIN_EXECUTIONS,
    RECORD_SECONDS,
    RUNS,
    SAMPLER_PERIOD_US,
    SEED,
    SOURCE_PERIOD_US,
    SYNC_BURST,
    SYNC_INTERVAL_MS,
    SYNC_MAX_READS,
    SYNC_SECONDS,
    TOP,
    FloatRange,
    IntRange,
)
from fingrav_native.backends._registry import device_usage, kinds, reported
from fingrav_native.method._phase_modes import PHASES


def device_option(value: str) -> Union[int, str]:
    """``--device``: a GPU index (with ``--backend``, checked against its range here) or a device string.

    The string is read by the device registry when the command runs, so an
    unknown one is refused naming ``--device`` and listing the forms.
    """
    if re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(DEVICE(value))
    return value


def _device_help(what: str) -> str:
    return (f"{what}: a device string ({device_usage()}; e.g. nvidia:0:instant, sim:3), or with --backend the "
            f"GPU index, {DEVICE} (default sim)")


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


class _OneOutput(_StoreOne):
    """An output option with a hidden earlier spelling: given twice under either name, it is refused.

    A plain store would keep the last of ``--out A --plot B`` and drop the
    first without a word.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"argument {option_string}: the output is named twice (--out, or its earlier name); "
                         "give it once")
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """The parser of ``fingrav`` and (through ``add_subparsers``) of each command: stores with :class:`_StoreOne`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOne)
        self.register("action", "store", _StoreOne)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser for ``fingrav`` and its subcommands."""
    parser = _Parser(
        prog="fingrav",
        description="Fine-grain GPU power profiles of sub-millisecond kernels (FinGraV).",
        epilog=("examples:\n  fingrav demo\n  fingrav demo --live --source synthetic --seconds 1 --period-us 100\n"
                "  fingrav record --device nvidia:0 --out power.npz -- ./my_app --steps 100\n"
                "  fingrav run --device amd:0 --out run1/ -- python train.py\n"
                "  fingrav trace run1/"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Each command's parser is a _Parser too (add_subparsers makes its own class); the builders take any.
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND"))
    _add_demo_parser(sub)
    _add_devices_parser(sub)
    _add_plot_parser(sub)
    _add_export_parser(sub)
    _add_profile_parser(sub)
    _add_sync_parser(sub)
    _add_characterize_parser(sub)
    _add_trace_parser(sub)
    _add_record_parser(sub)
    _add_run_parser(sub)
    _add_help_parser(sub, list(sub.choices))
    # The package's version from its installed metadata (importlib.metadata): no analysis module is loaded.
    from fingrav_native._version import __version__

    parser.add_argument("--version", action="version", version=f"fingrav {__version__}",
                        help="print the package's version and exit")
    return parser


def _add_help_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", commands: list[str]) -> None:
    """``fingrav help COMMAND``: a command's help, as ``fingrav COMMAND --help`` prints it (git's convention)."""
    helper = sub.add_parser(
        "help", help="print a command's help (the same as fingrav COMMAND --help)",
        description="Print the help of COMMAND, exactly as fingrav COMMAND --help does; without COMMAND, fingrav's.",
        epilog="examples:\n  fingrav help trace\n  fingrav help", formatter_class=argparse.RawDescriptionHelpFormatter)
    helper.add_argument("topic", nargs="?", choices=commands, metavar="COMMAND",
                        help="the command whose help to print: " + ", ".join(commands))


def _add_demo_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav demo``: the profiling demo, or the live sampling demos with ``--live``."""
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
    demo.add_argument("--out", default=None, metavar="DIR",
                      help="folder for the demo's files (default ./fingrav-demo; not with --live)")
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


def _add_devices_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav devices``: what each backend found, and why any is unavailable."""
    devices = sub.add_parser(
        "devices",
        help="list every backend, what was found, and why any is unavailable",
        description=(
            f"Report each backend ({', '.join(reported())}): whether it can profile here, the devices it "
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
    devices.add_argument("--backend", action="append", choices=tuple(reported()),
                         help="report only this backend (repeatable)")


def _add_plot_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav plot``: a saved profile's figures."""
    plot = sub.add_parser(
        "plot",
        help="draw a saved profile's figures (whole run, kernel per component, SSP search)",
        description="Write PNG figures of a profile saved by save_profile / fingrav profile.",
        epilog="examples:\n  fingrav plot cb-4k.fgprof --out figs/\n  fingrav plot cb-4k.fgprof --out figs/ --format pdf\n  fingrav plot cb-8k.fgprof cb-4k.fgprof cb-2k.fgprof --out figs/   # Figure 8: side by side",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plot.add_argument("profile", nargs="+",
                      help="saved profile(s) (.fgprof); with several, also their kernels side by side per component")
    plot.add_argument("--out", default=".", metavar="DIR", help="folder for the figures (default: current folder)")
    plot.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    plot.add_argument("--dpi", type=DPI, default=120, help=f"resolution of raster images, {DPI} (default 120)")


def _add_export_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav export``: a saved profile as a trace, Parquet tables or a JSON summary."""
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


def _add_trace_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav trace``: per-kernel power of an application from its profiler trace and a capture."""
    trace = sub.add_parser(
        "trace",
        help="per-kernel power and energy of an application from its torch.profiler or rocprofv3 trace and a "
             "power capture",
        description=(
            "In-situ FinGraV: read a torch.profiler (Kineto) trace or a rocprofv3 kernel trace (CSV, JSON or "
            "rocpd) and the power logs a PowerRecorder captured (or nvidia-smi, amd-smi, rocm-smi or dcgmi wrote) "
            "while it ran, place the logs on the trace's "
            "clock (CLOCK_REALTIME for torch.profiler, CLOCK_BOOTTIME for rocprofv3) through the capture's "
            "bracketed clock reads, profile every kernel signature (name, grid, block) over its own "
            "executions, print the top-kernels table and the energy per iteration, and write a Perfetto "
            "trace with power counter tracks over the kernel slices, figures, and the table as JSON. Where the "
            "capture holds an energy counter, check that the kernels and the gaps between them add up to it "
            "(the energy closure line). --annotate writes the user's own trace again, every event kept, with "
            "each kernel's energy in its args and the power as counter tracks beside its GPU's kernels."
        ),
        epilog=("examples:\n  fingrav trace trace.json.gz --power power.npz --out insitu/\n"
                "  fingrav trace trace.json.gz --power power.npz --top 6 --format pdf\n"
                "  fingrav trace out/host/4242_results.db --power power.npz --device 0\n"
                "  fingrav trace trace.json.gz --power smi.csv --log-tz Europe/Berlin --device 0\n"
                "  fingrav trace trace.json.gz --power power.npz --annotate trace.power.json.gz\n"
                "  fingrav trace run1/ --out run1/   # a folder fingrav run wrote"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    trace.add_argument("trace", help="a torch.profiler Chrome trace (.json or .json.gz), what rocprofv3 "
                                     "--kernel-trace wrote (<pid>_kernel_trace.csv, <pid>_results.json or "
                                     "<pid>_results.db (rocpd)), or the folder fingrav run wrote (its launch "
                                     "records and power capture)")
    trace.add_argument("--power", default=None, metavar="CAPTURE",
                       help="the power capture recorded beside it (PowerRecorder's .npz), or a power log nvidia-smi, "
                            "amd-smi, rocm-smi or dcgmi wrote (see the options below); not with a fingrav run "
                            "folder, which holds its own")
    trace.add_argument("--out", default="fingrav-trace", metavar="DIR",
                       help="folder for the Perfetto trace, figures and table (default ./fingrav-trace)")
    trace.add_argument("--top", type=TOP, default=4,
                       help=f"kernels whose stitched profiles are drawn, {TOP} (default 4)")
    trace.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    trace.add_argument("--min-executions", type=MIN_EXECUTIONS, default=20,
                       help=f"signatures with fewer executions are listed as not profiled, {MIN_EXECUTIONS} "
                            "(default 20)")
    trace.add_argument("--device", type=DEVICE, default=None, metavar="N",
                       help=f"the GPU the capture recorded (its ordinal, as amd:N / nvidia:N), {DEVICE}; needed "
                            "when the trace holds kernels of several GPUs")
    trace.add_argument("--sensor", default=None, metavar="PRESET",
                       help="what each log measures, if not the capture's own sensor model (a preset name; for a "
                            "tool's power log also a characterisation file)")
    _add_power_log_options(trace)
    trace.add_argument("--annotate", default=None, metavar="OUT",
                       help="also write the trace again as OUT (.json, or .json.gz gzipped) with every event kept, "
                            "each kernel's energy in its args and power counter tracks (opens in Perfetto, "
                            "TensorBoard, HTA); checked before any work")
    trace.add_argument("--force", action="store_true", help="let --annotate replace an existing file (never the trace)")
    trace.add_argument("--quiet", action="store_true",
                       help="no progress line (it is drawn on stderr, only on a terminal, past two seconds)")


def _add_power_log_options(trace: argparse.ArgumentParser) -> None:
    """``fingrav trace``'s options for a power log another tool wrote (``--power LOG``)."""
    log = trace.add_argument_group(
        "power logs other tools wrote (--power LOG: nvidia-smi, amd-smi, rocm-smi or dcgmi output, told apart by "
        "content)")
    log.add_argument("--log-tz", default=None, metavar="ZONE",
                     help="the zone of the log's local wall-time stamps (nvidia-smi's): an IANA name, UTC, +01:00, "
                          "or local (this host's); never guessed")
    log.add_argument("--log-kind", default="auto", choices=("auto", "nvidia-smi", "amd-smi", "rocm-smi", "dcgmi"),
                     help="the log's format (default: told apart by content)")
    log.add_argument("--log-start", default=None, metavar="TIME",
                     help="for a log without times (rocm-smi, dcgmi): its first row's wall-clock time, epoch "
                          "seconds or ISO 8601 with its zone")
    log.add_argument("--log-period", type=LOG_PERIOD_S, default=None, metavar="S",
                     help=f"for a log without times: the period it was written at, seconds, {LOG_PERIOD_S}")
    log.add_argument("--log-columns", default=None, metavar="A,B,...",
                     help="the columns of an nvidia-smi log written with noheader, in --query-gpu's order")
    log.add_argument("--boottime-offset-ns", type=BOOTTIME_OFFSET_NS, default=None, metavar="NS",
                     help="CLOCK_REALTIME - CLOCK_BOOTTIME on the recording host, to place a log's wall-clock "
                          f"stamps on a rocprofv3 trace's CLOCK_BOOTTIME, {BOOTTIME_OFFSET_NS}")


def _add_profile_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav profile``: a kernel profiled into a campaign folder, or ``--resume`` of one."""
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
            "that returns a fingrav_native.backends.Workload; on amd/nvidia the GEMM/GEMV presets run as "
            "PyTorch fp16 GEMMs/GEMVs of that size."),
        epilog=("examples:\n  fingrav profile cb-4k-gemm --out cb4k/\n"
                "  fingrav profile mb-2k-gemv --mode sse --runs 400 --margin 0.02 --out gemv/ --plots --trace\n"
                "  fingrav profile mymodels.layers:attention_workload --device nvidia:1:instant --out attn/\n"
                "  fingrav profile cb-4k-gemm --device sim:3 --out cb4k-seed3/\n"
                "  fingrav profile --resume cb4k/\n\n"
                "exit codes: 0 done, 1 the campaign failed (device, library, no logs, folder in use or damaged), "
                "2 bad usage (a number out of range, an unknown kernel, other settings on --resume), "
                "130 interrupted (resume with --resume)"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prof.add_argument("kernel", nargs="?", help="a preset name or module:function (not needed with --resume)")
    prof.add_argument("--backend", choices=kinds(), default=None,
                      help="where to run, with --device N and --seed (default sim: the simulated GPU in virtual "
                           "time); or give --device a device string")
    prof.add_argument("--device", type=device_option, default=None, metavar="DEVICE",
                      help=_device_help("where to run"))
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
    """--device (a device string, or a GPU index with --backend) and --seed, as `sync` and `characterize` take them.

    The parser leaves them None when not given: the command fills in the
    defaults, and can tell an option given from one left out (a device
    string given with --backend is refused, not one of them ignored).
    """
    parser.add_argument("--backend", choices=kinds(), default=None,
                        help=f"which {what}, with --device N and --seed (default sim); or give --device a device "
                             "string")
    parser.add_argument("--device", type=device_option, default=None, metavar="DEVICE",
                        help=_device_help(f"which {what}"))
    parser.add_argument("--seed", type=SEED, default=None,
                        help=f"seed of the simulated device, {SEED} (default 0)")


def _add_sync_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav sync``: the clock-sync report of a backend."""
    sync = sub.add_parser(
        "sync",
        help="clock-sync report: read latency, floor, skew, drift and error bound of a backend's clock map",
        description=(
            "Take bursts of bracketed device-clock reads (host before, device, host after) for a while and "
            "report the read latency, the floor no calibration removes (half the best round trip), the "
            "fitted skew, the error bound of the map at the end, and how far a drift-following piecewise "
            "map departs from a single line. On the simulator the true error is reported as well."),
        epilog=("examples:\n  fingrav sync\n  fingrav sync --device nvidia:0 --seconds 10 --json\n"
                "  fingrav sync --device amd:1 --out sync.png\n  fingrav sync --backend amd --device 1"),
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
    # Every command names its output --out; --plot, this option's earlier name, stays accepted but unlisted.
    sync.add_argument("--out", metavar="FILE", dest="plot", action=_OneOutput,
                      help="also draw each read's distance from the map into FILE (.png, .pdf or .svg)")
    sync.add_argument("--plot", metavar="FILE", dest="plot", action=_OneOutput, help=argparse.SUPPRESS)


def _add_characterize_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav characterize``: a backend's power sensor measured with a load square wave."""
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
                "  fingrav characterize --logs LOGS.csv --load LOAD.csv --out SENSOR.json\n"
                "  fingrav characterize --logs LOGS.csv --meter METER.csv --out SENSOR.json\n"
                "  fingrav characterize --device nvidia:0 --kernel cb-8k-gemm --light mb-2k-gemv --out h100.json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Defaults filled in by the command: with --logs no device runs, and a device option given is refused.
    _add_device_arguments(ch, "device")
    ch.add_argument("--kernel", default=None, help="the heavy kernel (default cb-8k-gemm)")
    ch.add_argument("--light", default=None, help="the light kernel (default mb-2k-gemv)")
    ch.add_argument("--runs", type=RUNS, default=None, help=f"runs, {RUNS} (default 40)")
    ch.add_argument("--cycles", type=CYCLES, default=None, help=f"heavy/light cycles per run, {CYCLES} (default 4)")
    ch.add_argument("--half-period-ms", type=HALF_PERIOD_MS, default=None,
                    help=f"length of each level, {HALF_PERIOD_MS}, a run at most "
                         f"{CHARACTERIZE_MAX_RUN_MS // 60_000} minutes (default: from the declared sensor)")
    ch.add_argument("--logs", metavar="LOGS.csv",
                    help="characterise from logs recorded elsewhere (CSV with columns t_ns,power_w; host ns) "
                         "instead of running a device; needs --load, or --meter")
    ch.add_argument("--load", metavar="LOAD.csv",
                    help="with --logs: CSV with columns start_ns,end_ns, each interval the load was on, on the "
                         "logs' clock")
    ch.add_argument("--meter", metavar="METER.csv",
                    help="with --logs: a reference meter's log (CSV with columns t_ns,power_w; the logs' clock). "
                         "The sensor is then fitted to the board's measured power, not to the load's square "
                         "wave, and its gain and offset are the field against the meter; --load may be left out")
    ch.add_argument("--out", metavar="FILE", help="write the characterisation (JSON) here")
    ch.add_argument("--json", action="store_true", help="print the characterisation as JSON")


def _add_record_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav record``: a device's power recorded around any command, or for a number of seconds."""
    rec = sub.add_parser(
        "record",
        help="record a GPU's power into a capture while any command runs (or for --seconds); the command's exit "
             "code is fingrav's",
        description=(
            "Record the device's power logs, with the clock brackets that place them on a profiler trace's clock, "
            "while CMD runs (or for --seconds without a command), and save them as a power capture (--out, "
            "read by fingrav trace --power and fingrav_native.load). The capture is journaled beside --out as it "
            "is taken, so a recorder killed outright (SIGKILL, out of memory) keeps all but the last second. "
            "CMD's standard streams are its own; fingrav's lines go to stderr, prefixed 'fingrav record:'. "
            "SIGINT, SIGTERM and SIGHUP are forwarded to CMD (its process group when it leads one; a terminal's "
            "Ctrl-C, which reached CMD already, is not sent twice); the capture is saved once CMD has ended.\n\n"
            "exit codes: CMD's own (128 + N when signal N ended it, as a shell reports it); 127 CMD not found, "
            "126 CMD not executable (nothing recorded); 1 the recording failed (a device, a library); 2 bad "
            "usage; with --seconds: 0, or 128 + N when signal N ended the recording early (the capture saved)"),
        epilog=("examples:\n  fingrav record --device nvidia:0 --out power.npz -- ./my_app --steps 100\n"
                "  fingrav record --device amd:0:socket --out power.npz -- python train.py\n"
                "  fingrav record --device sim-live --out idle.npz --seconds 2"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rec.add_argument("--device", required=True, metavar="DEV",
                     help=f"what to record: {device_usage(lambda k: k.live != 'none')} (sim-live: the simulator "
                          "in real time)")
    rec.add_argument("--out", required=True, metavar="CAPTURE", help="the power capture to write (.npz)")
    rec.add_argument("--seconds", type=RECORD_SECONDS, default=None,
                     help=f"record this long with no command, {RECORD_SECONDS}")
    rec.add_argument("--force", action="store_true",
                     help="replace an existing --out capture (never a file of another kind)")
    rec.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                     help="the command to run while recording, after --")


def _add_run_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """``fingrav run``: any application with its kernel launches captured natively beside the power logs."""
    run = sub.add_parser(
        "run",
        help="run any application with its kernel launches captured natively beside the power; print the "
             "per-kernel table (no profiler trace needed)",
        description=(
            "Run CMD with fingrav's launch-capture tool injected for the device's vendor (ROCm: "
            "ROCP_TOOL_LIBRARIES, rocprofiler-sdk; NVIDIA: CUDA_INJECTION64_PATH, CUPTI) and "
            "FINGRAV_LAUNCH_DIR=DIR/launches, record the device's power as fingrav record does into "
            "DIR/power.npz, then read the launch records, attribute the power logs to them as fingrav trace "
            "does (sensor-aware, with the energy closure where the device has an energy counter), print the "
            "per-kernel table and write fingrav trace's files into DIR. Launch records dropped by a full ring "
            "are counted and said (FINGRAV_LAUNCH_CAPACITY raises the ring's size); no launch records at all "
            "is said with the variable that was set and what to check. fingrav trace DIR reopens the folder. "
            "--device sim makes a shared simulated GPU in DIR (FINGRAV_SIM_DEVICE) for the simulated application, "
            "whose stand-in runtimes load the same tools.\n\n"
            "exit codes: CMD's own (128 + N when signal N ended it); 127 CMD not found, 126 not executable; "
            "1 the recording or the attribution failed; 2 bad usage"),
        epilog=("examples:\n  fingrav run --device amd:0 --out run1/ -- ./my_hip_app\n"
                "  fingrav run --device nvidia:0 --out run2/ -- python train.py --steps 200\n"
                "  fingrav run --device sim --out simrun/ -- \"$(python -c 'from fingrav_native.sim import app_path; "
                "print(app_path())')\" --vendor rocm --seconds 2\n"
                "  fingrav trace run1/ --out run1/figs"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--device", default=None, metavar="DEV",
                     help="the GPU the application runs on: nvidia:N[:MODE], amd:N[:CHANNEL], sim[:SEED] (a "
                          "shared simulated GPU made in --out, for the simulated application), or sim-live (the "
                          "simulator in real time, for an application that writes its own launch file) (default: "
                          "nvidia:0 or amd:0, whichever is found)")
    run.add_argument("--out", default="fingrav-run", metavar="DIR",
                     help="the folder to create (default ./fingrav-run)")
    run.add_argument("--force", action="store_true",
                     help="reuse an existing --out folder of an earlier fingrav run, replacing its files")
    run.add_argument("--top", type=TOP, default=4,
                     help=f"kernels whose stitched profiles are drawn, {TOP} (default 4)")
    run.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="image format (default png)")
    run.add_argument("--min-executions", type=MIN_EXECUTIONS, default=20,
                     help=f"signatures with fewer executions are listed as not profiled, {MIN_EXECUTIONS} "
                          "(default 20)")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]", help="the application, after --")
