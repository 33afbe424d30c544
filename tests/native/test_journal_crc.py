"""The native tools' CRC-32 (slice-by-8) is zlib's: the journal reader checks every record with zlib.crc32."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from fingrav_native import _core


def test_data_loss_journal_crc32_equals_zlib_on_random_buffers():
    rng = np.random.default_rng(42)
    for n in list(range(0, 40)) + [63, 64, 65, 72, 1000, 4096 + 3, 72 * 1000 + 80]:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert _core.journal_crc32(data) == zlib.crc32(data), n
        # Continuation, as a record's CRC runs over the .npy header and then the records.
        k = n // 3
        assert _core.journal_crc32(data[k:], _core.journal_crc32(data[:k])) == zlib.crc32(data), n
        seed = int(rng.integers(0, 2**32))
        assert _core.journal_crc32(data, seed) == zlib.crc32(data, seed), n


def test_unclear_journal_crc32_names_a_bad_crc():
    with pytest.raises(ValueError, match="crc="):
        _core.journal_crc32(b"x", -1)
    with pytest.raises(ValueError, match="crc="):
        _core.journal_crc32(b"x", 2**32)
