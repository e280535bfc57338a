// event_categories.h — every event category ("cat") Kineto has written into a Chrome trace, and
// what the import makes of each (internal).
//
// Is: one table, taken from Kineto's own source over its history (libkineto/src/output_json.cpp
// and ActivityType.{h,cpp}; docs/KINETO.md gives the commits): the 2020-21 spellings (`Operator`,
// `Runtime`, `Kernel`, `Memcpy`, `Memset`, `User`), the `gpu_user_Annotation` typo of 2021-22,
// and today's names, for every device Kineto writes: CUDA and ROCm (`kernel`, `cuda_runtime`,
// ...), XPU (`xpu_runtime`, `xpu_driver`), PrivateUse1 backends, HPU (`hpu_op`) and MTIA
// (`mtia_runtime` launches, `mtia_ccp_events` on the device). Each category has one role: a
// range, a candidate range among CPU ops (the old `Operator`), a launch, a device op, an MTIA
// device event (sorted by name), host-only detail the import skips, or device-side detail it
// cannot place (counted and reported, never shown as device time).
// Is not: reading events (trace_reader.cpp) or deciding ranks (kineto_import.cpp).
#pragma once

#include <cstdint>
#include <string_view>

namespace rankscope::kineto {

enum class EventRole : uint8_t {
  kSkipped,        // host-only detail the import does not need (python_function, flows' cats, ...)
  kHostOp,         // cpu_op: a framework operator on a host thread (the host timeline's leaves, op_family.h)
  kAnnotation,     // record_function range, ProfilerStep#N, nccl:/gloo: calls (user_annotation)
  kOperator,       // the 2020-21 `Operator`: CPU ops and record_function scopes in one category
  kLaunch,         // a host call that enqueues device work, joined to it by args.correlation
  kKernel,         // device kernel
  kMemcpy,         // device copy
  kMemset,         // device fill
  kMtiaDevice,     // MTIA's on-device events: kernels, DMA copies and stream syncs, told apart by name
  kDeviceNotRead,  // device-side records the import cannot place on the timeline: counted and reported
};

struct EventCategory {
  std::string_view cat;     // as Kineto writes it
  EventRole role;
  std::string_view device;  // "CUDA/ROCm", "XPU", "MTIA", ... ("" for device-neutral categories)
  std::string_view why;     // for kDeviceNotRead: why it is not read, as a warning says it
};

// The rule for `cat`, nullptr for a category Kineto never wrote (counted per category and reported).
const EventCategory* find_event_category(std::string_view cat);

// MTIA's on-device events (`mtia_ccp_events`) by name: DMA copies, stream synchronisation (a wait
// or an event record: a stream waiting is not device work) and, for every other name, a kernel.
enum class MtiaEventKind : uint8_t { kKernel, kCopy, kSync };
MtiaEventKind mtia_event_kind(std::string_view name);

// Whether a 2020-21 `Operator` event is a record_function scope (a range) rather than an op:
// ProfilerStep#N, and names without a "::" namespace that are not autograd nodes
// ("AddmmBackward", "CopyBackwards"): PyTorch named ops "aten::mm", "autograd::engine::...".
bool operator_is_user_scope(std::string_view name);

}  // namespace rankscope::kineto
