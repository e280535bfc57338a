// fr_dump_time.cpp — lower bounds on when the dumps were written (fr_dump_time.h).
#include "fr_dump_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "rankscope/format/saturating.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::torch_fr {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;

std::string seconds_text(double s) { return s < 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.0f} s", s); }

}  // namespace

RankTimes rank_times(const FrDump& d) {
  RankTimes r;
  for (const FrEntry& e : d.entries) {
    for (int64_t ts : {e.time_created_ns, e.time_started_ns, e.time_completed_ns}) {
      if (ts <= 0) continue;
      r.now_ns = std::max(r.now_ns, ts);
      r.earliest_ns = std::min(r.earliest_ns, ts);
    }
    if (e.completed) continue;
    r.pending = true;
    if (e.signal == CompletionSignal::kState && e.timeout_ms > 0 && e.time_created_ns > 0 &&
        (!r.oldest_open || e.time_created_ns < r.oldest_open->time_created_ns))
      r.oldest_open = &e;
  }
  return r;
}

DumpTime bound_dump_time(const std::map<int, FrDump>& dumps, const std::map<std::string, std::string>& comm_names,
                         const std::map<int, RankTimes>* per_rank) {
  DumpTime t;
  t.earliest_ns = std::numeric_limits<int64_t>::max();
  struct Bound {
    int64_t at_ns = std::numeric_limits<int64_t>::max();
    int rank = -1;
    const FrEntry* entry = nullptr;
  } watchdog;
  for (const auto& [rank, d] : dumps) {
    const auto made = per_rank ? per_rank->find(rank) : std::map<int, RankTimes>::const_iterator();
    const RankTimes r = per_rank && made != per_rank->end() ? made->second : rank_times(d);
    t.now_ns = std::max(t.now_ns, r.now_ns);
    t.earliest_ns = std::min(t.earliest_ns, r.earliest_ns);
    t.pending = t.pending || r.pending;
    const FrEntry* oldest_open = r.oldest_open;
    if (!oldest_open) continue;
    // A corrupt timeout (or creation time) saturates instead of overflowing.
    constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max() / kNsPerMs;
    const int64_t timeout_ns = std::clamp<int64_t>(oldest_open->timeout_ms, -kMaxMs, kMaxMs) * kNsPerMs;
    const int64_t at = format::add_saturating(oldest_open->time_created_ns, timeout_ns);
    if (at < watchdog.at_ns) watchdog = {at, rank, oldest_open};
  }
  if (t.earliest_ns == std::numeric_limits<int64_t>::max()) t.earliest_ns = t.now_ns;

  if (!t.pending) {
    t.basis = "Every entry in the dumps completed, so they were taken on demand (_dump_nccl_trace(), the debug pipe) "
              "from a job that was not stuck then: PyTorch's watchdog writes a dump only on a timeout, which leaves a "
              "collective open.";
  } else if (watchdog.entry) {
    const FrEntry& e = *watchdog.entry;
    auto name = comm_names.find(std::string(e.group));
    t.timeout_s = double(e.timeout_ms) / 1000.0;
    t.now_ns = std::max(t.now_ns, watchdog.at_ns);
    t.basis = fmt::format("The dumps do not say when they were written; PyTorch's watchdog writes them once a collective "
                          "has been open for its process group's timeout, and {} #{} on {} was enqueued on rank {} "
                          "with a timeout of {}, so times here are lower bounds from that.",
                          format::short_op_name(e.op), e.is_p2p ? e.p2p_seq : e.collective_seq,
                          name == comm_names.end() ? e.group : name->second, watchdog.rank, seconds_text(t.timeout_s));
  } else {
    t.basis = "The dumps do not say when they were taken, and no watchdog writes them for this backend (Gloo's are "
              "taken on demand), so times here are lower bounds from the newest timestamp in them.";
  }
  return t;
}

}  // namespace rankscope::torch_fr
