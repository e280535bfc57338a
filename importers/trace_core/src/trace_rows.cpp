// trace_rows.cpp — see trace_rows.h: NCCL's kernel names read as collectives.
#include "rankscope/trace_core/trace_rows.h"

#include <string_view>

namespace rankscope::trace_core {

using format::CollectiveOp;
using format::DataType;

bool is_nccl_kernel(std::string_view n) { return n.rfind("nccl", 0) == 0; }

CollectiveOp nccl_op_from_name(std::string_view n) {
  auto has = [&](std::string_view s) { return n.find(s) != std::string_view::npos; };
  if (has("AllReduce")) return has("_Max") || has("Max_") ? CollectiveOp::kAllReduceMax : CollectiveOp::kAllReduceSum;
  if (has("AllGather")) return CollectiveOp::kAllGather;
  if (has("ReduceScatter")) return CollectiveOp::kReduceScatter;
  if (has("Broadcast") || has("Bcast")) return CollectiveOp::kBroadcast;
  if (has("AllToAll") || has("Alltoall")) return CollectiveOp::kAllToAllV;
  if (has("SendRecv")) return CollectiveOp::kAllToAllV;  // send/recv pairs: all-to-all(v) or pipeline p2p
  if (has("Send")) return CollectiveOp::kSend;
  if (has("Recv")) return CollectiveOp::kRecv;
  return CollectiveOp::kUnknown;
}

DataType nccl_dtype_from_name(std::string_view n) {
  // Newer names carry _f32_/_bf16_; older ones _float/_half/_int8_t at the end.
  struct M { const char* tag; DataType dt; };
  static constexpr M kMap[] = {{"_bf16", DataType::kBFloat16}, {"_f16", DataType::kFloat16}, {"_half", DataType::kFloat16},
                               {"_f32", DataType::kFloat32},   {"_float", DataType::kFloat32}, {"_f64", DataType::kFloat64},
                               {"_double", DataType::kFloat64}, {"_i32", DataType::kInt32},   {"_int32", DataType::kInt32},
                               {"_i64", DataType::kInt64},     {"_int64", DataType::kInt64},  {"_u8", DataType::kUInt8},
                               {"_uint8", DataType::kUInt8}};
  for (const M& m : kMap) {
    if (n.find(m.tag) != std::string_view::npos) return m.dt;
  }
  return DataType::kUnknown;
}

}  // namespace rankscope::trace_core
