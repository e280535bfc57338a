// rank_scan.cpp — see rank_scan.h.
#include "rank_scan.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "interval_union.h"
#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/stats.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/op_family.h"

namespace rankscope::analyzers {
namespace {

template <class T>
void grow(std::vector<T>& v, size_t n, const T& fill) {
  if (v.size() < n) v.resize(n, fill);
}

}  // namespace

RankScan::RankScan(int rank, NameTable& names, ArrivalSink& sink, int64_t first_step, int64_t last_step)
    : rank_(rank), names_(names), sink_(sink), first_step_(first_step), last_step_(last_step) {
  result_.summary.rank = rank;
}

void RankScan::on_name(uint32_t id, format::NameKind kind, std::string_view name) {
  const size_t n = size_t(id) + 1;
  grow(local_names_, n, std::string());
  grow(local_kinds_, n, format::NameKind::kRange);
  grow(local_to_global_, n, kNoName);
  local_names_[id] = std::string(name);
  local_kinds_[id] = kind;
  local_to_global_[id] = names_.id(name);
  if (kind == format::NameKind::kRange && name == "step") step_range_ = id;
  grow(op_leaf_, n, false);
  grow(wait_leaf_, n, false);
  op_leaf_[id] = kind == format::NameKind::kRange && format::is_op_family_leaf(name);
  wait_leaf_[id] = kind == format::NameKind::kRange && format::is_collective_wait_leaf(name);
  grow(kernel_class_, n, format::KernelClass::kCompute);
  kernel_class_[id] = kind != format::NameKind::kKernel ? format::KernelClass::kCompute
                     : classifier_                     ? classifier_->classify(name).kind
                                                       : format::classify_kernel(name);
  grow(expert_of_local_, n, -1);
  if (kind == format::NameKind::kCounter) expert_of_local_[id] = routed_counter_expert(name).value_or(-1);
}

void RankScan::on_clock(const format::ClockRecord& clock) {
  if (saw_step_) {
    result_.warnings.push_back(fmt::format(
        "rank {}: clock record arrives after the first step; earlier steps are not aligned", rank_));
  }
  offset_ns_ = clock.offset_ns;
  result_.summary.clock_offset_ms = double(clock.offset_ns) / kNsPerMillisecond;
  result_.summary.clock_uncertainty_ms = double(clock.uncertainty_ns) / kNsPerMillisecond;
}

bool RankScan::is_range(uint32_t local) const {
  return local < local_kinds_.size() && local_kinds_[local] == format::NameKind::kRange &&
         !local_names_[local].empty();
}

const std::vector<uint32_t>& RankScan::ancestors_or_self(uint32_t local) {
  grow(ancestors_, size_t(local) + 1, std::vector<uint32_t>());
  grow(ancestors_ready_, size_t(local) + 1, false);
  if (!ancestors_ready_[local]) {
    // Parents are pushed before their children, so their NAME records came first.
    std::vector<uint32_t> chain{local};
    for (std::string_view p = parent_range(local_names_[local]); !p.empty(); p = parent_range(p)) {
      for (uint32_t i = 0; i < local_names_.size(); ++i) {
        if (local_kinds_[i] == format::NameKind::kRange && local_names_[i] == p) {
          chain.push_back(i);
          break;
        }
      }
    }
    ancestors_[local] = std::move(chain);
    ancestors_ready_[local] = true;
  }
  return ancestors_[local];
}

void RankScan::on_step(const format::StepRecord& step) {
  saw_step_ = true;
  device_.host_step(step.step, step.begin_ns, step.end_ns);  // the device windows need every step
  if (step.step < first_step_ || step.step > last_step_ || is_startup(step)) return;
  ++step_counter_;
  size_per_range_arrays();
  // GPU kernel time launched under each range (CUPTI; zero on CPU), also from entries of ranges
  // that did not run in this step on the main thread (count 0).
  for (const auto& r : step.ranges) {
    if (r.kernel_ns > 0 && is_range(r.name_id))
      range_kernel_samples_[r.name_id].push_back(double(r.kernel_ns) / kNsPerMillisecond);
  }
  const std::vector<uint32_t> touched = ranges_present(step);
  const bool ops_read = subtract_op_leaf_waits(touched);
  const CollectiveTime coll = scan_collectives(step, touched);
  const BusyTime busy = add_range_samples(touched);
  add_host_classes(step, ops_read, busy, coll);
  add_counters(step);
}

// Start-up (gpt2-train's step 0, made of init/* ranges) is not a training step: `rankscope startup`
// reports it, and its seconds would swamp every per-step statistic here.
bool RankScan::is_startup(const format::StepRecord& step) const {
  for (const auto& r : step.ranges)
    if (r.name_id < local_names_.size() && local_names_[r.name_id].rfind("init/", 0) == 0) return true;
  return false;
}

void RankScan::size_per_range_arrays() {
  const size_t n_names = local_names_.size();
  grow(stamp_, n_names, int64_t(0));
  grow(total_ns_, n_names, int64_t(0));
  grow(coll_in_ns_, n_names, int64_t(0));
  grow(wait_ns_, n_names, int64_t(0));
  grow(has_leaves_, n_names, int64_t(0));
  grow(range_compute_samples_, n_names, std::vector<double>());
  grow(range_total_samples_, n_names, std::vector<double>());
  grow(range_kernel_samples_, n_names, std::vector<double>());
  grow(coll_intervals_, n_names, std::vector<Interval>());
}

// The ranges that ran in this step, each stamped with it and its time summed.
std::vector<uint32_t> RankScan::ranges_present(const format::StepRecord& step) {
  std::vector<uint32_t> touched;
  for (const auto& r : step.ranges) {
    if (!is_range(r.name_id) || r.count == 0) continue;  // count 0: kernel time only, the range did not run
    if (stamp_[r.name_id] != step_counter_) {
      stamp_[r.name_id] = step_counter_;
      total_ns_[r.name_id] = 0;
      coll_in_ns_[r.name_id] = 0;
      wait_ns_[r.name_id] = 0;
      touched.push_back(r.name_id);
    }
    total_ns_[r.name_id] += r.total_ns;
  }
  return touched;
}

// Where a trace's framework ops were read (op leaves, format/op_family.h), a range's compute is its
// time less the leaves where its thread waited on collectives other threads ran: whatever those
// threads moved while this one computed is overlap, not lost time. True when any op leaf ran.
bool RankScan::subtract_op_leaf_waits(const std::vector<uint32_t>& touched) {
  bool ops_read = false;
  for (uint32_t r : touched) {
    if (r >= op_leaf_.size() || !op_leaf_[r]) continue;
    ops_read = true;
    for (uint32_t a : ancestors_or_self(r)) {
      if (stamp_[a] != step_counter_) continue;
      has_leaves_[a] = step_counter_;
      if (wait_leaf_[r] && a != r) wait_ns_[a] += total_ns_[r];
    }
  }
  return ops_read;
}

// Collectives: time inside each range, and arrivals (ordered per communicator by sequence number,
// which gives each its ordinal: the site identity that is the same in every step). Time in
// collectives is a union, never a sum: Gloo runs a step's all-reduces on several threads at once (DDP
// buckets, several process groups), and each instant counts once, for the step and for every range.
// Intervals are clipped to the step, so the classes add up to it.
RankScan::CollectiveTime RankScan::scan_collectives(const format::StepRecord& step,
                                                    const std::vector<uint32_t>& touched) {
  std::vector<std::tuple<uint32_t, uint64_t, size_t>> order;
  order.reserve(step.collectives.size());
  for (size_t i = 0; i < step.collectives.size(); ++i) {
    order.emplace_back(step.collectives[i].comm_id, step.collectives[i].seq, i);
  }
  std::sort(order.begin(), order.end());
  for (uint32_t r : touched) coll_intervals_[r].clear();
  all_coll_scratch_.clear();
  inside_coll_scratch_.clear();
  uint32_t prev_comm = kNoName;
  uint32_t ordinal = 0;
  for (const auto& [comm, seq, i] : order) {
    const auto& c = step.collectives[i];
    ordinal = comm == prev_comm ? ordinal + 1 : 0;
    prev_comm = comm;
    const int64_t dur = c.end_ns > 0 && c.end_ns >= c.enqueue_ns ? c.end_ns - c.enqueue_ns : -1;
    bool inside = false;
    if (dur > 0) {
      const Interval span{c.enqueue_ns, c.end_ns};
      all_coll_scratch_.push_back(span);
      if (is_range(c.range_id)) {
        for (uint32_t a : ancestors_or_self(c.range_id)) {
          if (!present(a)) continue;
          coll_intervals_[a].push_back(span);
          if (a != step_range_) inside = true;
        }
      }
      if (inside) inside_coll_scratch_.push_back(span);
    }
    ArrivalObservation obs;
    obs.comm = comm < local_to_global_.size() ? local_to_global_[comm] : kNoName;
    obs.range = c.range_id < local_to_global_.size() && is_range(c.range_id) ? local_to_global_[c.range_id] : kNoName;
    obs.op = c.op;
    obs.ordinal = ordinal;
    obs.seq = c.seq;
    obs.step = step.step;
    obs.arrival_ns = c.enqueue_ns + offset_ns_;
    obs.duration_ns = dur;
    obs.bytes = c.bytes;
    sink_.add(rank_, obs);
  }
  for (uint32_t r : touched) coll_in_ns_[r] = union_length(coll_intervals_[r], step.begin_ns, step.end_ns);
  return {union_length(all_coll_scratch_, step.begin_ns, step.end_ns),
          union_length(inside_coll_scratch_, step.begin_ns, step.end_ns)};
}

int64_t RankScan::range_compute_ns(uint32_t r) const {
  if (wait_leaf_[r]) return 0;
  if (has_leaves_[r] == step_counter_) return std::max<int64_t>(0, total_ns_[r] - wait_ns_[r]);
  return std::max<int64_t>(0, total_ns_[r] - coll_in_ns_[r]);
}

// Each present range's time and compute as samples. Outermost present ranges (no present strict
// ancestor) make up the busy time and the top-level breakdown; "step" itself is the frame, not a part.
RankScan::BusyTime RankScan::add_range_samples(const std::vector<uint32_t>& touched) {
  BusyTime busy;
  for (uint32_t r : touched) {
    if (r == step_range_) continue;
    const auto& chain = ancestors_or_self(r);
    const bool outermost = std::none_of(chain.begin() + 1, chain.end(),
                                        [&](uint32_t a) { return a != step_range_ && present(a); });
    if (outermost) {
      busy.total_ns += total_ns_[r];
      busy.compute_ns += range_compute_ns(r);
      grow(top_level_global_, size_t(r) + 1, kNoName);
      if (top_level_global_[r] == kNoName) top_level_global_[r] = names_.id(top_level_range(local_names_[r]));
      const uint32_t top = top_level_global_[r];
      grow(top_level_sum_, size_t(top) + 1, 0.0);
      top_level_sum_[top] += double(total_ns_[r]) / kNsPerMillisecond;
    }
    if (wait_leaf_[r]) continue;  // not work: the waits are in the collectives' classes
    range_total_samples_[r].push_back(double(total_ns_[r]) / kNsPerMillisecond);
    range_compute_samples_[r].push_back(double(range_compute_ns(r)) / kNsPerMillisecond);
  }
  return busy;
}

// Host classes of the step; they add up to it. Without op leaves: in some collective (any thread),
// else in a range (compute), else idle. With them (a trace's cpu_ops): compute is the ranges' time
// but the waits; collectives another thread ran while the main thread computed are overlap, not time
// lost; the rest of the collectives' time fills what is neither (the waits among it).
void RankScan::add_host_classes(const format::StepRecord& step, bool ops_read, BusyTime busy, CollectiveTime coll) {
  const int64_t step_ns = std::max<int64_t>(0, step.end_ns - step.begin_ns);
  const double step_ms = double(step_ns) / kNsPerMillisecond;
  int64_t compute_ns = 0, exposed_ns = coll.total_ns;
  if (ops_read) {
    compute_ns = std::min(busy.compute_ns, step_ns);
    exposed_ns = std::min(coll.total_ns, step_ns - compute_ns);
    overlap_ms_sum_ += double(coll.total_ns - exposed_ns) / kNsPerMillisecond;
  } else {
    compute_ns = std::clamp<int64_t>(busy.total_ns - coll.inside_ns, 0, std::max<int64_t>(0, step_ns - coll.total_ns));
  }
  compute_ms_sum_ += double(compute_ns) / kNsPerMillisecond;
  idle_ms_sum_ += double(std::max<int64_t>(0, step_ns - exposed_ns - compute_ns)) / kNsPerMillisecond;
  collective_ms_sum_ += double(exposed_ns) / kNsPerMillisecond;
  step_ms_.push_back(step_ms);
  noncomm_ms_.push_back(double(std::max<int64_t>(0, step_ns - exposed_ns)) / kNsPerMillisecond);
  result_.step_numbers.push_back(step.step);
  result_.step_ms.push_back(float(step_ms));
  result_.noncomm_ms.push_back(float(noncomm_ms_.back()));
}

void RankScan::add_counters(const format::StepRecord& step) {
  for (const auto& cv : step.counters) {
    const size_t n = size_t(cv.name_id) + 1;
    grow(counter_sum_, n, 0.0);
    grow(counter_max_, n, -1e300);
    grow(counter_steps_, n, int64_t(0));
    counter_sum_[cv.name_id] += cv.value;
    counter_max_[cv.name_id] = std::max(counter_max_[cv.name_id], cv.value);
    ++counter_steps_[cv.name_id];
    if (experts_ && cv.name_id < expert_of_local_.size() && expert_of_local_[cv.name_id] >= 0)
      experts_->add(step.step, expert_of_local_[cv.name_id], cv.value);
  }
}

void RankScan::on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) {
  if (step < first_step_ || step > last_step_ || step > last_device_step_ || kernels.empty()) return;
  kernel_scratch_.clear();
  kernel_keys_scratch_.clear();
  for (const format::TraceKernel& k : kernels) {
    kernel_scratch_.push_back(KernelSpan{k.begin_ns, k.end_ns, k.name_id < kernel_class_.size() ? kernel_class_[k.name_id] : format::KernelClass::kCompute});
    uint32_t key = DeviceTimeline::kNoRange;
    if (k.range_id != 0 && is_range(k.range_id)) {
      grow(device_range_key_, size_t(k.range_id) + 1, kUnkeyed);
      if (device_range_key_[k.range_id] == kUnkeyed) device_range_key_[k.range_id] = device_.range_key(local_names_[k.range_id]);
      key = device_range_key_[k.range_id];
    }
    kernel_keys_scratch_.push_back(key);
  }
  device_.add_step(step, kernel_scratch_, kernel_keys_scratch_);
}

