"""The gpu_metrics parser and the AMD power sources, on binary fixtures.

The fixtures are built from ctypes mirrors of the kernel's own struct
definitions (drivers/gpu/drm/amd/include/kgd_pp_interface.h, struct
gpu_metrics_v1_4 .. v1_8), written here field by field and independently of
the parser: nothing of the package's layout tables is imported. ctypes lays
the fields out with the platform C ABI's natural alignment, as the kernel's
compiler does. Format 1.9 tables are packed by tests/fakes/fake_amd.py from
the driver's DECLARE_SMU_METRICS_CLASS and the SMU 13.0.6 field lists, and
one is committed as tests/fixtures/gpu_metrics_v1_9_smu_13_0_6.bin.
"""

from __future__ import annotations

import ctypes
import random
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import fake_amd
from fingrav_native import _core

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
NUM_VCN, NUM_JPEG_ENG, NUM_JPEG_ENG_V1, NUM_XGMI_LINKS = 4, 32, 40, 8
MAX_GFX_CLKS, MAX_CLKS, MAX_XCC, NUM_XCP = 8, 4, 8, 8


class MetricsTableHeader(ctypes.Structure):
    _fields_ = [("structure_size", u16), ("format_revision", u8), ("content_revision", u8)]


_HEAD = [
    ("common_header", MetricsTableHeader),
    ("temperature_hotspot", u16),
    ("temperature_mem", u16),
    ("temperature_vrsoc", u16),
    ("curr_socket_power", u16),
    ("average_gfx_activity", u16),
    ("average_umc_activity", u16),
]
_LINK = [
    ("pcie_link_width", u16),
    ("pcie_link_speed", u16),
    ("xgmi_link_width", u16),
    ("xgmi_link_speed", u16),
    ("gfx_activity_acc", u32),
    ("mem_activity_acc", u32),
    ("pcie_bandwidth_acc", u64),
    ("pcie_bandwidth_inst", u64),
    ("pcie_l0_to_recov_count_acc", u64),
    ("pcie_replay_count_acc", u64),
    ("pcie_replay_rover_count_acc", u64),
]
_NAK = [("pcie_nak_sent_count_acc", u32), ("pcie_nak_rcvd_count_acc", u32)]
_XGMI = [("xgmi_read_data_acc", u64 * NUM_XGMI_LINKS), ("xgmi_write_data_acc", u64 * NUM_XGMI_LINKS)]
_CLOCKS = [
    ("firmware_timestamp", u64),
    ("current_gfxclk", u16 * MAX_GFX_CLKS),
    ("current_socclk", u16 * MAX_CLKS),
    ("current_vclk0", u16 * MAX_CLKS),
    ("current_dclk0", u16 * MAX_CLKS),
    ("current_uclk", u16),
]
_RESIDENCY = [
    ("accumulation_counter", u32),
    ("prochot_residency_acc", u32),
    ("ppt_residency_acc", u32),
    ("socket_thm_residency_acc", u32),
    ("vr_thm_residency_acc", u32),
    ("hbm_thm_residency_acc", u32),
]
_ENERGY = [("energy_accumulator", u64), ("system_clock_counter", u64)]


class GpuMetricsV1_4(ctypes.Structure):
    _fields_ = (
        _HEAD
        + [("vcn_activity", u16 * NUM_VCN)]
        + _ENERGY
        + [("throttle_status", u32), ("gfxclk_lock_status", u32)]
        + _LINK
        + _XGMI
        + _CLOCKS
        + [("padding", u16)]
    )


class GpuMetricsV1_5(ctypes.Structure):
    _fields_ = (
        _HEAD
        + [("vcn_activity", u16 * NUM_VCN), ("jpeg_activity", u16 * NUM_JPEG_ENG)]
        + _ENERGY
        + [("throttle_status", u32), ("gfxclk_lock_status", u32)]
        + _LINK
        + _NAK
        + _XGMI
        + _CLOCKS
        + [("padding", u16)]
    )


class GpuMetricsV1_6Early(ctypes.Structure):
    """gpu_metrics_v1_6 as first merged (Linux 6.10 era)."""

    _fields_ = (
        _HEAD
        + [("vcn_activity", u16 * NUM_VCN), ("jpeg_activity", u16 * NUM_JPEG_ENG)]
        + _ENERGY
        + _RESIDENCY
        + [("throttle_status", u32), ("gfxclk_lock_status", u32)]
        + _LINK
        + _NAK
        + _XGMI
        + _CLOCKS
        + [("padding", u16)]
    )


class AmdgpuXcpMetrics(ctypes.Structure):
    _fields_ = [
        ("gfx_busy_inst", u32 * MAX_XCC),
        ("jpeg_busy", u16 * NUM_JPEG_ENG),
        ("vcn_busy", u16 * NUM_VCN),
        ("gfx_busy_acc", u64 * MAX_XCC),
    ]


class AmdgpuXcpMetricsV1_1(ctypes.Structure):
    _fields_ = AmdgpuXcpMetrics._fields_ + [("gfx_below_host_limit_acc", u64 * MAX_XCC)]


class AmdgpuXcpMetricsV1_2(ctypes.Structure):
    _fields_ = [
        ("gfx_busy_inst", u32 * MAX_XCC),
        ("jpeg_busy", u16 * NUM_JPEG_ENG_V1),
        ("vcn_busy", u16 * NUM_VCN),
        ("gfx_busy_acc", u64 * MAX_XCC),
        ("gfx_below_host_limit_ppt_acc", u64 * MAX_XCC),
        ("gfx_below_host_limit_thm_acc", u64 * MAX_XCC),
        ("gfx_low_utilization_acc", u64 * MAX_XCC),
        ("gfx_below_host_limit_total_acc", u64 * MAX_XCC),
    ]


