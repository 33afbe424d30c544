"""Step 8: stitching, energy per execution and the whole-run view (stitch.py)."""

from __future__ import annotations

import doctest
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fingrav_native.method import StitchedChannel, energy_per_execution, stitch, whole_run_view
from fingrav_native.method._stitch import _t_quantiles
from fingrav_native.records import LOI_DTYPE, make_executions

# The module, not the function of the same name the package may export.
stitch_module = importlib.import_module("fingrav_native.method._stitch")

PROPS = settings(max_examples=60, deadline=None, database=None)

# Student t quantiles t_{0.975, df} (two-sided 95%), from standard tables.
T975 = {1: 12.706204736174694, 2: 4.302652729749462, 3: 3.1824463052837078, 5: 2.5705818356363146,
        10: 2.228138851986274, 30: 2.0422724563012378, 100: 1.9839715185235518, 1000: 1.9623390808264083}


def make_lois(toi_ns, values, *, duration_ns=40_000.0, channel="total", uncert_ns=0.0, run=None):
    toi = np.asarray(toi_ns, dtype=np.float64)
    lois = np.zeros(toi.size, dtype=LOI_DTYPE)
    lois["toi_ns"] = toi
    lois["duration_ns"] = duration_ns
    lois["toi_frac"] = toi / lois["duration_ns"]
    lois["uncert_ns"] = uncert_ns
    lois["run"] = np.arange(toi.size) if run is None else run
    for c in ("total", "compute", "io", "memory"):
        lois[c] = np.nan
    lois[channel] = values
    return lois


def hand_lois():
    """bin 0: 100, 110; bin 1: 200, 210, 220; bin 2: 300 alone; bin 3: empty."""
    return make_lois([1_000, 5_000, 12_000, 15_000, 18_000, 25_000], [100, 110, 200, 210, 220, 300])


# ---------------------------------------------------------------- t quantiles


def test_t_quantiles_match_tables():
    df = np.array(sorted(T975), dtype=np.float64)
    assert _t_quantiles(0.975, df) == pytest.approx([T975[int(d)] for d in df], rel=1e-10)
    assert _t_quantiles(0.95, np.array([10]))[0] == pytest.approx(1.8124611228116756, rel=1e-10)
    assert _t_quantiles(0.975, np.array([10**6]))[0] == pytest.approx(1.959966, rel=1e-6)  # -> normal


def test_t_quantiles_are_nan_without_degrees_of_freedom():
    # A bin with one LOI has no spread estimate: its band is unknown, not zero.
    q = _t_quantiles(0.975, np.array([0, -1, 1]))
    assert np.isnan(q[:2]).all() and q[2] == pytest.approx(12.706204736174698)


# ---------------------------------------------------------------- binned mean by hand


def test_binned_mean_and_ci_by_hand():
    p = stitch(hand_lois(), bin_width=10_000, channels=("total",), smoother=None)
    ch = p["total"]
    assert p.x == "time" and p.x_unit == "ns" and p.bin_width == 10_000.0
    assert ch.bin_edges.tolist() == [0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0]
    assert ch.bin_centres.tolist() == [5_000.0, 15_000.0, 25_000.0, 35_000.0]
    assert ch.count.tolist() == [2, 3, 1, 0]
    np.testing.assert_allclose(ch.mean[:3], [105.0, 210.0, 300.0])
    assert math.isnan(ch.mean[3])  # empty, kept
    np.testing.assert_allclose(ch.sd[:2], [math.sqrt(50.0), 10.0])
    assert np.isnan(ch.sd[2:]).all()
    # bin 0: t(1) * sqrt(50) / sqrt(2) = 5 t(1); bin 1: t(2) * 10 / sqrt(3)
    half = [T975[1] * 5.0, T975[2] * 10.0 / math.sqrt(3.0)]
    np.testing.assert_allclose(ch.ci_low[:2], [105 - half[0], 210 - half[1]], rtol=1e-12)
    np.testing.assert_allclose(ch.ci_high[:2], [105 + half[0], 210 + half[1]], rtol=1e-12)
    # one LOI: a mean but no interval; none: neither. Never dropped.
    assert np.isnan(ch.ci_low[2:]).all() and np.isnan(ch.ci_high[2:]).all()
    assert ch.fit_kind is None and ch.fit_x.size == 0 and ch.fit_y.size == 0
    assert ch.n_lois == 6 and p.n_lois == 6
    assert ch.confidence == 0.95


