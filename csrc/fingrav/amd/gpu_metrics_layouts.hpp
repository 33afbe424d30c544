// The kernel's fixed gpu_metrics layouts 1.4 to 1.8, restated field for field
// from struct gpu_metrics_v1_4 .. v1_8 and struct amdgpu_xcp_metrics* in
// drivers/gpu/drm/amd/include/kgd_pp_interface.h (torvalds/linux and
// ROCm/amdgpu, e.g. ROCm/amdgpu 0ce779bf), for gpu_metrics.cpp only.
//
// Every struct is flat: one member per kernel field, in kernel order, arrays
// only where the kernel has arrays, no nested struct except the kernel's own
// xcp_stats. A nested helper struct (an earlier version grouped the PCIe/XGMI
// link fields in one) takes its own alignment: one with a u64 inside starts on
// an 8-byte boundary, which moved pcie/xgmi link width and speed and the
// activity accumulators of the 1.6 (xcp), 1.7 and 1.8 layouts 4 bytes past
// the kernel's while the struct sizes still matched. Hence a compile-time
// check of every member's offset below, against offsets read off the kernel
// header (natural alignment, no packing attribute there): a layout that drifts
// from the kernel's no longer compiles.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fingrav::amd::layouts {

// Array bounds from the kernel header.
inline constexpr int kNumVcn = 4;            // NUM_VCN
inline constexpr int kNumJpegEng = 32;       // NUM_JPEG_ENG
inline constexpr int kNumJpegEngV1 = 40;     // NUM_JPEG_ENG_V1
inline constexpr int kNumXgmiLinks = 8;      // NUM_XGMI_LINKS
inline constexpr int kMaxGfxClks = 8;        // MAX_GFX_CLKS
inline constexpr int kMaxClks = 4;           // MAX_CLKS
inline constexpr int kMaxXcc = 8;            // MAX_XCC
inline constexpr int kNumXcp = 8;            // NUM_XCP

struct Header {  // struct metrics_table_header
  std::uint16_t structure_size;
  std::uint8_t format_revision;
  std::uint8_t content_revision;
};

// Field runs every layout from 1.4 on repeats verbatim. Macros, not nested
// structs, so each field keeps the kernel's own alignment (see above).
#define FINGRAV_GM_HEAD                  \
  Header common_header;                  \
  std::uint16_t temperature_hotspot;     \
  std::uint16_t temperature_mem;         \
  std::uint16_t temperature_vrsoc;       \
  std::uint16_t curr_socket_power;       \
  std::uint16_t average_gfx_activity;    \
  std::uint16_t average_umc_activity;

#define FINGRAV_GM_RESIDENCY                 \
  std::uint32_t accumulation_counter;        \
  std::uint32_t prochot_residency_acc;       \
  std::uint32_t ppt_residency_acc;           \
  std::uint32_t socket_thm_residency_acc;    \
  std::uint32_t vr_thm_residency_acc;        \
  std::uint32_t hbm_thm_residency_acc;

#define FINGRAV_GM_LINK                          \
  std::uint16_t pcie_link_width;                 \
  std::uint16_t pcie_link_speed;                 \
  std::uint16_t xgmi_link_width;                 \
  std::uint16_t xgmi_link_speed;                 \
  std::uint32_t gfx_activity_acc;                \
  std::uint32_t mem_activity_acc;                \
  std::uint64_t pcie_bandwidth_acc;              \
  std::uint64_t pcie_bandwidth_inst;             \
  std::uint64_t pcie_l0_to_recov_count_acc;      \
  std::uint64_t pcie_replay_count_acc;           \
  std::uint64_t pcie_replay_rover_count_acc;

#define FINGRAV_GM_NAK                     \
  std::uint32_t pcie_nak_sent_count_acc;   \
  std::uint32_t pcie_nak_rcvd_count_acc;

#define FINGRAV_GM_XGMI_ACC                              \
  std::uint64_t xgmi_read_data_acc[kNumXgmiLinks];       \
  std::uint64_t xgmi_write_data_acc[kNumXgmiLinks];

