// progress_watch.cpp — poll the recorders until progress stops.
#include "rankscope/analyzers/hang/progress_watch.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <tuple>
#include <vector>

#include "rankscope/format/clock.h"

namespace rankscope::analyzers::hang {
namespace {

using Signature = std::vector<std::tuple<int, int64_t, uint64_t, uint64_t, uint32_t>>;

Signature signature(const format::RunDirectory& run) {
  Signature s;
  for (const auto& r : run.ranks) {
    if (!r.flight) continue;
    const auto& l = r.flight->live;
    s.emplace_back(r.rank, l.step, l.collectives_issued, l.collectives_completed, uint32_t(l.process_state));
  }
  return s;
}

// Newest step start, collective call or completion of any rank, on rank 0's clock.
int64_t last_progress(const format::RunDirectory& run) {
  int64_t last = 0;
  for (const auto& r : run.ranks) {
    if (!r.flight) continue;
    const auto& f = *r.flight;
    const int64_t offset = f.live.clock_uncertainty_ns >= 0 ? f.live.clock_offset_ns : 0;
    int64_t t = f.live.step_begin_ns;
    for (const auto& c : f.comms)
      if (const auto* rec = c.last()) t = std::max({t, rec->enqueue_ns, rec->end_ns});
    if (t > 0) last = std::max(last, t + offset);
  }
  return last;
}

bool all_finished(const format::RunDirectory& run) {
  bool any = false;
  for (const auto& r : run.ranks) {
    if (!r.flight) continue;
    any = true;
    if (r.flight->live.process_state != format::ProcessState::kFinished) return false;
  }
  return any;
}

}  // namespace

Result<WatchResult> watch_until_stalled(const std::filesystem::path& dir, const WatchOptions& o) {
  auto now = o.now_ns ? o.now_ns : [] { return now_unix_ns(); };
  auto sleep = o.sleep_s ? o.sleep_s : [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };
  const int64_t quiet = int64_t(o.quiet_s * 1e9);
  const int64_t started = now();
  WatchResult w;
  Signature prev;
  int64_t last_change = started;
  while (true) {
    auto run = format::open_run_directory(dir);
    const int64_t t = now();
    if (!run.ok()) {
      // The job may not have created its run directory yet.
      if (t - started >= quiet) return run.status();
      sleep(o.poll_s);
      continue;
    }
    ++w.samples;
    Signature s = signature(*run);
    if (w.samples == 1 || s != prev) last_change = t;
    prev = std::move(s);
    w.last_progress_ns = std::max(last_progress(*run), 0L);
    w.verdict_ns = t;
    w.finished = all_finished(*run);
    // Stalled: nothing moved while we watched for quiet_s, or (after a second look that saw no
    // change) the recorders' own last progress is already older than quiet_s.
    const bool unchanged_twice = w.samples >= 2 && t > last_change;
    w.stalled = !w.finished && (t - last_change >= quiet || (unchanged_twice && w.last_progress_ns > 0 &&
                                                               t - w.last_progress_ns >= quiet));
    if (w.finished || w.stalled) {
      w.run = std::move(*run);
      return w;
    }
    sleep(o.poll_s);
  }
}

}  // namespace rankscope::analyzers::hang