def test_confidence_level_changes_the_t_factor():
    ch = stitch(hand_lois(), bin_width=10_000, channels=("total",), smoother=None, confidence=0.90)["total"]
    # t_{0.95, 1} = 6.313751514675043
    assert ch.ci_high[0] - ch.mean[0] == pytest.approx(6.313751514675043 * 5.0, rel=1e-10)


def test_fraction_axis_by_hand():
    p = stitch(hand_lois(), x="fraction", bin_width=0.25, channels=("total",), smoother=None)
    assert p.x_unit == "fraction"
    assert p["total"].bin_edges.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert p["total"].count.tolist() == [2, 3, 1, 0]


def test_position_on_last_edge_falls_in_last_bin():
    lois = make_lois([0.0, 40_000.0], [1.0, 2.0])
    ch = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)["total"]
    assert ch.count.tolist() == [1, 0, 0, 1]


def test_default_bin_width_follows_guidance():
    # 40 us kernels: Table I's 1 LOI per 5 us; 120 us: 1 per 10 us.
    assert stitch(make_lois([1.0], [1.0], duration_ns=40_000), smoother=None).bin_width == 5_000.0
    p = stitch(make_lois([1.0], [1.0], duration_ns=120_000), smoother=None)
    assert p.bin_width == 10_000.0 and len(p["total"].count) == 12
    # as a fraction: 12 bins over the execution
    p = stitch(make_lois([1.0], [1.0], duration_ns=120_000), x="fraction", smoother=None)
    assert p.bin_width == pytest.approx(1 / 12) and len(p["total"].count) == 12


def test_nan_channel_values_are_left_out():
    lois = hand_lois()
    lois["memory"][:3] = 7.0  # the other LOIs have no memory value
    p = stitch(lois, bin_width=10_000)
    assert p["memory"].count.tolist() == [2, 1, 0, 0] and p["memory"].n_lois == 3
    assert p["io"].count.tolist() == [0, 0, 0, 0] and p["io"].fit_kind is None
    assert np.isnan(p["io"].mean).all()
    assert p.channel_names == ("total", "compute", "io", "memory")


def test_profile_summary_fields():
    lois = hand_lois()
    lois["uncert_ns"] = [10, 20, 30, 40, 50, 60]
    lois["run"] = [3, 3, 4, 4, 9, 9]
    p = stitch(lois, channels=("total",))
    assert p.runs.tolist() == [3, 4, 9]
    assert (p.uncert_ns_median, p.uncert_ns_max) == (35.0, 60.0)
    assert p.duration_ns == 40_000.0 and p.smoother == "local" and not p.weighted
    with pytest.raises(KeyError, match="memory"):
        p.channel("memory")


# ---------------------------------------------------------------- fits


def test_poly4_reproduces_a_quartic():
    x = np.linspace(0, 40_000, 30)
    f = lambda t: 1 + 2 * (t / 1e4) + 3 * (t / 1e4) ** 2 - (t / 1e4) ** 3 + 0.5 * (t / 1e4) ** 4  # noqa: E731
    ch = stitch(make_lois(x, f(x)), smoother="poly4", channels=("total",))["total"]
    assert ch.fit_kind == "poly4"
    assert ch.fit_x[0] == 0.0 and ch.fit_x[-1] == 40_000.0 and ch.fit_x.size == 201
    # float32 values: agreement to float32 precision
    np.testing.assert_allclose(ch.fit_y, f(ch.fit_x), rtol=1e-5, atol=1e-4)


def test_poly_degree_drops_with_few_distinct_positions():
    ch = stitch(make_lois([0, 0, 10_000, 20_000], [1, 1, 2, 5]), smoother="poly4", channels=("total",))["total"]
    assert ch.fit_kind == "poly2"
    ch = stitch(make_lois([5_000], [3.0]), smoother="poly4", channels=("total",))["total"]
    assert ch.fit_kind == "poly0" and np.allclose(ch.fit_y, 3.0)


