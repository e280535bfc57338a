// run_parts.h — one run's step split into the waterfall's parts (compute per top-level range,
// collective wait and transfer, memcpy, idle), mean per step over its present ranks, with what the
// causes need: compute per folded range (and per rank), collective sites and bytes, the device's
// host-bound idle. Is: a reading of the skew report. Is not: the comparison (run_diff.cpp) or the
// causes (part_causes.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rankscope/analyzers/skew/skew_report.h"

namespace rankscope::analyzers::diff_detail {

// One run's parts, mean per step over its present ranks, and its compute per folded range.
struct RunParts {
  std::map<std::string, double> parts;       // part name -> ms per step
  std::map<std::string, double> range_compute;  // block-wildcarded range -> ms per step (mean over ranks)
  std::map<std::string, std::map<int, double>> range_by_rank;  // the same per rank
  double mean_step = 0, median_step = 0, spread = 0;
  int ranks = 0;
  int64_t steps = 0;
  size_t collective_sites = 0;
  double bytes_per_step = 0;                  // collective bytes a rank moves a step (0 unknown)
  int device_ranks = 0;                       // ranks whose breakdown is the device's (kernel records)
  double host_bound = 0;                      // of their GPU idle, the host-bound part (mean, ms a step)
  std::map<std::string, size_t> sites_by_op;  // "allreduce_sum on tp" -> sites
};

RunParts parts_of(const SkewReport& r);

// "12.3 ms", "480 ms": a step's milliseconds as the report prints them.
std::string format_ms(double v);

}  // namespace rankscope::analyzers::diff_detail
