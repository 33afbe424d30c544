"""Live sampling demos: a simulated GPU running GEMMs (default), or the synthetic test source."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

from fingrav_native._core import Sampler, SyntheticSource
from fingrav_native.app import _plot as fplot
from fingrav_native.app._profile import profile, profile_interleaved
from fingrav_native.backends._base import Backend, BackendWrapper, KernelSpec
from fingrav_native.backends._sim import SimBackend
from fingrav_native.clocks._piecewise import fit_piecewise_clock_map
from fingrav_native.clocks._twosided import fit_clock_map
from fingrav_native.files._outputs import Writes, check_output_path, write_atomically
from fingrav_native.files._profiles import save_profile
from fingrav_native.files._trace import export_trace
from fingrav_native.method._results import ExecutionProfile, InterleavedProfile, Profile
from fingrav_native.records._recording import RunRecord
from fingrav_native.sim._device import SimGPU

#: The sequence the simulated-GPU demo runs: the paper's heavy and light
#: GEMMs and a memory-bound GEMV (Section V-A), each as one run. cb-4k-gemm's
#: executions are 335 us apart, so a 1 ms logger's samples step only 2 % of
#: an execution further each time (2.98 executions per log): 40 executions
#: gave 14 logs from a quarter of the kernel's phases and a mean 10-30 % off
#: the truth depending on where they began. 200 executions (68 logs) sweep
#: every phase.
SIM_DEMO_SEQUENCE: tuple[tuple[str, int], ...] = (
    ("cb-8k-gemm", 12),
    ("cb-4k-gemm", 200),
    ("mb-8k-gemv", 120),
    ("cb-2k-gemm", 150),
)


def run_sim_demo(
    seed: int = 0,
    period_ns: int = 250_000,
    idle_ns: int = 30_000_000,
    sequence: tuple[tuple[str, int], ...] = SIM_DEMO_SEQUENCE,
    out: Callable[[str], object] = print,
) -> dict[str, Any]:
    """Poll a live simulated GPU's power logger while it runs a GEMM sequence.

    The simulated device runs in real time; the C++ sampler thread polls its
    1 ms power logger (Section III: the logger is agnostic of kernels) at
    ``period_ns``, and each kernel runs as one run of back-to-back
    executions (Section IV-B step 4). Nothing is profiled yet: the report
    shows how many logs landed inside each run, how their mean compares with
    the device's true mean power over the same executions, and what the
    sampling cost.

    Parameters
    ----------
    seed : int
        Seed of the simulated device.
    period_ns : int
        Sampler period in nanoseconds (20 us to 1 s).
    idle_ns : int
        Idle time before each run, so each starts from a cool, parked device.
    sequence : tuple of (kernel, executions)
        Kernels to run, one run each.
    out : callable
        Where lines of the report go (``print`` by default).

    Returns
    -------
    dict
        ``samples`` (SAMPLE_DTYPE), ``runs`` (one dict per run: kernel,
        executions, logs, logged_mean_w, true_mean_w, exec_time_us) and
        ``stats`` (the sampler's counters).
    """
    gpu = SimGPU(seed=seed, realtime=True)
    source = gpu.power_source(depth=4)
    chunks = []
    results = []
    with Sampler(source, period_ns=period_ns) as sampler:
        for kernel, count in sequence:
            gpu.idle(idle_ns)
            chunks.append(sampler.drain())
            results.append((kernel, gpu.run(kernel, count)))
        gpu.idle(5_000_000)  # let the last logs be published
    if sampler.available:
        chunks.append(sampler.drain())
    samples = np.concatenate(chunks)
    stats = sampler.stats()
    out(f"fingrav demo: simulated MI300X-class GPU in real time (seed {seed}); "
        f"the sampler polls its {source.info.native_period_ns / 1e6:g} ms power logger every {period_ns / 1e3:g} us")
    out(f"  {'kernel':<12} {'execs':>5} {'exec us':>8} {'logs':>5} {'logged W':>9} {'true W':>7}")
    runs = []
    for kernel, run in results:
        ex = run.executions
        # Logs are stamped by the device clock; without clock sync (next
        # step) the demo places them with the device's own markers, which
        # share that clock.
        inside = (samples["source_ts"] >= ex["begin_marker_ticks"][0]) & (
            samples["source_ts"] <= ex["end_marker_ticks"][-1])
        logged = samples["total"][inside]
        dur_ns = (ex["end_ns"] - ex["start_ns"]).astype(np.float64)
        true_mean = float(np.sum(ex["mean_total_w"] * dur_ns) / np.sum(dur_ns))
        row = {
            "kernel": kernel,
            "executions": len(ex),
            "exec_time_us": float(np.median(dur_ns) / 1e3),
            "logs": int(inside.sum()),
            "logged_mean_w": float(logged.mean()) if len(logged) else float("nan"),
            "true_mean_w": true_mean,
        }
        runs.append(row)
        out(f"  {kernel:<12} {row['executions']:>5} {row['exec_time_us']:>8.1f} {row['logs']:>5} "
            f"{row['logged_mean_w']:>9.1f} {true_mean:>7.1f}")
    out(f"  sampler: polls {stats.polls}, new logs {stats.samples}, duplicates {stats.duplicates}, "
        f"drops {stats.drops}, logs missed {stats.source_missed}, jitter p99 {stats.jitter_p99_ns / 1e3:.1f} us, "
        f"CPU {100 * stats.cpu_fraction:.1f}% of a core (simulating the device included)")
    out("  a sub-ms execution gets at most one 1 ms log; FinGraV places logs on the kernel's timeline "
        "and stitches many runs into one profile")
    return {"samples": samples, "runs": runs, "stats": stats.as_dict()}


def run_synthetic_demo(
    seconds: float = 1.0,
    period_ns: int = 250_000,
    source_period_ns: int = 1_000_000,
    out: Callable[[str], object] = print,
) -> dict[str, Any]:
    """Sample the synthetic source live and report what arrived.

    The sampler thread polls faster than the source produces readings (as one
    polls a 1 ms hardware logger), keeps only new readings, and the consumer
    drains every 100 ms, as the profiler will between runs.

    Parameters
    ----------
    seconds : float
        How long to sample; must be positive.
    period_ns : int
        Sampler period in nanoseconds (20 us to 1 s).
    source_period_ns : int
        How often the synthetic source produces a new reading.
    out : callable
        Where lines of the report go (``print`` by default).

    Returns
    -------
    dict
        ``samples`` (the drained structured array) and ``stats`` (the
        sampler's counters as a dict).
    """
    if not seconds > 0:
        raise ValueError(f"seconds={seconds}: must be positive")
    source = SyntheticSource(period_ns=source_period_ns, depth=1)
    chunks = []
    with Sampler(source, period_ns=period_ns) as sampler:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))
            chunks.append(sampler.drain())
    # The last poll at stop() may have brought nothing new, and drain() on a
    # stopped, empty sampler raises; after stop() `available` is exact.
    if sampler.available:
        chunks.append(sampler.drain())
    samples = np.concatenate(chunks)
    stats = sampler.stats()
    seqs = samples["source_seq"].astype(np.int64)
    gaps = int(np.count_nonzero(np.diff(seqs) != 1)) if len(seqs) > 1 else 0
    out(f"fingrav demo: synthetic source, a reading every {source_period_ns / 1e3:g} us, "
        f"sampler period {period_ns / 1e3:g} us, {seconds:g} s")
    out(f"  polls {stats.polls}, new readings {stats.samples}, duplicates skipped {stats.duplicates}, "
        f"drops {stats.drops}, source readings missed {stats.source_missed}")
    out(f"  achieved period {stats.mean_period_ns / 1e3:.1f} us, jitter p50 {stats.jitter_p50_ns / 1e3:.1f} us, "
        f"p99 {stats.jitter_p99_ns / 1e3:.1f} us, deadline misses {stats.deadline_misses}")
    out(f"  sampler thread CPU {100 * stats.cpu_fraction:.2f}% of one core")
    if len(samples):
        out(f"  total power: mean {np.nanmean(samples['total']):.1f} W, "
            f"min {np.nanmin(samples['total']):.1f} W, max {np.nanmax(samples['total']):.1f} W; "
            f"sequence gaps {gaps}")
    return {"samples": samples, "stats": stats.as_dict()}


#: The interleaved case the demo profiles: the paper's MB->2K (Section V-C3,
#: Figure 9), 40 memory-bound GEMVs before one compute-light GEMM, whose
#: power falls below its own steady state.
DEMO_KERNEL = "cb-4k-gemm"


DEMO_INTERLEAVED: tuple[str, tuple[tuple[str, int], ...]] = ("cb-2k-gemm", (("mb-4k-gemv", 40),))


class _BracketRecorder(BackendWrapper):
    """A backend that keeps every run's bracketed clock reads for the sync-error figure.

    The profile keeps the fitted clock maps, not the reads they came from;
    the demo wants both, so it wraps the backend and copies each run's
    ``brackets`` on the way through. Everything else is delegated.
    """

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.brackets: list[np.ndarray] = []

    def execute_run(self, kernel: KernelSpec, executions: int, run: int) -> RunRecord:
        rec = super().execute_run(kernel, executions, run)
        self.brackets.append(np.asarray(rec.brackets))
        return rec


class DemoInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_demo`, with what it had written by then.

    A ``KeyboardInterrupt``, so a caller that does not look for it sees
    Ctrl-C as always; ``fingrav demo`` reads it to say what was kept.

    Parameters
    ----------
    out_dir : str
        The demo's folder.
    files : dict of str to str
        Name -> path of every file completed before Ctrl-C (kept, whole);
        the one being written when it came is removed.
    removed_folder : bool
        ``out_dir`` did not exist before the demo, nothing was written in
        it, and it (with any parent folders the demo created) was removed.
    """

    def __init__(self, out_dir: str, files: dict[str, str], removed_folder: bool) -> None:
        super().__init__(f"run_demo interrupted with {len(files)} files written to {out_dir!r}")
        self.out_dir = out_dir
        self.files = files
        self.removed_folder = removed_folder


def _missing_folders(path: str) -> list[str]:
    """The folders ``os.makedirs(path)`` would create, deepest first."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return missing


def _remove_empty(folders: list[str]) -> bool:
    """Remove ``folders`` (deepest first) while they are empty; True if the first one went."""
    removed = 0
    for folder in folders:
        try:
            os.rmdir(folder)  # only an empty folder: never anything someone else put there
        except OSError:
            break
        removed += 1
    return removed > 0


def _energy(ep: ExecutionProfile) -> str:
    e = ep.energy["total"]
    return f"{e.energy_j * 1e3:.3f} +- {e.uncertainty_j * 1e3:.3f} mJ"


def _mean_power(ep: ExecutionProfile) -> tuple[float, float]:
    """Mean total power over the execution and its half-width, from the energy estimate."""
    e = ep.energy["total"]
    return e.energy_j / (ep.duration_ns * 1e-9), e.uncertainty_j / (ep.duration_ns * 1e-9)


def run_demo(out_dir: str = "fingrav-demo", *, seed: int = 0,
             out: Callable[[str], object] = print) -> dict[str, Any]:
    """Profile the paper's CB-4K GEMM (SSE and SSP) and MB->2K on the simulated GPU; write files and figures.

    Runs on the simulated MI300X-class GPU in virtual time, so it is
    deterministic for a seed and takes seconds. It profiles

    1. CB-4K GEMM with ``mode="both"``: the SSE execution (the fourth of
       each run) and the SSP execution the binary search on executions per
       run finds (paper Section IV-A and IV-B step 3);
    2. the paper's interleaved MB->2K case: 40 MB-4K GEMVs, then one
       CB-2K GEMM, against CB-2K's own SSP (Section V-C3, Figure 9).

    Parameters
    ----------
    out_dir : str
        Folder for the files (created if missing; files of the same name
        are overwritten).
    seed : int
        Seed of the simulated device (>= 0).
    out : callable
        Where the summary lines go (``print`` by default).

    Returns
    -------
    dict
        ``profile`` (the CB-4K :class:`~fingrav_native.method.Profile`),
        ``interleaved`` (the :class:`~fingrav_native.app.InterleavedProfile`),
        ``files`` (name -> path of every file written, in the order written),
        ``summary`` (the printed lines) and ``seconds`` (wall time).

    Raises
    ------
    ValueError
        ``seed`` negative or not an integer, or ``out_dir`` an existing file.
    DemoInterrupted
        Ctrl-C (a ``KeyboardInterrupt``): the files completed by then are
        kept, the one under way is removed, and a folder the demo created
        and wrote nothing into is removed again.

    Notes
    -----
    What it writes into ``out_dir``:

    - ``cb-4k-gemm.fgprof`` and ``mb-4k-gemv_then_cb-2k-gemm.fgprof``
      (:func:`~fingrav_native.files.save_profile`; reload with ``load_profile``
      or draw with ``fingrav plot``);
    - ``cb-4k-gemm.trace.json``, the campaign as a Perfetto trace
      (:func:`~fingrav_native.files.export_trace`);
    - figures: ``overview.png`` (whole run, SSE and SSP per component:
      paper Figures 4-7), ``whole_run.png``, ``sse_vs_ssp.png`` (per
      component, Figure 8 style), ``interleaved.png`` (Figure 9),
      ``ssp_search.png`` and ``sync_error.png`` (the device-clock map the
      logs were placed with).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r}: must be an integer >= 0")
    # A folder the disk refuses, or a file in it the demo must not replace, is found now, before seconds of
    # profiling.
    check_output_path(out_dir, "out_dir", folder=True)
    for name in _demo_file_names() if os.path.isdir(out_dir) else ():
        _check_demo_file(out_dir, name)
    import matplotlib

    matplotlib.use("Agg")  # files only; the demo must run on a machine without a display
    # Loaded before the folder is made and the clock starts: a broken matplotlib fails before any work.
    import matplotlib.pyplot  # noqa: F401

    t0 = time.perf_counter()
    seed = int(seed)
    created = _missing_folders(out_dir)
    folder = _DemoFolder(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)  # first, so an unwritable --out fails before seconds of work
        backend = _BracketRecorder(SimBackend(seed=seed))
        prof = profile(DEMO_KERNEL, backend, mode="both", seed=seed)
        il_kernel, il_before = DEMO_INTERLEAVED
        # Its own device: the interleaved case must not inherit CB-4K's heat.
        il = profile_interleaved(il_kernel, list(il_before), SimBackend(seed=seed), seed=seed)
        _write_demo_files(folder, prof, il, backend.brackets)
        # The summary is inside too: Ctrl-C while it is printed still says what was written.
        seconds = time.perf_counter() - t0
        lines = _summary_lines(prof, il, seed, seconds, folder)
        for line in lines:
            out(line)
    except KeyboardInterrupt:
        # Whole files stay; a folder the demo made and left empty goes.
        raise DemoInterrupted(out_dir, dict(folder.files), not folder.files and _remove_empty(created)) from None
    return {"profile": prof, "interleaved": il, "files": folder.files, "summary": lines, "seconds": seconds}


class _DemoFolder:
    """The demo's folder: each file written whole or not at all; ``files`` holds those completed, in order."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.files: dict[str, str] = {}

    def write(self, name: str, writer: Callable[[str], object]) -> None:
        """Write ``name`` with ``writer(path)``."""
        # Under a temporary name, then renamed: a file cut short (Ctrl-C, a
        # full disk) never passes for a whole one, nor replaces an earlier
        # demo's whole one.
        self.files[name] = write_atomically(_check_demo_file(self.out_dir, name), writer)

    def draw(self, name: str, make: Callable[[], Any]) -> None:
        """Save the figure ``make()`` draws as ``name`` (its extension is the format), then close it."""
        import matplotlib.pyplot as plt

        fig = make()
        try:
            self.write(name, lambda p: fig.savefig(p, dpi=120, format=os.path.splitext(name)[1][1:]))
        finally:
            plt.close(fig)


def _demo_file_names() -> list[str]:
    """Every file the demo may write, for the check before its work."""
    il_kernel, il_before = DEMO_INTERLEAVED
    il_stem = "_then_".join([k for k, _ in il_before] + [il_kernel])
    return [f"{DEMO_KERNEL}.fgprof", f"{il_stem}.fgprof", f"{DEMO_KERNEL}.trace.json", "overview.png",
            "whole_run.png", "sse_vs_ssp.png", "interleaved.png", "ssp_search.png", "sync_error.png"]


def _check_demo_file(out_dir: str, name: str) -> str:
    """One of the demo's files through the output guard: it replaces a file of its own kind or a plain one only."""
    kind: Writes = "profile" if name.endswith(".fgprof") else "trace" if name.endswith(".trace.json") else "file"
    return check_output_path(os.path.join(out_dir, name), "out_dir", writes=kind,
                             shown=f"out_dir={out_dir!r}: {name}")


def _write_demo_files(folder: _DemoFolder, prof: Profile, il: InterleavedProfile,
                      brackets_per_run: list[np.ndarray]) -> None:
    """The demo's profiles, trace and figures, in the order the summary lists them."""
    il_kernel, il_before = DEMO_INTERLEAVED
    folder.write(f"{DEMO_KERNEL}.fgprof", lambda p: save_profile(prof, p))
    il_stem = "_then_".join([k for k, _ in il_before] + [il_kernel])
    folder.write(f"{il_stem}.fgprof", lambda p: save_profile(il, p))
    folder.write(f"{DEMO_KERNEL}.trace.json", lambda p: export_trace(prof, p))

    sse, ssp = prof.profiles["sse"], prof.profiles["ssp"]
    search = prof.ssp_search
    folder.draw("overview.png", lambda: figure_overview(prof))
    folder.draw("whole_run.png", lambda: fplot.plot_whole_run(prof).figure)
    folder.draw("sse_vs_ssp.png", lambda: fplot.figure_kernels_by_component(
        [(f"SSE (execution {sse.execution_index})", sse), (f"SSP (execution {ssp.execution_index})", ssp)],
        x="time"))
    folder.draw("interleaved.png", lambda: fplot.plot_interleaved(il).figure)
    if search is not None:
        folder.draw("ssp_search.png", lambda: fplot.plot_ssp_search(search).figure)
    brackets = np.concatenate(brackets_per_run)
    tick = prof.backend.device_tick_ns
    # Fitted as the profile fits its device map (piecewise past 2 s of
    # campaign), over every run's reads, so the band is the clock-map term
    # of the error budget.
    span_ns = float(brackets[:, 0].max() - brackets[:, 0].min())
    cmap = (fit_piecewise_clock_map(brackets, tick_ns=tick) if span_ns > 2e9
            else fit_clock_map(brackets, tick_ns=tick))
    folder.draw("sync_error.png", lambda: fplot.plot_sync_error(brackets, cmap).figure)


def _summary_lines(prof: Profile, il: InterleavedProfile, seed: int, seconds: float,
                   folder: _DemoFolder) -> list[str]:
    """What the demo prints: the two executions of interest, the interleaved case, the error budget, the files."""
    il_kernel, il_before = DEMO_INTERLEAVED
    sse, ssp = prof.profiles["sse"], prof.profiles["ssp"]
    files, out_dir = folder.files, folder.out_dir
    b = prof.error_budget
    p_sse, u_sse = _mean_power(sse)
    p_ssp, u_ssp = _mean_power(ssp)
    lines = [
        f"fingrav demo: {DEMO_KERNEL} on a simulated MI300X-class GPU (virtual time, seed {seed}), "
        f"{seconds:.1f} s",
        f"  {prof.runs} runs in all; the SSP search settled on {ssp.executions_per_run} executions per run, "
        f"so the SSP execution is index {ssp.execution_index} (SSE: index {sse.execution_index})",
        f"  {'':<4}{'execution':>10}{'duration':>10}{'golden runs':>13}{'LOIs/target':>13}"
        f"{'mean power':>14}{'energy/execution':>22}",
    ]
    for label, ep, p, u in (("SSE", sse, p_sse, u_sse), ("SSP", ssp, p_ssp, u_ssp)):
        lines.append(f"  {label:<4}{ep.execution_index:>10}{f'{ep.duration_ns / 1e3:.0f} us':>10}"
                     f"{f'{ep.golden.count}/{ep.golden.total}':>13}{f'{len(ep.lois)}/{ep.loi_target}':>13}"
                     f"{f'{p:.0f} +- {u:.0f} W':>14}{_energy(ep):>22}")
    lines += [
        f"  SSP / SSE mean power: {p_ssp / p_sse:.2f} (one kernel, two power levels: which execution you profile "
        "matters)",
        "  (+- : 95% confidence half-widths; golden runs: runs in the most populated execution-time bin)",
        f"  interleaved {' + '.join(f'{n} x {k}' for k, n in il_before)} -> 1 x {il_kernel}: "
        f"{il.power_ratio:.3f} x its isolated SSP power (paper Fig. 9, MB->2K)",
        f"  error budget (half-widths, us): clock map {b.clock_map_ns / 1e3:.2f} + kernel start "
        f"{b.marker_ns / 1e3:.2f} + logger window {b.logger_window_ns / 1e3:.2f} -> per log {b.total_ns / 1e3:.2f}",
        f"    a log's time inside the execution is known to +-{b.total_ns / 1e3:.2f} us; "
        f"features narrower than ~{2 * b.total_ns / 1e3:.1f} us are not resolved",
        f"  wrote {len(files)} files to {out_dir}/: "
        + ", ".join(os.path.basename(p) for p in files.values()),
        f"  next: fingrav plot {files[f'{DEMO_KERNEL}.fgprof']} --out figs/ ; "
        f"open {files[f'{DEMO_KERNEL}.trace.json']} at https://ui.perfetto.dev",
    ]
    return lines


def figure_overview(prof: Profile) -> object:
    """The demo's main figure: the whole run on top, SSE and SSP per component below.

    Parameters
    ----------
    prof : Profile
        A profile made with ``mode="both"``.

    Returns
    -------
    matplotlib Figure

    Notes
    -----
    Puts side by side what the paper shows in Figures 5-7 (the whole run
    with warm-up, SSE and SSP marked) and Figures 4 and 8 (an execution's
    stitched profile per component, with confidence bands), on one y scale
    so SSE and SSP power compare at a glance (Section IV-A).
    """
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(11, 7), layout="constrained")
    grid = fig.add_gridspec(2, 2)
    fplot.plot_whole_run(prof, fig.add_subplot(grid[0, :]))
    ax_sse = fig.add_subplot(grid[1, 0])
    ax_ssp = fig.add_subplot(grid[1, 1], sharey=ax_sse)
    fplot.plot_kernel(prof.profiles["sse"], ax_sse)
    fplot.plot_kernel(prof.profiles["ssp"], ax_ssp)
    return fig
