// op_family.h — what a framework's host operator is, by its name: attention, a matrix multiply, a
// normalisation, the optimizer's update, a copy, the loss, an embedding lookup, or another op.
//
// Is: the rule that groups PyTorch's operators (`aten::scaled_dot_product_attention`, `aten::linear`,
// the autograd nodes of backward such as `ScaledDotProductFlashAttentionForCpuBackward0` or
// `AddmmBackward0`, `aten::_foreach_add_`) into the families a person acts on, and the leaf name a
// family gets in the host timeline ("[attention]"). A job with no ranges of its own still gets a
// breakdown; one with ranges gets what runs inside them. Collective calls (`c10d::allreduce_`,
// `record_param_comms`) are not compute: kCommunication, never a leaf.
// Is not: reading any trace (importers/kineto reads cpu_op events and places the leaves).
#pragma once

#include <cstdint>
#include <string_view>

namespace rankscope::format {

enum class OpFamily : uint8_t {
  kAttention,
  kMatmul,
  kNorm,
  kOptimizer,
  kCopy,
  kLoss,
  kEmbedding,
  kOther,
  kCommunication,  // a collective's host call: its time is the collective's, not a leaf
};

OpFamily op_family(std::string_view op_name);

// The leaf's range name: "[attention]", "[matmul]", ..., "[other ops]".
std::string_view op_family_leaf(OpFamily family);

// The leaf of the main thread's time between ops while a collective of the rank was in flight on
// another thread (Gloo runs them on its own threads): the thread waited there, it did not compute.
inline constexpr std::string_view kCollectiveWaitLeaf = "[waiting on collectives]";

// True for a range name whose last component is a leaf: an op family's or the wait leaf.
bool is_op_family_leaf(std::string_view range_name);
// True for a range name whose last component is kCollectiveWaitLeaf.
bool is_collective_wait_leaf(std::string_view range_name);

}  // namespace rankscope::format