#define FINGRAV_GM_CLOCKS                        \
  std::uint64_t firmware_timestamp;              \
  std::uint16_t current_gfxclk[kMaxGfxClks];     \
  std::uint16_t current_socclk[kMaxClks];        \
  std::uint16_t current_vclk0[kMaxClks];         \
  std::uint16_t current_dclk0[kMaxClks];         \
  std::uint16_t current_uclk;

struct V1_4 {
  FINGRAV_GM_HEAD
  std::uint16_t vcn_activity[kNumVcn];
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t throttle_status;
  std::uint32_t gfxclk_lock_status;
  FINGRAV_GM_LINK
  FINGRAV_GM_XGMI_ACC
  FINGRAV_GM_CLOCKS
  std::uint16_t padding;
};

struct V1_5 {
  FINGRAV_GM_HEAD
  std::uint16_t vcn_activity[kNumVcn];
  std::uint16_t jpeg_activity[kNumJpegEng];
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint32_t throttle_status;
  std::uint32_t gfxclk_lock_status;
  FINGRAV_GM_LINK
  FINGRAV_GM_NAK
  FINGRAV_GM_XGMI_ACC
  FINGRAV_GM_CLOCKS
  std::uint16_t padding;
};

// The first 1.6 (Linux 6.10 era): 1.5 plus the accumulation counter and the
// throttler residencies, still with device-wide VCN/JPEG activity.
struct V1_6a {
  FINGRAV_GM_HEAD
  std::uint16_t vcn_activity[kNumVcn];
  std::uint16_t jpeg_activity[kNumJpegEng];
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  FINGRAV_GM_RESIDENCY
  std::uint32_t throttle_status;
  std::uint32_t gfxclk_lock_status;
  FINGRAV_GM_LINK
  FINGRAV_GM_NAK
  FINGRAV_GM_XGMI_ACC
  FINGRAV_GM_CLOCKS
  std::uint16_t padding;
};

struct XcpMetrics {  // struct amdgpu_xcp_metrics
  std::uint32_t gfx_busy_inst[kMaxXcc];
  std::uint16_t jpeg_busy[kNumJpegEng];
  std::uint16_t vcn_busy[kNumVcn];
  std::uint64_t gfx_busy_acc[kMaxXcc];
};

struct XcpMetrics1_1 {  // struct amdgpu_xcp_metrics_v1_1
  std::uint32_t gfx_busy_inst[kMaxXcc];
  std::uint16_t jpeg_busy[kNumJpegEng];
  std::uint16_t vcn_busy[kNumVcn];
  std::uint64_t gfx_busy_acc[kMaxXcc];
  std::uint64_t gfx_below_host_limit_acc[kMaxXcc];
};

struct XcpMetrics1_2 {  // struct amdgpu_xcp_metrics_v1_2
  std::uint32_t gfx_busy_inst[kMaxXcc];
  std::uint16_t jpeg_busy[kNumJpegEngV1];
  std::uint16_t vcn_busy[kNumVcn];
  std::uint64_t gfx_busy_acc[kMaxXcc];
  std::uint64_t gfx_below_host_limit_ppt_acc[kMaxXcc];
  std::uint64_t gfx_below_host_limit_thm_acc[kMaxXcc];
  std::uint64_t gfx_low_utilization_acc[kMaxXcc];
  std::uint64_t gfx_below_host_limit_total_acc[kMaxXcc];
};

// The later 1.6 (the same revision number, reworked in place): VCN/JPEG
// activity and throttle_status moved out, per-partition xcp_stats added.
struct V1_6b {
  FINGRAV_GM_HEAD
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  FINGRAV_GM_RESIDENCY
  std::uint32_t gfxclk_lock_status;
  FINGRAV_GM_LINK
  FINGRAV_GM_NAK
  FINGRAV_GM_XGMI_ACC
  FINGRAV_GM_CLOCKS
  std::uint16_t num_partition;
  XcpMetrics xcp_stats[kNumXcp];
  std::uint32_t pcie_lc_perf_other_end_recovery;
};

