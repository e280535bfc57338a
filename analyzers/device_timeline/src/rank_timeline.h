// rank_timeline.h — one rank's capture window as the kernel analyses need it (internal).
//
// Is: every traced GPU op (TRACE_KERNELS) with its kind from the classifier and, where a
// TRACE_LAUNCHES record names it, its launch call; ops sorted by begin. Read in one streaming pass
// of the rank's event stream that keeps nothing else (ranges, collectives and counters are skipped).
// Is not: analysis (analyses.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/analyzers/device_timeline/kernels_report.h"
#include "rankscope/format/kernel_class.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::device_timeline {

inline constexpr int64_t kNoLaunch = INT64_MIN;

struct Op {
  int64_t begin = 0, end = 0;  // device times, this rank's clock (end >= begin)
  int64_t step = 0;            // the record's step
  uint32_t name = 0;           // index into RankTimeline::names
  uint32_t device = 0, stream = 0;
  int32_t launch = -1;  // index into RankTimeline::launches, -1 when not seen
  format::KernelClass kind = format::KernelClass::kCompute;
};

struct Launch {
  int64_t begin = 0, end = 0;  // the host call
  int64_t gpu_begin = 0, gpu_end = 0;
  int64_t step = 0;
  uint32_t api = 0;     // index into names, 0 = unknown ("")
  uint32_t kernel = 0;  // index into names
  uint32_t device = 0, stream = 0;
};

struct RankTimeline {
  int rank = 0;
  std::vector<std::string> names;     // kernel and API names of this rank; names[0] = ""
  std::vector<std::string> rules;     // the classifier's rule per name (kernels only)
  std::vector<Op> ops;                // sorted by (begin, end)
  std::vector<Launch> launches;       // in file order
  std::vector<int64_t> traced_steps;  // distinct steps with ops, ascending
  double step_ms = 0;                 // mean wall time of the traced steps' STEP records
  int64_t first_ns = 0;               // earliest op begin or launch begin (0 when empty)
  bool adjacent(int64_t a, int64_t b) const { return b - a <= 1 && a - b <= 1; }
};

// Reads `files`' event stream. Not found / unreadable: the status says why.
Result<RankTimeline> read_rank_timeline(const format::RankFiles& files, const format::KernelClassifier& classifier);

}  // namespace rankscope::analyzers::device_timeline
