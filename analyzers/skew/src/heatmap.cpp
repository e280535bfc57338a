// heatmap.cpp — the rank x step heatmap of step times, binned to a size a browser draws at once.
//
// Bins hold the slowest step in them (a straggler must not vanish into an average); a bin with no
// step is NaN (null in JSON). Also picks the "typical" step shown in the arrival-skew chart.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/stats.h"
#include "rankscope/format/saturating.h"
#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

std::string bin_label(int64_t lo, int64_t hi) { return lo == hi ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi); }

}  // namespace

void build_heatmap(const std::vector<RankSteps>& steps, const SkewOptions& options, SkewReport& report) {
  Heatmap& h = report.heatmap;
  if (report.first_step < 0 || steps.empty()) return;
  const int64_t n_ranks = int64_t(steps.size());
  // Step numbers come from files: a span up to INT64_MAX is held there, and the bins' products are
  // taken in 128 bits (format/saturating.h).
  const int64_t n_steps =
      format::add_saturating(format::sub_saturating(report.last_step, report.first_step), 1);
  const int64_t rank_bins = std::min<int64_t>(n_ranks, std::max(1, options.heatmap_max_ranks));
  const int64_t step_bins = std::min<int64_t>(n_steps, std::max(1, options.heatmap_max_steps));
  // Bin b covers [b*n/bins, (b+1)*n/bins): sizes differ by at most one.
  auto rank_bin = [&](int64_t r) { return r * rank_bins / n_ranks; };
  auto step_bin = [&](int64_t s) {
    const int64_t b = format::mul_div_saturating(format::sub_saturating(s, report.first_step), step_bins, n_steps);
    return std::clamp<int64_t>(b, 0, step_bins - 1);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  h.values_ms.assign(size_t(rank_bins), std::vector<double>(size_t(step_bins), nan));
  for (int64_t b = 0; b < rank_bins; ++b) {
    const int64_t lo = (b * n_ranks + rank_bins - 1) / rank_bins;
    const int64_t hi = ((b + 1) * n_ranks + rank_bins - 1) / rank_bins - 1;
    h.rank_labels.push_back(bin_label(lo, hi));
  }
  for (int64_t b = 0; b < step_bins; ++b) {
    // ceil(b * n / bins) and ceil((b + 1) * n / bins) - 1, the products in 128 bits.
    const int64_t lo = format::mul_div_up_saturating(b, n_steps, step_bins);
    const int64_t hi = format::mul_div_up_saturating(b + 1, n_steps, step_bins) - 1;
    // The last bin ends at the last step (a span held at INT64_MAX would end it one short).
    const int64_t last = b + 1 == step_bins ? report.last_step : format::add_saturating(report.first_step, hi);
    h.step_labels.push_back(bin_label(format::add_saturating(report.first_step, lo), last));
  }
  for (int64_t r = 0; r < n_ranks; ++r) {
    auto& row = h.values_ms[size_t(rank_bin(r))];
    const auto& rs = steps[size_t(r)];
    for (size_t i = 0; i < rs.steps.size(); ++i) {
      double& cell = row[size_t(step_bin(rs.steps[i]))];
      cell = std::isnan(cell) ? double(rs.ms[i]) : std::max(cell, double(rs.ms[i]));
    }
  }
}

int64_t typical_step(const std::vector<RankSteps>& steps) {
  std::map<int64_t, float> slowest;  // step -> slowest rank's time
  for (const auto& rs : steps) {
    for (size_t i = 0; i < rs.steps.size(); ++i) {
      auto [it, fresh] = slowest.try_emplace(rs.steps[i], rs.ms[i]);
      if (!fresh) it->second = std::max(it->second, rs.ms[i]);
    }
  }
  if (slowest.empty()) return -1;
  std::vector<double> values;
  for (const auto& [s, ms] : slowest) values.push_back(ms);
  const double target = percentile(values, 50);
  int64_t best = slowest.begin()->first;
  double best_gap = std::numeric_limits<double>::infinity();
  for (const auto& [s, ms] : slowest) {
    if (std::abs(ms - target) < best_gap) {
      best_gap = std::abs(ms - target);
      best = s;
    }
  }
  return best;
}

}  // namespace rankscope::analyzers
