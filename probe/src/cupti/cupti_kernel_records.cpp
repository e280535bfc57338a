// cupti_kernel_records.cpp — kernel activity records to KernelActivity.
#include "cupti_kernel_records.h"

#include <string_view>

namespace rankscope::probe::cupti {

std::optional<KernelActivity> kernel_activity_of(const CUpti_Activity& record) {
  if (record.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record.kind != CUPTI_ACTIVITY_KIND_KERNEL) {
    return std::nullopt;
  }
  // Both kinds use the current kernel record layout of the CUPTI we compile against.
  const auto& k = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
  KernelActivity a;
  a.name = k.name ? std::string_view(k.name) : std::string_view("?");
  a.correlation_id = k.correlationId;  // a graph launch's id for every kernel of that graph
  a.stream = k.streamId;
  a.device = k.deviceId;
  a.begin_ns = static_cast<int64_t>(k.start);
  a.end_ns = static_cast<int64_t>(k.end);
  return a;
}

}  // namespace rankscope::probe::cupti
