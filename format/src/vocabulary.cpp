// vocabulary.cpp — names of the on-disk enumerations.
#include "rankscope/format/vocabulary.h"

#include <array>
#include <utility>

namespace rankscope::format {
namespace {

constexpr std::array<std::pair<CollectiveOp, std::string_view>, 15> kOps = {{
    {CollectiveOp::kUnknown, "unknown"},
    {CollectiveOp::kAllReduceSum, "allreduce_sum"},
    {CollectiveOp::kAllReduceMax, "allreduce_max"},
    {CollectiveOp::kAllGather, "allgather"},
    {CollectiveOp::kReduceScatter, "reduce_scatter"},
    {CollectiveOp::kBroadcast, "broadcast"},
    {CollectiveOp::kAllToAll, "alltoall"},
    {CollectiveOp::kAllToAllV, "alltoallv"},
    {CollectiveOp::kBarrier, "barrier"},
    {CollectiveOp::kSend, "send"},
    {CollectiveOp::kRecv, "recv"},
    {CollectiveOp::kAllReduce, "allreduce"},
    {CollectiveOp::kReduce, "reduce"},
    {CollectiveOp::kGather, "gather"},
    {CollectiveOp::kScatter, "scatter"},
}};

constexpr std::array<std::pair<DataType, std::string_view>, 8> kDtypes = {{
    {DataType::kUnknown, "unknown"},
    {DataType::kFloat32, "fp32"},
    {DataType::kBFloat16, "bf16"},
    {DataType::kFloat16, "fp16"},
    {DataType::kInt32, "int32"},
    {DataType::kInt64, "int64"},
    {DataType::kUInt8, "uint8"},
    {DataType::kFloat64, "fp64"},
}};

}  // namespace

std::string_view op_name(CollectiveOp op) {
  for (const auto& [o, n] : kOps)
    if (o == op) return n;
  return "unknown";
}

std::string_view short_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduceSum:
    case CollectiveOp::kAllReduceMax: return "allreduce";
    default: return op_name(op);
  }
}

std::string_view dtype_name(DataType dt) {
  for (const auto& [d, n] : kDtypes)
    if (d == dt) return n;
  return "unknown";
}

size_t dtype_size(DataType dt) {
  switch (dt) {
    case DataType::kFloat32: case DataType::kInt32: return 4;
    case DataType::kBFloat16: case DataType::kFloat16: return 2;
    case DataType::kInt64: case DataType::kFloat64: return 8;
    case DataType::kUInt8: return 1;
    case DataType::kUnknown: return 0;
  }
  return 0;
}

std::string_view state_name(CollectiveState s) {
  switch (s) {
    case CollectiveState::kEmpty: return "empty";
    case CollectiveState::kEnqueued: return "enqueued";
    case CollectiveState::kStarted: return "started";
    case CollectiveState::kCompleted: return "completed";
    case CollectiveState::kFailed: return "failed";
  }
  return "unknown";
}

std::string_view process_state_name(ProcessState s) {
  switch (s) {
    case ProcessState::kStarting: return "starting";
    case ProcessState::kRunning: return "running";
    case ProcessState::kFinished: return "finished";
    case ProcessState::kAborted: return "aborted";
  }
  return "unknown";
}

std::string_view watchdog_kind_name(WatchdogKind k) {
  switch (k) {
    case WatchdogKind::kNone: return "none";
    case WatchdogKind::kCollectiveTimeout: return "collective_timeout";
    case WatchdogKind::kRangeTimeout: return "range_timeout";
    case WatchdogKind::kSuspectedHang: return "suspected_hang";
  }
  return "unknown";
}

std::optional<CollectiveOp> parse_op(std::string_view name) {
  for (const auto& [o, n] : kOps)
    if (n == name) return o;
  return std::nullopt;
}

std::optional<DataType> parse_dtype(std::string_view name) {
  for (const auto& [d, n] : kDtypes)
    if (n == name) return d;
  return std::nullopt;
}

}  // namespace rankscope::format