def _xcp_layout(mem_max_bandwidth: bool, xgmi_status: bool, xcp: type) -> list:
    return (
        _HEAD
        + ([("mem_max_bandwidth", u64)] if mem_max_bandwidth else [])
        + _ENERGY
        + _RESIDENCY
        + [("gfxclk_lock_status", u32)]
        + _LINK
        + _NAK
        + _XGMI
        + ([("xgmi_link_status", u16 * NUM_XGMI_LINKS), ("padding", u16)] if xgmi_status else [])
        + _CLOCKS
        + [("num_partition", u16), ("xcp_stats", xcp * NUM_XCP), ("pcie_lc_perf_other_end_recovery", u32)]
    )


class GpuMetricsV1_6Xcp(ctypes.Structure):
    """gpu_metrics_v1_6 as reworked in place: per-partition xcp_stats."""

    _fields_ = _xcp_layout(False, False, AmdgpuXcpMetrics)


class GpuMetricsV1_7(ctypes.Structure):
    _fields_ = _xcp_layout(True, True, AmdgpuXcpMetricsV1_1)


class GpuMetricsV1_8(ctypes.Structure):
    _fields_ = _xcp_layout(True, True, AmdgpuXcpMetricsV1_2)


# (struct, content revision, size the kernel's sizeof gives, layout name)
LAYOUTS = [
    (GpuMetricsV1_4, 4, 288, "1.4"),
    (GpuMetricsV1_5, 5, 360, "1.5"),
    (GpuMetricsV1_6Early, 6, 384, "1.6 (device-wide VCN/JPEG activity)"),
    (GpuMetricsV1_6Xcp, 6, 1664, "1.6 (per-partition xcp_stats)"),
    (GpuMetricsV1_7, 7, 2208, "1.7"),
    (GpuMetricsV1_8, 8, 3872, "1.8"),
]
IDS = [name for *_, name in LAYOUTS]
ALL_ONES16, ALL_ONES32, ALL_ONES64 = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


def make_table(struct: type, crev: int, **fields) -> bytes:
    """A table as the driver writes it: all 0xFF, then the header, then the given fields."""
    t = struct()
    ctypes.memset(ctypes.addressof(t), 0xFF, ctypes.sizeof(t))
    t.common_header.structure_size = ctypes.sizeof(t)
    t.common_header.format_revision = 1
    t.common_header.content_revision = crev
    for name, value in fields.items():
        if isinstance(value, (list, tuple)):
            arr = getattr(t, name)
            for i, v in enumerate(value):
                arr[i] = v
        else:
            setattr(t, name, value)
    return bytes(t)


def full_fields(struct: type) -> dict:
    names = {f[0] for f in struct._fields_}
    f = dict(
        temperature_hotspot=71,
        temperature_mem=64,
        temperature_vrsoc=52,
        curr_socket_power=512,
        average_gfx_activity=97,
        average_umc_activity=33,
        energy_accumulator=0x0123_4567_89AB_CDEF,
        system_clock_counter=1_234_567_890_123,
        firmware_timestamp=987_654_321_000,
        gfxclk_lock_status=0x5A,
        current_gfxclk=[2100, 2090, 2080, 2070],  # 4 XCCs; slots 4..7 stay unset
        current_uclk=1300,
        pcie_link_width=16,
        current_socclk=[1, 2, 3, 4],
    )
    if "throttle_status" in names:
        f["throttle_status"] = 0x0000_1002
    if "accumulation_counter" in names:
        f["accumulation_counter"] = 424_242
    if "num_partition" in names:
        f["num_partition"] = 2
    if "mem_max_bandwidth" in names:
        f["mem_max_bandwidth"] = 5300
    return f


# ---------------------------------------------------------------- the parser


@pytest.mark.parametrize("struct, crev, size, name", LAYOUTS, ids=IDS)
def test_fixture_struct_has_the_kernel_size(struct, crev, size, name):
    # The sizes the kernel's sizeof gives (the 1.8 one is also written in the
    # kernel's metrics attribute table): a check of the ctypes mirrors.
    assert ctypes.sizeof(struct) == size


def test_layout_table_lists_every_supported_layout():
    assert _core.GPU_METRICS_LAYOUTS == tuple((1, crev, size, name) for _, crev, size, name in LAYOUTS) + (
        (1, 9, 0, "1.9 (attribute-encoded)"),)  # size 0: any, the attributes say
    assert _core.AMD_ENERGY_UNIT_UJ == 15.2587890625 == 1e6 / 65536
    assert _core.AMD_FIRMWARE_TICK_NS == 10
    assert _core.AMD_DRIVER_CACHE_INTERVAL_NS == 5_000_000  # SMU_GPU_METRICS_CACHE_INTERVAL


