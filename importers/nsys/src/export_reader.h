// export_reader.h — reads one nsys SQLite export (internal).
//
// Is: the schema gate (EXPORT_SCHEMA_VERSION major 3, each needed column checked with PRAGMA
// table_info, columns always read by name), event types resolved by name from ENUM_NSYS_EVENT_TYPE
// or the known numbers, the session start, host, recorded environment and MPI_RANKS; then two
// reads: scan_export() (light: per process, kernel and range counts, NCCL kernel times for clock
// alignment, rankscope marks) and load_process_rows() (everything of the chosen processes, sorted
// in memory: rows come in no guaranteed order). Is not: interpretation (rank_builder.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"
#include "sqlite_db.h"

namespace rankscope::nsys {

// Serialized ids: pid = (globalTid >> 24) & 0xFFFFFF, tid = globalTid & 0xFFFFFF; the process key
// (globalPid) is globalTid with the thread bits cleared.
inline uint64_t process_key(uint64_t global_tid) { return global_tid & 0xFFFFFFFFFF000000ull; }
inline uint32_t pid_of(uint64_t global_id) { return uint32_t((global_id >> 24) & 0xFFFFFF); }
inline uint32_t tid_of(uint64_t global_tid) { return uint32_t(global_tid & 0xFFFFFF); }

// The newest schema the importer was tested against (fixtures and the official reference).
inline constexpr const char* kNewestTestedSchema = "3.28.1";

struct EventTypes {
  int push_pop = 59, start_end = 60, mark = 34, domain_create = 75;
  bool from_enum_table = false;
};

struct ExportInfo {
  std::filesystem::path file;
  std::string schema_version;    // EXPORT_SCHEMA_VERSION, "" when absent
  std::string product_version;   // EXPORT_PRODUCT_VERSION (the nsys release)
  bool has_session_start = false;
  int64_t utc_epoch_ns = 0;      // TARGET_INFO_SESSION_START_TIME.utcEpochNs
  std::string host;
  std::optional<int> env_rank, env_world;
  std::string env_rank_variable; // RANK, OMPI_COMM_WORLD_RANK, ...
  std::map<uint64_t, int> mpi_rank_by_process;  // MPI_RANKS, by process key
  EventTypes types;
  std::vector<std::string> warnings;     // schema and content problems, one line each
  std::vector<std::string> diagnostics;  // DIAGNOSTIC_EVENT texts (first few)
  int64_t diagnostic_count = 0;

  // Column sets of the tables read; empty when the table is absent.
  std::set<std::string> nvtx, kernel, runtime, memcpy, memset;
  std::unordered_map<int64_t, std::string> strings;  // StringIds
  std::string_view string(int64_t id) const {
    auto it = strings.find(id);
    return it == strings.end() ? std::string_view() : std::string_view(it->second);
  }
};

// Opens `file`, checks the schema and reads the small tables. Fails on a file that is not an nsys
// export or whose schema major version is not 3.
Result<std::unique_ptr<Database>> open_export(const std::filesystem::path& file, ExportInfo& info);

// One NCCL kernel as pass 1 sees it.
struct NcclKernelTimes {
  int64_t start = 0, end = 0;  // session timestamps
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
};

struct ProcessScan {
  uint64_t key = 0;  // process key (globalPid)
  uint32_t pid = 0;
  int64_t kernels = 0, ranges = 0;
  std::optional<int> mark_rank, mark_world;  // rankscope:rank=R/W mark
  std::string mark_text;
  std::vector<std::pair<int64_t, int64_t>> sync_marks;  // (session ts, probe clock payload)
  // NCCL kernels per communicator stream, streams in the order they first ran one; each by start.
  std::vector<std::vector<NcclKernelTimes>> nccl_streams;
  std::vector<uint32_t> nccl_stream_ids;
};

struct ExportScan {
  ExportInfo info;
  std::vector<ProcessScan> processes;  // those with kernels or NVTX ranges, by pid
  int64_t min_ts = INT64_MAX, max_ts = INT64_MIN;
  bool absolute_timestamps = false;    // exported with --ts-normalize: values are already epoch ns
};

Result<ExportScan> scan_export(const std::filesystem::path& file);

// --- pass 2: the rows of some processes -------------------------------------------------------

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

Result<ProcessRows> load_process_rows(Database& db, const ExportInfo& info, const std::set<uint64_t>& processes);

// NCCL kernel names: "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_AllGather_RING_LL_Sum_int8_t".
bool is_nccl_kernel(std::string_view short_name);
format::CollectiveOp nccl_op_from_name(std::string_view name);  // also NCCL's NVTX range names
format::DataType nccl_dtype_from_name(std::string_view name);

}  // namespace rankscope::nsys
