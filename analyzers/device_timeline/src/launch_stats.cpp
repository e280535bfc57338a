// launch_stats.cpp — CUDA launch statistics, HTA's way (cuda_kernel_analysis.py,
// cuda_kernel_launch_stats): for every op joined to its launch call, the call's duration (cpu), the
// op's duration (gpu) and the launch delay = op begin - call end, clipped at 0; outliers by HTA's
// cutoffs (a call over 50 µs, a delay over 100 µs) and its "short GPU kernels" (gpu < cpu for a call
// under the cutoff). HTA counts only cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync and
// cudaMemsetAsync; we count every launch the producer recorded (cuLaunchKernelEx of cuBLASLt too).
#include <algorithm>
#include <map>

#include "analyses.h"

namespace rankscope::analyzers::device_timeline {
namespace {

Distribution distribution(std::vector<int64_t>& v) {
  Distribution d;
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))]; };
  d.min_ns = v.front();
  d.median_ns = at(0.5);
  d.p95_ns = at(0.95);
  d.max_ns = v.back();
  return d;
}

}  // namespace

LaunchStats compute_launch_stats(const RankTimeline& t, const KernelsOptions& options) {
  LaunchStats r;
  std::vector<int64_t> cpu, gpu, delay;
  std::vector<LaunchOutlier> calls, delays;
  std::map<uint32_t, int64_t> per_api;
  for (const Launch& l : t.launches) {
    const int64_t c = l.end - l.begin, g = l.gpu_end - l.gpu_begin, d = std::max<int64_t>(0, l.gpu_begin - l.end);
    cpu.push_back(c);
    gpu.push_back(g);
    delay.push_back(d);
    ++per_api[l.api];
    if (g < c && c <= options.runtime_outlier_ns) ++r.short_kernels;
    const bool long_call = c > options.runtime_outlier_ns, long_delay = d > options.launch_delay_outlier_ns;
    if (!long_call && !long_delay) continue;
    LaunchOutlier o{t.names[l.api], t.names[l.kernel], l.step, c, g, d, double(l.begin - t.first_ns) / 1e6};
    if (long_call) ++r.runtime_outliers, calls.push_back(o);
    if (long_delay) ++r.delay_outliers, delays.push_back(o);
  }
  r.launches = int64_t(t.launches.size());
  int64_t joined = 0;
  for (const Op& o : t.ops) joined += o.launch >= 0;
  r.ops_without_launch = int64_t(t.ops.size()) - joined;
  r.cpu = distribution(cpu);
  r.gpu = distribution(gpu);
  r.delay = distribution(delay);
  auto keep_longest = [&](std::vector<LaunchOutlier>& v, int64_t LaunchOutlier::*field) {
    const size_t n = std::min(v.size(), options.outliers_named);
    std::partial_sort(v.begin(), v.begin() + long(n), v.end(), [&](const LaunchOutlier& a, const LaunchOutlier& b) {
      return a.*field != b.*field ? a.*field > b.*field : a.at_ms < b.at_ms;
    });
    v.resize(n);
  };
  keep_longest(calls, &LaunchOutlier::cpu_ns);
  keep_longest(delays, &LaunchOutlier::delay_ns);
  r.longest_calls = std::move(calls);
  r.longest_delays = std::move(delays);
  for (const auto& [api, n] : per_api) r.apis.emplace_back(t.names[api], n);
  std::sort(r.apis.begin(), r.apis.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return r;
}

}  // namespace rankscope::analyzers::device_timeline
