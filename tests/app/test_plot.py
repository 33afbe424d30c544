"""Plots: each takes an optional ax, returns it, and draws what the result holds."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from fingrav_native import profile
from fingrav_native.app import _plot as plot
from fingrav_native.app import profile_interleaved
from fingrav_native.backends import SimBackend
from fingrav_native.clocks import fit_clock_map


@pytest.fixture(scope="module")
def backend():
    return SimBackend(seed=4)


@pytest.fixture(scope="module")
def prof(backend):
    return profile("cb-4k-gemm", backend, mode="both", runs=30)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_whole_run_marks_warmup_sse_ssp(prof):
    fig, ax = plt.subplots()
    assert plot.plot_whole_run(prof, ax) is ax
    labels = ax.get_legend_handles_labels()[1]
    assert any(lbl.startswith("logs (") for lbl in labels)
    assert "warm-up" in labels and "SSP (last execution)" in labels
    assert any(lbl.startswith("SSE (execution 3)") for lbl in labels)
    (pts,) = [ln for ln in ax.lines if ln.get_label().startswith("logs")]
    assert len(pts.get_xdata()) == len(prof.whole_run.t_ns)
    ax2 = plot.plot_whole_run(prof, max_runs=2)
    (few,) = [ln for ln in ax2.lines if ln.get_label().startswith("logs")]
    assert 0 < len(few.get_xdata()) < len(pts.get_xdata())
    with pytest.raises(ValueError, match="max_runs=0"):
        plot.plot_whole_run(prof, max_runs=0)


def test_kernel_view_per_component(prof):
    ax = plot.plot_kernel(prof.profiles["ssp"])
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["total", "compute", "io", "memory"]
    # Styles differ by dash pattern, not only colour (black-and-white print).
    styles = {ln.get_linestyle() for ln in ax.lines if ln.get_label() in labels}
    assert len(styles) == 4
    assert len(ax.collections) == 4  # one confidence band per channel
    assert len(plot.plot_kernel(prof.profiles["sse"], channels=("total",), bands=False).collections) == 0
    with pytest.raises(ValueError, match="channels: unknown channel 'gpu'"):
        plot.plot_kernel(prof.profiles["ssp"], channels=("gpu",))
    with pytest.raises(ValueError, match="ep: expected an ExecutionProfile"):
        plot.plot_kernel(prof)


def test_kernel_band_is_the_fits_and_falls_back_to_the_bins(prof):
    import dataclasses

    ep = prof.profiles["ssp"]
    ch = ep.stitched["total"]
    ax = plot.plot_kernel(ep, channels=("total",))
    (band,) = ax.collections
    verts = band.get_paths()[0].vertices
    # The fit's simultaneous band, drawn along the fit's grid (us).
    assert verts[:, 0].min() == pytest.approx(ch.fit_x[0] / 1e3) and verts[:, 0].max() == pytest.approx(ch.fit_x[-1] / 1e3)
    assert verts[:, 1].min() == pytest.approx(np.nanmin(ch.fit_low)) and verts[:, 1].max() == pytest.approx(np.nanmax(ch.fit_high))
    # A profile without a fit band (a file written before it existed): the
    # intervals of the bins with two LOIs or more (30 runs leave few).
    ep = prof.profiles["sse"]
    ch = ep.stitched["total"]
    old = dataclasses.replace(ch, fit_low=np.empty(0), fit_high=np.empty(0))
    ep_old = dataclasses.replace(ep, stitched=dataclasses.replace(ep.stitched, channels=(old,)))
    (bins,) = plot.plot_kernel(ep_old, channels=("total",)).collections
    good = np.isfinite(ch.ci_low) & np.isfinite(ch.ci_high)
    assert good.any()
    assert bins.get_paths()[0].vertices[:, 1].max() == pytest.approx(np.max(ch.ci_high[good]))


def test_kernels_side_by_side(prof, backend):
    other = profile("mb-4k-gemv", backend, mode="ssp", runs=30, executions=16)
    fig = plot.figure_kernels_by_component({"CB-4K": prof, "MB-4K": other})
    assert [a.get_title() for a in fig.axes] == ["total", "compute", "io", "memory"]
    for a in fig.axes:
        assert len(a.lines) == 2
        xs = np.concatenate([ln.get_xdata() for ln in a.lines])
        assert xs.min() >= 0 and xs.max() <= 100  # progress in percent
    ax = plot.plot_kernels([("a", prof)], "io", x="time")
    assert ax.get_xlabel() == "time in execution (us)"
    with pytest.raises(ValueError, match="channel='power'"):
        plot.plot_kernels({"a": prof}, "power")
    with pytest.raises(ValueError, match="profiles: empty"):
        plot.plot_kernels({}, "total")


def test_interleaved_and_search(prof, backend):
    il = profile_interleaved("cb-4k-gemm", [("mb-8k-gemv", 10)], backend, runs=20, reference=prof)
    ax = plot.plot_interleaved(il)
    assert f"{il.power_ratio:.3f}" in ax.get_title()
    assert len(ax.lines) == 2
    ax = plot.plot_ssp_search(prof.ssp_search)
    assert f"SSP at {prof.ssp_search.executions} executions" in ax.get_legend_handles_labels()[1]
    assert len(ax.texts) == len(prof.ssp_search.trace)


def test_sync_error(backend):
    br = backend.read_clocks(100)
    m = fit_clock_map(br, tick_ns=backend.capabilities.device_tick_ns)
    ax = plot.plot_sync_error(br, m)
    labels = ax.get_legend_handles_labels()[1]
    assert "map error bound" in labels
    (resid,) = [ln for ln in ax.lines if ln.get_label() == "mapped - bracket midpoint"]
    assert len(resid.get_ydata()) == 100
    # The fitted map puts every read inside its bound here (a simulated clock).
    (upper,) = [ln for ln in ax.lines if ln.get_label() == "map error bound"]
    assert np.all(np.abs(resid.get_ydata()) <= np.max(upper.get_ydata()))
    with pytest.raises(ValueError, match=r"brackets: expected an \(n, 3\) array"):
        plot.plot_sync_error(np.zeros((3, 2)), m)
