// kernel_class.cpp — the rule table of kernel_class.h.
//
// Each built-in rule matches words the producing library puts in its kernels' names (read in their
// sources; docs/FORMAT.md, TRACE_KERNELS, names them). Names arrive demangled in most traces
// ("void deep_ep::internode::dispatch<...>(...)"), mangled in some (HIP, raw CUPTI names:
// "_ZN7deep_ep9internode8dispatch..."), so a rule looks for its words anywhere in the name and,
// where the namespace matters, for both spellings.
#include "rankscope/format/kernel_class.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <regex>

namespace rankscope::format {
namespace {

bool contains(std::string_view name, std::string_view word) { return name.find(word) != std::string_view::npos; }

bool contains_any(std::string_view name, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(), [&](std::string_view w) { return contains(name, w); });
}

// Case-insensitive search for the collective words a custom kernel's name carries
// ("one_shot_all_reduce_kernel", "twoShotAllReduceKernel", "multimem_all_gather").
bool names_a_collective(std::string_view name) {
  static constexpr std::array<std::string_view, 8> kWords = {"allreduce",     "all_reduce",     "allgather", "all_gather",
                                                             "reducescatter", "reduce_scatter", "alltoall",  "all_to_all"};
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return std::any_of(kWords.begin(), kWords.end(), [&](std::string_view w) { return contains(lower, w); });
}

// The built-in communication rules, first match wins; nullptr when none matches.
const char* builtin_communication_rule(std::string_view name) {
  // NCCL and RCCL: ncclKernel_<coll>_<algo>_<proto>_<op>_<type> (up to 2.18),
  // ncclDevKernel_<coll>_... (2.19+), possibly behind "void " or mangled.
  if (name.starts_with("nccl") || contains_any(name, {"ncclKernel", "ncclDevKernel"})) return "nccl";
  // DeepEP (deepseek-ai/DeepEP csrc/kernels): namespaces intranode, internode and internode_ll hold
  // dispatch, combine, notify_dispatch, cached_notify, barriers; `layout` (counting tokens) is
  // compute. DeepSeek's published profile spells the namespace dpsk::ep.
  if (contains_any(name, {"deep_ep::intranode", "deep_ep::internode", "dpsk::ep::intranode", "dpsk::ep::internode",
                          "7deep_ep9intranode", "7deep_ep9internode", "7deep_ep12internode_ll"}))
    return "deepep";
  if (contains(name, "nvshmem")) return "nvshmem";                    // nvshmemi_*, nvshmemx_* device collectives
  if (contains_any(name, {"mscclpp::", "7mscclpp"})) return "mscclpp";  // MSCCL++ kernels live in namespace mscclpp
  if (contains(name, "mscclKernel")) return "msccl";                   // MSCCL (the NCCL fork)
  // Custom all-reduce over NVLink peer memory: vLLM's and SGLang's cross_device_reduce_{1,2}stage,
  // TensorRT-LLM's {one,two}ShotAllReduceKernel and allreduce_fusion kernels.
  if (contains_any(name, {"cross_device_reduce", "AllReduceKernel", "allreduce_fusion"})) return "custom-allreduce";
  if (contains(name, "userbuffers_")) return "userbuffers";  // Transformer Engine's comm/GEMM overlap
  // Anything else whose name says it is a collective (PyTorch symmetric memory's
  // one_shot_all_reduce_kernel, multimem_all_gather_kernel, ...).
  if (names_a_collective(name)) return "collective-name";
  return nullptr;
}

}  // namespace

struct KernelClassifier::UserRules {
  std::vector<std::string> patterns;
  std::vector<std::regex> compiled;
};

KernelClassifier::KernelClassifier() = default;
KernelClassifier::~KernelClassifier() = default;
KernelClassifier::KernelClassifier(KernelClassifier&&) noexcept = default;
KernelClassifier& KernelClassifier::operator=(KernelClassifier&&) noexcept = default;
KernelClassifier::KernelClassifier(const KernelClassifier& other)
    : user_(other.user_ ? std::make_unique<UserRules>(*other.user_) : nullptr) {}
KernelClassifier& KernelClassifier::operator=(const KernelClassifier& other) {
  if (this != &other) user_ = other.user_ ? std::make_unique<UserRules>(*other.user_) : nullptr;
  return *this;
}

Result<KernelClassifier> KernelClassifier::with_patterns(const std::vector<std::string>& patterns) {
  KernelClassifier c;
  if (patterns.empty()) return c;
  c.user_ = std::make_unique<UserRules>();
  for (const std::string& p : patterns) {
    if (p.empty()) return invalid_argument("--comm-kernel: an empty pattern would match every kernel");
    try {
      c.user_->compiled.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return invalid_argument("--comm-kernel '" + p + "' is not a regular expression (" + e.what() + ")");
    }
    c.user_->patterns.push_back(p);
  }
  return c;
}

const std::vector<std::string>& KernelClassifier::user_patterns() const {
  static const std::vector<std::string> kNone;
  return user_ ? user_->patterns : kNone;
}

KernelVerdict KernelClassifier::classify(std::string_view name) const {
  // The user's word wins: a pattern may claim a memcpy (a peer copy that is the job's transfer).
  if (user_) {
    for (size_t i = 0; i < user_->compiled.size(); ++i)
      if (std::regex_search(name.begin(), name.end(), user_->compiled[i]))
        return {KernelClass::kCommunication, "user:" + user_->patterns[i]};
  }
  if (name.starts_with("[CUDA memset") || name.starts_with("Memset ")) return {KernelClass::kMemory, "memset"};
  if (is_memory_operation(name)) return {KernelClass::kMemory, "memcpy"};
  if (const char* rule = builtin_communication_rule(name)) return {KernelClass::kCommunication, rule};
  return {KernelClass::kCompute, "default"};
}

KernelClass classify_kernel(std::string_view kernel_name) {
  if (is_memory_operation(kernel_name)) return KernelClass::kMemory;
  return builtin_communication_rule(kernel_name) ? KernelClass::kCommunication : KernelClass::kCompute;
}

bool is_communication_kernel(std::string_view kernel_name) {
  return builtin_communication_rule(kernel_name) != nullptr;
}

std::string_view kernel_class_name(KernelClass c) {
  switch (c) {
    case KernelClass::kCommunication: return "communication";
    case KernelClass::kMemory: return "memory";
    case KernelClass::kCompute: break;
  }
  return "compute";
}

}  // namespace rankscope::format
