// partial_ranks.h — which ranks' evidence ends early, and where (internal to the skew analyzer).
//
// Why: a trace cut short (a truncated `.json.gz`) still yields every step on the host,
// with its kernels or collectives missing; read as they are, the rank looks idle and the findings
// change. A rank is *partial* when the import says it read the rank's file in part (run.json
// `source.ranks[].warnings`, "partial import: ...") or when its event stream ends before the other
// ranks'. Where its evidence stops is decided from the data: its steps in order, the first one whose
// collective count, or (for a traced step) kernel count, falls short of its peers' median at that
// step (its own fullest step where no peer has that step) is the cut; the steps before it are
// complete.
//
// Is: a pre-pass visitor counting each rank's evidence per step, the cut rule (pure), the plan the
// scan follows, and the caveats laid on findings that rest on a partial rank. Is not: the analysis itself, which reads
// only the complete steps (skew_analyzer.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <set>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_report.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory.h"
#include "rankscope/format/run_metadata.h"
#include "skew_parts.h"

namespace rankscope::analyzers {

// How much evidence one step of one rank holds.
struct StepEvidence {
  int64_t step = 0;
  uint32_t collectives = 0;
  uint32_t kernels = 0;
  bool traced = false;  // a TRACE_KERNELS record named this step
};

// Counts a rank's evidence per step, in stream order.
class EvidenceCounter : public format::EventStreamVisitor {
 public:
  void on_step(const format::StepRecord& step) override;
  void on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) override;
  std::vector<StepEvidence> take() { return std::move(steps_); }

 private:
  StepEvidence& at(int64_t step);
  std::vector<StepEvidence> steps_;
  std::map<int64_t, size_t> index_;
};

// The ranks the import read in part, with the importer's words: run.json source.ranks[] whose
// warnings say "partial import". Empty for runs the probe wrote.
std::map<int, std::string> imported_in_part(const format::RunMetadata* meta);

// Where each rank of `flagged` stops being complete, from every rank's evidence (by rank; empty
// for a rank with no event stream). One PartialRank per flagged rank, `left_out` empty.
std::vector<PartialRank> locate_cuts(const std::map<int, std::string>& flagged,
                                     const std::vector<std::vector<StepEvidence>>& evidence);

// What the partial ranks change in the scan: a shorter step window for every rank (the cross-rank
// figures need every rank's evidence), ranks with no complete step left out, and per rank the last
// step whose kernel records are complete.
struct PartialPlan {
  std::vector<PartialRank> ranks;
  int64_t last_step = INT64_MAX;
  std::set<int> left_out;
  std::map<int, int64_t> device_last_step;
};

// The plan for `run`: a pre-pass over every rank's event stream (EvidenceCounter), only when the
// import read some rank in part; otherwise the options' window and nothing else.
PartialPlan plan_partial_ranks(const format::RunDirectory& run, const format::RunMetadata* meta, const SkewOptions& options);

// Ranks whose event stream ends before the others' (a crash, a file cut between steps) are partial
// too, when the import did not say so already: added to report.partial_ranks.
void add_ranks_ending_early(const std::vector<RankSteps>& rank_steps, SkewReport& report);

// Lays a caveat on every finding that names a partial rank among its ranks or waiters.
void add_partial_caveats(SkewReport& report);

}  // namespace rankscope::analyzers
