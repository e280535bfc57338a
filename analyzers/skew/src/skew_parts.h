// skew_parts.h — the derivation steps of the skew report after the scan (internal).
//
// Each takes the report as filled so far and adds one part; they live in their own files.
#pragma once

#include <map>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_report.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers {

// counter_skew.cpp: report.counters from ranks[].counters and the groups of `meta` (may be null).
void compute_counter_skew(const format::RunMetadata* meta, const SkewOptions& options, SkewReport& report);

// heatmap.cpp: report.heatmap from per-rank step times (by rank: step numbers and ms).
struct RankSteps {
  std::vector<int64_t> steps;
  std::vector<float> ms;
  std::vector<float> noncomm_ms;  // without communication; empty where not known
};

// step_noise.cpp: ranks[].noncomm_paired_mad_ms, each rank's step-to-step variation against the
// median rank at the same step.
void measure_step_noise(const std::vector<RankSteps>& steps, SkewReport& report);
// collective_bandwidth.cpp: each site's algbw and busbw and report.groups, from the sites' bytes
// and transfer times.
void measure_collective_bandwidth(SkewReport& report);
void build_heatmap(const std::vector<RankSteps>& steps, const SkewOptions& options, SkewReport& report);
// The step whose slowest rank is the median of all steps' slowest ranks: a typical step.
int64_t typical_step(const std::vector<RankSteps>& steps);

// straggler_class.cpp: the class of a slow rank's slowdown (see there), with the sentence that
// explains it ("" for range_specific and outside_ranges, whose findings say it already).
struct SlowdownShape {
  std::string cls;                        // uniform_slowdown | range_specific | communication | outside_ranges
  double factor = 1, factor_p25 = 1, factor_p75 = 1;  // leaf-range time over its peers' medians: overall, and the
                                                      // time-weighted quartiles of the per-range ratios
  int ranges_compared = 0;  // its leaf ranges long enough at its peers to compare
  int ranges_total = 0;     // all its leaf ranges
  std::vector<std::string> slower_ranges;
  std::string text;
};
SlowdownShape classify_slowdown(const SkewReport& report, int rank, const std::vector<int>& peers, bool own_cause);

// skew_findings.cpp: report.findings (ranked) and report.what_if.
void derive_findings(const format::RunMetadata* meta, const SkewOptions& options, SkewReport& report);

}  // namespace rankscope::analyzers
