// skew_analyzer.h — `rankscope skew`: per-rank imbalance of a run, from its event streams.
//
// Is: the entry point that streams every rank's event stream once (format::scan_event_stream;
// StepRecords are never all in memory), joins collective arrivals across ranks by (comm, seq) on
// the aligned clock, and derives findings ranked by the time they cost per step. Collective
// *duration* measures waiting, not work (the fast rank shows the longest all-reduce), so every
// figure about collectives is built on arrival times. Where a rank's steps carry kernel records
// (capture window, nsys import), its compute / transfer / idle breakdown and the GPU time per range
// come from the device timeline instead of host time (src/device_timeline.h). Is not: rendering
// (skew_json.h, the HTML report in reports/html) or the scaling sweep (analyzers/scaling).
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/analyzers/skew/skew_report.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers {

struct SkewOptions {
  int64_t first_step = std::numeric_limits<int64_t>::min();  // inclusive window
  int64_t last_step = std::numeric_limits<int64_t>::max();
  int heatmap_max_ranks = 128;   // rank x step heatmap is binned (max per bin) beyond these
  int heatmap_max_steps = 200;
  double counter_imbalance_threshold = 1.25;  // max/mean over a group at or above which it is a finding
  double straggler_score_threshold = 0.9;     // relative score below which a rank is a straggler
  double min_finding_ms = 0.05;               // time findings costing less per step are dropped,
  double min_finding_fraction = 0.01;         // ...and those under this share of the median step
  size_t max_findings = 20;
  // Extra communication-kernel regexes (`--comm-kernel`), beside format::KernelClassifier's built-in
  // rules; a bad one is an error of analyze_skew.
  std::vector<std::string> comm_kernel_patterns;
};

// "A-B" or "A" (inclusive) into a step window; a clear error with a hint otherwise.
Result<std::pair<int64_t, int64_t>> parse_steps(std::string_view text);

Result<SkewReport> analyze_skew(const std::filesystem::path& run_dir, const SkewOptions& options = {});
Result<SkewReport> analyze_skew(const format::RunDirectory& run, const SkewOptions& options = {});

}  // namespace rankscope::analyzers
