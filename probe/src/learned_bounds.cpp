// learned_bounds.cpp — the watchdog's fast hang detector: learns each collective call site's and
// the step's typical duration (learned_bounds.h), publishes the bounds in the flight recorder, and
// reports a collective or a step running past its bound as a suspected hang (once per item), with
// the same evidence as the fixed timeout: a watchdog record of kind suspected_hang and stacks.
//
// Arming: a call site has a bound from its first completed call (10 x the longest call so far,
// floor 3 s), and the robust p95 bound after `hang_warmup` calls. The step's first duration carries
// start-up costs: it is never learned, but it stands in as the bound's basis until step 1 ends, so
// that step 1 is guarded too (a longer basis only makes the bound later, never a false alarm).
#include <algorithm>

#include <fmt/format.h>

#include "probe_impl.h"

namespace rankscope::probe {
namespace {

BoundPolicy policy_of(const Options& o) {
  BoundPolicy p;
  p.floor_s = o.hang_floor_s;
  p.factor = o.hang_factor;
  p.warmup = static_cast<uint32_t>(std::max<int64_t>(1, o.hang_warmup));
  p.early = static_cast<uint32_t>(std::max<int64_t>(1, o.hang_early));
  return p;
}

// "its learned bound 3.000 s (p95 2.1 ms of the last 64 of 200 samples, x10, floor 3 s)".
std::string limit_text(const DurationBound& b) {
  const BoundPolicy& p = b.policy();
  const double bound_s = double(b.bound_ns()) * 1e-9;
  const double statistic_ms = double(b.statistic_ns()) * 1e-6;
  switch (b.basis()) {
    case DurationBound::Basis::kStartup:
      return fmt::format("its learned bound {:.3f} s (the first step's {:.3f} ms, start-up included, x{:g}, floor {:g} s)",
                         bound_s, statistic_ms, p.factor, p.floor_s);
    case DurationBound::Basis::kLongest:
      return fmt::format("its learned bound {:.3f} s (longest {:.3f} ms of the first {} samples, x{:g}, floor {:g} s)",
                         bound_s, statistic_ms, b.samples(), p.factor, p.floor_s);
    default:
      return fmt::format("its learned bound {:.3f} s (p{} {:.3f} ms of the last {} of {} samples, x{:g}, floor {:g} s)",
                         bound_s, p.quantile_permille / 10, statistic_ms, std::min(b.samples(), p.window), b.samples(),
                         p.factor, p.floor_s);
  }
}

}  // namespace

Probe::Impl::LearnedSite* Probe::Impl::learned_site(int comm, uint32_t name) {
  for (LearnedSite& s : learned_sites)
    if (s.comm == comm && s.name == name) return &s;
  const int slot = next_bound_slot < static_cast<int>(flight->max_bounds()) ? next_bound_slot++ : -1;
  learned_sites.push_back(LearnedSite{comm, name, slot, DurationBound(policy_of(options)), false});
  return &learned_sites.back();
}

void Probe::Impl::learn_bounds(int64_t now_ns) {
  if (!step_bound) {
    step_bound.emplace(policy_of(options));
    step_bound_slot = next_bound_slot++;
  }
  const uint64_t last = collectives.next_index();
  uint64_t i = std::max(learn_cursor, last > CollectiveTable::kCapacity ? last - CollectiveTable::kCapacity : 0);
  for (; i < last; ++i) {
    std::optional<CollectiveView> v = collectives.view(i);
    if (!v) {
      // Still being written by its caller (retry next tick), or recycled long ago (skip it).
      if (last - i < CollectiveTable::kCapacity) break;
      continue;
    }
    if (format::is_open(v->state)) break;  // learned once it completes; later ones wait for it
    if (v->state == format::CollectiveState::kCompleted && v->end_ns >= v->enqueue_ns) {
      LearnedSite* s = learned_site(v->comm, v->site);
      s->bound.add(v->end_ns - v->enqueue_ns);
      s->dirty = true;
    }
  }
  learn_cursor = i;

  // Finished steps since the last tick (the ring keeps the last 64; older ones are not learned).
  const uint64_t ended = steps_ended.load(std::memory_order_acquire);
  const uint64_t ring = step_durations_ns.size();
  for (uint64_t k = std::max(steps_seen, ended > ring ? ended - ring : 0); k < ended; ++k) {
    const int64_t duration_ns = step_durations_ns[k % ring].load(std::memory_order_relaxed);
    if (k == 0) step_bound->add_startup(duration_ns);  // carries start-up costs: a basis, never learned
    else step_bound->add(duration_ns);
    step_bound_dirty = true;
  }
  steps_seen = ended;
  publish_bounds(now_ns);
}

void Probe::Impl::publish_bounds(int64_t now_ns) {
  auto desc = [&](const DurationBound& b) {
    format::BoundDesc d;
    d.samples = b.samples();
    d.warmup = b.policy().warmup;
    // While the bound rests on the longest (or the start-up) sample, say so: permille 1000.
    d.quantile_ns = b.statistic_ns();
    d.bound_ns = b.bound_ns();
    d.updated_ns = now_ns;
    d.quantile_permille = b.armed() ? b.statistic_permille() : b.policy().quantile_permille;
    d.window = b.policy().window;
    return d;
  };
  for (LearnedSite& s : learned_sites) {
    if (!s.dirty || s.slot < 0) continue;
    format::BoundDesc d = desc(s.bound);
    d.kind = format::BoundKind::kCollective;
    d.comm_index = s.comm;
    {
      std::lock_guard<std::mutex> lock(comm_mutex);  // comm_names grows on the main thread
      d.comm = comm_names[static_cast<size_t>(s.comm)];
    }
    d.site = std::string(name_of(s.name));
    flight->write_bound(s.slot, d);
    s.dirty = false;
  }
  if (step_bound_dirty && step_bound_slot >= 0) {
    format::BoundDesc d = desc(*step_bound);
    d.kind = format::BoundKind::kStep;
    d.site = "step";
    flight->write_bound(step_bound_slot, d);
    step_bound_dirty = false;
  }
}

void Probe::Impl::detect_past_bounds(int64_t now_ns) {
  // Suspicions about collectives that completed since are forgotten.
  std::erase_if(suspected_events, [&](uint64_t e) { return e < learn_cursor; });
  const uint64_t last = collectives.next_index();
  bool suspected_open = !suspected_events.empty();
  for (uint64_t i = learn_cursor; i < last; ++i) {  // every open collective is at or past the cursor
    std::optional<CollectiveView> v = collectives.view(i);
    if (!v || !format::is_open(v->state)) continue;
    const LearnedSite* s = nullptr;
    for (const LearnedSite& x : learned_sites)
      if (x.comm == v->comm && x.name == v->site) s = &x;
    if (s == nullptr || !s->bound.armed() || now_ns - v->enqueue_ns <= s->bound.bound_ns()) continue;
    if (std::find(suspected_events.begin(), suspected_events.end(), i) != suspected_events.end()) continue;
    suspected_events.push_back(i);
    std::string comm;
    {
      std::lock_guard<std::mutex> lock(comm_mutex);
      comm = comm_names[static_cast<size_t>(v->comm)];
    }
    const std::string what = fmt::format("{} #{} on '{}' called from '{}' ({} bytes, {})", format::op_name(v->op), v->seq,
                                         comm, name_of(v->site), v->bytes, format::state_name(v->state));
    report_stuck(format::WatchdogKind::kSuspectedHang, v->comm, v->seq, v->enqueue_ns, now_ns, what,
                 limit_text(s->bound), double(s->bound.bound_ns()) * 1e-9);
    return;  // one report per tick: the evidence capture takes a while
  }

  const int64_t begin = open_step_begin_ns.load(std::memory_order_acquire);
  if (begin == 0 || begin == suspected_step_begin_ns || !step_bound || !step_bound->armed()) return;
  if (now_ns - begin <= step_bound->bound_ns()) return;
  suspected_step_begin_ns = begin;
  if (suspected_open) return;  // the step is long because a suspected collective is: said already
  const std::string what = fmt::format("step {} (innermost range '{}')", step.load(std::memory_order_relaxed),
                                       name_of(innermost(&threads[0])));
  report_stuck(format::WatchdogKind::kSuspectedHang, -1, 0, begin, now_ns, what, limit_text(*step_bound),
               double(step_bound->bound_ns()) * 1e-9);
}

}  // namespace rankscope::probe
