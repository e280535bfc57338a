// run_parts.cpp — one run's waterfall parts (run_parts.h).
//
// Per rank the skew report splits the mean step into compute + collective wait + collective transfer
// + memcpy + idle; compute is split further over the top-level ranges in proportion to their compute
// time (collectives excluded), so that the parts of each run add up to its mean step exactly.
#include "run_parts.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/range_names.h"
#include "rank_roles.h"

namespace rankscope::analyzers::diff_detail {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

RunParts parts_of(const SkewReport& r) {
  RunParts p;
  std::vector<double> medians, spreads;
  for (const auto& k : r.ranks) {
    if (!k.present || k.steps == 0) continue;
    ++p.ranks;
    medians.push_back(k.step_ms_median);
    // 1.4826 x MAD is the standard deviation where the noise is normal; steps far off (start-up, a
    // stall, a burst of load on a shared machine) do not widen it as they widen p90 - median.
    spreads.push_back(1.4826 * k.step_ms_mad);
    // Compute over the top-level components ("forward", "backward", "optimizer"): the outermost
    // ranges recorded under each ("forward/embed" where no "forward" range exists; ranges include
    // their children). "step" and "init" hold the others: not parts.
    double named = 0;
    std::map<std::string, double> top;
    for (const auto& [name, ms] : k.range_compute_ms) {
      if (name == "step" || name == "init" || name.starts_with("init/")) continue;
      bool outermost = true;
      for (std::string_view up = parent_range(name); !up.empty() && outermost; up = parent_range(up))
        outermost = !k.range_compute_ms.count(std::string(up));
      if (!outermost) continue;
      top[std::string(top_level_range(name))] += ms;
      named += ms;
    }
    for (const auto& [name, ms] : top) p.parts["compute in " + name] += named > 0 ? k.compute_ms * ms / named : 0;
    if (named <= 0) p.parts["compute"] += k.compute_ms;
    p.parts["collective wait"] += k.collective_wait_ms;
    p.parts["collective transfer"] += k.collective_transfer_ms;
    p.parts["memcpy"] += k.memcpy_ms;
    p.parts["idle (outside ranges and collectives)"] += k.idle_ms;
    if (k.breakdown_source == "device" && k.device) {
      ++p.device_ranks;
      p.host_bound += k.device->host_bound_ms;
    }
    for (const auto& [name, ms] : k.range_compute_ms)
      if (name != "step" && name != "init") {
        const std::string folded = block_wildcard(name);
        p.range_compute[folded] += ms;
        p.range_by_rank[folded][k.rank] += ms;
      }
  }
  if (p.ranks > 0) {
    for (auto& [name, ms] : p.parts) ms /= p.ranks;
    for (auto& [name, ms] : p.range_compute) ms /= p.ranks;
  }
  if (p.device_ranks > 0) p.host_bound /= p.device_ranks;
  for (const auto& [name, ms] : p.parts) p.mean_step += ms;
  p.median_step = median(medians);
  p.spread = median(spreads);
  p.steps = r.steps;
  p.collective_sites = r.collectives.size();
  for (const auto& c : r.collectives) {
    ++p.sites_by_op[fmt::format("{} on {}", c.op, group_kind_of(c.comm))];
    p.bytes_per_step += c.bytes * double(c.instances);
  }
  if (r.steps > 0) p.bytes_per_step /= double(r.steps);
  return p;
}

std::string format_ms(double v) { return std::fabs(v) >= 100 ? fmt::format("{:.0f} ms", v) : fmt::format("{:.1f} ms", v); }

}  // namespace rankscope::analyzers::diff_detail
