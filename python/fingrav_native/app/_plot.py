"""Plots in the paper's style, readable in black and white.

Every function takes result objects (never raw device handles), an optional
``ax`` to draw into, and returns the Axes. matplotlib is imported when a
function is called, so the rest of the package works without it. Channels
are told apart by line style and marker as well as colour, so a figure
printed in grey keeps its meaning.
"""

from __future__ import annotations

import textwrap
from typing import Any, Literal, Mapping, Optional, Sequence, cast

import numpy as np

from fingrav_native._checks import choice, flag, integer_in, short_repr, tick_length, whole_numbers
from fingrav_native.clocks._maps import ClockMapLike
from fingrav_native.insitu._results import TraceProfile, shown_name
from fingrav_native.method._results import ExecutionProfile, InterleavedProfile, Profile
from fingrav_native.method._steady import SspSearch
from fingrav_native.method._stitched import StitchedChannel

#: A power channel a figure draws.
Channel = Literal["total", "compute", "io", "memory", "rest"]
#: What a kernel's profile is drawn over: fraction of the execution, or time in it.
PlotX = Literal["fraction", "time"]

# Channel -> (line style, marker, colour): distinct in colour and in grey.
_STYLE: dict[str, tuple[Any, str, str]] = {
    "total": ("-", "o", "black"),
    "compute": ("--", "s", "tab:blue"),
    "io": ("-.", "^", "tab:orange"),
    "memory": (":", "D", "tab:green"),
    # Total minus memory, where the device reports memory power and no other component (NVIDIA's memory scope).
    "rest": ((0, (5, 1, 1, 1)), "v", "tab:purple"),
}


