// step_noise.cpp — each rank's step-to-step variation against the other ranks (skew_parts.h).
//
// A shared machine, a long batch or a collective's jitter slows every rank of a step alike: held
// against each rank's own spread of steps, that would hide a real straggler (a rank sharing its
// core with busy work: every step of every rank varies by a third). So a rank's noise is the spread
// of its difference from the median rank at the same step, centred on its median difference (the
// straggler's excess is the finding, not the noise).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "rankscope/analyzers/skew/stats.h"
#include "skew_parts.h"

namespace rankscope::analyzers {

void measure_step_noise(const std::vector<RankSteps>& steps, SkewReport& report) {
  std::unordered_map<int64_t, std::vector<float>> at_step;
  for (const RankSteps& rs : steps)
    for (size_t i = 0; i < rs.steps.size() && i < rs.noncomm_ms.size(); ++i) at_step[rs.steps[i]].push_back(rs.noncomm_ms[i]);
  std::unordered_map<int64_t, double> median_rank;
  for (auto& [step, v] : at_step) {
    std::vector<double> d(v.begin(), v.end());
    median_rank[step] = percentile(std::move(d), 50);
  }
  for (size_t r = 0; r < steps.size() && r < report.ranks.size(); ++r) {
    const RankSteps& rs = steps[r];
    std::vector<double> diff;
    for (size_t i = 0; i < rs.steps.size() && i < rs.noncomm_ms.size(); ++i) diff.push_back(rs.noncomm_ms[i] - median_rank[rs.steps[i]]);
    if (diff.empty()) continue;
    const double centre = percentile(diff, 50);
    for (double& x : diff) x = std::fabs(x - centre);
    report.ranks[r].noncomm_paired_mad_ms = percentile(std::move(diff), 50);
  }
}

}  // namespace rankscope::analyzers
