// cupti_kernel_tracer.h — the CUPTI implementation of KernelTracer (leaf rankscope_probe_cupti).
//
// Is: the factory only. The tracer subscribes to the kernel-launch callbacks of the CUDA runtime
// and driver APIs (to hand each launch's correlation id to the probe on the launching thread:
// cuBLASLt and cuDNN launch through the driver, CUDA graphs through cu/cudaGraphLaunch) and to
// CUPTI's concurrent-kernel activity (name, stream, device, start, end). Is not: attribution or clock
// conversion (kernel_attribution.h, in the core). No CUPTI header here (design rule 3).
#pragma once

#include <memory>

#include "rankscope/probe/kernel_tracer.h"

namespace rankscope::probe {

std::unique_ptr<KernelTracer> make_cupti_kernel_tracer();

}  // namespace rankscope::probe
