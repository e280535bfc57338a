// cupti_launch_callbacks.h — which CUDA API calls launch kernels, and the callback body that
// reports each launch to the probe.
//
// Is: the CUPTI leaf's list of kernel-launch APIs in both callback domains — the runtime
// (cudaLaunchKernel, cudaLaunchKernelExC, cudaGraphLaunch, ...) and the driver (cuLaunchKernel,
// cuLaunchKernelEx, cuGraphLaunch, ...: cuBLASLt's nvjet GEMMs and cuDNN's SDPA kernels are
// launched by cuLaunchKernelEx) — and the callback body that hands a launch's correlation id to the
// KernelSink at API entry, on the launching thread. Every kernel of a graph launch carries that
// launch's correlation id, so one report covers them all. Pure: it calls no CUPTI function, so tests
// drive it with fabricated callback data and no GPU.
// Is not: the subscription (cupti_kernel_tracer.cpp) or the attribution (kernel_attribution.h).
// Private to rankscope_probe_cupti (design rule 3).
#pragma once

#include <cupti.h>

#include <span>

#include "rankscope/probe/kernel_tracer.h"

namespace rankscope::probe::cupti {

struct LaunchApi {
  CUpti_CallbackDomain domain;  // CUPTI_CB_DOMAIN_RUNTIME_API or CUPTI_CB_DOMAIN_DRIVER_API
  CUpti_CallbackId id;
  const char* name;  // the API's name, for messages
};

// Every API whose call launches kernels: the callbacks the tracer enables.
std::span<const LaunchApi> kernel_launch_apis();

bool launches_kernels(CUpti_CallbackDomain domain, CUpti_CallbackId id);

// The subscriber callback's body: at the entry of a launch API, sink.on_launch(correlation id);
// anything else (another API, the exit site, another domain) is ignored.
void report_launch(KernelSink& sink, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* callback_data);

}  // namespace rankscope::probe::cupti