@pytest.mark.parametrize("weighted", [False, True])
def test_local_smoother_reproduces_a_line(weighted):
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 40_000, 80))
    lois = make_lois(x, 100 + x / 400, uncert_ns=rng.uniform(10, 1000, 80))
    ch = stitch(lois, channels=("total",), weighted=weighted)["total"]
    assert ch.fit_kind == "local"
    np.testing.assert_allclose(ch.fit_y, 100 + ch.fit_x / 400, rtol=1e-5)


def test_smoothers_recover_a_noisy_profile():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 40_000, 3000)
    truth = lambda t: 300 + 100 * np.sin(np.pi * t / 40_000)  # noqa: E731
    lois = make_lois(x, truth(x) + rng.normal(0, 5, x.size))
    for smoother in ("local", "poly4"):
        ch = stitch(lois, channels=("total",), smoother=smoother, span=0.1)["total"]
        inner = (ch.fit_x > 2_000) & (ch.fit_x < 38_000)
        assert np.max(np.abs(ch.fit_y[inner] - truth(ch.fit_x[inner]))) < 3.0, smoother
    # and the binned 95% intervals cover the truth at the bin centres mostly
    ch = stitch(lois, channels=("total",), smoother=None)["total"]
    covered = (ch.ci_low <= truth(ch.bin_centres)) & (truth(ch.bin_centres) <= ch.ci_high)
    assert covered.mean() >= 0.6  # the sine's curvature within a bin biases a little


def test_weighting_pulls_the_fit_towards_precise_logs():
    x = np.linspace(0, 40_000, 41)
    v = np.zeros(41)
    v[20] = 100.0
    unc = np.full(41, 1_000.0)
    unc[20] = 1.0
    lois = make_lois(x, v, uncert_ns=unc)
    plain = stitch(lois, channels=("total",), smoother="poly4")["total"]
    weighted = stitch(lois, channels=("total",), smoother="poly4", weighted=True)["total"]
    mid = np.argmin(np.abs(plain.fit_x - 20_000))
    assert weighted.fit_y[mid] > 90 > plain.fit_y[mid]
    # bin means stay plain
    np.testing.assert_array_equal(plain.mean, weighted.mean)


@pytest.mark.slow
def test_local_smoother_with_many_lois_uses_blocks():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1_000_000, 50_000)
    lois = make_lois(x, 50 + x / 10_000, duration_ns=1_000_000.0)
    ch = stitch(lois, channels=("total",), span=0.5)["total"]
    np.testing.assert_allclose(ch.fit_y, 50 + ch.fit_x / 10_000, rtol=1e-5)


# ---------------------------------------------------------------- span from the data, band


def smooth_truth(t):
    """A smooth execution-like profile over 370 us: a rise, a plateau, a gentle fall (W)."""
    return 600 + 150 * np.sin(np.pi * t / 370_000.0)


def noisy_lois(seed, n=40, sd=12.0, truth=smooth_truth, duration_ns=370_000.0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, duration_ns, n)
    return make_lois(x, truth(x) + rng.normal(0, sd, n), duration_ns=duration_ns)


def test_forty_noisy_lois_give_no_spurious_spike():
    # Table I's density gives ~40 LOIs for a ~400 us execution. A local
    # line through 15% of them (6 LOIs) follows single noisy LOIs; the span
    # chosen from the data does not, and its band holds the truth over the
    # whole curve, not just at a point (nominal 95%).
    covered, worst, worst_fixed = 0, [], []
    for seed in range(40):
        lois = noisy_lois(seed)
        ch = stitch(lois, channels=("total",), bin_width=10_000)["total"]
        fixed = stitch(lois, channels=("total",), bin_width=10_000, span=0.15)["total"]
        truth = smooth_truth(ch.fit_x)
        dev = np.abs(ch.fit_y - truth)
        covered += bool(np.all(dev <= ch.fit_high - ch.fit_y) and np.all(dev <= ch.fit_y - ch.fit_low))
        worst.append(dev.max())
        worst_fixed.append(np.abs(fixed.fit_y - truth).max())
        assert ch.fit_span * 40 >= stitch_module.MIN_WINDOW
    assert covered >= 32, covered  # 35 of 40 when written (nominal 38: choosing the span on the same LOIs costs some)
    # The data-chosen span errs about half as far from the truth at worst.
    assert np.median(worst) < 0.6 * np.median(worst_fixed), (np.median(worst), np.median(worst_fixed))
    assert np.median(worst) < 1.5 * 12.0


