// expert_load.h — MoE expert load across ranks and steps (internal to the skew analyzer).
//
// Is: the per-step, per-expert token counts summed over ranks (collected while each rank's event
// stream is scanned, from the counters moe.expert{e}.routed), and the step that turns them and the
// per-rank figures (moe.tokens_received, the .../moe/experts ranges) into report.expert_load and an
// `expert_load` finding. Is not: the scan (rank_scan.cpp) or the ranking of findings.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_report.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers {

// Tokens routed to each global expert per step, summed over the ranks scanned so far.
struct ExpertSeries {
  std::map<int64_t, std::vector<double>> by_step;
  int experts = 0;  // highest expert index seen + 1
  void add(int64_t step, int expert, double tokens);
};

// "moe.expert12.routed" -> 12; nullopt for any other name.
std::optional<int> routed_counter_expert(std::string_view counter);

// report.expert_load and, when one ep group's ranks receive unequal tokens, an expert_load finding.
void compute_expert_load(const format::RunMetadata* meta, const SkewOptions& options, const ExpertSeries& series,
                         SkewReport& report);

}  // namespace rankscope::analyzers
