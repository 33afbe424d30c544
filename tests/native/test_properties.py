"""Property-based tests (hypothesis): chunked draining and the waveform."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CHANNEL_SHARES, wait_until
from fingrav_native import SAMPLE_DTYPE
from fingrav_native.native import CHANNELS, Sampler, SyntheticSource

# Live threads make example run times vary: no deadline, no example database
# (nothing to replay: the property holds for every interleaving).
LIVE = settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

drain_ops = st.lists(
    st.tuples(st.sampled_from(["drain", "drain_into"]), st.integers(min_value=0, max_value=40)),
    min_size=1,
    max_size=10,
)


@LIVE
@given(ops=drain_ops)
def test_chunked_drains_concatenate_to_one_contiguous_stream(ops):
    # 100 readings/ms would fill 65536 slots in 6.5 s: the ring never
    # overflows within one example, so every accepted reading is drained.
    src = SyntheticSource(period_ns=10_000, depth=128)
    sampler = Sampler(src, period_ns=50_000, capacity=1 << 16)
    chunks = []
    sampler.start()
    try:
        for op, size in ops:
            before = sampler.stats().drained
            if op == "drain":
                chunk = sampler.drain(size)
                assert chunk.dtype == SAMPLE_DTYPE
            else:
                buf = np.empty(size, dtype=SAMPLE_DTYPE)
                n = sampler.drain_into(buf)
                chunk = buf[:n]
            assert len(chunk) <= size
            assert sampler.stats().drained == before + len(chunk)
            chunks.append(chunk)
            # Let something arrive before the next op, without relying on timing.
            wait_until(lambda: sampler.available > 0, "a buffered sample")
    finally:
        sampler.stop()
    if sampler.available:
        chunks.append(sampler.drain())
    got = np.concatenate(chunks)
    stats = sampler.stats()
    assert stats.drops == 0
    assert len(got) == stats.samples == stats.drained
    np.testing.assert_array_equal(got["seq"], np.arange(len(got)))
    assert np.all(np.diff(got["source_seq"].astype(np.int64)) >= 1)
    assert np.all(np.diff(got["host_ns"]) >= 0)


@settings(max_examples=200, deadline=None, database=None)
@given(
    k=st.integers(min_value=0, max_value=2**63),
    cycle=st.integers(min_value=1, max_value=1_000_000),
    base_w=st.floats(min_value=-1e4, max_value=1e4, allow_nan=False),
    amplitude_w=st.floats(min_value=-1e4, max_value=1e4, allow_nan=False),
    channel_mask=st.integers(min_value=1, max_value=15),
)
def test_synthetic_value_is_the_documented_waveform(k, cycle, base_w, amplitude_w, channel_mask):
    src = SyntheticSource(cycle=cycle, base_w=base_w, amplitude_w=amplitude_w, channel_mask=channel_mask)
    total = base_w + amplitude_w * math.sin(2 * math.pi * (k % cycle) / cycle)
    scale = abs(base_w) + abs(amplitude_w)
    for c, name in enumerate(CHANNELS):
        got = src.value(k, c)
        if channel_mask & (1 << c):
            want = float(np.float32(total * CHANNEL_SHARES[c]))
            assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6 * scale), (name, got, want)
        else:
            assert math.isnan(got), name
    assert math.isnan(src.value(k, 4)) and math.isnan(src.value(k, -1))