RankScanResult RankScan::finish() {
  RankSkew& s = result_.summary;
  s.steps = int64_t(step_ms_.size());
  s.present = true;
  if (s.steps == 0) return std::move(result_);
  const double n = double(s.steps);
  s.step_ms_median = percentile(step_ms_, 50);
  s.step_ms_p90 = percentile(step_ms_, 90);
  s.step_ms_max = *std::max_element(step_ms_.begin(), step_ms_.end());
  s.step_ms_min = *std::min_element(step_ms_.begin(), step_ms_.end());
  {
    std::vector<double> deviation(step_ms_.size());
    for (size_t i = 0; i < step_ms_.size(); ++i) deviation[i] = std::fabs(step_ms_[i] - s.step_ms_median);
    s.step_ms_mad = percentile(std::move(deviation), 50);
  }
  s.compute_ms = compute_ms_sum_ / n;
  s.idle_ms = idle_ms_sum_ / n;
  s.collective_overlap_ms = overlap_ms_sum_ / n;
  result_.collective_ms_mean = collective_ms_sum_ / n;
  s.noncomm_ms_median = percentile(noncomm_ms_, 50);
  const double best = *std::min_element(noncomm_ms_.begin(), noncomm_ms_.end());
  s.individual_score = s.noncomm_ms_median > 0 ? std::clamp(best / s.noncomm_ms_median, 0.0, 1.0) : 1.0;
  for (size_t g = 0; g < top_level_sum_.size(); ++g) {
    if (top_level_sum_[g] > 0) s.top_level_ms[names_.name(uint32_t(g))] = top_level_sum_[g] / n;
  }
  for (size_t l = 0; l < range_compute_samples_.size(); ++l) {
    if (range_compute_samples_[l].empty()) continue;
    s.range_compute_ms[local_names_[l]] = median_inplace(range_compute_samples_[l]);
    s.range_ms[local_names_[l]] = median_inplace(range_total_samples_[l]);
    s.range_ms_min[local_names_[l]] = *std::min_element(range_total_samples_[l].begin(), range_total_samples_[l].end());
  }
  for (size_t l = 0; l < range_kernel_samples_.size(); ++l) {
    auto& v = range_kernel_samples_[l];
    if (v.empty()) continue;
    s.range_kernel_ms[local_names_[l]] = median_inplace(v);
    s.range_kernel_ms_min[local_names_[l]] = *std::min_element(v.begin(), v.end());
  }
  if (!device_.empty()) {
    // Start-up steps and steps outside the window have no STEP here: their kernels are left out.
    std::map<int64_t, double> wall_ms;
    for (size_t i = 0; i < result_.step_numbers.size(); ++i) wall_ms[result_.step_numbers[i]] = result_.step_ms[i];
    s.device = device_.finish(wall_ms);
  }
  for (size_t l = 0; l < counter_steps_.size(); ++l) {
    if (counter_steps_[l] == 0 || l >= local_names_.size()) continue;
    s.counters[local_names_[l]] = counter_sum_[l] / double(counter_steps_[l]);
    s.counters_max[local_names_[l]] = counter_max_[l];
  }
  return std::move(result_);
}

}  // namespace rankscope::analyzers
