// event_categories.cpp — see event_categories.h. The table's rows name the Kineto commits that
// wrote each spelling (pytorch/kineto, libkineto/src/output_json.cpp and ActivityType.{h,cpp}).
#include "event_categories.h"

#include <array>
#include <cctype>
#include <unordered_map>

namespace rankscope::kineto {
namespace {

using R = EventRole;

constexpr std::string_view kCudaRocm = "CUDA/ROCm";

constexpr std::array kCategories = {
    // 2020-09 .. 2021-06 (0cc71588 .. cbae6007): CPU ops and record_function scopes alike
    EventCategory{"Operator", R::kOperator, "", ""},
    EventCategory{"User", R::kSkipped, "", ""},  // d521932f: GPU projection of user scopes
    // 2020-09 .. 2022-04 (.. d714941f): the CUPTI records' own categories
    EventCategory{"Runtime", R::kLaunch, kCudaRocm, ""},  // until bc4eaef5 (2021-11)
    EventCategory{"Kernel", R::kKernel, kCudaRocm, ""},
    EventCategory{"Memcpy", R::kMemcpy, kCudaRocm, ""},
    EventCategory{"Memset", R::kMemset, kCudaRocm, ""},
    EventCategory{"Trace", R::kSkipped, "", ""},  // the profiler's span, pid "Spans"/"Traces"
    // 2021-06 (6f9c0eef) on: ActivityType names
    EventCategory{"cpu_op", R::kHostOp, "", ""},
    EventCategory{"user_annotation", R::kAnnotation, "", ""},
    EventCategory{"gpu_user_Annotation", R::kSkipped, "", ""},  // 6f9c0eef .. 3db5c597 (2022-05)
    EventCategory{"gpu_user_annotation", R::kSkipped, "", ""},
    EventCategory{"gpu_memcpy", R::kMemcpy, kCudaRocm, ""},    // 1679e50e (2022-04) on
    EventCategory{"gpu_memset", R::kMemset, kCudaRocm, ""},
    EventCategory{"kernel", R::kKernel, kCudaRocm, ""},
    EventCategory{"external_correlation", R::kSkipped, "", ""},
    EventCategory{"cuda_runtime", R::kLaunch, kCudaRocm, ""},  // ROCm's hip* calls too (RocprofActivity.h)
    EventCategory{"cuda_driver", R::kLaunch, kCudaRocm, ""},   // 60b08b08 (2023-05): cuLaunchKernel
    EventCategory{"cpu_instant_event", R::kSkipped, "", ""},
    EventCategory{"python_function", R::kSkipped, "", ""},     // b5bb62d2 (2021-11)
    EventCategory{"overhead", R::kSkipped, "", ""},            // fd335826 (2022-02): CUPTI's own overhead
    EventCategory{"cuda_sync", R::kSkipped, "", ""},           // 7b003638 (2023-06): the host waiting
    EventCategory{"cuda_event", R::kSkipped, "", ""},          // de208906 (2025-11): cudaEventRecord
    EventCategory{"glow_runtime", R::kSkipped, "", ""},
    EventCategory{"cuda_profiler_range", R::kDeviceNotRead, kCudaRocm,
                  "CUPTI range-profiler measurements taken under kernel replay: their times are not the job's timeline"},
    EventCategory{"hpu_op", R::kLaunch, "HPU", ""},            // 115f5306 (2022-07)
    EventCategory{"xpu_runtime", R::kLaunch, "XPU", ""},       // be3fb3fa (2023-02)
    EventCategory{"xpu_driver", R::kLaunch, "XPU", ""},        // 7a731b6a (2026-01)
    EventCategory{"xpu_sync", R::kSkipped, "", ""},            // 8285e5bf (2026-07): the host waiting
    EventCategory{"privateuse1_runtime", R::kLaunch, "PrivateUse1", ""},  // 445909a8 (2024-03)
    EventCategory{"privateuse1_driver", R::kLaunch, "PrivateUse1", ""},
    EventCategory{"mtia_runtime", R::kLaunch, "MTIA", ""},     // 60b08b08 (2023-05)
    EventCategory{"mtia_ccp_events", R::kMtiaDevice, "MTIA", ""},  // 3cb331da (2023-04)
    EventCategory{"mtia_insight", R::kDeviceNotRead, "MTIA", "MTIA Insight records: no launch or stream to place them by"},
    EventCategory{"mtia_workloadd", R::kDeviceNotRead, "MTIA", "MTIA workload records: no launch or stream to place them by"},
    EventCategory{"mtia_collective_comm", R::kDeviceNotRead, "MTIA",
                  "MTIA collective records: not matched across ranks as collectives"},
    EventCategory{"collective_comm", R::kDeviceNotRead, "",
                  "backend collective records (HCCL, XPU): not matched across ranks as collectives"},
    // Counter tracks ("ph": "C"): never complete events, listed so they are known, not unknown.
    EventCategory{"mtia_counters", R::kSkipped, "", ""},
    EventCategory{"hardware_counters", R::kSkipped, "", ""},
    EventCategory{"xpu_scope_profiler", R::kSkipped, "", ""},
};

}  // namespace

const EventCategory* find_event_category(std::string_view cat) {
  // Called once per event of traces of millions: a hash lookup, the map built once (thread-safe).
  static const std::unordered_map<std::string_view, const EventCategory*> by_name = [] {
    std::unordered_map<std::string_view, const EventCategory*> m;
    for (const EventCategory& c : kCategories) m.emplace(c.cat, &c);
    return m;
  }();
  const auto it = by_name.find(cat);
  return it == by_name.end() ? nullptr : it->second;
}

MtiaEventKind mtia_event_kind(std::string_view name) {
  if (name == "dma_request") return MtiaEventKind::kCopy;
  if (name == "event_wait" || name == "event_record") return MtiaEventKind::kSync;
  return MtiaEventKind::kKernel;
}

bool operator_is_user_scope(std::string_view name) {
  if (name.substr(0, 13) == "ProfilerStep#") return true;
  if (name.empty() || name.find("::") != std::string_view::npos) return false;
  // Autograd nodes: "AddmmBackward", "CopyBackwards", "MmBackward0".
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  const std::string_view stem = name.substr(0, end);
  auto ends_with = [&](std::string_view s) { return stem.size() >= s.size() && stem.substr(stem.size() - s.size()) == s; };
  return !ends_with("Backward") && !ends_with("Backwards");
}

}  // namespace rankscope::kineto