template <typename Xcp>
struct V1_7or8 {
  FINGRAV_GM_HEAD
  std::uint64_t mem_max_bandwidth;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  FINGRAV_GM_RESIDENCY
  std::uint32_t gfxclk_lock_status;
  FINGRAV_GM_LINK
  FINGRAV_GM_NAK
  FINGRAV_GM_XGMI_ACC
  std::uint16_t xgmi_link_status[kNumXgmiLinks];
  std::uint16_t padding;
  FINGRAV_GM_CLOCKS
  std::uint16_t num_partition;
  Xcp xcp_stats[kNumXcp];
  std::uint32_t pcie_lc_perf_other_end_recovery;
};
using V1_7 = V1_7or8<XcpMetrics1_1>;
using V1_8 = V1_7or8<XcpMetrics1_2>;

#undef FINGRAV_GM_HEAD
#undef FINGRAV_GM_RESIDENCY
#undef FINGRAV_GM_LINK
#undef FINGRAV_GM_NAK
#undef FINGRAV_GM_XGMI_ACC
#undef FINGRAV_GM_CLOCKS

// ------------------------------------------------ offsets, field by field
// Each number is the field's offset in the kernel's struct under the C ABI's
// natural alignment (x86-64 and aarch64 agree: no field is wider than its
// alignment). The sizes are the kernel's sizeof; the 1.8 one is also stated
// in the kernel ("sizeof(struct gpu_metrics_v1_8) == 3872").
#define FINGRAV_AT(S, field, off) \
  static_assert(offsetof(S, field) == (off), #S "::" #field " is not at the kernel's offset " #off)

// The head, common to every layout.
#define FINGRAV_HEAD_AT(S)                  \
  FINGRAV_AT(S, common_header, 0);          \
  FINGRAV_AT(S, temperature_hotspot, 4);    \
  FINGRAV_AT(S, temperature_mem, 6);        \
  FINGRAV_AT(S, temperature_vrsoc, 8);      \
  FINGRAV_AT(S, curr_socket_power, 10);     \
  FINGRAV_AT(S, average_gfx_activity, 12);  \
  FINGRAV_AT(S, average_umc_activity, 14)

FINGRAV_HEAD_AT(V1_4);
FINGRAV_AT(V1_4, vcn_activity, 16);
FINGRAV_AT(V1_4, energy_accumulator, 24);
FINGRAV_AT(V1_4, system_clock_counter, 32);
FINGRAV_AT(V1_4, throttle_status, 40);
FINGRAV_AT(V1_4, gfxclk_lock_status, 44);
FINGRAV_AT(V1_4, pcie_link_width, 48);
FINGRAV_AT(V1_4, pcie_link_speed, 50);
FINGRAV_AT(V1_4, xgmi_link_width, 52);
FINGRAV_AT(V1_4, xgmi_link_speed, 54);
FINGRAV_AT(V1_4, gfx_activity_acc, 56);
FINGRAV_AT(V1_4, mem_activity_acc, 60);
FINGRAV_AT(V1_4, pcie_bandwidth_acc, 64);
FINGRAV_AT(V1_4, pcie_bandwidth_inst, 72);
FINGRAV_AT(V1_4, pcie_l0_to_recov_count_acc, 80);
FINGRAV_AT(V1_4, pcie_replay_count_acc, 88);
FINGRAV_AT(V1_4, pcie_replay_rover_count_acc, 96);
FINGRAV_AT(V1_4, xgmi_read_data_acc, 104);
FINGRAV_AT(V1_4, xgmi_write_data_acc, 168);
FINGRAV_AT(V1_4, firmware_timestamp, 232);
FINGRAV_AT(V1_4, current_gfxclk, 240);
FINGRAV_AT(V1_4, current_socclk, 256);
FINGRAV_AT(V1_4, current_vclk0, 264);
FINGRAV_AT(V1_4, current_dclk0, 272);
FINGRAV_AT(V1_4, current_uclk, 280);
FINGRAV_AT(V1_4, padding, 282);
static_assert(sizeof(V1_4) == 288);

FINGRAV_HEAD_AT(V1_5);
FINGRAV_AT(V1_5, vcn_activity, 16);
FINGRAV_AT(V1_5, jpeg_activity, 24);
FINGRAV_AT(V1_5, energy_accumulator, 88);
FINGRAV_AT(V1_5, system_clock_counter, 96);
FINGRAV_AT(V1_5, throttle_status, 104);
FINGRAV_AT(V1_5, gfxclk_lock_status, 108);
FINGRAV_AT(V1_5, pcie_link_width, 112);
FINGRAV_AT(V1_5, pcie_link_speed, 114);
FINGRAV_AT(V1_5, xgmi_link_width, 116);
FINGRAV_AT(V1_5, xgmi_link_speed, 118);
FINGRAV_AT(V1_5, gfx_activity_acc, 120);
FINGRAV_AT(V1_5, mem_activity_acc, 124);
FINGRAV_AT(V1_5, pcie_bandwidth_acc, 128);
FINGRAV_AT(V1_5, pcie_bandwidth_inst, 136);
FINGRAV_AT(V1_5, pcie_l0_to_recov_count_acc, 144);
FINGRAV_AT(V1_5, pcie_replay_count_acc, 152);
FINGRAV_AT(V1_5, pcie_replay_rover_count_acc, 160);
FINGRAV_AT(V1_5, pcie_nak_sent_count_acc, 168);
FINGRAV_AT(V1_5, pcie_nak_rcvd_count_acc, 172);
FINGRAV_AT(V1_5, xgmi_read_data_acc, 176);
FINGRAV_AT(V1_5, xgmi_write_data_acc, 240);
FINGRAV_AT(V1_5, firmware_timestamp, 304);
FINGRAV_AT(V1_5, current_gfxclk, 312);
FINGRAV_AT(V1_5, current_socclk, 328);
FINGRAV_AT(V1_5, current_vclk0, 336);
FINGRAV_AT(V1_5, current_dclk0, 344);
FINGRAV_AT(V1_5, current_uclk, 352);
FINGRAV_AT(V1_5, padding, 354);
static_assert(sizeof(V1_5) == 360);

FINGRAV_HEAD_AT(V1_6a);
FINGRAV_AT(V1_6a, vcn_activity, 16);
FINGRAV_AT(V1_6a, jpeg_activity, 24);
FINGRAV_AT(V1_6a, energy_accumulator, 88);
FINGRAV_AT(V1_6a, system_clock_counter, 96);
FINGRAV_AT(V1_6a, accumulation_counter, 104);
FINGRAV_AT(V1_6a, prochot_residency_acc, 108);
FINGRAV_AT(V1_6a, ppt_residency_acc, 112);
FINGRAV_AT(V1_6a, socket_thm_residency_acc, 116);
FINGRAV_AT(V1_6a, vr_thm_residency_acc, 120);
FINGRAV_AT(V1_6a, hbm_thm_residency_acc, 124);
FINGRAV_AT(V1_6a, throttle_status, 128);
FINGRAV_AT(V1_6a, gfxclk_lock_status, 132);
FINGRAV_AT(V1_6a, pcie_link_width, 136);
FINGRAV_AT(V1_6a, pcie_link_speed, 138);
FINGRAV_AT(V1_6a, xgmi_link_width, 140);
FINGRAV_AT(V1_6a, xgmi_link_speed, 142);
FINGRAV_AT(V1_6a, gfx_activity_acc, 144);
FINGRAV_AT(V1_6a, mem_activity_acc, 148);
FINGRAV_AT(V1_6a, pcie_bandwidth_acc, 152);
FINGRAV_AT(V1_6a, pcie_bandwidth_inst, 160);
FINGRAV_AT(V1_6a, pcie_l0_to_recov_count_acc, 168);
FINGRAV_AT(V1_6a, pcie_replay_count_acc, 176);
FINGRAV_AT(V1_6a, pcie_replay_rover_count_acc, 184);
FINGRAV_AT(V1_6a, pcie_nak_sent_count_acc, 192);
FINGRAV_AT(V1_6a, pcie_nak_rcvd_count_acc, 196);
FINGRAV_AT(V1_6a, xgmi_read_data_acc, 200);
FINGRAV_AT(V1_6a, xgmi_write_data_acc, 264);
FINGRAV_AT(V1_6a, firmware_timestamp, 328);
FINGRAV_AT(V1_6a, current_gfxclk, 336);
FINGRAV_AT(V1_6a, current_socclk, 352);
FINGRAV_AT(V1_6a, current_vclk0, 360);
FINGRAV_AT(V1_6a, current_dclk0, 368);
FINGRAV_AT(V1_6a, current_uclk, 376);
FINGRAV_AT(V1_6a, padding, 378);
static_assert(sizeof(V1_6a) == 384);

FINGRAV_AT(XcpMetrics, gfx_busy_inst, 0);
FINGRAV_AT(XcpMetrics, jpeg_busy, 32);
FINGRAV_AT(XcpMetrics, vcn_busy, 96);
FINGRAV_AT(XcpMetrics, gfx_busy_acc, 104);
static_assert(sizeof(XcpMetrics) == 168);
FINGRAV_AT(XcpMetrics1_1, gfx_busy_inst, 0);
FINGRAV_AT(XcpMetrics1_1, jpeg_busy, 32);
FINGRAV_AT(XcpMetrics1_1, vcn_busy, 96);
FINGRAV_AT(XcpMetrics1_1, gfx_busy_acc, 104);
FINGRAV_AT(XcpMetrics1_1, gfx_below_host_limit_acc, 168);
static_assert(sizeof(XcpMetrics1_1) == 232);
FINGRAV_AT(XcpMetrics1_2, gfx_busy_inst, 0);
FINGRAV_AT(XcpMetrics1_2, jpeg_busy, 32);
FINGRAV_AT(XcpMetrics1_2, vcn_busy, 112);
FINGRAV_AT(XcpMetrics1_2, gfx_busy_acc, 120);
FINGRAV_AT(XcpMetrics1_2, gfx_below_host_limit_ppt_acc, 184);
FINGRAV_AT(XcpMetrics1_2, gfx_below_host_limit_thm_acc, 248);
FINGRAV_AT(XcpMetrics1_2, gfx_low_utilization_acc, 312);
FINGRAV_AT(XcpMetrics1_2, gfx_below_host_limit_total_acc, 376);
static_assert(sizeof(XcpMetrics1_2) == 440);

FINGRAV_HEAD_AT(V1_6b);
FINGRAV_AT(V1_6b, energy_accumulator, 16);
FINGRAV_AT(V1_6b, system_clock_counter, 24);
FINGRAV_AT(V1_6b, accumulation_counter, 32);
FINGRAV_AT(V1_6b, prochot_residency_acc, 36);
FINGRAV_AT(V1_6b, ppt_residency_acc, 40);
FINGRAV_AT(V1_6b, socket_thm_residency_acc, 44);
FINGRAV_AT(V1_6b, vr_thm_residency_acc, 48);
FINGRAV_AT(V1_6b, hbm_thm_residency_acc, 52);
FINGRAV_AT(V1_6b, gfxclk_lock_status, 56);
FINGRAV_AT(V1_6b, pcie_link_width, 60);
FINGRAV_AT(V1_6b, pcie_link_speed, 62);
FINGRAV_AT(V1_6b, xgmi_link_width, 64);
FINGRAV_AT(V1_6b, xgmi_link_speed, 66);
FINGRAV_AT(V1_6b, gfx_activity_acc, 68);
FINGRAV_AT(V1_6b, mem_activity_acc, 72);
FINGRAV_AT(V1_6b, pcie_bandwidth_acc, 80);
FINGRAV_AT(V1_6b, pcie_bandwidth_inst, 88);
FINGRAV_AT(V1_6b, pcie_l0_to_recov_count_acc, 96);
FINGRAV_AT(V1_6b, pcie_replay_count_acc, 104);
FINGRAV_AT(V1_6b, pcie_replay_rover_count_acc, 112);
FINGRAV_AT(V1_6b, pcie_nak_sent_count_acc, 120);
FINGRAV_AT(V1_6b, pcie_nak_rcvd_count_acc, 124);
FINGRAV_AT(V1_6b, xgmi_read_data_acc, 128);
FINGRAV_AT(V1_6b, xgmi_write_data_acc, 192);
FINGRAV_AT(V1_6b, firmware_timestamp, 256);
FINGRAV_AT(V1_6b, current_gfxclk, 264);
FINGRAV_AT(V1_6b, current_socclk, 280);
FINGRAV_AT(V1_6b, current_vclk0, 288);
FINGRAV_AT(V1_6b, current_dclk0, 296);
FINGRAV_AT(V1_6b, current_uclk, 304);
FINGRAV_AT(V1_6b, num_partition, 306);
FINGRAV_AT(V1_6b, xcp_stats, 312);
FINGRAV_AT(V1_6b, pcie_lc_perf_other_end_recovery, 1656);
static_assert(sizeof(V1_6b) == 1664);

// 1.7 and 1.8 differ only in xcp_stats' element type, so in their size and
// the offset of the last field.
#define FINGRAV_V17_AT(S)                             \
  FINGRAV_HEAD_AT(S);                                 \
  FINGRAV_AT(S, mem_max_bandwidth, 16);               \
  FINGRAV_AT(S, energy_accumulator, 24);              \
  FINGRAV_AT(S, system_clock_counter, 32);            \
  FINGRAV_AT(S, accumulation_counter, 40);            \
  FINGRAV_AT(S, prochot_residency_acc, 44);           \
  FINGRAV_AT(S, ppt_residency_acc, 48);               \
  FINGRAV_AT(S, socket_thm_residency_acc, 52);        \
  FINGRAV_AT(S, vr_thm_residency_acc, 56);            \
  FINGRAV_AT(S, hbm_thm_residency_acc, 60);           \
  FINGRAV_AT(S, gfxclk_lock_status, 64);              \
  FINGRAV_AT(S, pcie_link_width, 68);                 \
  FINGRAV_AT(S, pcie_link_speed, 70);                 \
  FINGRAV_AT(S, xgmi_link_width, 72);                 \
  FINGRAV_AT(S, xgmi_link_speed, 74);                 \
  FINGRAV_AT(S, gfx_activity_acc, 76);                \
  FINGRAV_AT(S, mem_activity_acc, 80);                \
  FINGRAV_AT(S, pcie_bandwidth_acc, 88);              \
  FINGRAV_AT(S, pcie_bandwidth_inst, 96);             \
  FINGRAV_AT(S, pcie_l0_to_recov_count_acc, 104);     \
  FINGRAV_AT(S, pcie_replay_count_acc, 112);          \
  FINGRAV_AT(S, pcie_replay_rover_count_acc, 120);    \
  FINGRAV_AT(S, pcie_nak_sent_count_acc, 128);        \
  FINGRAV_AT(S, pcie_nak_rcvd_count_acc, 132);        \
  FINGRAV_AT(S, xgmi_read_data_acc, 136);             \
  FINGRAV_AT(S, xgmi_write_data_acc, 200);            \
  FINGRAV_AT(S, xgmi_link_status, 264);               \
  FINGRAV_AT(S, padding, 280);                        \
  FINGRAV_AT(S, firmware_timestamp, 288);             \
  FINGRAV_AT(S, current_gfxclk, 296);                 \
  FINGRAV_AT(S, current_socclk, 312);                 \
  FINGRAV_AT(S, current_vclk0, 320);                  \
  FINGRAV_AT(S, current_dclk0, 328);                  \
  FINGRAV_AT(S, current_uclk, 336);                   \
  FINGRAV_AT(S, num_partition, 338);                  \
  FINGRAV_AT(S, xcp_stats, 344)

FINGRAV_V17_AT(V1_7);
FINGRAV_AT(V1_7, pcie_lc_perf_other_end_recovery, 2200);
static_assert(sizeof(V1_7) == 2208);
FINGRAV_V17_AT(V1_8);
FINGRAV_AT(V1_8, pcie_lc_perf_other_end_recovery, 3864);
static_assert(sizeof(V1_8) == 3872);

#undef FINGRAV_V17_AT
#undef FINGRAV_HEAD_AT
#undef FINGRAV_AT

}  // namespace fingrav::amd::layouts
