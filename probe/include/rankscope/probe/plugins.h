// plugins.h — attaches the GPU-side plug-ins this build has (NVTX ranges, CUPTI kernel timing).
//
// Is: one call for programs: `probe::attach_default_plugins(*probe)` adds the NVTX range sink and
// the CUPTI kernel tracer when they were compiled in and Options::nvtx / Options::cupti allow them,
// printing one line per capability that is off or unavailable. Lives in the target
// rankscope_probe_plugins, which links whichever leaves exist. Is not: a dynamic plug-in loader.
#pragma once

#include "rankscope/probe/probe.h"

namespace rankscope::probe {

struct PluginReport {
  bool nvtx = false;   // NVTX ranges are emitted (domain "rankscope")
  bool cupti = false;  // GPU kernel timing is on
};

// `gpu_in_use`: the program computes on a GPU. When false (a CPU run of a CUDA build), CUPTI is not
// attached and nothing is said about it: the program's own device line already says "cpu", and a
// CUPTI error there would contradict it.
PluginReport attach_default_plugins(Probe& probe, bool gpu_in_use = true);

}  // namespace rankscope::probe
