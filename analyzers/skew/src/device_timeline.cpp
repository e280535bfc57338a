// device_timeline.cpp — see device_timeline.h.
#include "device_timeline.h"

#include <algorithm>

#include "interval_union.h"
#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/format/clock.h"

namespace rankscope::analyzers {
namespace {

// The per-step times of a DeviceBreakdown, which means average alike.
constexpr double DeviceBreakdown::*kTimes[] = {&DeviceBreakdown::step_ms,     &DeviceBreakdown::busy_ms,
                                               &DeviceBreakdown::compute_ms,  &DeviceBreakdown::transfer_ms,
                                               &DeviceBreakdown::memcpy_ms,   &DeviceBreakdown::idle_ms,
                                               &DeviceBreakdown::host_bound_ms, &DeviceBreakdown::kernel_ms,
                                               &DeviceBreakdown::outside_ranges_ms};

// Moves the parts of `from`'s kernels after `cut` into `to` (splitting a kernel that straddles it),
// so each instant of a kernel is in exactly one window.
void move_after(std::vector<KernelSpan>& from, std::vector<KernelSpan>& to, int64_t cut) {
  for (KernelSpan& k : from) {
    if (k.end_ns <= cut) continue;
    to.push_back({std::max(k.begin_ns, cut), k.end_ns, k.kind});
    k.end_ns = std::max(k.begin_ns, cut);
  }
  std::erase_if(from, [](const KernelSpan& k) { return k.end_ns <= k.begin_ns; });
}

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

void DeviceTimeline::host_step(int64_t step, int64_t begin_ns, int64_t end_ns) {
  host_ns_[step] = std::max<int64_t>(0, end_ns - begin_ns);
}

void DeviceTimeline::add_step(int64_t step, std::span<KernelSpan> kernels, std::span<const uint32_t> range_keys) {
  Step s{step, {}};
  // Per range and outside every range: the union of the kernels' intervals.
  std::vector<std::vector<Interval>> by_key(range_names_.size());
  std::vector<Interval> outside;
  std::vector<KernelSpan> spans;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelSpan& k = kernels[i];
    if (k.end_ns <= k.begin_ns) continue;
    s.kernel_ns += k.end_ns - k.begin_ns;
    spans.push_back(k);
    const uint32_t key = i < range_keys.size() ? range_keys[i] : kNoRange;
    (key < by_key.size() ? by_key[key] : outside).push_back({k.begin_ns, k.end_ns});
  }
  s.outside_ns = union_length(outside);
  for (uint32_t k = 0; k < by_key.size(); ++k) {
    if (const int64_t ns = union_length(by_key[k]); ns > 0) s.range_ns.emplace_back(k, ns);
  }
  int64_t first = INT64_MAX;
  for (const KernelSpan& k : spans) first = std::min(first, k.begin_ns);
  // The last record's window ends where this one's begins, when they are consecutive steps; the
  // part of its kernels that runs on (the GPU lags the host) is this window's.
  if (has_pending_) {
    if (step == steps_.back().step + 1 && !spans.empty() && first > pending_first_) {
      move_after(pending_, spans, first);
      close_pending(first);
    } else {
      close_pending(std::nullopt);
    }
  }
  steps_.push_back(std::move(s));
  pending_ = std::move(spans);
  pending_first_ = first;
  has_pending_ = true;
}

void DeviceTimeline::close_pending(std::optional<int64_t> window_end) {
  if (!has_pending_) return;
  has_pending_ = false;
  Step& s = steps_.back();
  const auto host = host_ns_.find(s.step);
  if (!pending_.empty()) {
    int64_t last = INT64_MIN;
    for (const KernelSpan& k : pending_) last = std::max(last, k.end_ns);
    // With no next window to end it: the host's step length from the first kernel, or the last
    // kernel's end if later.
    const int64_t end = window_end ? *window_end
                                   : std::max(last, host != host_ns_.end() ? pending_first_ + host->second : last);
    s.window_ns = std::max<int64_t>(0, end - pending_first_);
  } else if (host != host_ns_.end()) {
    s.window_ns = host->second;  // a record of empty kernels: the GPU idled the whole step
  }
  s.time = measure_device_step(pending_);
  const int64_t idle = std::max<int64_t>(0, s.window_ns - s.time.busy_ns);
  if (host != host_ns_.end()) s.host_bound_ns = std::clamp<int64_t>(host->second - s.time.busy_ns, 0, idle);
  pending_.clear();
}

std::optional<DeviceBreakdown> DeviceTimeline::finish(const std::map<int64_t, double>& step_ms) {
  close_pending(std::nullopt);
  DeviceBreakdown d;
  std::vector<int64_t> range_ns(range_names_.size(), 0);
  for (const Step& s : steps_) {
    if (!step_ms.count(s.step)) continue;
    ++d.traced_steps;
    d.first_traced_step = d.first_traced_step < 0 ? s.step : std::min(d.first_traced_step, s.step);
    d.last_traced_step = std::max(d.last_traced_step, s.step);
    d.step_ms += double(s.window_ns) / kNsPerMillisecond;
    d.busy_ms += double(s.time.busy_ns) / kNsPerMillisecond;
    d.compute_ms += double(s.time.compute_ns) / kNsPerMillisecond;
    d.transfer_ms += double(s.time.transfer_ns) / kNsPerMillisecond;
    d.memcpy_ms += double(s.time.memcpy_ns) / kNsPerMillisecond;
    d.idle_ms += double(std::max<int64_t>(0, s.window_ns - s.time.busy_ns)) / kNsPerMillisecond;
    d.host_bound_ms += double(s.host_bound_ns) / kNsPerMillisecond;
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
