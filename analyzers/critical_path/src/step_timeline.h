// step_timeline.h — one step of every rank, as the critical-path walk reads it (internal).
//
// Is: plain data on rank 0's clock (each rank's clock offset applied), loaded from a run
// directory's event streams by load_step_timelines(), or built by hand in tests. Is not: the walk
// (path_walk.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/format/kernel_class.h"

namespace rankscope::analyzers::critical_path_detail {

struct TimelineCollective {
  std::string comm;  // communicator name: (comm, seq) matches across ranks
  uint64_t seq = 0;
  std::string op;    // "allreduce", ...
  std::string range; // the range it was called in
  int64_t enqueue_ns = 0, start_ns = 0, end_ns = 0;  // end 0: never completed in the step
  bool on_device = false;  // a communication kernel carried it (set when one starts at start_ns)
};

struct TimelineRange {
  std::string name;  // full path ("backward/block3/attn")
  int64_t begin_ns = 0, end_ns = 0;
  uint32_t depth = 0;
};

struct TimelineKernel {
  std::string name;
  std::string range;  // range open on the launching thread at launch ("" none)
  uint32_t stream = 0;
  int64_t begin_ns = 0, end_ns = 0;
  format::KernelClass kind = format::KernelClass::kCompute;
  int64_t launch_end_ns = 0;  // the launch call's return on the host; 0 unknown
  int collective = -1;        // index into RankStep::collectives for a communication kernel
};

struct RankStep {
  int rank = 0;
  bool present = false;
  int64_t begin_ns = 0, end_ns = 0;
  std::vector<TimelineCollective> collectives;  // by enqueue
  std::vector<TimelineRange> ranges;            // the main thread's, by begin
  std::vector<TimelineKernel> kernels;          // by begin
};

// Every rank of one step, with the cross-rank index of collectives.
struct StepTimelines {
  int64_t step = 0;
  std::vector<RankStep> ranks;  // by rank
  // (comm, seq) -> (rank, index into that rank's collectives)
  std::map<std::pair<std::string, uint64_t>, std::vector<std::pair<int, int>>> members;

  // Sorts each rank's lists, joins communication kernels to their collectives, builds `members`.
  void finalize(int64_t touch_ns);
};

// Reads every rank's event stream once and cuts it into steps within the window. Steps that no
// rank traced still get their collectives. Problems (unreadable ranks) go to `problems`.
Result<std::vector<StepTimelines>> load_step_timelines(const format::RunDirectory& run, const CriticalPathOptions& options,
                                                       const format::KernelClassifier& classifier,
                                                       std::vector<std::string>& problems);

}  // namespace rankscope::analyzers::critical_path_detail