@pytest.mark.parametrize("struct, crev, size, name", LAYOUTS, ids=IDS)
def test_parse_every_field(struct, crev, size, name):
    fields = full_fields(struct)
    d = _core.parse_gpu_metrics(make_table(struct, crev, **fields))
    names = {f[0] for f in struct._fields_}
    assert d["format_revision"] == 1 and d["content_revision"] == crev
    assert d["structure_size"] == size and d["layout"] == name
    assert d["temperature_hotspot_c"] == 71
    assert d["temperature_mem_c"] == 64
    assert d["temperature_vrsoc_c"] == 52
    assert d["curr_socket_power_w"] == 512
    assert d["average_gfx_activity_pct"] == 97
    assert d["average_umc_activity_pct"] == 33
    assert d["energy_accumulator"] == 0x0123_4567_89AB_CDEF
    assert d["energy_j"] == 0x0123_4567_89AB_CDEF / 65536
    assert d["system_clock_counter_ns"] == 1_234_567_890_123
    assert d["firmware_timestamp"] == 987_654_321_000
    assert d["gfxclk_lock_status"] == 0x5A
    assert d["current_gfxclk_mhz"] == [2100, 2090, 2080, 2070]
    assert d["current_uclk_mhz"] == 1300
    assert d["throttle_status"] == (0x1002 if "throttle_status" in names else None)
    assert d["accumulation_counter"] == (424_242 if "accumulation_counter" in names else None)
    assert d["num_partition"] == (2 if "num_partition" in names else None)
    assert d["firmware_tick_ns"] == 10 and d["attribute_count"] is None and d["encoding_bytes"] is None


@pytest.mark.parametrize("struct, crev, size, name", LAYOUTS, ids=IDS)
def test_unset_fields_are_none(struct, crev, size, name):
    d = _core.parse_gpu_metrics(make_table(struct, crev))
    for key in (
        "temperature_hotspot_c",
        "curr_socket_power_w",
        "energy_accumulator",
        "energy_j",
        "system_clock_counter_ns",
        "firmware_timestamp",
        "accumulation_counter",
        "throttle_status",
        "current_uclk_mhz",
        "num_partition",
    ):
        assert d[key] is None, key
    assert d["current_gfxclk_mhz"] == []


@pytest.mark.parametrize("struct, crev, size, name", LAYOUTS, ids=IDS)
def test_truncated_and_trailing_bytes_are_errors(struct, crev, size, name):
    data = make_table(struct, crev, **full_fields(struct))
    with pytest.raises(_core.GpuMetricsFormatError, match=rf"1\.{crev}.*{size}.*{size - 1} bytes.*truncated"):
        _core.parse_gpu_metrics(data[:-1])
    with pytest.raises(_core.GpuMetricsFormatError, match=rf"{size + 8} bytes.*trailing"):
        _core.parse_gpu_metrics(data + bytes(8))


@pytest.mark.parametrize("data", [b"", b"\x20", b"\x20\x01\x01"])
def test_shorter_than_header(data):
    with pytest.raises(_core.GpuMetricsFormatError, match=f"{len(data)} bytes, shorter than the 4-byte header"):
        _core.parse_gpu_metrics(data)


@pytest.mark.parametrize("frev, crev", [(1, 3), (1, 10), (1, 0), (2, 4), (3, 0), (0, 0)])
def test_unknown_revision_names_revision_and_size(frev, crev):
    data = bytearray(make_table(GpuMetricsV1_4, 4))
    data[2], data[3] = frev, crev
    with pytest.raises(_core.GpuMetricsFormatError, match=rf"revision {frev}\.{crev} \(structure_size 288, 288 bytes"):
        _core.parse_gpu_metrics(bytes(data))


def test_wrong_structure_size_for_the_revision():
    # A 1.6 header with a size that is neither 1.6 layout: never guessed.
    data = bytearray(make_table(GpuMetricsV1_6Early, 6))
    data[0:2] = (1000).to_bytes(2, "little")
    with pytest.raises(_core.GpuMetricsFormatError, match=r"1\.6 with structure_size 1000.*384 .*or 1664 "):
        _core.parse_gpu_metrics(bytes(data))


def test_layout_relabelled_with_another_revision_is_refused():
    # A 1.5 body under a 1.4 header: the size says it is not 1.4.
    data = bytearray(make_table(GpuMetricsV1_5, 5, **full_fields(GpuMetricsV1_5)))
    data[3] = 4
    with pytest.raises(_core.GpuMetricsFormatError, match=r"1\.4 with structure_size 360.*expected 288"):
        _core.parse_gpu_metrics(bytes(data))


def test_the_two_16_layouts_are_told_apart_by_size():
    early = _core.parse_gpu_metrics(make_table(GpuMetricsV1_6Early, 6, energy_accumulator=11, firmware_timestamp=22))
    xcp = _core.parse_gpu_metrics(make_table(GpuMetricsV1_6Xcp, 6, energy_accumulator=11, firmware_timestamp=22))
    assert early["layout"] != xcp["layout"]
    # Same values although the fields sit at different offsets in the two layouts.
    assert GpuMetricsV1_6Early.energy_accumulator.offset != GpuMetricsV1_6Xcp.energy_accumulator.offset
    assert early["energy_accumulator"] == xcp["energy_accumulator"] == 11
    assert early["firmware_timestamp"] == xcp["firmware_timestamp"] == 22


def test_parse_rejects_non_bytes():
    with pytest.raises(TypeError):
        _core.parse_gpu_metrics("not bytes")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4200))
