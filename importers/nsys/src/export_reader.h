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
#include "rankscope/trace_core/trace_rows.h"
#include "sqlite_db.h"

namespace rankscope::nsys {

// The row model is the importers' shared one (importers/trace_core).
using trace_core::GpuOp;
using trace_core::GpuOpKind;
using trace_core::HostCollective;
using trace_core::is_nccl_kernel;
using trace_core::nccl_dtype_from_name;
using trace_core::nccl_op_from_name;
using trace_core::NcclKernelTimes;
using trace_core::NvtxKind;
using trace_core::NvtxRow;
using trace_core::pid_of;
using trace_core::process_key;
using trace_core::ProcessRows;
using trace_core::RuntimeRow;
using trace_core::tid_of;

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

Result<ProcessRows> load_process_rows(Database& db, const ExportInfo& info, const std::set<uint64_t>& processes);

}  // namespace rankscope::nsys