_CYCLE = [("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 1)), "P")]


_GREYS = ["0.0", "0.35", "0.55", "0.7", "0.2", "0.45"]


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    return ax


def _channels(channels: Any) -> list[Channel]:
    """A sequence of channel names, each one of the plotted four (a bare string is one name, not letters)."""
    if isinstance(channels, (str, bytes)) or not isinstance(channels, (list, tuple)) or not channels:
        raise ValueError(f"channels={short_repr(channels)}: must be a non-empty sequence of {sorted(_STYLE)}")
    for name in channels:
        if not isinstance(name, str) or name not in _STYLE:
            raise ValueError(f"channels: unknown channel {short_repr(name)}; one of {sorted(_STYLE)}")
    return cast(list[Channel], list(channels))


def _x_of(ch: StitchedChannel) -> tuple[np.ndarray, Optional[np.ndarray], float, str]:
    """Bin centres, fit grid and label in the unit a reader expects (us or %)."""
    if ch.x == "time":
        return ch.bin_centres / 1e3, ch.fit_x / 1e3 if ch.fit_x is not None else None, 1e3, "time in execution (us)"
    return ch.bin_centres * 100, ch.fit_x * 100 if ch.fit_x is not None else None, 0.01, "execution progress (%)"


def plot_whole_run(profile: Profile, ax: Any = None, *, max_runs: Optional[int] = None) -> Any:
    """Every golden run's logs on time since run start, with warm-up, SSE and SSP marked.

    Parameters
    ----------
    profile : Profile
        A profile from :func:`~fingrav_native.profile`.
    ax : matplotlib Axes, optional
        Where to draw; a new figure otherwise.
    max_runs : int, optional
        Show only this many runs' logs (all by default).

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    Paper Figures 5-7: the whole-run view that shows the initial rise, the
    SSE execution (Section IV-A) and where power reaches steady state (SSP).
    """
    if not isinstance(profile, Profile) or profile.whole_run is None:
        raise ValueError("profile: expected a Profile with a whole-run view")
    wr = profile.whole_run
    ax = _axes(ax)
    keep = np.ones(len(wr.t_ns), dtype=bool)
    if max_runs is not None:
        keep = np.isin(wr.run, wr.runs[:integer_in(max_runs, "max_runs", 1)])
    t_ms = wr.t_ns / 1e6
    ax.plot(t_ms[keep], wr.value[keep], linestyle="none", marker=".", markersize=3, color="0.25",
            label=f"logs ({len(np.unique(wr.run[keep]))} golden runs)")
    # Execution boundaries: thin ticks at the top, one per execution.
    for s in wr.boundary_start_ns:
        ax.axvline(s / 1e6, color="0.8", linewidth=0.5, zorder=0)
    if wr.warmup_end_ns is not None:
        ax.axvspan(0, wr.warmup_end_ns / 1e6, facecolor="none", edgecolor="0.6", hatch="///", linewidth=0,
                   label="warm-up")
    if wr.sse_start_ns is not None and wr.sse_end_ns is not None:
        ax.axvspan(wr.sse_start_ns / 1e6, wr.sse_end_ns / 1e6, facecolor="0.85", edgecolor="0.4", linewidth=0.8,
                   label=f"SSE (execution {wr.sse_index})")
    ax.axvspan(wr.ssp_start_ns / 1e6, wr.ssp_end_ns / 1e6, facecolor="none", edgecolor="0.2", hatch="\\\\\\",
               linewidth=0.8, label="SSP (last execution)")
    ax.set_xlabel("time since run start (ms)")
    ax.set_ylabel("total power (W)")
    ax.set_title(f"{profile.kernel}: whole run ({profile.settings.get('executions_per_run', '?')} executions)")
    # Outside the axes: the logs fill the whole plot area, and inside, any
    # corner hides some (the last partial wave's low logs sit bottom right).
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", borderaxespad=0)
    return ax


def plot_kernel(ep: ExecutionProfile, ax: Any = None, *,
                channels: Sequence[Channel] = ("total", "compute", "io", "memory", "rest"),
                bands: bool = True) -> Any:
    """One execution's stitched profile per component, with confidence bands.

    Parameters
    ----------
    ep : ExecutionProfile
        ``profile.profiles["sse"]`` or ``["ssp"]``.
    ax : matplotlib Axes, optional
    channels : sequence of {"total", "compute", "io", "memory", "rest"}
        Channels to draw (those the logger lacks are skipped); ``"rest"`` is total minus memory where
        the device reports memory power and no other component (NVIDIA's memory scope).
    bands : bool
        Shade the smooth fit's simultaneous confidence band (each bin's
        interval where the profile has no fit band: a deconvolution, or a
        file written before the band existed).

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    Paper Figures 4 and 8: binned means of the LOIs (markers), the smooth
    fit (line) of Section IV-B step 8 and its band. At Table I's density
    most bins hold one or two LOIs, whose own intervals say little; the
    fit's band holds over the whole curve, so a bump inside it is not
    supported by the LOIs.
    """
    if not isinstance(ep, ExecutionProfile):
        raise ValueError(f"ep: expected an ExecutionProfile, got {type(ep).__name__}")
    names = _channels(channels)
    bands = flag(bands, "bands")
    ax = _axes(ax)
    by_name = {c.name: c for c in ep.stitched.channels}
    drawn = 0
    low_w, high_w = np.inf, -np.inf
    for name in names:
        ch = by_name.get(name)
        if ch is None or not np.isfinite(ch.mean).any():
            continue
        ls, mk, col = _STYLE[name]
        x, fx, _, xlabel = _x_of(ch)
        ok = np.isfinite(ch.mean)
        curve = np.concatenate([ch.mean[ok], np.asarray(ch.fit_y if fx is not None else [], dtype=float)])
        low_w, high_w = min(low_w, float(np.nanmin(curve))), max(high_w, float(np.nanmax(curve)))
        if bands and fx is not None and len(ch.fit_low) == len(fx) and np.isfinite(ch.fit_low).any():
            good = np.isfinite(ch.fit_low) & np.isfinite(ch.fit_high)
            ax.fill_between(fx[good], ch.fit_low[good], ch.fit_high[good], color=col, alpha=0.18, linewidth=0)
        elif bands:
            lo, hi = ch.ci_low, ch.ci_high
            good = ok & np.isfinite(lo) & np.isfinite(hi)
            ax.fill_between(x[good], lo[good], hi[good], color=col, alpha=0.18, linewidth=0)
        ax.plot(x[ok], ch.mean[ok], linestyle="none", marker=mk, markersize=3.5, color=col, markerfacecolor="white")
        if fx is not None and len(ch.fit_y):
            ax.plot(fx, ch.fit_y, linestyle=ls, color=col, linewidth=1.6, label=name)
        else:
            ax.plot(x[ok], ch.mean[ok], linestyle=ls, color=col, linewidth=1.2, label=name)
        ax.set_xlabel(xlabel)
        drawn += 1
    if drawn == 0:
        raise ValueError("channels: none of them has data in this profile")
    ax.set_ylabel("power (W)")
    ax.set_title(f"{ep.label.upper()} execution {ep.execution_index}: {ep.golden.count} golden runs, "
                 f"{len(ep.lois)} LOIs")
    # Scale to the curves, not the bands: a bin with one or two LOIs has an
    # interval hundreds of watts wide that would flatten every curve; such a
    # band runs off the axes, which reads as "unknown here". The headroom
    # keeps the legend row clear of the curves.
    top = max(high_w, 1.0)
    ax.set_ylim(min(0.0, low_w), top * 1.3)
    ax.legend(fontsize="small", ncols=min(drawn, 4), loc="upper center")
    return ax


def _as_mapping(profiles: Any) -> Mapping[str, ExecutionProfile]:
    out: dict[str, ExecutionProfile] = {}
    items = profiles.items() if isinstance(profiles, Mapping) else profiles
    if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
        raise ValueError(f"profiles={short_repr(profiles)}: must be a mapping or sequence of (name, Profile or "
                         "ExecutionProfile)")
    items = list(items)
    if not all(isinstance(it, (tuple, list)) and len(it) == 2 for it in items):
        raise ValueError("profiles: must be a mapping or sequence of (name, Profile or ExecutionProfile) pairs")
    for name, p in items:
        if isinstance(p, Profile):
            p = p.profiles.get("ssp") or next(iter(p.profiles.values()))
        if not isinstance(p, ExecutionProfile):
            raise ValueError(f"profiles: {name!r} is a {type(p).__name__}, not a Profile or ExecutionProfile")
        out[str(name)] = p
    if not out:
        raise ValueError("profiles: empty")
    return out


def plot_kernels(profiles: Any, channel: Channel = "total", ax: Any = None, *, x: PlotX = "fraction") -> Any:
    """Several kernels' stitched profiles of one component, side by side on one axis.

    Parameters
    ----------
    profiles : mapping or sequence of (name, Profile or ExecutionProfile)
        A Profile contributes its SSP profile (else its only one).
    channel : {"total", "compute", "io", "memory"}
        Component to show.
    ax : matplotlib Axes, optional
    x : {"fraction", "time"}
        Execution progress (comparable across kernels of different
        duration, as in the paper) or time in execution.

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    Paper Figures 8 and 10: compute-bound vs memory-bound GEMMs per
    component (Section V-C).
    """
    choice(channel, "channel", tuple(_STYLE))
    choice(x, "x", ("fraction", "time"))
    eps = _as_mapping(profiles)
    ax = _axes(ax)
    for i, (name, ep) in enumerate(eps.items()):
        ch = next((c for c in ep.stitched.channels if c.name == channel), None)
        if ch is None:
            continue
        ls, mk = _CYCLE[i % len(_CYCLE)]
        grey = _GREYS[i % len(_GREYS)]
        ok = np.isfinite(ch.mean)
        xs = ch.bin_centres[ok]
        if ch.x == "time":
            xs = xs / ep.duration_ns if x == "fraction" else xs / 1e3
        elif x == "time":
            xs = xs * ep.duration_ns / 1e3
        if x == "fraction":
            xs = xs * 100
        ax.plot(xs, ch.mean[ok], linestyle=ls, marker=mk, markersize=3, color=grey, markerfacecolor="white",
                label=f"{name} ({ep.duration_ns / 1e3:.0f} us)")
    ax.set_xlabel("execution progress (%)" if x == "fraction" else "time in execution (us)")
    ax.set_ylabel(f"{channel} power (W)")
    ax.set_title(channel)
    ax.legend(fontsize="x-small")
    return ax


def figure_kernels_by_component(profiles: Any, *,
                                channels: Sequence[Channel] = ("total", "compute", "io", "memory"),
                                x: PlotX = "fraction") -> Any:
    """A figure with one panel per component, kernels side by side in each.

    Parameters
    ----------
    profiles : mapping or sequence of (name, Profile or ExecutionProfile)
    channels : sequence of {"total", "compute", "io", "memory"}
    x : {"fraction", "time"}

    Returns
    -------
    matplotlib Figure

    Notes
    -----
    Paper Figures 8 and 10 (see :func:`plot_kernels`).
    """
    import matplotlib.pyplot as plt

    names = _channels(channels)
    choice(x, "x", ("fraction", "time"))
    _as_mapping(profiles)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.6), layout="constrained",
                             squeeze=False)
    for ax, ch in zip(axes[0], names):
        plot_kernels(profiles, ch, ax, x=x)
    # The kernels are the same in every panel: one legend under the figure
    # instead of one per panel sitting on some panel's curves.
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0]:
        leg = ax.get_legend()
        if leg is not None:
            leg.remove()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), fontsize="small")
    return fig