def test_random_bytes_parse_or_raise_format_error(data):
    try:
        d = _core.parse_gpu_metrics(data)
    except _core.GpuMetricsFormatError:
        return
    assert d["structure_size"] == len(data)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(LAYOUTS),
    st.integers(min_value=0, max_value=4000),
    st.binary(min_size=1, max_size=8),
)
def test_corrupted_tables_parse_or_raise(layout, pos, junk):
    struct, crev, size, _ = layout
    data = bytearray(make_table(struct, crev, **full_fields(struct)))
    pos = pos % len(data)
    data[pos : pos + len(junk)] = junk  # may also lengthen the buffer at the end
    try:
        d = _core.parse_gpu_metrics(bytes(data))
    except _core.GpuMetricsFormatError:
        return
    # Accepted: then the header still names a known layout of exactly this
    # size, or 1.9, whose attributes then account for every byte.
    assert (d["format_revision"], d["content_revision"], d["structure_size"]) in {
        (1, c, s) for _, c, s, _ in LAYOUTS
    } | {(1, 9, len(data))}
    assert d["structure_size"] == len(data)


# ---------------------------------------------------------------- format 1.9 (attribute-encoded)
# Tables packed as the driver packs them (tests/fakes/fake_amd.py): header,
# int attr_count, then per field AMDGPU_METRICS_ENC_ATTR(unit, type, id, inst)
# and its value(s). The merged driver writes 8-byte encodings, the helper
# patch as first posted (v1, v2) wrote 4-byte ones; SMU 13.0.6 moved counters from U32 to U64.

V19_VALUES = {
    "temperature_hotspot": 71, "temperature_mem": 64, "temperature_vrsoc": 52, "curr_socket_power": 512,
    "average_gfx_activity": 97, "average_umc_activity": 33, "energy_accumulator": 0x0123_4567_89AB_CDEF,
    "system_clock_counter": 1_234_567_890_123, "accumulation_counter": 424_242, "gfxclk_lock_status": 0x5A,
    "firmware_timestamp": 987_654_321_000, "current_gfxclk": [2100, 2090, 2080, 2070], "current_uclk": 1300,
    "mem_max_bandwidth": 5300, "xgmi_read_data_acc": list(range(8)), "jpeg_busy": [7] * 40,
}
V19_KINDS = [(fake_amd.SMU_13_0_6_ROCM, 8), (fake_amd.SMU_13_0_6_V2, 4)]
V19_IDS = ["rocm-amdgpu-8-byte", "first-posted-4-byte"]


def _v19(fields=fake_amd.SMU_13_0_6_ROCM, tag_bytes=8, **values):
    return fake_amd.build_v19(fields, values, tag_bytes=tag_bytes)


def _v19_raw(attrs, tag_bytes=8, count=None):
    """A 1.9 table from (encoding, value bytes) pairs, for the malformed cases."""
    body = b"".join(struct.pack("<Q" if tag_bytes == 8 else "<I", e) + v for e, v in attrs)
    n = len(attrs) if count is None else count
    return struct.pack("<HBBi", 8 + len(body), 1, 9, n) + body


def enc(unit, type_, attr, inst=1):
    return fake_amd.enc_attr(unit, type_, fake_amd.ATTR[attr] if isinstance(attr, str) else attr, inst)


@pytest.mark.parametrize("fields, tag_bytes", V19_KINDS, ids=V19_IDS)
def test_v19_every_field_read_by_its_encoding(fields, tag_bytes):
    data = _v19(fields, tag_bytes, **V19_VALUES)
    d = _core.parse_gpu_metrics(data)
    assert d["format_revision"] == 1 and d["content_revision"] == 9 and d["structure_size"] == len(data)
    assert d["layout"] == f"1.9 (attribute-encoded), {tag_bytes}-byte encodings"
    assert d["encoding_bytes"] == tag_bytes and d["attribute_count"] == len(fields)
    assert d["temperature_hotspot_c"] == 71 and d["temperature_mem_c"] == 64 and d["temperature_vrsoc_c"] == 52
    assert d["curr_socket_power_w"] == 512
    assert d["average_gfx_activity_pct"] == 97 and d["average_umc_activity_pct"] == 33
    assert d["energy_accumulator"] == 0x0123_4567_89AB_CDEF and d["energy_j"] == 0x0123_4567_89AB_CDEF / 65536
    assert d["system_clock_counter_ns"] == 1_234_567_890_123
    assert d["firmware_timestamp"] == 987_654_321_000 and d["firmware_tick_ns"] == 10  # AMDGPU_METRICS_UNIT_TIME_2
    assert d["accumulation_counter"] == 424_242
    assert d["gfxclk_lock_status"] == 0x5A
    assert d["current_gfxclk_mhz"] == [2100, 2090, 2080, 2070]
    assert d["current_uclk_mhz"] == 1300
    # Not in SMU 13.0.6's list (num_partition), or gone since 1.6 (throttle_status).
    assert d["num_partition"] is None and d["throttle_status"] is None


def test_v19_committed_fixture():
    # A binary fixture made once from the kernel's definitions; the builder
    # must still make the same bytes, so the two cannot drift apart.
    data = (FIXTURES / "gpu_metrics_v1_9_smu_13_0_6.bin").read_bytes()
    assert data == fake_amd.build_v19(fake_amd.SMU_13_0_6_ROCM, fake_amd.FIXTURE_VALUES)
    assert len(data) == 1258 and data[:4] == bytes([0xEA, 0x04, 1, 9])
    d = _core.parse_gpu_metrics(data)
    assert d["attribute_count"] == 50 and d["encoding_bytes"] == 8
    assert d["curr_socket_power_w"] == 162 and d["energy_accumulator"] == 0x0000_01A2_B3C4_D5E6
    assert d["firmware_timestamp"] == 123_456_789_000 and d["system_clock_counter_ns"] == 987_654_321_012
    assert d["accumulation_counter"] == 5_000_000_000  # a U64 counter beyond 32 bits, kept whole
    assert d["current_gfxclk_mhz"] == [132, 133, 131, 132, 134, 132, 133, 131] and d["current_uclk_mhz"] == 900