def test_one_outlier_loi_makes_no_spike_the_band_does_not_hold():
    # The demo's SSP profile once showed a spike from one LOI far off the
    # plateau: with the span from the data the bump stays small and inside
    # the band, so the profile does not claim it.
    rng = np.random.default_rng(7)
    x = np.sort(rng.uniform(0, 370_000, 40))
    v = 820 + rng.normal(0, 8, 40)
    mid = np.argmin(np.abs(x - 190_000))
    v[mid] += 45  # one LOI ~5 sd off
    lois = make_lois(x, v, duration_ns=370_000.0)
    ch = stitch(lois, channels=("total",), bin_width=10_000)["total"]
    fixed = stitch(lois, channels=("total",), bin_width=10_000, span=0.15)["total"]
    bump = ch.fit_y.max() - 820
    assert bump < 0.2 * 45 and bump < 0.5 * (fixed.fit_y.max() - 820)
    assert np.all(ch.fit_low <= 820) and np.all(ch.fit_high >= 820)


def test_a_gap_in_the_lois_shows_as_a_wide_band():
    # Six LOIs on a steep rise, then none for 30 us: no fit can know the
    # curve there (the demo's SSE had such a gap), and the band must say so
    # rather than draw a confident line across it.
    rng = np.random.default_rng(2)
    truth = lambda t: 400 + 340 * (1 - np.exp(-t / 14_000))  # noqa: E731
    x = np.concatenate([np.sort(rng.uniform(0, 17_000, 6)), np.sort(rng.uniform(47_000, 370_000, 34))])
    ch = stitch(make_lois(x, truth(x) + rng.normal(0, 4, x.size), duration_ns=370_000.0), channels=("total",),
                bin_width=10_000)["total"]
    half = (ch.fit_high - ch.fit_low) / 2
    gap = (ch.fit_x > 22_000) & (ch.fit_x < 42_000)
    plateau = ch.fit_x > 100_000
    assert half[gap].min() > 5 * np.median(half[plateau])
    t = truth(ch.fit_x)
    assert np.all((ch.fit_low <= t) & (t <= ch.fit_high))


def test_band_brackets_the_fit_and_narrows_with_more_lois():
    for smoother in ("local", "poly4"):
        few = stitch(noisy_lois(1, n=40), channels=("total",), smoother=smoother)["total"]
        many = stitch(noisy_lois(1, n=640), channels=("total",), smoother=smoother)["total"]
        for ch in (few, many):
            assert ch.fit_low.shape == ch.fit_y.shape == ch.fit_high.shape
            assert np.all(ch.fit_low <= ch.fit_y) and np.all(ch.fit_y <= ch.fit_high)
        assert np.median(many.fit_high - many.fit_low) < 0.5 * np.median(few.fit_high - few.fit_low), smoother
    assert math.isnan(few.fit_span)  # poly4: no window
    ch = stitch(noisy_lois(1), channels=("total",), span=0.5)["total"]
    assert ch.fit_span == 0.5
    # Bins only: no fit, no band.
    ch = stitch(noisy_lois(1), channels=("total",), smoother=None)["total"]
    assert ch.fit_low.size == 0 and ch.fit_high.size == 0 and math.isnan(ch.fit_span)


def test_band_is_nan_without_degrees_of_freedom():
    ch = stitch(make_lois([1_000, 20_000, 39_000], [1.0, 2.0, 4.0]), channels=("total",))["total"]
    assert np.all(np.isfinite(ch.fit_y)) and np.all(np.isnan(ch.fit_low))


