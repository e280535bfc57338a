// kernel_class.h — what a GPU op's time is (compute, communication, memory), by its name, and
// which rule said so.
//
// Why rules and not one prefix: NCCL's kernels start with "nccl", but MoE and inference stacks move
// data with kernels of their own (DeepEP's dispatch/combine, NVSHMEM, MSCCL++, vLLM's and
// TensorRT-LLM's custom all-reduce, PyTorch's symmetric-memory collectives, Transformer Engine's
// userbuffers). Booked as compute, a step that is all communication reads "compute 100%". Every
// reader of kernel records (skew's time classes, `rankscope kernels`, the Chrome export) classifies
// with this one table, so they agree, and each verdict names its rule so a user can see why.
//
// Is: the built-in rules (docs/FORMAT.md, TRACE_KERNELS, lists them) and
// the user's extra patterns (`--comm-kernel REGEX`, ECMAScript syntax, searched anywhere in the
// name). Is not: the NCCL collective matching of the importers (that is about NCCL's own kernels).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::format {

// What a TRACE_KERNELS record's GPU time is.
enum class KernelClass : uint8_t { kCompute, kCommunication, kMemory };
std::string_view kernel_class_name(KernelClass c);  // "compute" | "communication" | "memory"

struct KernelVerdict {
  KernelClass kind = KernelClass::kCompute;
  // The rule that decided, stable words for JSON: "nccl", "deepep", "nvshmem", "mscclpp", "msccl",
  // "custom-allreduce", "userbuffers", "collective-name", "user:<REGEX>", "memcpy", "memset",
  // "default" (no rule matched: compute).
  std::string rule;
};

class KernelClassifier {
 public:
  KernelClassifier();  // built-in rules only
  ~KernelClassifier();
  KernelClassifier(KernelClassifier&&) noexcept;
  KernelClassifier& operator=(KernelClassifier&&) noexcept;
  KernelClassifier(const KernelClassifier&);
  KernelClassifier& operator=(const KernelClassifier&);

  // Built-in rules plus `patterns` (each a regex; a kernel any of them finds is communication, the
  // user's word winning over every built-in rule). A bad regex is an invalid_argument naming it.
  static Result<KernelClassifier> with_patterns(const std::vector<std::string>& patterns);

  KernelVerdict classify(std::string_view kernel_name) const;
  const std::vector<std::string>& user_patterns() const;

 private:
  struct UserRules;
  std::unique_ptr<UserRules> user_;
};

// Built-in rules only (no user patterns): memory operations first, then communication, else compute.
KernelClass classify_kernel(std::string_view kernel_name);

// A memory operation rather than a kernel: the names importers give CUDA memcpys and memsets
// (nsys: "[CUDA memcpy]", "[CUDA memset]"; Kineto: "Memcpy HtoD (Pinned -> Device)", "Memset
// (Device)"). A demangled kernel name never starts so ("Memcpy " needs the space; kernels read
// "void name<...>(...)").
inline bool is_memory_operation(std::string_view kernel_name) {
  return kernel_name.starts_with("[CUDA memcpy") || kernel_name.starts_with("[CUDA memset") ||
         kernel_name.starts_with("Memcpy ") || kernel_name.starts_with("Memset ");
}

// Communication by the built-in rules alone (NCCL, DeepEP, NVSHMEM, ...; no user pattern).
bool is_communication_kernel(std::string_view kernel_name);

}  // namespace rankscope::format