@pytest.mark.parametrize("fields, tag_bytes", V19_KINDS, ids=V19_IDS)
def test_v19_unset_fields_are_none(fields, tag_bytes):
    d = _core.parse_gpu_metrics(_v19(fields, tag_bytes))
    for key in ("temperature_hotspot_c", "curr_socket_power_w", "energy_accumulator", "energy_j",
                "system_clock_counter_ns", "firmware_timestamp", "accumulation_counter", "current_uclk_mhz"):
        assert d[key] is None, key
    assert d["current_gfxclk_mhz"] == []


def test_v19_order_is_free_and_unknown_attributes_are_skipped():
    # Decoded by encoding, not offset: shuffled fields, and attributes this
    # parser does not know (ids, units, widths of a later driver) anywhere.
    fields = list(fake_amd.SMU_13_0_6_ROCM)
    random.Random(3).shuffle(fields)
    unknown = [("X", 77, t, f"future_{t}", n) for t, n in ((0, 3), (3, 1), (5, 2), (7, 5))]
    for k, f in enumerate(unknown):
        fields.insert(5 * k, f)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(fake_amd.ATTR, "X", 1000)  # an id the kernel has not assigned yet
        data = fake_amd.build_v19(fields, V19_VALUES | {"future_7": [1, 2, 3, 4, 5]})
    d = _core.parse_gpu_metrics(data)
    ref = _core.parse_gpu_metrics(_v19(**V19_VALUES))
    assert d["attribute_count"] == len(fields)
    assert {k: v for k, v in d.items() if k not in ("attribute_count", "structure_size")} == {
        k: v for k, v in ref.items() if k not in ("attribute_count", "structure_size")}


def test_v19_widths_follow_the_type():
    # The same fields in other integer types: values read at each type's width.
    attrs = [(enc(3, 4, "CURR_SOCKET_POWER"), struct.pack("<I", 700)),              # U32 W
             (enc(0, 4, "ENERGY_ACCUMULATOR"), struct.pack("<I", 123_456)),         # U32 count
             (enc(4, 6, "FIRMWARE_TIMESTAMP"), struct.pack("<Q", 5_000)),           # U64 in ns (TIME_1)
             (enc(5, 6, "SYSTEM_CLOCK_COUNTER"), struct.pack("<Q", 77)),            # in 10 ns (TIME_2)
             (enc(2, 1, "TEMPERATURE_HOTSPOT"), struct.pack("<b", 45)),             # S8
             (enc(1, 4, "CURRENT_GFXCLK", 10), struct.pack("<10I", *range(2000, 2010)))]  # 10 XCCs, U32
    d = _core.parse_gpu_metrics(_v19_raw(attrs))
    assert d["curr_socket_power_w"] == 700 and d["energy_accumulator"] == 123_456
    assert d["firmware_timestamp"] == 5_000 and d["firmware_tick_ns"] == 1
    assert d["system_clock_counter_ns"] == 770
    assert d["temperature_hotspot_c"] == 45
    assert d["current_gfxclk_mhz"] == list(range(2000, 2008))  # MAX_GFX_CLKS of them kept


MALFORMED = [
    ("count beyond size", lambda: _v19_raw([(enc(0, 6, "ENERGY_ACCUMULATOR"), bytes(8))], count=100),
     r"attr_count 100 needs at least 800 bytes of encodings but the table has 16"),
    ("negative count", lambda: _v19_raw([], count=-3), r"attr_count is -3, negative"),
    ("value cut off", lambda: _v19_raw([(enc(0, 6, "ENERGY_ACCUMULATOR"), bytes(8)),
                                        (enc(5, 6, "FIRMWARE_TIMESTAMP"), bytes(4))]),
     r"attribute 1 \(id 32, 1 x U64\) runs 4 bytes past the end of the table"),
    ("no values", lambda: _v19_raw([(enc(0, 0, 600, 0), b"")]), r"attribute 0 \(id 600\) has no values \(inst 0\)"),
    ("bytes after the last attribute", lambda: _v19_raw([(enc(0, 6, "ENERGY_ACCUMULATOR"), bytes(12))]),
     r"1 attributes end at byte 24 but structure_size is 28"),
    ("unknown type width", lambda: _v19_raw([(enc(0, 9, "ENERGY_ACCUMULATOR"), bytes(8))]),
     r"has type 9, not one of the 8 types"),
    ("a field twice", lambda: _v19_raw([(enc(0, 6, "ENERGY_ACCUMULATOR"), bytes(8))] * 2),
     r"energy_accumulator appears twice: which one holds the value is ambiguous"),
    ("a scalar with two values", lambda: _v19_raw([(enc(5, 6, "FIRMWARE_TIMESTAMP", 2), bytes(16))]),
     r"firmware_timestamp has 2 values where the kernel defines one"),
    ("a time that is no time", lambda: _v19_raw([(enc(3, 6, "FIRMWARE_TIMESTAMP"), bytes(8))]),
     r"firmware_timestamp has unit 3, not a time unit"),
    ("energy in another unit", lambda: _v19_raw([(enc(3, 6, "ENERGY_ACCUMULATOR"), bytes(8))]),
     r"energy_accumulator has unit 3, not the unit-less 2\^-16 J count"),
    ("power not in watts", lambda: _v19_raw([(enc(0, 2, "CURR_SOCKET_POWER"), bytes(2))]),
     r"curr_socket_power has unit 0, not watts"),
    ("negative power", lambda: _v19_raw([(enc(3, 3, "CURR_SOCKET_POWER"), struct.pack("<h", -5))]),
     r"curr_socket_power is negative \(S16\)"),
    ("power too large", lambda: _v19_raw([(enc(3, 4, "CURR_SOCKET_POWER"), struct.pack("<I", 70_000))]),
     r"curr_socket_power = 70000 does not fit 16 bits"),
    ("ambiguous width",  # 8-byte: two U64; 4-byte: a U64, then a U64[2] encoded in the first value's upper half
     lambda: _v19_raw([(enc(0, 6, 500), struct.pack("<Q", enc(0, 6, 501, 2) << 32)),
                       (enc(0, 6, 502), struct.pack("<Q", 9))]),
     r"consistently with both 8-byte and 4-byte attribute encodings \(2 attributes either way\)"),
    ("no attr_count", lambda: struct.pack("<HBB", 6, 1, 9) + b"\0\0", r"6 bytes has no room for its attr_count"),
]