def plot_interleaved(il: InterleavedProfile, ax: Any = None, *, channel: Channel = "total") -> Any:
    """A kernel run after other kernels against its own steady-state profile.

    Parameters
    ----------
    il : InterleavedProfile
        From :func:`~fingrav_native.profile_interleaved`.
    ax : matplotlib Axes, optional
    channel : {"total", "compute", "io", "memory"}

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    Paper Figure 9 (Section V-C3): power-light kernels pulled up or down by
    what ran before them.
    """
    if not isinstance(il, InterleavedProfile):
        raise ValueError(f"il: expected an InterleavedProfile, got {type(il).__name__}")
    choice(channel, "channel", tuple(_STYLE))
    before = " + ".join(f"{k} x{n}" for k, n in il.preceded_by)
    ax = plot_kernels([(f"after {before}", il.scenario), ("isolated (SSP)", il.reference)], channel, ax)
    ax.set_title(f"{il.reference.kernel}: interleaved / isolated = {il.power_ratio:.3f}")
    return ax


def plot_ssp_search(search: SspSearch, ax: Any = None) -> Any:
    """The SSP binary search: each probe's power against executions per run.

    Parameters
    ----------
    search : SspSearch
        ``profile.ssp_search``.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    Paper Section IV-B step 3: the search doubles the executions per run
    until the last execution's power stops changing, then bisects.
    """
    if not isinstance(search, SspSearch):
        raise ValueError(f"search: expected an SspSearch, got {type(search).__name__}")
    ax = _axes(ax)
    marks = {"start": ("o", "black"), "double": ("s", "0.35"), "bisect": ("^", "0.6")}
    for phase, (mk, col) in marks.items():
        steps = [s for s in search.trace if s.phase == phase]
        if not steps:
            continue
        ax.errorbar([s.executions for s in steps], [s.measurement.mean_w for s in steps],
                    yerr=[2 * s.measurement.stderr_w for s in steps], linestyle="none", marker=mk, color=col,
                    markerfacecolor="white" if phase != "start" else col, capsize=2, label=phase)
    for i, s in enumerate(search.trace):
        ax.annotate(str(i), (s.executions, s.measurement.mean_w), textcoords="offset points", xytext=(4, 4),
                    fontsize="x-small", color="0.3")
    ax.axvline(search.executions, color="black", linestyle="--", linewidth=1,
               label=f"SSP at {search.executions} executions")
    ax.axhline(search.steady_power_w, color="0.5", linestyle=":", linewidth=1,
               label=f"steady power {search.steady_power_w:.0f} W")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("executions per run")
    ax.set_ylabel("power of the last execution (W)")
    ax.set_title("SSP search" + ("" if search.converged else " (not converged)"))
    ax.legend(fontsize="small")
    return ax


