// cupti_launch_callbacks.cpp — the kernel-launch APIs of both CUPTI callback domains.
//
// A launch API left out of this list is a kernel no range can claim (the nvjet GEMMs of
// cuBLASLt come through cuLaunchKernelEx, which the runtime-only list missed). Host-function
// launches (cu/cudaLaunchHostFunc) run no kernel and are left out.
#include "cupti_launch_callbacks.h"

#include <iterator>

namespace rankscope::probe::cupti {
namespace {

constexpr CUpti_CallbackDomain kRuntime = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr CUpti_CallbackDomain kDriver = CUPTI_CB_DOMAIN_DRIVER_API;

#define RS_RUNTIME_LAUNCH(api) LaunchApi{kRuntime, CUPTI_RUNTIME_TRACE_CBID_##api, #api}
#define RS_DRIVER_LAUNCH(api) LaunchApi{kDriver, CUPTI_DRIVER_TRACE_CBID_##api, #api}

constexpr LaunchApi kLaunchApis[] = {
    // Runtime: <<<>>> and cudaLaunchKernel (CUDA 13's <<<>>> calls __cudaLaunchKernel), the
    // extensible and cooperative launches, the legacy cudaLaunch, and graph launches.
    RS_RUNTIME_LAUNCH(cudaLaunchKernel_v7000),
    RS_RUNTIME_LAUNCH(cudaLaunchKernel_ptsz_v7000),
    RS_RUNTIME_LAUNCH(__cudaLaunchKernel_v13000),
    RS_RUNTIME_LAUNCH(__cudaLaunchKernel_ptsz_v13000),
    RS_RUNTIME_LAUNCH(cudaLaunchKernelExC_v11060),
    RS_RUNTIME_LAUNCH(cudaLaunchKernelExC_ptsz_v11060),
    RS_RUNTIME_LAUNCH(cudaLaunchCooperativeKernel_v9000),
    RS_RUNTIME_LAUNCH(cudaLaunchCooperativeKernel_ptsz_v9000),
    RS_RUNTIME_LAUNCH(cudaLaunchCooperativeKernelMultiDevice_v9000),
    RS_RUNTIME_LAUNCH(cudaLaunch_v3020),
    RS_RUNTIME_LAUNCH(cudaLaunch_ptsz_v7000),
    RS_RUNTIME_LAUNCH(cudaGraphLaunch_v10000),
    RS_RUNTIME_LAUNCH(cudaGraphLaunch_ptsz_v10000),
    // Driver: what libraries that load their own cubins call (cuBLASLt, cuDNN, Triton, NCCL).
    RS_DRIVER_LAUNCH(cuLaunchKernel),
    RS_DRIVER_LAUNCH(cuLaunchKernel_ptsz),
    RS_DRIVER_LAUNCH(cuLaunchKernelEx),
    RS_DRIVER_LAUNCH(cuLaunchKernelEx_ptsz),
    RS_DRIVER_LAUNCH(cuLaunchCooperativeKernel),
    RS_DRIVER_LAUNCH(cuLaunchCooperativeKernel_ptsz),
    RS_DRIVER_LAUNCH(cuLaunchCooperativeKernelMultiDevice),
    RS_DRIVER_LAUNCH(cuLaunch),
    RS_DRIVER_LAUNCH(cuLaunchGrid),
    RS_DRIVER_LAUNCH(cuLaunchGridAsync),
    RS_DRIVER_LAUNCH(cuGraphLaunch),
    RS_DRIVER_LAUNCH(cuGraphLaunch_ptsz),
};

#undef RS_RUNTIME_LAUNCH
#undef RS_DRIVER_LAUNCH

}  // namespace

std::span<const LaunchApi> kernel_launch_apis() { return kLaunchApis; }

bool launches_kernels(CUpti_CallbackDomain domain, CUpti_CallbackId id) {
  // About 25 entries, and only the enabled callbacks reach here: a scan beats a table to keep.
  for (const LaunchApi& api : kLaunchApis) {
    if (api.id == id && api.domain == domain) return true;
  }
  return false;
}

void report_launch(KernelSink& sink, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* callback_data) {
  if (callback_data == nullptr || !launches_kernels(domain, id)) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(callback_data);
  // At entry: the range open now is the one the caller launched under; the kernels that follow
  // carry this correlation id.
  if (info->callbackSite != CUPTI_API_ENTER) return;
  sink.on_launch(info->correlationId);
}

}  // namespace rankscope::probe::cupti