@pytest.mark.parametrize("build, pattern", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_v19_malformed_tables_are_refused(build, pattern):
    prefix = r"gpu_metrics( 1\.9:|: revision 1\.9 table of) .*"
    with pytest.raises(_core.GpuMetricsFormatError, match=prefix + pattern) as e:
        _core.parse_gpu_metrics(build())
    assert "\n" not in str(e.value)


def test_v19_truncated_read_is_refused():
    data = _v19(**V19_VALUES)
    with pytest.raises(_core.GpuMetricsFormatError, match=rf"1\.9 header says structure_size {len(data)} but "
                                                          rf"{len(data) - 1} bytes were read \(truncated\)"):
        _core.parse_gpu_metrics(data[:-1])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(V19_KINDS), st.lists(st.tuples(st.integers(0, 1300), st.integers(0, 255)), min_size=1,
                                             max_size=4))
def test_v19_corrupted_tables_parse_or_raise(kind, flips):
    fields, tag_bytes = kind
    data = bytearray(_v19(fields, tag_bytes, **V19_VALUES))
    for pos, byte in flips:
        data[pos % len(data)] = byte
    try:
        d = _core.parse_gpu_metrics(bytes(data))
    except _core.GpuMetricsFormatError:
        return
    assert d["structure_size"] == len(data)


# ---------------------------------------------------------------- GpuMetricsSource


class MetricsFile:
    """A gpu_metrics stand-in rewritten in place (the source keeps its descriptor open)."""

    def __init__(self, path, struct=GpuMetricsV1_8, crev=8):
        self.path, self.struct, self.crev = str(path), struct, crev

    def write(self, **fields):
        fake_amd.rewrite_in_place(self.path, make_table(self.struct, self.crev, **fields))


def expected_watts(de: int, dt_ticks: int) -> np.float32:
    # The documented formula, W = dE * 2^-16 J / (dt * 10 ns), evaluated the same way.
    return np.float32(float(de) * 1e9 / (65536.0 * float(dt_ticks * 10)))


@pytest.fixture
def mfile(tmp_path):
    f = MetricsFile(tmp_path / "gpu_metrics")
    f.write(energy_accumulator=1_000_000, firmware_timestamp=5_000_000, curr_socket_power=400, system_clock_counter=1)
    return f