def test_auto_span_follows_a_step_and_widens_on_a_plateau():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 400_000, 400)
    flat = stitch(make_lois(x, 500 + rng.normal(0, 5, x.size), duration_ns=400_000.0), channels=("total",))
    step = stitch(make_lois(x, np.where(x < 300_000, 800, 450) + rng.normal(0, 5, x.size), duration_ns=400_000.0),
                  channels=("total",))
    assert flat["total"].fit_span > 3 * step["total"].fit_span
    # Beyond 256 LOIs the search runs on a subsample; the span still follows the data.
    assert step["total"].fit_span * 400 >= stitch_module.MIN_WINDOW


def test_results_are_read_only():
    ch = stitch(hand_lois(), channels=("total",))["total"]
    for arr in (ch.mean, ch.count, ch.ci_low, ch.fit_y, ch.bin_edges, ch.fit_low, ch.fit_high):
        with pytest.raises(ValueError):
            arr[0] = 0


# ---------------------------------------------------------------- errors


def test_stitch_errors_name_the_argument():
    lois = hand_lois()
    with pytest.raises(ValueError, match="lois.*empty"):
        stitch(lois[:0])
    with pytest.raises(ValueError, match="lois"):
        stitch(np.zeros(3))  # type: ignore[arg-type]
    bad = lois.copy()
    bad["toi_ns"][0] = -1.0
    with pytest.raises(ValueError, match="lois.*toi_ns"):
        stitch(bad)
    bad = lois.copy()
    bad["duration_ns"][0] = 0.0
    with pytest.raises(ValueError, match="lois.*duration_ns"):
        stitch(bad)
    cases = [
        ({"x": "seconds"}, "x"),
        ({"bin_width": 0.0}, "bin_width"),
        ({"bin_width": math.nan}, "bin_width"),
        ({"x": "fraction", "bin_width": 1.5}, "bin_width"),
        ({"channels": ()}, "channels"),
        ({"channels": "total"}, "channels"),
        ({"channels": ("total", "power")}, "channels"),
        ({"channels": ("total", "total")}, "channels"),
        ({"smoother": "spline"}, "smoother"),
        ({"confidence": 0.0}, "confidence"),
        ({"confidence": 1.0}, "confidence"),
        ({"span": 0.0}, "span"),
        ({"span": 1.5}, "span"),
        ({"span": "gcv"}, "span"),
        ({"grid_points": 1}, "grid_points"),
        ({"grid_points": 10.5}, "grid_points"),
        ({"weighted": True}, "weighted"),  # uncert_ns is 0 in hand_lois
    ]
    for kwargs, name in cases:
        with pytest.raises(ValueError, match=name):
            stitch(lois, **kwargs)


# ---------------------------------------------------------------- properties

loi_sets = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 40_000), min_size=n, max_size=n),
        st.lists(st.integers(0, 1_000), min_size=n, max_size=n),
    )
)
widths = st.sampled_from([1_000.0, 2_500.0, 5_000.0, 7_000.0, 40_000.0])


