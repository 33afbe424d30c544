"""The exit-code table of docs/reference/exit-codes.md, case by case: every item of every cell is run and
gives its column's code.

The table is read from that page, each cell split at "; " into its items;
every item has cases here (and every case an item there), so the table and
the command cannot drift apart. Cases that need hardware, a long campaign or
a Ctrl-C stand in with a monkeypatched step that raises what that situation
raises (a missing library, no logs, KeyboardInterrupt).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from fingrav_native import DeviceUnavailableError, FitTooLargeError, LibraryNotFoundError
from fingrav_native.app import _cli as cli
from fingrav_native.app import _cli_demo, _cli_device, _cli_files, _cli_profile, _cli_run
from fingrav_native.app import _trace as _trace_module
from fingrav_native.method._align import NoLogsInExecutionsError
from fingrav_native.sensors._from_logs import SplitDisagreementWarning

#: The exit-code table, in the documentation's reference.
EXIT_CODES = Path(__file__).resolve().parents[2] / "docs" / "reference" / "exit-codes.md"

CODES = {"0": cli.EXIT_OK, "1": cli.EXIT_FAILURE, "2": cli.EXIT_USAGE, "130": cli.EXIT_INTERRUPTED}


def read_table() -> dict[tuple[str, str, str], None]:
    """(row, code, item) of every item of the exit-code table."""
    text = EXIT_CODES.read_text(encoding="utf-8")
    section = text[text.index("# Exit codes"):]
    lines = [line for line in section.splitlines()[1:] if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    codes = [h.split(":")[0] for h in header[1:]]
    items: dict[tuple[str, str, str], None] = {}
    for line in lines[2:]:
        if not line.startswith("| `") and not line.startswith("| every"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        row = cells[0]
        for code, cell in zip(codes, cells[1:]):
            # The Ctrl-C column says what is kept: one behaviour, one case.
            for item in ([cell] if code in ("0", "130") else cell.split("; ")) if cell else ():
                items[(row, code, item)] = None
    return items


# --- what the cases need ------------------------------------------------------------------------------------------


class Env:
    """A case's surroundings: its folder, monkeypatch, and the shared saved profile."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile_path: str, folder: Callable[[], str]):
        self.tmp = tmp_path
        self.mp = monkeypatch
        self.profile = profile_path
        self._unwritable = folder

    @property
    def unwritable(self) -> str:
        return self._unwritable()

    def raising(self, module: Any, name: str, error: BaseException) -> None:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise error

        self.mp.setattr(module, name, fail)

    def file(self, name: str, text: str = "x") -> str:
        path = self.tmp / name
        path.write_text(text)
        return str(path)

    def campaign(self) -> str:
        out = str(self.tmp / "c")
        assert cli.main(["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "6", "--out", out, "--quiet"]) == 0
        return out

    def csvs(self, follow: bool = True) -> tuple[str, str]:
        """Logs of a 1 ms average every 1 ms over a 20 ms square wave of load (or logs that ignore it)."""
        rng = np.random.default_rng(0)
        t = np.arange(0, 400_000_000, 1_000_000) + 137
        on = np.array([[a, a + 20_000_000] for a in range(5_000_000, 400_000_000, 40_000_000)])
        window = t[:, None] - np.linspace(0, 1_000_000, 50)[None, :]
        level = ((window[..., None] >= on[:, 0]) & (window[..., None] < on[:, 1])).any(axis=2).mean(axis=1)
        p = (100 + 200 * level if follow else np.full(len(t), 100.0)) + rng.normal(0, 2, len(t))
        logs = self.file(f"logs-{follow}.csv", "t_ns,power_w\n" + "".join(f"{a},{b:.3f}\n" for a, b in zip(t, p)))
        # The fit may say its halves disagree (a warning, not the exit code's business).
        warnings.filterwarnings("ignore", category=SplitDisagreementWarning)
        load = self.file("load.csv", "start_ns,end_ns\n" + "".join(f"{a},{b}\n" for a, b in on))
        return logs, load

    def session(self) -> tuple[str, str]:
        from fingrav_native.app import simulate_training_loop

        return simulate_training_loop(120, seed=5, pause_every=30).save(self.tmp / "session")


def _parquet_over_a_capture(env: Env) -> list[str]:
    """``export --parquet DIR`` where DIR's logs.parquet is a measured capture: refused before any table is written."""
    folder = env.tmp / "pq"
    folder.mkdir()
    (folder / "logs.parquet").write_bytes(Path(env.session()[1]).read_bytes())
    return ["export", env.profile, "--parquet", str(folder)]


def _stdout_full(env: Env) -> list[str]:
    class Full:
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    env.mp.setattr(sys, "stdout", Full())
    return ["devices"]


def _devices_available(env: Env, available: bool) -> list[str]:
    from fingrav_native.backends._report import BackendReport

    reports = [BackendReport(backend=b, available=available or b == "sim", reason="" if available else "none here")
               for b in ("sim", "amd", "nvidia")]
    env.mp.setattr(_cli_device, "list_backends", lambda names=None: [r for r in reports
                                                                      if not names or r.backend in names])
    return ["devices"]


def _interrupted(module: Any, name: str, argv: Callable[[Env], list[str]]) -> Callable[[Env], list[str]]:
    def case(env: Env) -> list[str]:
        env.raising(module, name, KeyboardInterrupt())
        return argv(env)
    return case


def _no_logs(env: Env) -> list[str]:
    env.raising(_cli_profile, "profile", NoLogsInExecutionsError("samples: no log falls inside an execution"))
    return ["profile", "cb-4k-gemm", "--out", str(env.tmp / "c")]


def _in_use(env: Env) -> list[str]:
    import threading

    from fingrav_native.files import lock_campaign

    out = str(env.tmp / "held")
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock_campaign(out):
            taken.set()
            done.wait(60)

    threading.Thread(target=hold, daemon=True).start()
    taken.wait(60)
    env.mp.setattr(env, "release", done.set, raising=False)
    return ["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "6", "--out", out]


def _damaged(env: Env) -> list[str]:
    out = env.campaign()
    os.remove(os.path.join(out, "campaign.json"))
    os.symlink("/dev/zero", os.path.join(out, "campaign.json"))
    return ["profile", "--resume", out]


def _foreign_run(env: Env) -> list[str]:
    import shutil

    from fingrav_native.files import run_files

    out = env.campaign()
    other = str(env.tmp / "other")
    assert cli.main(["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "6", "--seed", "2", "--out", other,
                     "--quiet"]) == 0
    shutil.copyfile(run_files(other)[2], run_files(out)[2])
    return ["profile", "--resume", out]


def _trace(env: Env, *, out: str | None = None, power: str | None = None) -> list[str]:
    trace, capture = env.session()
    return ["trace", trace, "--power", power or capture, "--out", out or str(env.tmp / "t"), "--min-executions",
            "20"]


#: An nvidia-smi power log of one GPU (local wall-time stamps, no zone in the file).
_SMI = ("timestamp, index, power.draw [W]\n2024/05/01 14:00:00.000, 0, 100.00 W\n"
        "2024/05/01 14:00:00.020, 0, 101.00 W\n2024/05/01 14:00:00.040, 0, 102.00 W\n")


def _log(env: Env, text: str) -> str:
    """A tool's power log written into the case's folder."""
    path = env.tmp / "power-log.csv"
    path.write_text(text)
    return str(path)


def _trace_data(message: str) -> Callable[[Env], list[str]]:
    def case(env: Env) -> list[str]:
        env.raising(_cli_files, "profile_trace", ValueError(message))
        return _trace(env)
    return case


def _small_trace(env: Env, kernels: int = 12, steps: bool = False) -> tuple[str, str]:
    """The session's first kernels as a Kineto trace of their own (no ProfilerStep unless ``steps``), and its capture."""
    from fingrav_native.files import read_trace, write_kineto_trace

    trace, capture = env.session()
    kt = read_trace(trace)
    ex, sig = kt.executions[:kernels], kt.signatures[kt.executions["kernel_id"][:kernels]]
    start, end = ex["start_ns"] + kt.origin_ns, ex["end_ns"] + kt.origin_ns
    small = write_kineto_trace(env.tmp / "small.json", sig["name"].tolist(), sig["grid"].tolist(),
                               sig["block"].tolist(), start, end, base_time_ns=kt.origin_ns,
                               steps=[(int(start[0]) - 1_000, int(end[-1]) + 1_000)] if steps else None)
    return small, capture


def _trace_small(env: Env) -> list[str]:
    # A trace of a dozen kernels and no ProfilerStep is enough to profile: not refused whole (exit 1).
    small, capture = _small_trace(env)
    return ["trace", small, "--power", capture, "--out", str(env.tmp / "t")]


def _trace_few_steps(env: Env) -> list[str]:
    small, capture = _small_trace(env, steps=True)
    return ["trace", small, "--power", capture, "--out", str(env.tmp / "t")]


def test_a_trace_too_small_to_profile_prints_what_can_be_said(tmp_path, monkeypatch, capsys, saved_profile) -> None:
    # The table is empty; each signature's shortfall and the energy over the kernel span are printed and
    # written to kernels.json, and the command exits 0.
    import json

    env = Env(tmp_path, monkeypatch, saved_profile, lambda: "")
    assert _run(_trace_small(env)) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "no kernel signature could be profiled" in out and "fewer than min_executions=20" in out
    assert "ms of kernels on this device: " in out and " mJ (mean " in out
    doc = json.loads((tmp_path / "t" / "kernels.json").read_text())
    assert doc["kernels"] == [] and doc["iterations"] is None
    assert doc["span"]["logs"] >= 2 and doc["span"]["energy_j"] > 0 and doc["span"]["energy_half_width_j"] > 0


def _trace_onto_input(env: Env) -> list[str]:
    trace, capture = env.session()
    out = os.path.dirname(trace)
    os.replace(trace, os.path.join(out, "power_trace.json.gz"))
    return ["trace", os.path.join(out, "power_trace.json.gz"), "--power", capture, "--out", out]


#: Every item of the table: its cases (argv builders; each may set up files or monkeypatch a step).

# --- record and run -------------------------------------------------------------------------------------------------


def _record(env: Env, *cmd: str, out: str | None = None) -> list[str]:
    return ["record", "--device", "sim-live", "--out", out or str(env.tmp / "p.npz"), "--", *cmd]


def _run_app(env: Env, *cmd: str, out: str | None = None, device: str = "sim-live") -> list[str]:
    return ["run", "--device", device, "--out", out or str(env.tmp / "r"), "--quiet", "--", *cmd]


#: A child that sends Ctrl-C's signal to fingrav (its parent), which forwards it: the child ends by it (130).
_CTRL_C_CHILD = "import os, signal, time; os.kill(os.getppid(), signal.SIGINT); time.sleep(20)"

#: An application that writes its own launch file: 40 kernels of 2 ms on CLOCK_BOOTTIME, over the last 0.2 s.
_LAUNCHING_CHILD = (
    "import os, sys, time\n"
    "import numpy as np\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from launch_files import launch_records, write_launch_file\n"
    "time.sleep(0.3)\n"
    "rows = []\n"
    "for _ in range(16):\n"
    "    a = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW); b = time.clock_gettime_ns(time.CLOCK_BOOTTIME)\n"
    "    rows.append((a, b, time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)))\n"
    "start = rows[0][1] - 250_000_000 + np.arange(40) * 5_000_000\n"
    "rec, names = launch_records(['k'] * 40, start, start + 2_000_000, [[64, 1, 1]] * 40, [[64, 1, 1]] * 40)\n"
    "write_launch_file(os.environ['FINGRAV_LAUNCH_DIR'], rec, names, np.array(rows, dtype=np.int64))\n"
)


def _run_launching(env: Env) -> list[str]:
    from fingrav_native.method._stitched import LogQualityWarning

    # The live simulator idles while the child runs (its kernels run nowhere): its logs are one value, said so.
    warnings.simplefilter("ignore", LogQualityWarning)
    return _run_app(env, sys.executable, "-c", _LAUNCHING_CHILD, str(Path(__file__).resolve().parents[1]))


def _run_with_injection_set(env: Env) -> list[str]:
    env.mp.setattr(_cli_run, "_tool", lambda vendor: f"/lib/fingrav_{vendor}_tool.so")
    env.mp.setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libinjection.so")
    return _run_app(env, "true", device="nvidia:0")


def _run_folder_without_launches(env: Env) -> list[str]:
    import shutil

    folder = env.tmp / "runfolder"
    (folder / "launches").mkdir(parents=True)
    shutil.copy(env.session()[1], folder / "power.npz")
    return ["trace", str(folder), "--out", str(env.tmp / "t")]


def _used_folder(env: Env, name: str) -> str:
    folder = env.tmp / "used"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("x")
    return str(folder)


CASES: dict[tuple[str, str, str], list[Callable[[Env], list[str]]]] = {
    # demo
    ("`demo`", "0", "done"): [lambda e: ["demo", "--live", "--source", "synthetic", "--seconds", "0.05"]],
    ("`demo`", "1", "`--out` cannot be written (permissions, a read-only file system)"):
        [lambda e: ["demo", "--out", os.path.join(e.unwritable, "demo")]],
    ("`demo`", "2", "a number out of range"): [lambda e: ["demo", "--seed", "-1"]],
    ("`demo`", "2", "a `--live` option without `--live`"): [lambda e: ["demo", "--seconds", "1"]],
    ("`demo`", "2", "`--out` with `--live`"): [lambda e: ["demo", "--live", "--out", str(e.tmp / "d")]],
    ("`demo`", "2", "`--out` an existing file"): [lambda e: ["demo", "--out", e.file("f")]],
    ("`demo`", "130", "files completed are kept whole, the one under way is removed, a folder the demo created and "
                      "left empty is removed; the line says which"):
        [_interrupted(_cli_demo, "run_synthetic_demo", lambda e: ["demo", "--live", "--source", "synthetic"])],
    # devices
    ("`devices`", "0", "a hardware backend is usable (with `--backend`: every one named)"):
        [lambda e: _devices_available(e, True), lambda e: _devices_available(e, True) + ["--backend", "nvidia"]],
    ("`devices`", "1", "none is (with `--backend`: one named is not)"):
        [lambda e: _devices_available(e, False), lambda e: _devices_available(e, False) + ["--backend", "amd"]],
    ("`devices`", "2", "an unknown option or backend"):
        [lambda e: ["devices", "--frobnicate"], lambda e: ["devices", "--backend", "tpu"]],
    ("`devices`", "130", "stopped"): [_interrupted(_cli_device, "list_backends", lambda e: ["devices"])],
    # profile
    ("`profile`", "0", "profile saved"): [lambda e: ["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "6",
                                                     "--out", str(e.tmp / "c"), "--quiet"]],
    ("`profile`", "1", "a device, library or workload module missing"):
        [lambda e: (e.raising(_cli_profile, "make_backend", LibraryNotFoundError("libnvidia-ml.so.1: not found"))
                    or ["profile", "cb-4k-gemm", "--backend", "nvidia", "--out", str(e.tmp / "c")]),
         lambda e: (e.raising(_cli_profile, "make_backend", DeviceUnavailableError("no GPU"))
                    or ["profile", "cb-4k-gemm", "--backend", "amd", "--out", str(e.tmp / "c")]),
         lambda e: ["profile", "not_a_module_xyz:fn", "--backend", "nvidia", "--out", str(e.tmp / "c")]],
    ("`profile`", "1", "a campaign that gave no logs"): [_no_logs],
    ("`profile`", "1", "the campaign folder damaged (a file of it unreadable, a link to a device, a FIFO), in use by "
                       "another process or not writable"):
        [_damaged, _in_use, lambda e: ["profile", "cb-4k-gemm", "--out", os.path.join(e.unwritable, "c")]],
    ("`profile`", "1", "a run file of another campaign in it"): [_foreign_run],
    ("`profile`", "2", "a number out of range"): [lambda e: ["profile", "cb-4k-gemm", "--runs", "1"]],
    ("`profile`", "2", "an unknown kernel"): [lambda e: ["profile", "no-such-kernel"]],
    ("`profile`", "2", "a `module:function` that is no workload function (it needs arguments, is a builtin or a "
                       "class)"):
        [lambda e: ["profile", spec, "--backend", "nvidia", "--out", str(e.tmp / "c")]
         for spec in ("json:dumps", "os:abort", "collections:OrderedDict")],
    ("`profile`", "2", "`--out` holding a campaign, a file or empty"):
        [lambda e: ["profile", "cb-4k-gemm", "--out", e.campaign()],
         lambda e: ["profile", "cb-4k-gemm", "--out", e.file("f")], lambda e: ["profile", "cb-4k-gemm", "--out", ""]],
    ("`profile`", "2", "`--resume` with other settings"): [lambda e: ["profile", "--resume", e.campaign(), "--runs",
                                                                     "9"]],
    ("`profile`", "2", "`--executions` with `--mode sse`"):
        [lambda e: ["profile", "cb-4k-gemm", "--mode", "sse", "--executions", "8"]],
    ("`profile`", "2", "`--device` with the simulator"): [lambda e: ["profile", "cb-4k-gemm", "--device", "1"]],
    ("`profile`", "2", "a device string with `--backend`, an unknown one, or the simulator's with `--seed`"):
        [lambda e: ["profile", "cb-4k-gemm", "--backend", "amd", "--device", "nvidia:0"],
         lambda e: ["profile", "cb-4k-gemm", "--device", "tpu:0"],
         lambda e: ["profile", "cb-4k-gemm", "--device", "sim:2", "--seed", "3"]],
    ("`profile`", "130", "every completed run kept; `fingrav profile --resume DIR` goes on"):
        [_interrupted(_cli_profile, "profile", lambda e: ["profile", "cb-4k-gemm", "--out", str(e.tmp / "c")])],
    # sync
    ("`sync`", "0", "report printed"): [lambda e: ["sync", "--seconds", "0.2"]],
    ("`sync`", "1", "a device or library missing"):
        [lambda e: (e.raising(_cli_device, "make_backend", LibraryNotFoundError("libnvidia-ml.so.1: not found"))
                    or ["sync", "--backend", "nvidia"])],
    ("`sync`", "1", "`--out` cannot be written"): [lambda e: ["sync", "--out", os.path.join(e.unwritable, "s.png")]],
    ("`sync`", "2", "a number out of range"): [lambda e: ["sync", "--burst", "1"]],
    ("`sync`", "2", "more than 10,000,000 reads in all"):
        [lambda e: ["sync", "--seconds", "3600", "--interval-ms", "1", "--burst", "10000"]],
    ("`sync`", "2", "`--out` a directory or not a .png, .pdf or .svg name"):
        [lambda e: ["sync", "--out", str(e.tmp)], lambda e: ["sync", "--plot", str(e.tmp / "s")]],
    ("`sync`", "2", "`--device` with the simulator"): [lambda e: ["sync", "--device", "2"]],
    ("`sync`", "2", "`--seed` on amd or nvidia"): [lambda e: ["sync", "--backend", "amd", "--seed", "2"]],
    ("`sync`", "2", "a device string with `--backend`, an unknown one, or the simulator's with `--seed`"):
        [lambda e: ["sync", "--backend", "sim", "--device", "sim:1"], lambda e: ["sync", "--device", "nvidia:0:x"],
         lambda e: ["sync", "--device", "sim", "--seed", "3"]],
    ("`sync`", "130", "stopped; `--out` not written"): [_interrupted(_cli_device, "sync_report", lambda e: ["sync"])],
    # characterize
    ("`characterize`", "0", "done"): [lambda e: ["characterize", "--logs", e.csvs()[0], "--load", e.csvs()[1]]],
    ("`characterize`", "1", "a device or library missing"):
        [lambda e: (e.raising(_cli_device, "make_backend", DeviceUnavailableError("no GPU"))
                    or ["characterize", "--backend", "amd", "--kernel", "cb-4k-gemm", "--light", "mb-2k-gemv"])],
    ("`characterize`", "1", "`--out` cannot be written (a missing folder, permissions)"):
        [lambda e: ["characterize", "--out", str(e.tmp / "no" / "s.json")],
         lambda e: ["characterize", "--out", os.path.join(e.unwritable, "s.json")]],
    ("`characterize`", "2", "a number out of range"): [lambda e: ["characterize", "--cycles", "0"]],
    ("`characterize`", "2", "runs longer than 10 minutes"):
        [lambda e: ["characterize", "--cycles", "1000", "--half-period-ms", "10000"]],
    ("`characterize`", "2", "a wave faster than the sensor resolves"):
        [lambda e: ["characterize", "--half-period-ms", "0.001", "--runs", "4"]],
    ("`characterize`", "2", "an unknown kernel"): [lambda e: ["characterize", "--kernel", "no-such"]],
    ("`characterize`", "2", "`--logs` without `--load` or `--meter`"): [lambda e: ["characterize", "--logs", e.csvs()[0]]],
    ("`characterize`", "2", "`--load` or `--meter` without `--logs`"):
        [lambda e: ["characterize", "--load", e.csvs()[1]], lambda e: ["characterize", "--meter", e.csvs()[0]]],
    ("`characterize`", "2", "a device option with `--logs`"):
        [lambda e: ["characterize", "--logs", e.csvs()[0], "--load", e.csvs()[1], "--runs", "9"]],
    ("`characterize`", "2", "a CSV without its columns"):
        [lambda e: ["characterize", "--logs", e.file("l.csv", "a,b\n1,2\n"), "--load", e.csvs()[1]]],
    ("`characterize`", "2", "logs that do not follow the load"):
        [lambda e: ["characterize", "--logs", e.csvs(follow=False)[0], "--load", e.csvs()[1]]],
    ("`characterize`", "2", "`--out` a directory, one of its CSVs or a campaign's file"):
        [lambda e: ["characterize", "--out", str(e.tmp)],
         lambda e: ["characterize", "--logs", e.csvs()[0], "--load", e.csvs()[1], "--out", e.csvs()[0]],
         lambda e: ["characterize", "--out", os.path.join(e.campaign(), "command.json")]],
    ("`characterize`", "130", "stopped; `--out` not written"):
        [_interrupted(_cli_device, "characterize", lambda e: ["characterize"])],
    # plot, export
    ("`plot`, `export`", "0", "done"): [lambda e: ["export", e.profile, "--summary", str(e.tmp / "s.json")],
                                        lambda e: ["plot", e.profile, "--out", str(e.tmp / "figs")]],
    ("`plot`, `export`", "1", "a profile missing or not a valid profile file"):
        [lambda e: ["plot", str(e.tmp / "absent.fgprof"), "--out", str(e.tmp)],
         lambda e: ["export", e.file("bad.fgprof"), "--summary", str(e.tmp / "s.json")]],
    ("`plot`, `export`", "1", "an output that cannot be written"):
        [lambda e: ["export", e.profile, "--trace", os.path.join(e.unwritable, "t.json")],
         lambda e: ["plot", e.profile, "--out", os.path.join(e.unwritable, "figs")]],
    ("`plot`, `export`", "2", "a number out of range"): [lambda e: ["plot", e.profile, "--dpi", "0"]],
    ("`plot`, `export`", "2", "`export` with nothing to export"): [lambda e: ["export", e.profile]],
    ("`plot`, `export`", "2", "an output that is the profile read, a campaign's file, a saved or measured file of "
                              "another kind, a directory where a file goes, or named twice"):
        [lambda e: ["export", e.profile, "--summary", e.profile],
         lambda e: ["export", e.profile, "--trace", os.path.join(e.campaign(), "campaign.json")],
         lambda e: ["export", os.path.join(e.campaign(), "profile.fgprof"), "--trace", e.profile],
         lambda e: ["export", e.profile, "--summary", str(e.tmp)],
         lambda e: ["export", e.profile, "--summary", str(e.tmp / "x"), "--trace", str(e.tmp / "x")],
         lambda e: ["export", e.profile, "--summary", e.session()[1]], _parquet_over_a_capture],
    ("`plot`, `export`", "130", "files named so far are whole; none is ever half written (each is written beside "
                                "and renamed)"):
        [_interrupted(_cli_files, "_load", lambda e: ["plot", e.profile, "--out", str(e.tmp)])],
    # trace
    ("`trace`", "0", "done (also when the energy closure fails: a warning on stderr; and when no signature can be "
                     "profiled: an empty table and the signatures not profiled counted by reason, each one's "
                     "reason in `kernels.json`, with the energy per iteration or over the trace's kernel span)"): [_trace, _trace_small, _trace_few_steps],
    ("`trace`", "1", "the trace or capture missing or malformed"):
        [lambda e: _trace(e, power=e.file("junk.npz")), lambda e: ["trace", str(e.tmp / "absent.json"), "--power",
                                                                   e.file("p.npz"), "--out", str(e.tmp / "t")]],
    ("`trace`", "1", "logs that cover none of the trace's kernels (a clock mismatch)"):
        [_trace_data("samples: no power log falls within the trace's kernels (a clock mismatch)")],
    ("`trace`", "1", "a capture that does not bracket the trace's clock (recorded before format version 2, with a "
                     "rocprofv3 trace)"):
        [_trace_data("samples: the trace's kernels are stamped on CLOCK_BOOTTIME (rocprofv3), and this capture "
                     "brackets only CLOCK_REALTIME")],
    ("`trace`", "1", "a tool's power log that is malformed (not a format read, a unit not W or mW, time going "
                     "back, no value)"):
        [lambda e: _trace(e, power=_log(e, "time,watts\n1,2\n")),
         lambda e: _trace(e, power=_log(e, "gpu,socket_power\n0,3 kW\n")),
         lambda e: _trace(e, power=_log(e, _SMI.replace(".040", ".001").replace(".020", ".040"))) + ["--log-tz", "UTC"],
         lambda e: _trace(e, power=_log(e, "gpu,socket_power,timestamp\n0,N/A,1\n"))],
    ("`trace`", "1", "an averaging sensor's joint fit past its memory budget (its kernel classes and columns named)"):
        [lambda e: e.raising(_cli_files, "profile_trace", FitTooLargeError(
            "classes: 417 kernel classes (signatures) x their columns (...): samples: the fit has 2929 unknowns "
            "(columns) in each of 7 candidate models; their normal matrices over 10 blocks of logs need 9.9 GiB, "
            "more than the 2.0 GiB budget")) or _trace(e)],
    ("`trace`", "1", "`--out` cannot be written"): [lambda e: _trace(e, out=os.path.join(e.unwritable, "t"))],
    ("`trace`", "2", "a number out of range"): [lambda e: ["trace", "t.json", "--power", "p.npz", "--top", "0"]],
    ("`trace`", "2", "an unknown sensor preset"): [lambda e: _trace(e) + ["--sensor", "no-such-sensor"]],
    ("`trace`", "2", "a `--device` the trace has no kernels of, or none with kernels of several GPUs"):
        [lambda e: _trace(e) + ["--device", "7"]],
    ("`trace`", "2", "a tool's power log without what it lacks (`--log-tz` for local wall-time stamps, `--log-start` "
                     "and `--log-period` for a log without times, `--device` for a log of several GPUs, `--sensor` "
                     "for a column no preset describes)"):
        [lambda e: _trace(e, power=_log(e, _SMI)),
         lambda e: _trace(e, power=_log(e, "device,Current Socket Graphics Package Power (W)\ncard0,35\n")),
         lambda e: _trace(e, power=_log(e, _SMI.replace(", 0,", ", 1,", 1))) + ["--log-tz", "UTC"],
         lambda e: _trace(e, power=_log(e, "gpu,average_socket_power,timestamp\n0,300,1\n"))],
    ("`trace`", "2", "`--out` holding the trace or capture read"): [_trace_onto_input],
    ("`trace`", "2", "`--annotate` a folder, in a missing or unwritable folder, the trace itself, the capture read, "
                     "one of `--out`'s files, a measured or saved file of another kind (with `--force` too), or an "
                     "existing file without `--force` (refused before any work)"):
        [lambda e: _trace(e) + ["--annotate", str(e.tmp)],
         lambda e: _trace(e) + ["--annotate", os.path.join(str(e.tmp), "missing", "a.json")],
         lambda e: _trace(e) + ["--annotate", e.session()[1], "--force"],
         lambda e: _trace(e, out=str(e.tmp)) + ["--annotate", str(e.tmp / "kernels.json")],
         lambda e: _trace(e) + ["--annotate", e.profile, "--force"]],
    ("`trace`", "2", "`--force` without `--annotate`"): [lambda e: _trace(e) + ["--force"]],
    ("`trace`", "130", "files named so far are whole; none is ever half written (each is written beside and "
                       "renamed)"):
        [_interrupted(_cli_files, "profile_trace", _trace)],
    # record
    ("`record`", "0", "the command's own exit status, passed through (128 + N when signal N ended it; 127 a command "
                      "not found and 126 one not executable, nothing recorded); with `--seconds`, done (128 + N when "
                      "signal N ended it early, the capture saved)"):
        [lambda e: _record(e, "true"),
         lambda e: ["record", "--device", "sim-live", "--out", str(e.tmp / "p.npz"), "--seconds", "0.1"]],
    ("`record`", "1", "a device or library missing"):
        [lambda e: (e.raising(_cli_run, "PowerRecorder", LibraryNotFoundError("libnvidia-ml.so.1 not found"))
                    or ["record", "--device", "nvidia:0", "--out", str(e.tmp / "p.npz"), "--", "true"])],
    ("`record`", "1", "`--out` cannot be written"): [lambda e: _record(e, "true", out=os.path.join(e.unwritable, "p.npz"))],
    ("`record`", "2", "no command and no `--seconds`, or both"):
        [lambda e: _record(e)[:-1], lambda e: _record(e, "true")[:-2] + ["--seconds", "1", "--", "true"]],
    ("`record`", "2", "`--out` existing without `--force`, or a file of another kind or a folder (with `--force` too)"):
        [lambda e: _record(e, "true", out=e.session()[1]),
         lambda e: _record(e, "true", out=e.profile)[:-2] + ["--force", "--", "true"],
         lambda e: _record(e, "true", out=str(e.tmp))[:-2] + ["--force", "--", "true"]],
    ("`record`", "2", "`--device sim` (virtual time has no live power)"):
        [lambda e: ["record", "--device", "sim", "--out", str(e.tmp / "p.npz"), "--", "true"]],
    ("`record`", "130", "forwarded to the command; the capture is saved once it ends, and its status is fingrav's"):
        [lambda e: _record(e, sys.executable, "-c", _CTRL_C_CHILD)],
    # run
    ("`run`", "0", "the application's own exit status, passed through (128 + N when signal N ended it; 127 a "
                   "command not found and 126 one not executable, nothing run), the per-kernel table printed and "
                   "`fingrav trace`'s files written into `--out`"): [_run_launching],
    ("`run`", "1", "a device, library or launch-capture tool missing"):
        [lambda e: (e.raising(_cli_run, "_tool", RuntimeError("the rocm launch-capture tool is not installed"))
                    or _run_app(e, "true", device="amd:0"))],
    ("`run`", "1", "no launch record came (the tool did not load: the variables set are named, and a note of the "
                   "tool such as another subscriber)"): [lambda e: _run_app(e, "true")],
    ("`run`", "1", "an averaging sensor's joint fit past its memory budget (its kernel classes and columns named)"):
        [lambda e: e.raising(_trace_module, "profile_trace", FitTooLargeError(
            "classes: 417 kernel classes (signatures) x their columns (...): samples: the fit has 2929 unknowns "
            "(columns) in each of 7 candidate models; their normal matrices over 10 blocks of logs need 9.9 GiB, "
            "more than the 2.0 GiB budget")) or _run_launching(e)],
    ("`run`", "1", "launch files or the capture malformed"):
        [lambda e: _run_app(e, "sh", "-c", 'printf junk > "$FINGRAV_LAUNCH_DIR/launches.1.journal"')],
    ("`run`", "1", "`--out` cannot be written"): [lambda e: _run_app(e, "true", out=os.path.join(e.unwritable, "r"))],
    ("`run`", "2", "no command"): [lambda e: _run_app(e)[:-1]],
    ("`run`", "2", "an unknown `--device`"): [lambda e: _run_app(e, "true", device="tpu:0")],
    ("`run`", "2", "`--out` not empty without `--force`, or holding files no `fingrav run` wrote (with `--force` "
                   "too)"):
        [lambda e: _run_app(e, "true", out=_used_folder(e, "power.npz")),
         lambda e: _run_app(e, "true", out=_used_folder(e, "mine.txt"))[:-2] + ["--force", "--", "true"]],
    ("`run`", "2", "`CUDA_INJECTION64_PATH` set already to another library"): [_run_with_injection_set],
    ("`run`", "130", "forwarded to the application; the capture is saved once it ends, and its status is fingrav's"):
        [lambda e: _run_app(e, sys.executable, "-c", _CTRL_C_CHILD)],
    ("`trace`", "1", "a `fingrav run` folder without launch files"): [_run_folder_without_launches],
    ("`trace`", "2", "`--power` missing with a trace file, or given with a `fingrav run` folder (it holds its own)"):
        [lambda e: ["trace", e.file("t.json"), "--out", str(e.tmp / "t")],
         lambda e: (_run_folder_without_launches(e) and
                    ["trace", str(e.tmp / "runfolder"), "--power", e.session()[1], "--out", str(e.tmp / "t")])],
    # every command
    ("every command", "1", "standard output that cannot be written (a full disk)"): [_stdout_full],
    ("every command", "130", "interrupted while it starts (its modules loading, its arguments read): one line, "
                             "nothing written"):
        [_interrupted(cli, "build_parser", lambda e: [command]) for command in ("devices", "profile", "trace")],
    ("`fingrav` alone", "2", "prints the help"): [lambda e: []],
    ("`help`", "0", "the command's help printed, as `fingrav COMMAND --help` prints it"):
        [lambda e: ["help", "trace"], lambda e: ["help"]],
    ("`help`", "2", "an unknown command"): [lambda e: ["help", "nosuch"]],
    ("`fingrav --version`", "0", "the package's version printed"): [lambda e: ["--version"]],
}


def test_every_item_of_the_table_has_cases_and_every_case_an_item():
    table = read_table()
    assert set(CASES) == set(table), (sorted(set(table) - set(CASES)), sorted(set(CASES) - set(table)))


@pytest.fixture(scope="module")
def saved_profile(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("exit-codes") / "c")
    assert cli.main(["profile", "cb-4k-gemm", "--mode", "sse", "--runs", "6", "--out", out, "--quiet"]) == 0
    return os.path.join(out, "profile.fgprof")


def _run(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exc:  # argparse: an option it cannot parse, or out of its range
        return int(exc.code or 0)


@pytest.mark.parametrize("key", list(CASES), ids=lambda k: f"{k[0]}-{k[1]}-{k[2][:40]}")
def test_each_documented_case_gives_its_exit_code(key, tmp_path, monkeypatch, capsys, saved_profile, request):
    row, code, item = key
    if code == "130" and signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        # A command owns Ctrl-C only over Python's own handler (a job started in the background ignores SIGINT).
        pytest.skip("SIGINT is not Python's default handler here")
    for i, case in enumerate(CASES[key]):
        folder = tmp_path / str(i)
        folder.mkdir()
        monkeypatch.chdir(folder)
        env = Env(folder, monkeypatch, saved_profile, lambda: request.getfixturevalue("unwritable_folder"))
        try:
            got = _run(case(env))
        finally:
            getattr(env, "release", lambda: None)()
        out, err = capsys.readouterr()
        assert got == CODES[code], f"{row} {item!r} (case {i}): exit {got}, not {code}: {err}"
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        if code in ("1", "2") and lines and item != "prints the help":
            # One line naming the cause (argparse's refusals are its usage line and the error); `run` reports the
            # launches it read before it analyses them, and the cause is then the line after that report.
            report = ("launch clock", "kernel executions of") if row == "`run`" else ()
            cause = [line for line in lines if not any(r in line for r in report)]
            assert len(cause) == 1 or (code == "2" and lines[0].startswith("usage:")), err
        monkeypatch.undo()
