// op_family.cpp — see op_family.h. The names are PyTorch's (aten's native_functions.yaml and the
// autograd nodes generated from derivatives.yaml: "<Op>Backward<N>"), read in lower case.
#include "rankscope/format/op_family.h"

#include <array>
#include <cctype>
#include <string>

namespace rankscope::format {
namespace {

// "autograd::engine::evaluate_function: AddmmBackward0" -> "addmmbackward0";
// "aten::scaled_dot_product_attention" -> "scaled_dot_product_attention".
std::string base_name(std::string_view name) {
  constexpr std::string_view kAutograd = "autograd::engine::evaluate_function: ";
  if (name.substr(0, kAutograd.size()) == kAutograd) name.remove_prefix(kAutograd.size());
  const size_t colons = name.rfind("::");
  if (colons != std::string_view::npos) name.remove_prefix(colons + 2);
  while (!name.empty() && name.front() == '_') name.remove_prefix(1);
  std::string out(name);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool has(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

}  // namespace

OpFamily op_family(std::string_view op_name) {
  if (starts(op_name, "c10d::") || starts(op_name, "record_param_comms") || starts(op_name, "nccl:") ||
      starts(op_name, "gloo:") || has(op_name, "ProcessGroup"))
    return OpFamily::kCommunication;
  const std::string n = base_name(op_name);
  // Attention first: its backward nodes and fused kernels name the whole block
  // ("scaleddotproductflashattentionforcpubackward0", "efficient_attention_forward").
  if (has(n, "attention") || has(n, "sdpa") || (has(n, "softmax") && !has(n, "log_softmax") && !has(n, "logsoftmax")))
    return OpFamily::kAttention;
  if (has(n, "cross_entropy") || has(n, "nll_loss") || has(n, "nllloss") || has(n, "log_softmax") || has(n, "logsoftmax") ||
      has(n, "mse_loss") || has(n, "mseloss") || has(n, "l1_loss") || has(n, "binary_cross"))
    return OpFamily::kLoss;
  if (starts(n, "foreach_") || starts(n, "fused_adam") || starts(n, "fused_sgd") || starts(n, "adam") || starts(n, "sgd") ||
      has(n, "optimizer"))
    return OpFamily::kOptimizer;
  if (has(n, "layer_norm") || has(n, "layernorm") || has(n, "batch_norm") || has(n, "batchnorm") || has(n, "group_norm") ||
      has(n, "groupnorm") || has(n, "rms_norm") || has(n, "rmsnorm"))
    return OpFamily::kNorm;
  if (starts(n, "embedding")) return OpFamily::kEmbedding;
  constexpr std::array kMatmul = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "einsum",
                                  "conv", "cudnn_convolution", "mkldnn_convolution", "scaled_mm", "grouped_mm"};
  for (std::string_view p : kMatmul)
    if (starts(n, p)) return OpFamily::kMatmul;
  constexpr std::array kCopy = {"copy", "to_copy", "to", "contiguous", "clone", "cat", "stack", "index_select",
                                "gather", "scatter", "pin_memory"};
  for (std::string_view p : kCopy)
    if (n == p || starts(n, std::string(p) + "_") || starts(n, std::string(p) + "backward")) return OpFamily::kCopy;
  if (has(op_name, "copy_bucket_to_grad") || has(op_name, "Memcpy")) return OpFamily::kCopy;
  return OpFamily::kOther;
}

std::string_view op_family_leaf(OpFamily family) {
  switch (family) {
    case OpFamily::kAttention: return "[attention]";
    case OpFamily::kMatmul: return "[matmul]";
    case OpFamily::kNorm: return "[norm]";
    case OpFamily::kOptimizer: return "[optimizer]";
    case OpFamily::kCopy: return "[copy]";
    case OpFamily::kLoss: return "[loss]";
    case OpFamily::kEmbedding: return "[embedding]";
    case OpFamily::kOther: return "[other ops]";
    case OpFamily::kCommunication: return "[communication]";
  }
  return "[other ops]";
}

namespace {

std::string_view last_component(std::string_view range_name) {
  const size_t slash = range_name.rfind('/');
  return slash == std::string_view::npos ? range_name : range_name.substr(slash + 1);
}

}  // namespace

bool is_collective_wait_leaf(std::string_view range_name) { return last_component(range_name) == kCollectiveWaitLeaf; }

bool is_op_family_leaf(std::string_view range_name) {
  const std::string_view last = last_component(range_name);
  if (last.size() < 3 || last.front() != '[' || last.back() != ']') return false;
  if (last == kCollectiveWaitLeaf) return true;
  for (int f = 0; f <= int(OpFamily::kCommunication); ++f)
    if (last == op_family_leaf(OpFamily(f))) return true;
  return false;
}

}  // namespace rankscope::format