def plot_sync_error(brackets: np.ndarray, clock_map: ClockMapLike, ax: Any = None, *, tick_ns: float = 1.0,
                    max_brackets: int = 1500) -> Any:
    """How far each bracketed read lies from a fitted clock map, with the map's error bound.

    Parameters
    ----------
    brackets : numpy.ndarray
        (n, 3) int64 bracketed reads ``(host_before, device_ticks, host_after)``.
    clock_map : ClockMap, PiecewiseClockMap or any ClockMapLike
        The fitted map.
    ax : matplotlib Axes, optional
    tick_ns : float
        Unused by the map (it knows its tick); kept for labelling raw ticks.
    max_brackets : int
        Draw at most this many brackets (evenly spaced); every read's
        residual is still drawn. Ten thousand overlapping bars are a grey
        wall that hides the bound.

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    The clock-map step that places logs and markers on one timeline (paper
    Section IV-B step 2): a read is consistent with the map when the mapped
    device time falls inside its bracket; the band is the map's bound.
    """
    b = whole_numbers(brackets, "brackets", -(2**63), 2**63 - 1)
    if b.ndim != 2 or b.shape[1] != 3 or len(b) == 0:
        raise ValueError(f"brackets: expected an (n, 3) array, got shape {b.shape}")
    integer_in(max_brackets, "max_brackets", 1)
    tick_length(tick_ns, "tick_ns")  # as the clock fits
    if not callable(getattr(clock_map, "to_host", None)):
        raise ValueError(f"clock_map={short_repr(clock_map)}: must be a clock map (with to_host)")
    ax = _axes(ax)
    before, ticks, after = b[:, 0], b[:, 1], b[:, 2]
    t0 = float(before.min())
    mid = before + (after - before) / 2.0
    mapped = np.asarray(clock_map.to_host(ticks), dtype=np.float64)
    resid = mapped - mid
    half = (after - before) / 2.0
    span_s = float(mid.max() - t0) / 1e9
    scale, unit = (1e9, "s") if span_s >= 1 else (1e6, "ms")
    x_s = (mid - t0) / scale
    order = np.argsort(x_s)
    bound = np.asarray(clock_map.error_bound_at(mid), dtype=np.float64)
    # Brackets light, the map's residual dark, the bound as dashed lines:
    # the three stay apart in grey print even when they overlap.
    shown = np.unique(np.linspace(0, len(b) - 1, min(len(b), max_brackets)).astype(np.int64))
    ax.errorbar(x_s[shown], resid[shown], yerr=half[shown], linestyle="none", color="0.75", elinewidth=0.5,
                label="read bracket (half-width)" + ("" if len(shown) == len(b) else f", {len(shown)} shown"))
    ax.plot(x_s, resid, linestyle="none", marker=".", markersize=3, color="black",
            label="mapped - bracket midpoint")
    ax.plot(x_s[order], bound[order], linestyle="--", color="black", linewidth=1, label="map error bound")
    ax.plot(x_s[order], -bound[order], linestyle="--", color="black", linewidth=1)
    ax.axhline(0, color="black", linewidth=0.6)
    lim = float(np.percentile(np.abs(resid) + half, 99)) * 1.5 + 1.0
    ax.set_ylim(-lim, lim)
    ax.set_xlabel(f"time since first read ({unit})")
    ax.set_ylabel("offset from bracket midpoint (ns)")
    ax.set_title(f"clock sync: {len(b)} reads, median bound {float(np.median(bound)):.0f} ns")
    ax.legend(fontsize="small", loc="upper right")
    return ax


