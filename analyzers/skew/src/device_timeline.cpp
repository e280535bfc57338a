// device_timeline.cpp — see device_timeline.h.
#include "device_timeline.h"

#include <algorithm>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/format/clock.h"

namespace rankscope::analyzers {
namespace {

// The per-step times of a DeviceBreakdown, which means average alike.
constexpr double DeviceBreakdown::*kTimes[] = {&DeviceBreakdown::step_ms,     &DeviceBreakdown::busy_ms,
                                               &DeviceBreakdown::compute_ms,  &DeviceBreakdown::transfer_ms,
                                               &DeviceBreakdown::memcpy_ms,   &DeviceBreakdown::idle_ms,
                                               &DeviceBreakdown::kernel_ms,   &DeviceBreakdown::outside_ranges_ms};

}  // namespace

DeviceStepTime measure_device_step(std::span<KernelSpan> kernels) {
  // Endpoints in time order; at equal times ends before begins, so back-to-back kernels leave no
  // gap and no overlap.
  struct Edge {
    int64_t t;
    int delta;  // +1 begin, -1 end
    format::KernelClass kind;
  };
  std::vector<Edge> edges;
  edges.reserve(kernels.size() * 2);
  for (const KernelSpan& k : kernels) {
    if (k.end_ns <= k.begin_ns) continue;
    edges.push_back({k.begin_ns, +1, k.kind});
    edges.push_back({k.end_ns, -1, k.kind});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.t != b.t ? a.t < b.t : a.delta < b.delta;
  });
  DeviceStepTime out;
  // Open operations by class. A memcpy beside an NCCL kernel books as memcpy: it moves data, while
  // the NCCL kernel may only be waiting for a peer.
  int open[3] = {0, 0, 0};
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    open[size_t(e.kind)] += e.delta;
    if (i + 1 == edges.size()) break;
    const int64_t span = edges[i + 1].t - e.t;
    if (open[size_t(format::KernelClass::kCompute)] > 0) {
      out.compute_ns += span;
    } else if (open[size_t(format::KernelClass::kMemory)] > 0) {
      out.memcpy_ns += span;
    } else if (open[size_t(format::KernelClass::kCommunication)] > 0) {
      out.transfer_ns += span;
    }
  }
  out.busy_ns = out.compute_ns + out.memcpy_ns + out.transfer_ns;
  return out;
}

uint32_t DeviceTimeline::range_key(std::string_view range_name) {
  const std::string wildcard = block_wildcard(range_name);
  auto it = range_keys_.find(wildcard);
  if (it != range_keys_.end()) return it->second;
  const uint32_t key = uint32_t(range_names_.size());
  range_names_.push_back(wildcard);
  range_keys_.emplace(wildcard, key);
  return key;
}

void DeviceTimeline::add_step(int64_t step, std::span<KernelSpan> kernels, std::span<const uint32_t> range_keys) {
  Step s{step, {}, 0, 0, {}};
  std::vector<int64_t> by_key(range_names_.size(), 0);
  for (size_t i = 0; i < kernels.size(); ++i) {
    const int64_t ns = std::max<int64_t>(0, kernels[i].end_ns - kernels[i].begin_ns);
    s.kernel_ns += ns;
    const uint32_t key = i < range_keys.size() ? range_keys[i] : kNoRange;
    if (key < by_key.size()) {
      by_key[key] += ns;
    } else {
      s.outside_ns += ns;
    }
  }
  for (uint32_t k = 0; k < by_key.size(); ++k) {
    if (by_key[k] > 0) s.range_ns.emplace_back(k, by_key[k]);
  }
  s.time = measure_device_step(kernels);  // reorders `kernels`: last
  steps_.push_back(std::move(s));
}

std::optional<DeviceBreakdown> DeviceTimeline::finish(const std::map<int64_t, double>& step_ms) const {
  DeviceBreakdown d;
  std::vector<int64_t> range_ns(range_names_.size(), 0);
  for (const Step& s : steps_) {
    auto wall = step_ms.find(s.step);
    if (wall == step_ms.end()) continue;
    const double frame_ms = std::max(wall->second, double(s.time.busy_ns) / kNsPerMillisecond);
    ++d.traced_steps;
    d.first_traced_step = d.first_traced_step < 0 ? s.step : std::min(d.first_traced_step, s.step);
    d.last_traced_step = std::max(d.last_traced_step, s.step);
    d.step_ms += frame_ms;
    d.busy_ms += double(s.time.busy_ns) / kNsPerMillisecond;
    d.compute_ms += double(s.time.compute_ns) / kNsPerMillisecond;
    d.transfer_ms += double(s.time.transfer_ns) / kNsPerMillisecond;
    d.memcpy_ms += double(s.time.memcpy_ns) / kNsPerMillisecond;
    d.idle_ms += frame_ms - double(s.time.busy_ns) / kNsPerMillisecond;
    d.kernel_ms += double(s.kernel_ns) / kNsPerMillisecond;
    d.outside_ranges_ms += double(s.outside_ns) / kNsPerMillisecond;
    for (const auto& [key, ns] : s.range_ns) range_ns[key] += ns;
  }
  if (d.traced_steps == 0) return std::nullopt;
  const double n = double(d.traced_steps);
  for (auto field : kTimes) d.*field /= n;
  for (size_t k = 0; k < range_ns.size(); ++k) {
    if (range_ns[k] > 0) d.range_ms[range_names_[k]] = double(range_ns[k]) / kNsPerMillisecond / n;
  }
  return d;
}

void apply_device_breakdown(RankSkew& rank) {
  rank.host_breakdown = HostBreakdown{rank.compute_ms, rank.collective_wait_ms, rank.collective_transfer_ms, rank.idle_ms};
  if (!rank.device) return;
  const DeviceBreakdown& d = *rank.device;
  rank.breakdown_source = "device";
  rank.compute_ms = d.compute_ms;
  // The device cannot tell waiting for a peer from moving data: both are an NCCL kernel running.
  rank.collective_wait_ms = 0;
  rank.collective_transfer_ms = d.transfer_ms;
  rank.memcpy_ms = d.memcpy_ms;
  if (d.transfer_ms <= 0) rank.idle_collective_wait_ms = std::min(d.idle_ms, rank.host_breakdown.collective_wait_ms);
  rank.idle_ms = d.idle_ms;
}

std::optional<DeviceSummary> summarize_device(const std::vector<RankSkew>& ranks) {
  DeviceSummary s;
  DeviceBreakdown& m = s.mean;
  std::map<std::string, double> range_sum;
  for (const RankSkew& r : ranks) {
    if (!r.device) continue;
    const DeviceBreakdown& d = *r.device;
    ++s.ranks;
    m.traced_steps = std::max(m.traced_steps, d.traced_steps);
    m.first_traced_step = m.first_traced_step < 0 ? d.first_traced_step : std::min(m.first_traced_step, d.first_traced_step);
    m.last_traced_step = std::max(m.last_traced_step, d.last_traced_step);
    for (auto field : kTimes) m.*field += d.*field;
    for (const auto& [name, ms] : d.range_ms) range_sum[name] += ms;
  }
  if (s.ranks == 0) return std::nullopt;
  const double n = double(s.ranks);
  for (auto field : kTimes) m.*field /= n;
  for (const auto& [name, ms] : range_sum) s.ranges_ms.emplace_back(name, ms / n);
  std::stable_sort(s.ranges_ms.begin(), s.ranges_ms.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace rankscope::analyzers
