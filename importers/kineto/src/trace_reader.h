// trace_reader.h — one PyTorch profiler (Kineto) trace read in one streaming pass (internal).
//
// Is: a SAX handler (nlohmann's json_sax interface, fed by RapidJSON's reader) over a gzip or plain Chrome-trace JSON file that
// keeps only what the importer needs, in the importers' shared row model (trace_core/trace_rows.h) so one
// rank builder serves both. Categories by event_categories.h (every spelling Kineto has used, every
// device it writes): `user_annotation` events (record_function ranges, ProfilerStep#N; in traces of
// 2020-21, the `Operator` events that are user scopes) as ranges, `nccl:*` annotations as the NCCL
// domain, `gloo:*`/`mpi:*`/`ucc:*` annotations as host collectives, runtime and driver calls of any
// device (`cuda_runtime`, `Runtime`, `xpu_runtime`, `mtia_runtime`, ...) with a correlation id as
// launches, and device ops (`kernel`/`Kernel`, copies, fills, MTIA's `mtia_ccp_events`) as GPU ops;
// device records it cannot place and categories Kineto never wrote are counted (events, summed
// duration) as not read. Plus `distributedInfo`, `deviceProperties[].name`, `baseTimeNanoseconds`
// and the version keys. NCCL kernels' process group and message size (their "Process Group Name",
// "In msg nelems", "dtype" args) name their communicator and give the collective's bytes. Every other event (cpu_op, flows, python stacks) is dropped as it is read,
// so memory holds these compact rows (a few percent of the text), never the document.
// Never throws or crashes on bad input: an event with a field of the wrong type, a time out of
// range, a negative duration or a missing field is dropped and counted; a file that ends early
// (truncated gzip, unterminated JSON) keeps the events read before the break and says so.
// Is not: choosing ranks, clocks or communicators (kineto_import.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/trace_core/trace_rows.h"
#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::kineto {

// NVTX-domain ids the rows use: user annotations in the default domain, `nccl:*` in "NCCL".
inline constexpr uint32_t kAnnotationDomain = 0;
inline constexpr uint32_t kNcclDomain = 1;

struct ProcessGroupInfo {
  std::string name, desc, backend;
  std::vector<int> ranks;
};

// A `gloo:all_reduce`-style annotation: a collective run on the host by a non-NCCL backend.
struct HostAnnotation {
  int64_t start = 0, end = 0;  // trace ns (ts x 1000)
  uint64_t gtid = 0;
  std::string backend;         // "gloo"
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  uint64_t bytes = 0;          // its tensors' bytes, from record_shapes' Input Dims and Input type; 0 unknown
};

// Events of one kind the import did not read, and why (device records it cannot place, categories
// Kineto never wrote): reported per rank so nothing is dropped without a word.
struct NotRead {
  int64_t events = 0;
  int64_t duration_ns = 0;  // the sum of their durations
  bool on_device = false;   // device-side records (their time is device time, not shown as such)
  std::string why;
};

struct DropCounts {
  int64_t wrong_type = 0, bad_time = 0, negative_duration = 0, missing_field = 0;
  int64_t total() const { return wrong_type + bad_time + negative_duration + missing_field; }
};

struct KinetoTrace {
  std::filesystem::path file;
  bool compressed = false;
  // distributedInfo
  std::optional<int> rank, world_size;
  std::string backend;
  std::optional<int> group_count;  // distributedInfo.pg_count
  std::vector<ProcessGroupInfo> groups;
  std::vector<std::string> device_names;  // deviceProperties[].name, distinct, in order
  // clocks: trace ts (µs) x 1000 + base_time_ns = ns since the epoch
  std::optional<int64_t> base_time_ns;
  std::vector<std::pair<std::string, std::string>> versions;  // schemaVersion, cupti_version, ...
  // rows, in trace ns; thread ids are (process key | thread ordinal), see process_key
  trace_core::ProcessRows rows;
  int64_t min_ts = INT64_MAX;  // earliest event start read (trace ns); rows.max_ts the latest end
  std::vector<HostAnnotation> host_annotations;
  // The process group of each NCCL stream, from its kernels' "Process Group Name"/"Description"
  // args (Kineto copies record_param_comms' metadata onto the kernel); first one seen per stream.
  std::map<uint32_t, ProcessGroupInfo> nccl_stream_groups;
  uint64_t process_key = 0;   // pid of the main thread << 24
  uint64_t main_gtid = 0;     // the thread with the ProfilerStep#N annotations
  int64_t profiler_steps = 0;
  int64_t events = 0;         // trace events seen
  // Device kinds whose work was read ("CUDA", "ROCm", "XPU", "MTIA", ...) with their op counts.
  std::map<std::string, int64_t> device_ops;
  // Not read, by what (a category, or "MTIA stream synchronisation"); see NotRead.
  std::map<std::string, NotRead> not_read;
  int64_t old_operator_ranges = 0;  // ranges taken from the 2020-21 `Operator` category
  int64_t host_ops_read = 0;        // the main thread's outermost ops read as leaves (op_family.h)
  DropCounts dropped;
  std::string stopped_early;  // why reading stopped before the end ("" when it did not)
  std::vector<std::string> warnings;
};

Result<KinetoTrace> read_trace(const std::filesystem::path& file);

// "gloo:all_reduce" -> kAllReduceSum, "nccl:_allgather_base" -> kAllGather; kUnknown otherwise.
format::CollectiveOp collective_op_from_annotation(std::string_view op_name);

}  // namespace rankscope::kineto