def _row_label(tp: TraceProfile, i: int) -> str:
    """Row ``i`` in a figure's words: its number (the table's, kernels.json's), its name cut and marked, its grid."""
    r = tp.kernels[i]
    return f"{i} {shown_name(r['name'], 28)} {'x'.join(str(int(g)) for g in r['grid'])}"


def plot_kernel_energy(tp: TraceProfile, ax: Any = None, *, top: int = 12) -> Any:
    """Energy by kernel signature in an application: total over the trace, with 95 % intervals.

    Parameters
    ----------
    tp : TraceProfile
        From :func:`~fingrav_native.profile_trace`.
    ax : matplotlib Axes, optional
    top : int
        Signatures drawn (the table's first rows: the largest total energy).

    Returns
    -------
    matplotlib Axes

    Notes
    -----
    In-situ FinGraV (paper Section IV-A's protocol over an application's own
    executions): each bar is ``count x energy per execution``, its whisker
    the energy's 95 % interval scaled the same way; the share of all kernel
    energy is written beside it.
    """
    if not isinstance(tp, TraceProfile):
        raise ValueError(f"tp: expected a TraceProfile, got {type(tp).__name__}")
    top = integer_in(top, "top", 1)
    ax = _axes(ax)
    k = tp.kernels[:top]
    n = len(k)
    y = np.arange(n)[::-1]
    total = k["count"] * k["energy_j"]
    err = k["count"] * k["energy_half_width_j"]
    ax.barh(y, total, xerr=err, color="0.6", edgecolor="black", hatch="//", capsize=3)
    for yi, t, e, sh in zip(y, total, err, k["share"]):
        ax.text(t + e, yi, f"  {100 * sh:.1f} %", va="center", fontsize="small")
    ax.set_yticks(y, [_row_label(tp, i) for i in range(n)], fontsize="small")
    ax.set_xlabel("energy over the trace (J)")
    ax.set_title("energy by kernel (count x energy per execution)", fontsize="medium")
    ax.set_xlim(0, float(np.nanmax(total + err)) * 1.25 if n else 1.0)
    return ax


