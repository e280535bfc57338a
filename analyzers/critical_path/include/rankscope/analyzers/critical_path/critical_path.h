// critical_path.h — what set each step's length, across the ranks of a run.
//
// HTA's critical path follows one rank's CPU ops, launches and kernels. A distributed step is longer
// than any one rank: rank 0's optimizer cannot start before its all-reduce ends, which cannot end
// before the last rank arrived, whose backward waited on its own data loading. This analysis walks
// each step backwards from its end through those ties — host ranges, GPU kernels on a stream, a
// kernel's launch, and every collective to the member that started it last — and says which
// ranks, ranges, kernels and collectives the step's time went through.
//
// Is: the walk over a run directory's event streams (probe runs, nsys and Kineto imports alike),
// its result, JSON and text. Uses what the run has: collectives always (so CPU runs without a
// capture window still get the cross-rank chain, host time unnamed); range instances, kernels and
// launches of the capture window where present. Is not: the per-rank time classes (skew) or the
// kernel analyses (analyzers/device_timeline). docs/CRITICAL_PATH.md has the rules and their limits.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rankscope/format/run_directory.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers {

struct CriticalPathOptions {
  int64_t first_step = std::numeric_limits<int64_t>::min();  // inclusive window
  int64_t last_step = std::numeric_limits<int64_t>::max();
  std::vector<std::string> comm_kernel_patterns;  // `--comm-kernel`, as skew's
  // Two events closer than this are taken as one causing the other (a kernel ending as the host
  // returns from a sync; a stream's next kernel starting as its previous one ends).
  int64_t touch_ns = 20'000;
  size_t max_segments_per_step = 400;  // the JSON's per-step segment list is cut beyond this
};

// One stretch of the path: on `rank`, from begin to end (ns on rank 0's clock).
struct PathSegment {
  enum class Kind : uint8_t {
    kHost,        // host work, named by the innermost range open then ("(no range)" outside all)
    kKernel,      // a compute or memory kernel on the GPU
    kCollective,  // a collective from its last member's start to its end (the transfer itself)
    kLaunchDelay  // a GPU op queued after its launch returned, its stream idle
  };
  int rank = 0;
  Kind kind = Kind::kHost;
  int64_t begin_ns = 0, end_ns = 0;
  std::string name;   // range path, kernel name, or "allreduce dp0 #12"
  std::string range;  // the range a kernel was launched under or a collective called in ("" none)
};
std::string_view segment_kind_name(PathSegment::Kind k);  // "host" | "kernel" | "collective" | "launch_delay"

struct StepPath {
  int64_t step = 0;
  int64_t step_ns = 0;     // the longest rank's step (what the path explains)
  int64_t covered_ns = 0;  // the path's length (< step_ns where the walk met a rank's step start early)
  int end_rank = 0;        // the rank whose step ended last: where the walk began
  int hops = 0;            // rank changes along the path
  std::vector<PathSegment> segments;  // in time order
  bool segments_cut = false;
};

// A share of the path: time on it per step (mean over steps), and the share of the covered time.
struct PathShare {
  std::string what;  // "rank 3", "rank 3 data", "kernel nvjet...", "collective allreduce dp0"
  int rank = -1;     // -1 when the entry spans ranks
  double ms_per_step = 0, share = 0;
};

struct CriticalPathReport {
  std::string run_dir;
  int world_size = 0;
  std::vector<StepPath> steps;
  double step_ms = 0, covered_ms = 0;  // means over the analysed steps
  std::vector<PathShare> by_rank;      // largest first
  std::vector<PathShare> by_kind;      // host, kernel, collective, launch_delay
  std::vector<PathShare> by_range;     // (rank, range) pairs, largest first, top 20
  std::vector<PathShare> by_item;      // kernels and collectives, largest first, top 20
  std::string summary;                 // one sentence
  std::vector<std::string> problems;
};

Result<CriticalPathReport> analyze_critical_path(const std::filesystem::path& run_dir, const CriticalPathOptions& options = {});
Result<CriticalPathReport> analyze_critical_path(const format::RunDirectory& run, const CriticalPathOptions& options = {});

inline constexpr int kCriticalPathSchemaVersion = 1;
nlohmann::json critical_path_json(const CriticalPathReport& report);
void write_critical_path_text(const CriticalPathReport& report, std::ostream& out);

}  // namespace rankscope::analyzers
