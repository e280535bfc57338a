// plugins.cpp — attach_default_plugins: the NVTX sink and the CUPTI tracer when compiled in.
#include "rankscope/probe/plugins.h"

#include <string>
#include <vector>

#if RANKSCOPE_PROBE_HAVE_NVTX
#include "rankscope/probe/nvtx_range_sink.h"
#endif
#if RANKSCOPE_PROBE_HAVE_CUPTI
#include "rankscope/probe/cupti_kernel_tracer.h"
#endif

namespace rankscope::probe {

PluginReport attach_default_plugins(Probe& probe, bool gpu_in_use) {
  PluginReport report;
  if (!probe.enabled()) return report;
  const Options& options = probe.options();
  // One line for the job (rank 0 speaks for all ranks, which run the same build).
  std::vector<std::string> off;

#if RANKSCOPE_PROBE_HAVE_NVTX
  if (options.nvtx) {
    probe.add_range_sink(make_nvtx_range_sink(probe.rank(), probe.world_size()));
    report.nvtx = true;
  } else {
    off.push_back("NVTX ranges off (RANKSCOPE_NVTX=0)");
  }
#else
  if (options.nvtx) off.push_back("NVTX ranges unavailable (built without the CUDA toolkit)");
#endif

#if RANKSCOPE_PROBE_HAVE_CUPTI
  if (options.cupti && !gpu_in_use) {
    // A CPU run: no kernels to time, and nothing to say.
  } else if (options.cupti) {
    // On failure set_kernel_tracer prints "GPU kernel timing unavailable (...)" itself.
    report.cupti = probe.set_kernel_tracer(make_cupti_kernel_tracer()).ok();
  } else {
    off.push_back("GPU kernel timing off (RANKSCOPE_CUPTI=0)");
  }
#else
  if (options.cupti && gpu_in_use) off.push_back("GPU kernel timing unavailable (built without CUDA/CUPTI)");
#endif
  if (!off.empty() && probe.rank() == 0) {
    std::string line;
    for (const auto& o : off) line += (line.empty() ? "" : "; ") + o;
    probe.logger().notice(line);
  }
  return report;
}

}  // namespace rankscope::probe