def figure_trace_profiles(tp: TraceProfile, *, top: int = 4,
                          channels: Sequence[Channel] = ("total", "compute", "io", "memory")) -> Any:
    """The stitched profiles of an application's top kernels, one panel each.

    Parameters
    ----------
    tp : TraceProfile
    top : int
        Panels (the table's first rows).
    channels : sequence of {"total", "compute", "io", "memory"}

    Returns
    -------
    matplotlib Figure

    Notes
    -----
    Paper Section IV-B step 8 per kernel signature (see :func:`plot_kernel`).
    """
    import matplotlib.pyplot as plt

    if not isinstance(tp, TraceProfile):
        raise ValueError(f"tp: expected a TraceProfile, got {type(tp).__name__}")
    top = integer_in(top, "top", 1)
    _channels(channels)
    n = min(top, len(tp.kernels))
    fig, axes = plt.subplots(1, max(n, 1), figsize=(4.2 * max(n, 1), 3.6), layout="constrained", squeeze=False)
    if n == 0:
        # A trace too small to profile any signature (its table is empty): one panel that says so.
        what = str(tp.summary if tp.summary is not None else tp.span if tp.span is not None else "")
        axes[0][0].text(0.5, 0.5, "no kernel signature could be profiled\n(see the table's warnings)\n"
                        + textwrap.fill(what, 48), ha="center", va="center", fontsize="small", wrap=True)
        axes[0][0].set_axis_off()
        return fig
    for i, ax in enumerate(axes[0]):
        plot_kernel(tp.profile(i), ax, channels=channels)
        r = tp.kernels[i]
        ax.set_title(f"{_row_label(tp, i)}: {1e3 * r['energy_j']:.3f} mJ, {r['golden']} golden", fontsize="small")
    return fig