@PROPS
@given(data=loi_sets, width=widths)
def test_bin_means_are_the_plain_means_of_their_members(data, width):
    toi, values = (np.asarray(a, dtype=np.float64) for a in data)
    ch = stitch(make_lois(toi, values), bin_width=width, channels=("total",), smoother=None)["total"]
    members = np.minimum((toi // width).astype(int), len(ch.count) - 1)
    assert ch.count.sum() == toi.size
    for b in range(len(ch.count)):
        vals = values[members == b]
        assert ch.count[b] == vals.size
        if vals.size:
            assert ch.mean[b] == pytest.approx(vals.mean(), rel=1e-12, abs=1e-9)
            assert ch.bin_edges[b] <= toi[members == b].min()
        if vals.size > 1:
            assert ch.sd[b] == pytest.approx(vals.std(ddof=1), rel=1e-9, abs=1e-9)
            assert ch.ci_low[b] <= ch.mean[b] <= ch.ci_high[b]
        else:
            assert math.isnan(ch.ci_low[b])


@PROPS
@given(data=loi_sets, c=st.integers(-500, 500), smoother=st.sampled_from(["local", "poly4"]))
@pytest.mark.slow
def test_constant_shift_shifts_means_and_fits(data, c, smoother):
    toi, values = (np.asarray(a, dtype=np.float64) for a in data)
    values = values + 500.0  # stitch refuses negative power: both sets stay >= 0 for any c in [-500, 500]
    a = stitch(make_lois(toi, values), channels=("total",), smoother=smoother)["total"]
    b = stitch(make_lois(toi, values + c), channels=("total",), smoother=smoother)["total"]
    tol = 1e-7 * (abs(c) + 1_000)
    np.testing.assert_allclose(b.mean, a.mean + c, atol=tol)
    np.testing.assert_allclose(b.ci_low, a.ci_low + c, atol=tol)
    np.testing.assert_allclose(b.ci_high, a.ci_high + c, atol=tol)
    np.testing.assert_allclose(b.fit_y, a.fit_y + c, atol=1e-5 * (abs(c) + 1_000))
    assert a.fit_kind == b.fit_kind
    # The band moves with the fit: the span chosen and the noise do not change.
    assert a.fit_span == b.fit_span or (math.isnan(a.fit_span) and math.isnan(b.fit_span))
    np.testing.assert_allclose(b.fit_low, a.fit_low + c, atol=1e-4 * (abs(c) + 1_000))
    np.testing.assert_allclose(b.fit_high, a.fit_high + c, atol=1e-4 * (abs(c) + 1_000))


@PROPS
@given(data=loi_sets, seed=st.integers(0, 2**32 - 1), x=st.sampled_from(["time", "fraction"]))
@pytest.mark.slow
def test_loi_order_does_not_matter(data, seed, x):
    toi, values = (np.asarray(a, dtype=np.float64) for a in data)
    lois = make_lois(toi, values)
    perm = np.random.default_rng(seed).permutation(toi.size)
    a = stitch(lois, x=x, channels=("total",))["total"]
    b = stitch(lois[perm], x=x, channels=("total",))["total"]
    np.testing.assert_array_equal(a.count, b.count)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12)
    np.testing.assert_allclose(a.fit_y, b.fit_y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(a.fit_low, b.fit_low, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- energy per execution


def test_energy_by_hand_with_empty_and_single_bins():
    ch = stitch(hand_lois(), bin_width=10_000, channels=("total",), smoother=None)["total"]
    est = energy_per_execution(ch, 40_000)
    # 10 us each of 105 W, 210 W, 300 W and (empty bin, held at) 300 W
    assert est.energy_j == pytest.approx((105 + 210 + 300 + 300) * 10_000 * 1e-9)
    # pooled sd over the bins with 2+ LOIs: (1 * 50 + 2 * 100) / 3, t at 3 dof
    s_p = math.sqrt(250 / 3)
    halves = [T975[1] * 5.0, T975[2] * 10 / math.sqrt(3), T975[3] * s_p, T975[3] * s_p]
    # plus what holding the empty last bin at 300 W can miss if its power lies in the LOIs' range, 105-300 W
    assert est.uncertainty_j == pytest.approx((math.sqrt(sum(h * h for h in halves)) + 195) * 10_000 * 1e-9)
    assert est.interpolated_share == pytest.approx(0.25)
    assert est.pooled_share == pytest.approx(0.5)
    assert "interpolated" in est.note and "pooled" in est.note
    e, u = est  # unpacks as a pair
    assert (e, u) == (est.energy_j, est.uncertainty_j)
    assert est.channel == "total" and est.duration_ns == 40_000.0


def test_energy_interpolates_an_inner_empty_bin():
    lois = make_lois([1_000, 2_000, 21_000, 22_000], [100, 100, 200, 200], duration_ns=30_000)
    ch = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)["total"]
    est = energy_per_execution(ch, 30_000)
    assert est.energy_j == pytest.approx((100 + 150 + 200) * 10_000 * 1e-9)
    # identical values: zero pooled sd; the empty bin's power may lie anywhere between 100 and 200 W
    assert est.uncertainty_j == pytest.approx(50 * 10_000 * 1e-9)
    assert est.interpolated_share == pytest.approx(1 / 3)


def test_energy_over_part_of_the_profile_and_beyond_it():
    lois = make_lois([1_000, 2_000, 11_000, 12_000], [100, 100, 200, 200], duration_ns=20_000)
    ch = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)["total"]
    assert energy_per_execution(ch, 15_000).energy_j == pytest.approx((100 * 10_000 + 200 * 5_000) * 1e-9)
    beyond = energy_per_execution(ch, 25_000)  # 5 us past the last edge: held at 200 W
    assert beyond.energy_j == pytest.approx((100 + 200 + 100) * 10_000 * 1e-9)
    assert beyond.interpolated_share == pytest.approx(0.2)


def test_energy_on_a_fraction_axis_scales_with_duration():
    lois = make_lois([1_000, 2_000, 21_000, 22_000], [100, 100, 200, 200], duration_ns=40_000)
    ch = stitch(lois, x="fraction", bin_width=0.5, channels=("total",), smoother=None)["total"]
    assert energy_per_execution(ch, 40_000).energy_j == pytest.approx((100 + 200) * 20_000 * 1e-9)
    assert energy_per_execution(ch, 80_000).energy_j == pytest.approx((100 + 200) * 40_000 * 1e-9)


def test_energy_without_any_interval_is_nan_and_says_so():
    lois = make_lois([1_000, 15_000], [100, 200], duration_ns=20_000)
    ch = stitch(lois, bin_width=10_000, channels=("total",), smoother=None)["total"]
    est = energy_per_execution(ch, 20_000)
    assert est.energy_j == pytest.approx(300 * 10_000 * 1e-9)
    assert math.isnan(est.uncertainty_j) and "no interval" in est.note


def test_energy_errors():
    p = stitch(hand_lois(), bin_width=10_000, smoother=None)
    with pytest.raises(ValueError, match="stitched_channel"):
        energy_per_execution(p, 40_000)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stitched_channel.*no LOI"):
        energy_per_execution(p["io"], 40_000)
    for bad in (0.0, -1.0, math.nan, math.inf, "long"):
        with pytest.raises(ValueError, match="duration_ns"):
            energy_per_execution(p["total"], bad)  # type: ignore[arg-type]
    assert isinstance(p["total"], StitchedChannel)


# ---------------------------------------------------------------- whole-run view


def five_by_two():
    """run 0: 10 ns executions 2 ns apart from 1000; run 1: 4 ns apart from 5000."""
    s0 = 1_000 + 12 * np.arange(5)
    s1 = 5_000 + 14 * np.arange(5)
    starts = np.concatenate([s0, s1]).astype(float)
    return make_executions([0] * 5 + [1] * 5, list(range(5)) * 2, [0] * 10, starts, starts + 10)


def test_whole_run_view_by_hand():
    ex = five_by_two()
    host = [995, 1_005, 1_011, 1_058, 1_100, 5_003, 5_070, 9_000]
    v = whole_run_view(host, np.arange(1.0, 9.0), ex, runs=[1, 0])
    assert v.runs.tolist() == [0, 1]
    assert v.t_ns.tolist() == [5.0, 11.0, 58.0, 3.0]
    assert v.value.tolist() == [2.0, 3.0, 4.0, 6.0]
    assert v.run.tolist() == [0, 0, 0, 1]
    assert v.execution.tolist() == [0, -1, 4, 0]  # 1011 is in a gap; 1058 is execution 4's end
    # medians of (0, 12, 24, 36, 48) and (0, 14, 28, 42, 56)
    assert v.execution_index.tolist() == [0, 1, 2, 3, 4]
    assert v.boundary_start_ns.tolist() == [0.0, 13.0, 26.0, 39.0, 52.0]
    assert v.boundary_end_ns.tolist() == [10.0, 23.0, 36.0, 49.0, 62.0]
    assert (v.sse_index, v.warmup_end_ns, v.sse_start_ns, v.sse_end_ns) == (3, 36.0, 39.0, 49.0)
    assert (v.ssp_start_ns, v.ssp_end_ns) == (52.0, 62.0)


def test_whole_run_view_padding_and_selection():
    ex = five_by_two()
    host = [995, 1_005, 1_011, 1_058, 1_100, 5_003, 5_070, 9_000]
    v = whole_run_view(host, np.arange(1.0, 9.0), ex, runs=[0, 1], pad_ns=10)
    assert v.t_ns.tolist() == [-5.0, 5.0, 11.0, 58.0, 3.0, 70.0]
    assert v.execution.tolist() == [-1, 0, -1, 4, 0, -1]
    v = whole_run_view(host, np.arange(1.0, 9.0), ex, runs=[1], sse_index=None)
    assert v.t_ns.tolist() == [3.0] and v.runs.tolist() == [1]
    assert v.sse_start_ns is None and v.warmup_end_ns is None and v.sse_index is None
    assert v.boundary_start_ns.tolist() == [0.0, 14.0, 28.0, 42.0, 56.0]
    # an SSE index no run reaches: no SSE marks, SSP still marked
    v = whole_run_view(host, np.arange(1.0, 9.0), ex, runs=[0], sse_index=7)
    assert v.sse_start_ns is None and v.ssp_start_ns == 48.0


def test_whole_run_view_errors():
    ex = five_by_two()
    host, vals = [1_005.0, 5_003.0], [1.0, 2.0]
    with pytest.raises(ValueError, match="runs.*empty"):
        whole_run_view(host, vals, ex, runs=[])
    with pytest.raises(ValueError, match="runs.*no executions"):
        whole_run_view(host, vals, ex, runs=[0, 5])
    with pytest.raises(ValueError, match="values"):
        whole_run_view(host, [1.0], ex, runs=[0])
    with pytest.raises(ValueError, match="samples_host_ns"):
        whole_run_view([math.nan, 1.0], vals, ex, runs=[0])
    with pytest.raises(ValueError, match="sse_index"):
        whole_run_view(host, vals, ex, runs=[0], sse_index=-1)
    with pytest.raises(ValueError, match="pad_ns"):
        whole_run_view(host, vals, ex, runs=[0], pad_ns=-1.0)
    bad = ex.copy()
    bad["end_ns"][0] = bad["start_ns"][0] - 1
    with pytest.raises(ValueError, match="executions"):
        whole_run_view(host, vals, bad, runs=[0])


def test_doctests():
    assert doctest.testmod(stitch_module).failed == 0


@pytest.mark.parametrize("name", ["fingrav_native.method._stitched", "fingrav_native.method._whole_run"])
def test_doctests_of_the_result_types_and_the_whole_run_view(name):
    # energy_per_execution and whole_run_view left the stitch module; their examples still run.
    failed, attempted = doctest.testmod(importlib.import_module(name))[:2]
    assert attempted > 0 and failed == 0


def test_slow_bandwidth_search_finds_every_candidates_windows_in_one_search(monkeypatch) -> None:
    # The span search ran the nearest-neighbour window search once per candidate window
    # (twelve small binary searches per channel group, per signature of a trace); one vectorised search now
    # finds them all, and each candidate's fit is the one its own search gives.
    from fingrav_native.method import _smoothers

    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(0.0, 1e5, 200))
    x[50:60] = x[50]  # ties: the window's edge must not depend on the search
    y = np.stack([200.0 + 1e-3 * x + rng.normal(0.0, 2.0, x.size),
                  300.0 + 50.0 * np.sin(x / 1e4) + rng.normal(0.0, 2.0, x.size)])
    w = rng.uniform(0.5, 1.5, x.size)
    calls: list[int] = []
    search = _smoothers._window_starts
    monkeypatch.setattr(_smoothers, "_window_starts", lambda *a: calls.append(len(a[1])) or search(*a))
    chosen = _smoothers._choose_window(x, y, w)
    assert calls == [12 * x.size]
    monkeypatch.setattr(_smoothers, "_window_starts", search)
    # The choice each candidate alone gives: generalised cross-validation over the twelve windows.
    ks = np.unique(np.round(np.geomspace(6, x.size, 12)).astype(np.int64))
    every = np.arange(x.size)
    scores = []
    for k in ks:
        lf = _smoothers._local_linear(x, y, w, x, int(k), self_index=every, spread=False)
        nu1 = float(np.sum(lf.self_weight))
        scores.append(x.size * np.sum(w * (y - lf.y) ** 2, axis=1) / (x.size - nu1) ** 2)
    assert chosen.tolist() == ks[np.argmin(np.array(scores), axis=0)].tolist()
