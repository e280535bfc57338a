// vocabulary.h — the enumerations written into run directories, and their stable names.
//
// Is: the numeric codes stored on disk (they never change meaning; new codes are appended) and the
// lower-case names used in JSON, CLI output and docs/FORMAT.md. Is not: any behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rankscope::format {

enum class CollectiveOp : uint8_t {
  kUnknown = 0,
  kAllReduceSum = 1,
  kAllReduceMax = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kBroadcast = 5,
  kAllToAll = 6,
  kAllToAllV = 7,
  kBarrier = 8,
  kSend = 9,
  kRecv = 10,
  // Appended for NCCL jobs recorded by the profiler plugin (probe/nccl): NCCL names the function
  // but not the reduction, so an all-reduce of unknown reduction is kAllReduce.
  kAllReduce = 11,
  kReduce = 12,
  kGather = 13,
  kScatter = 14,
};
inline constexpr uint8_t kMaxCollectiveOp = 14;

enum class DataType : uint8_t {
  kUnknown = 0, kFloat32 = 1, kBFloat16 = 2, kFloat16 = 3, kInt32 = 4, kInt64 = 5, kUInt8 = 6, kFloat64 = 7,
};

// Lifecycle of one collective on one rank. Enqueued: the rank called it. Started: the operation
// began moving data (a GPU kernel started; on blocking CPU collectives equal to enqueued).
enum class CollectiveState : uint8_t { kEmpty = 0, kEnqueued = 1, kStarted = 2, kCompleted = 3, kFailed = 4 };

// Still running: enqueued, or its kernel started, and not yet ended.
constexpr bool is_open(CollectiveState s) { return s == CollectiveState::kEnqueued || s == CollectiveState::kStarted; }

enum class ProcessState : uint32_t { kStarting = 0, kRunning = 1, kFinished = 2, kAborted = 3 };

// kSuspectedHang: a collective or step ran far past its learned bound (before the fixed timeout).
enum class WatchdogKind : uint32_t { kNone = 0, kCollectiveTimeout = 1, kRangeTimeout = 2, kSuspectedHang = 3 };

std::string_view op_name(CollectiveOp op);       // "allreduce_sum", "allgather", ...
std::string_view short_op_name(CollectiveOp op); // "allreduce", "allgather", ... for sentences
std::string_view dtype_name(DataType dt);        // "fp32", "bf16", ...
std::string_view state_name(CollectiveState s);  // "enqueued", "completed", ...
std::string_view process_state_name(ProcessState s);
std::string_view watchdog_kind_name(WatchdogKind k);
size_t dtype_size(DataType dt);                  // bytes per element; 0 for unknown

std::optional<CollectiveOp> parse_op(std::string_view name);
std::optional<DataType> parse_dtype(std::string_view name);

}  // namespace rankscope::format
