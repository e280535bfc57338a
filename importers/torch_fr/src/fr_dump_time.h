// fr_dump_time.h — when a job's dumps were written, as far as they tell, and whether anything in
// them was still pending. Private to the importer.
//
// A dump holds no time of its own, and a file's mtime is its copy's. What bounds the moment below:
//   - the newest timestamp in any dump (time_created_ns, time_discovered_*_ns);
//   - PyTorch's NCCL watchdog writes the dumps once a work item has been open past its timeout (its
//     loop: checkTimeout, then broadcastDumpSignal so every rank dumps, then a sleep before the
//     abort, so the timed-out entry is still open in the dump). An open entry of an NCCL-like backend
//     therefore puts the dump at least its time_created_ns + timeout_ms after it was enqueued. Which
//     rank timed out first is not known, so the smallest such bound over the ranks is taken.
//   - Gloo has no such watchdog: its dumps are taken on demand (_dump_fr_trace()), so only the
//     newest timestamp bounds them.
// Is not: a wall-clock reading; durations computed from it are lower bounds, never epoch-sized.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

struct DumpTime {
  int64_t now_ns = 0;       // lower bound on when the dumps were written
  int64_t earliest_ns = 0;  // oldest timestamp in them
  bool pending = false;     // some entry never completed
  double timeout_s = 0;     // the timeout the watchdog bound rests on (0: none)
  std::string basis;        // one sentence saying what now_ns rests on
};

// What one rank's entries say: its newest and oldest timestamps, whether any is open, and its
// oldest open entry with a timeout (NCCL-like backends). Made per rank (on the import's worker
// threads, where the entries were just read) and combined in rank order by bound_dump_time.
struct RankTimes {
  int64_t now_ns = 0;
  int64_t earliest_ns = INT64_MAX;
  bool pending = false;
  const FrEntry* oldest_open = nullptr;
};
RankTimes rank_times(const FrDump& d);

// `comm_names`: group name -> the communicator name the report uses. `per_rank`: each rank's
// rank_times when the caller made them from the dumps as they are now; else they are made here.
DumpTime bound_dump_time(const std::map<int, FrDump>& dumps, const std::map<std::string, std::string>& comm_names,
                         const std::map<int, RankTimes>* per_rank = nullptr);

}  // namespace rankscope::torch_fr
