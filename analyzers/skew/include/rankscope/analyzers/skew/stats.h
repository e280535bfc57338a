// stats.h — order statistics over small vectors of doubles, shared by the skew and scaling reports.
//
// Is: median and percentile (linear interpolation between closest ranks, as numpy's default) that
// reorder their argument in place instead of copying it. Is not: streaming or approximate
// quantiles; callers keep one vector per rank at a time, never one per rank for the whole run.
#pragma once

#include <span>
#include <vector>

namespace rankscope::analyzers {

// p in [0, 100]. Returns 0 for an empty input. Reorders `values`.
double percentile_inplace(std::span<double> values, double p);
inline double median_inplace(std::span<double> values) { return percentile_inplace(values, 50.0); }

// Copying variants for callers that must keep their data in order.
double percentile(std::vector<double> values, double p);
inline double median(std::vector<double> values) { return percentile(std::move(values), 50.0); }

double mean(std::span<const double> values);

}  // namespace rankscope::analyzers