def test_source_info_energy(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    info = src.info
    assert info.clock_domain == "amd-pmfw-10ns" and info.tick_ns == 10.0
    assert info.channels == ["total"] and not info.has_sequence
    # Not 1 ms: the period depends on the driver's table cache (5 ms by
    # default since December 2025), so the source declares it unknown and
    # the backend measures it.
    assert info.native_period_ns == 0
    assert info.window_ns == 5_000_000
    assert src.channel == "energy" and src.clock == "firmware" and src.layout == "1.8"
    assert src.path == mfile.path
    assert src.first_table["energy_accumulator"] == 1_000_000


def test_energy_channel_derives_exact_watts(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    # The first table only seeds the difference.
    assert len(src.poll()) == 0
    assert src.stats()["unpaired"] == 1
    e, t = 1_000_000, 5_000_000
    seen = []
    for de, dt in [(32768, 100_000), (1_234_567, 99_990), (1, 1), (0, 250_000)]:
        e, t = e + de, t + dt
        mfile.write(energy_accumulator=e, firmware_timestamp=t)
        r = src.poll()
        assert len(r) == 1
        assert r["source_ts"][0] == t
        assert r["total"][0] == expected_watts(de, dt)
        assert r["flags"][0] == _core.FLAG_DERIVED
        assert r["window_ns"][0] == dt * 10
        assert np.isnan(r["compute"][0]) and np.isnan(r["io"][0]) and np.isnan(r["memory"][0])
        seen.append(float(r["total"][0]))
    assert seen[0] == 500.0  # 2^15 units = 0.5 J over 1 ms
    st_ = src.stats()
    assert st_["tables"] == 5 and st_["emitted"] == 4 and st_["reads"] >= 5


def test_repeated_timestamp_is_the_same_reading(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    src.poll()
    mfile.write(energy_accumulator=1_000_000 + 65536, firmware_timestamp=5_100_000)
    first = src.poll()
    again = src.poll()
    assert len(first) == 1 and first.tobytes() == again.tobytes()
    assert src.stats()["tables"] == 2 and src.stats()["emitted"] == 1


def test_energy_accumulator_wraps(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    mfile.write(energy_accumulator=ALL_ONES64 - 99, firmware_timestamp=6_000_000)
    src.poll()
    mfile.write(energy_accumulator=400, firmware_timestamp=6_100_000)
    r = src.poll()
    assert r["total"][0] == expected_watts(500, 100_000)


def test_energy_reset_is_reported_then_derivation_restarts(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    mfile.write(energy_accumulator=10**12, firmware_timestamp=6_000_000)
    src.poll()
    mfile.write(energy_accumulator=5, firmware_timestamp=6_100_000)
    with pytest.raises(RuntimeError, match="transient.*energy accumulator went from 1000000000000 to 5"):
        src.poll()
    assert src.stats()["energy_resets"] == 1
    mfile.write(energy_accumulator=5 + 65536, firmware_timestamp=6_200_000)
    r = src.poll()
    assert r["total"][0] == expected_watts(65536, 100_000)


def test_firmware_timestamp_going_backwards_is_fatal(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    mfile.write(energy_accumulator=100, firmware_timestamp=6_000_000)
    src.poll()
    mfile.write(energy_accumulator=200, firmware_timestamp=10)
    with pytest.raises(RuntimeError, match="fatal.*went backwards from 6000000 to 10"):
        src.poll()


def test_stuck_firmware_timestamp_is_detected(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    src.poll()
    for k in range(1, 3):
        mfile.write(energy_accumulator=1_000_000 + k * 1000, firmware_timestamp=5_000_000)
        assert len(src.poll()) == 0
    mfile.write(energy_accumulator=1_000_000 + 3000, firmware_timestamp=5_000_000)
    with pytest.raises(RuntimeError, match="fatal.*does not advance its timestamp.*clock='boottime'"):
        src.poll()


def test_unset_firmware_timestamp_falls_back_to_boottime(tmp_path):
    f = MetricsFile(tmp_path / "gpu_metrics", GpuMetricsV1_4, 4)
    f.write(energy_accumulator=0, system_clock_counter=10**9)  # firmware_timestamp left all ones
    src = _core.GpuMetricsSource(f.path)
    assert src.clock == "boottime"
    assert src.info.clock_domain == "boottime" and src.info.tick_ns == 1.0
    assert len(src.poll()) == 0
    # Same energy, later driver stamp: the same table (dedupe on the accumulators).
    f.write(energy_accumulator=0, system_clock_counter=10**9 + 500_000)
    assert len(src.poll()) == 0
    f.write(energy_accumulator=65536, system_clock_counter=10**9 + 1_000_000)
    r = src.poll()
    assert r["source_ts"][0] == 10**9 + 1_000_000
    assert r["window_ns"][0] == 1_000_000
    assert r["total"][0] == np.float32(65536.0 * 1e9 / (65536.0 * 1_000_000.0))
    with pytest.raises(_core.DeviceUnavailableError, match="firmware_timestamp unset"):
        _core.GpuMetricsSource(f.path, clock="firmware")


def test_socket_channel(mfile):
    src = _core.GpuMetricsSource(mfile.path, channel="socket")
    assert src.info.window_ns == 0
    r = src.poll()  # the first table is a reading of its own
    assert len(r) == 1 and r["total"][0] == 400 and r["flags"][0] == 0 and r["source_ts"][0] == 5_000_000
    mfile.write(energy_accumulator=1, firmware_timestamp=5_100_000, curr_socket_power=655)
    r = src.poll()
    assert r["total"][0] == 655 and r["source_ts"][0] == 5_100_000


def test_bad_arguments(mfile, tmp_path):
    with pytest.raises(ValueError, match="channel='watts'"):
        _core.GpuMetricsSource(mfile.path, channel="watts")
    with pytest.raises(ValueError, match="clock='host'"):
        _core.GpuMetricsSource(mfile.path, clock="host")
    with pytest.raises(ValueError, match="path"):
        _core.GpuMetricsSource("")
    missing = str(tmp_path / "card9" / "gpu_metrics")
    with pytest.raises(_core.DeviceUnavailableError, match=rf"{missing}.*amdgpu kernel driver must be loaded"):
        _core.GpuMetricsSource(missing)


def test_unknown_format_refused_at_open(tmp_path):
    p = tmp_path / "gpu_metrics"
    data = bytearray(make_table(GpuMetricsV1_4, 4))
    data[3] = 3
    p.write_bytes(bytes(data))
    with pytest.raises(_core.GpuMetricsFormatError, match=r"revision 1\.3 \(structure_size 288"):
        _core.GpuMetricsSource(str(p))


def test_format_change_while_polling_is_fatal(mfile):
    src = _core.GpuMetricsSource(mfile.path)
    with open(mfile.path, "r+b") as f:
        f.truncate(100)
    with pytest.raises(RuntimeError, match="fatal.*3872.*100 bytes"):
        src.poll()


def test_energy_channel_under_the_sampler_thread(mfile):
    # Energy stays constant, so every pair of tables the thread happens to
    # see (and a read that races the rewrite) derives exactly 0 W.
    src = _core.GpuMetricsSource(mfile.path)
    written = []
    stop = threading.Event()

    def writer():
        t = 5_000_000
        while not stop.is_set():
            t += 100_000
            mfile.write(energy_accumulator=1_000_000, firmware_timestamp=t)
            written.append(t)
            time.sleep(0.002)

    sampler = _core.Sampler(src, period_ns=200_000)
    th = threading.Thread(target=writer)
    with sampler:
        th.start()
        time.sleep(0.25)
        stop.set()
        th.join()
    samples = sampler.drain()
    stats = sampler.stats()
    assert stats.read_errors == 0
    assert len(samples) >= 10
    assert np.all(samples["total"] == 0.0)
    assert np.all(samples["flags"] == _core.FLAG_DERIVED)
    assert np.all(np.diff(samples["source_ts"]) > 0)
    assert set(samples["source_ts"].tolist()) <= set(written)
    assert np.all(samples["window_ns"] % 1_000_000 == 0)  # whole 100_000-tick steps
    assert stats.duplicates > 0  # the thread polls faster than the tables change


@pytest.mark.parametrize("fields, tag_bytes", V19_KINDS, ids=V19_IDS)
def test_source_on_a_v19_file(tmp_path, fields, tag_bytes):
    # The energy channel on a 1.9 table: the same derivation, the firmware
    # clock's tick from the field's unit.
    p = tmp_path / "gpu_metrics"
    p.write_bytes(_v19(fields, tag_bytes, energy_accumulator=1_000_000, firmware_timestamp=5_000_000))
    src = _core.GpuMetricsSource(str(p))
    assert src.layout == f"1.9 (attribute-encoded), {tag_bytes}-byte encodings"
    assert src.clock == "firmware" and src.info.clock_domain == "amd-pmfw-10ns" and src.info.tick_ns == 10.0
    assert len(src.poll()) == 0
    with open(p, "r+b") as f:
        f.write(_v19(fields, tag_bytes, energy_accumulator=1_000_000 + 32768, firmware_timestamp=5_100_000))
    r = src.poll()
    assert r["total"][0] == expected_watts(32768, 100_000) == 500.0 and r["window_ns"][0] == 1_000_000


def test_source_on_a_v19_file_in_ns(tmp_path):
    # A firmware clock stated in ns (AMDGPU_METRICS_UNIT_TIME_1): 1 ns ticks.
    def table(e, t):
        return _v19_raw([(enc(0, 6, "ENERGY_ACCUMULATOR"), struct.pack("<Q", e)),
                         (enc(4, 6, "FIRMWARE_TIMESTAMP"), struct.pack("<Q", t))])
    p = tmp_path / "gpu_metrics"
    p.write_bytes(table(0, 10**9))
    src = _core.GpuMetricsSource(str(p))
    assert src.info.clock_domain == "amd-pmfw-1ns" and src.info.tick_ns == 1.0
    src.poll()
    with open(p, "r+b") as f:
        f.write(table(65536, 10**9 + 1_000_000))
    r = src.poll()
    assert r["total"][0] == 1000.0 and r["window_ns"][0] == 1_000_000  # 1 J over 1 ms


def test_v19_unit_change_while_polling_is_fatal(tmp_path):
    def table(unit):
        return _v19_raw([(enc(0, 6, "ENERGY_ACCUMULATOR"), struct.pack("<Q", 0)),
                         (enc(unit, 6, "FIRMWARE_TIMESTAMP"), struct.pack("<Q", 10**9))])
    p = tmp_path / "gpu_metrics"
    p.write_bytes(table(5))
    src = _core.GpuMetricsSource(str(p))
    p.write_bytes(table(4))
    with pytest.raises(RuntimeError, match="fatal.*layout changed"):
        src.poll()


# ---------------------------------------------------------------- hwmon


def test_hwmon_source(tmp_path):
    p = tmp_path / "power1_average"
    p.write_text("123456789\n")
    src = _core.HwmonPowerSource(str(p))
    assert src.averaged and src.path == str(p)
    assert src.info.clock_domain == "host-monotonic-raw" and src.info.tick_ns == 1.0
    assert src.read_microwatts() == 123456789
    before = _core.host_time_ns()
    r = src.poll()
    after = _core.host_time_ns()
    assert len(r) == 1 and r["total"][0] == np.float32(123.456789)
    assert before <= r["source_ts"][0] <= after
    again = src.poll()  # unchanged value: the same reading
    assert again["source_ts"][0] == r["source_ts"][0]
    with open(p, "r+") as f:
        f.write("200000000\n")
    r2 = src.poll()
    assert r2["total"][0] == np.float32(200.0) and r2["source_ts"][0] > r["source_ts"][0]
    inp = tmp_path / "power1_input"
    inp.write_text("5")
    assert not _core.HwmonPowerSource(str(inp)).averaged


@pytest.mark.parametrize("text", ["", "\n", "12a\n", "-5\n", "99999999999999999999999\n", "1.5\n"])
def test_hwmon_bad_text(tmp_path, text):
    p = tmp_path / "power1_input"
    p.write_text(text)
    with pytest.raises(_core.DeviceUnavailableError, match="power1_input"):
        _core.HwmonPowerSource(str(p))


def test_hwmon_transient_error_then_recovers(tmp_path):
    p = tmp_path / "power1_input"
    p.write_text("1000000\n")
    src = _core.HwmonPowerSource(str(p))
    with open(p, "w") as f:
        f.write("garbage\n")
    with pytest.raises(RuntimeError, match="transient.*not a decimal microwatt count"):
        src.poll()
    with open(p, "w") as f:
        f.write("2000000\n")
    assert src.poll()["total"][0] == 2.0


def test_hwmon_missing_file(tmp_path):
    with pytest.raises(_core.DeviceUnavailableError, match="amdgpu kernel driver"):
        _core.HwmonPowerSource(str(tmp_path / "nope" / "power1_average"))
    with pytest.raises(ValueError, match="path"):
        _core.HwmonPowerSource("")
