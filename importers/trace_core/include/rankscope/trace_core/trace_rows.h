// trace_rows.h — the rows every trace importer reads its file into (nsys exports, Kineto traces),
// one process's NVTX or annotation ranges, runtime calls, GPU ops and host-side collectives, in the
// file's own timestamps.
//
// Is: the row model the rank builder (rank_builder.h) turns into a run directory, the serialized
// thread ids (nsys's globalTid layout, which the Kineto reader builds too), and NCCL's kernel names
// read as collectives. Is not: reading any file format (importers/nsys, importers/kineto).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rankscope/format/vocabulary.h"

namespace rankscope::trace_core {

// Serialized ids: pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF; the process key
// (globalPid) is globalTid with the thread bits cleared.
inline uint64_t process_key(uint64_t global_tid) { return global_tid & 0xFFFFFFFFFF000000ull; }
inline uint32_t pid_of(uint64_t global_id) { return uint32_t((global_id >> 24) & 0xFFFFFF); }
inline uint32_t tid_of(uint64_t global_tid) { return uint32_t(global_tid & 0xFFFFFF); }

// One NCCL kernel as pass 1 sees it.
struct NcclKernelTimes {
  int64_t start = 0, end = 0;  // session timestamps
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
};

// --- the rows of one process ------------------------------------------------------------------

enum class NvtxKind : uint8_t { kPushPop, kStartEnd, kMark };

struct NvtxRow {
  int64_t start = 0, end = 0;
  uint64_t gtid = 0, end_gtid = 0;  // end_gtid 0: ended on the same thread (or not recorded)
  int64_t id = 0;                   // eventId, else rowid
  int64_t payload = 0;
  uint32_t text = 0;                // index into ProcessRows::pool
  uint32_t domain = 0;              // domainId (0: default domain)
  NvtxKind kind = NvtxKind::kPushPop;
  bool open_end = false;            // end NULL: still open when the capture stopped
  bool has_payload = false;
};

struct RuntimeRow {
  int64_t start = 0, end = 0;
  uint64_t gtid = 0;
  uint32_t correlation = 0;
  uint32_t name = 0;  // pool index of the call's name (cudaLaunchKernel, cuLaunchKernelEx); 0 unknown
};

enum class GpuOpKind : uint8_t { kKernel, kMemcpy, kMemset };

struct GpuOp {
  int64_t start = 0, end = 0;
  uint64_t process = 0;
  uint32_t correlation = 0;
  uint32_t stream = 0, device = 0;
  uint32_t name = 0;       // pool index (kernels; memcpy/memset get fixed names)
  uint32_t short_name = 0; // pool index of shortName (NCCL classification)
  GpuOpKind kind = GpuOpKind::kKernel;
};

// A collective that only the host saw (no NCCL kernel: Gloo, MPI). nsys exports have none; the
// Kineto importer fills them from `gloo:all_reduce`-style annotations.
struct HostCollective {
  int64_t enqueue = 0, start = 0, end = 0;
  uint64_t gtid = 0;       // the thread whose open range the collective is booked under
  uint32_t comm = 0;       // index into RankPlan::comm_names
  uint64_t seq = 0;        // per communicator
  uint64_t bytes = 0;
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  format::DataType dtype = format::DataType::kUnknown;
};

struct ProcessRows {
  std::vector<std::string> pool;  // strings of the rows, index 0 = ""
  std::vector<NvtxRow> nvtx;      // of the chosen processes, ranges and marks
  std::map<std::pair<uint64_t, uint32_t>, std::string> domains;  // (process key, domainId) -> name
  std::vector<RuntimeRow> runtime;
  std::vector<GpuOp> ops;
  std::vector<HostCollective> host_collectives;
  std::unordered_map<uint32_t, uint64_t> collective_bytes;  // by index into ops (NCCL kernels whose size is known)
  int64_t max_ts = INT64_MIN;     // latest timestamp of the export (closes open ranges, as nsys does)
};

// NCCL kernel names: "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_AllGather_RING_LL_Sum_int8_t".
bool is_nccl_kernel(std::string_view short_name);
format::CollectiveOp nccl_op_from_name(std::string_view name);  // also NCCL's NVTX range names
format::DataType nccl_dtype_from_name(std::string_view name);

}  // namespace rankscope::trace_core
