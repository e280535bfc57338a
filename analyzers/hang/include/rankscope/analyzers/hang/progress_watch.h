// progress_watch.h — follows a live job until it stops making progress (hangdoctor --wait).
//
// Is: polling of the flight recorders (read-only; the job is not disturbed) for progress that does
// not depend on the heartbeat — each rank's step, collectives issued and completed, process state —
// until nothing moved for `quiet_s` seconds or every rank finished. It reports when the last
// progress happened according to the recorders, so the caller can print the time from the hang
// to the verdict. Is not: the diagnosis (classifier.h), which runs on the final read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "rankscope/format/run_directory.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers::hang {

struct WatchOptions {
  double quiet_s = 10;                 // no progress for this long -> stop
  double poll_s = 0.25;
  // Seam for tests; defaults are the real clock and sleep.
  std::function<int64_t()> now_ns;
  std::function<void(double)> sleep_s;
};

struct WatchResult {
  format::RunDirectory run;            // the last read
  bool finished = false;               // every readable rank shut down cleanly
  bool stalled = false;                // nothing moved for quiet_s
  int64_t last_progress_ns = 0;        // newest progress time written by any rank (rank 0 clock)
  int64_t verdict_ns = 0;              // when the watch ended
  int samples = 0;
  double hang_to_verdict_s() const { return double(verdict_ns - last_progress_ns) / 1e9; }
};

// Fails only when the run directory never became readable within quiet_s.
Result<WatchResult> watch_until_stalled(const std::filesystem::path& dir, const WatchOptions& options);

}  // namespace rankscope::analyzers::hang
