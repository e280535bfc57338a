// partial_ranks.cpp — see partial_ranks.h.
#include "partial_ranks.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/stats.h"

namespace rankscope::analyzers {
namespace {

// A step's kernel count may differ a little between ranks of one job (a rank that logs, a
// sampler's extra copy); collectives are the job's own structure and may not.
constexpr double kKernelShortfall = 0.9;

bool says_partial(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return text.find("partial import") != std::string::npos;
}

// The first step of `mine` whose count (`field`) falls short of the peers' median at that step (of
// the rank's own fullest step where no peer has it: a step may legitimately differ from the others,
// a first step that builds buckets, while the same step differs across ranks only when evidence is
// missing); -1 when none does. `use(step)` says which steps count.
template <class Field, class Use>
int64_t first_short_step(const std::vector<StepEvidence>& mine, const std::vector<std::vector<StepEvidence>>& evidence,
                         size_t self, Field field, Use use, double tolerance) {
  std::map<int64_t, std::vector<double>> peers;  // step -> the other ranks' counts
  for (size_t r = 0; r < evidence.size(); ++r) {
    if (r == self) continue;
    for (const StepEvidence& p : evidence[r])
      if (use(p)) peers[p.step].push_back(double(field(p)));
  }
  double fullest = 0;
  for (const StepEvidence& e : mine)
    if (use(e)) fullest = std::max(fullest, double(field(e)));
  for (const StepEvidence& e : mine) {
    if (!use(e)) continue;
    const double here = double(field(e));
    auto it = peers.find(e.step);
    if (here < tolerance * (it != peers.end() ? median(it->second) : fullest)) return e.step;
  }
  return -1;
}

// The step of `mine` before `cut` (-1 when `cut` is its first), or its last step when `cut` is -1.
int64_t last_before(const std::vector<StepEvidence>& mine, int64_t cut, bool traced_only) {
  int64_t last = -1;
  for (const StepEvidence& e : mine) {
    if (traced_only && !e.traced) continue;
    if (cut >= 0 && e.step >= cut) break;
    last = e.step;
  }
  return last;
}

}  // namespace

StepEvidence& EvidenceCounter::at(int64_t step) {
  auto [it, fresh] = index_.try_emplace(step, steps_.size());
  if (fresh) steps_.push_back(StepEvidence{step});
  return steps_[it->second];
}

void EvidenceCounter::on_step(const format::StepRecord& step) {
  at(step.step).collectives += uint32_t(step.collectives.size());
}

void EvidenceCounter::on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) {
  StepEvidence& e = at(step);
  e.traced = true;
  e.kernels += uint32_t(kernels.size());
}

std::map<int, std::string> imported_in_part(const format::RunMetadata* meta) {
  std::map<int, std::string> out;
  if (!meta || !meta->extra.contains("source")) return out;
  const nlohmann::json& source = meta->extra["source"];
  if (!source.is_object() || !source.contains("ranks") || !source["ranks"].is_array()) return out;
  for (const nlohmann::json& r : source["ranks"]) {
    if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer()) continue;
    if (!r.contains("warnings") || !r["warnings"].is_array()) continue;
    for (const nlohmann::json& w : r["warnings"]) {
      if (w.is_string() && says_partial(w.get<std::string>())) {
        out.emplace(r["rank"].get<int>(), w.get<std::string>());
        break;
      }
    }
  }
  return out;
}

std::vector<PartialRank> locate_cuts(const std::map<int, std::string>& flagged,
                                     const std::vector<std::vector<StepEvidence>>& evidence) {
  std::vector<PartialRank> out;
  for (const auto& [rank, reason] : flagged) {
    if (rank < 0 || size_t(rank) >= evidence.size()) continue;
    std::vector<StepEvidence> mine = evidence[size_t(rank)];
    std::sort(mine.begin(), mine.end(), [](const StepEvidence& a, const StepEvidence& b) { return a.step < b.step; });
    PartialRank p;
    p.rank = rank;
    p.reason = reason;
    if (mine.empty()) {
      out.push_back(std::move(p));
      continue;
    }
    p.last_step = mine.back().step;
    const int64_t host_cut = first_short_step(
        mine, evidence, size_t(rank), [](const StepEvidence& e) { return e.collectives; },
        [](const StepEvidence&) { return true; }, 1.0);
    p.last_complete_step = last_before(mine, host_cut, false);
    const bool traced = std::any_of(mine.begin(), mine.end(), [](const StepEvidence& e) { return e.traced; });
    if (traced) {
      const int64_t device_cut = first_short_step(
          mine, evidence, size_t(rank), [](const StepEvidence& e) { return e.kernels; },
          [](const StepEvidence& e) { return e.traced; }, kKernelShortfall);
      p.last_complete_device_step = last_before(mine, device_cut, true);
      p.device_cut = device_cut >= 0;
    }
    out.push_back(std::move(p));
  }
  return out;
}

PartialPlan plan_partial_ranks(const format::RunDirectory& run, const format::RunMetadata* meta, const SkewOptions& options) {
  PartialPlan plan;
  plan.last_step = options.last_step;
  const std::map<int, std::string> flagged = imported_in_part(meta);
  if (flagged.empty()) return plan;
  std::vector<std::vector<StepEvidence>> evidence(size_t(run.world_size));
  for (const format::RankFiles& files : run.ranks) {
    if (files.rank < 0 || files.rank >= run.world_size || !files.has_events()) continue;
    EvidenceCounter counter;
    if (format::scan_rank_events(files, counter).ok()) evidence[size_t(files.rank)] = counter.take();
  }
  // The last step any rank reached, in the window: the cut only shortens the window when it is before.
  int64_t job_last = -1;
  for (const auto& steps : evidence) {
    for (const StepEvidence& e : steps)
      if (e.step >= options.first_step && e.step <= options.last_step) job_last = std::max(job_last, e.step);
  }
  plan.ranks = locate_cuts(flagged, evidence);
  for (PartialRank& p : plan.ranks) {
    std::vector<std::string> said;
    if (p.last_complete_step < 0 || p.last_complete_step < options.first_step) {
      plan.left_out.insert(p.rank);
      said.push_back("none of its steps is complete: it is left out of the report");
    } else if (p.last_complete_step < std::min(job_last, options.last_step)) {
      plan.last_step = std::min(plan.last_step, p.last_complete_step);
      said.push_back(fmt::format("its steps after {} are incomplete: every rank's figures use steps up to {}",
                                 p.last_complete_step, p.last_complete_step));
    }
    if (p.device_cut && !plan.left_out.count(p.rank)) {
      plan.device_last_step[p.rank] = p.last_complete_device_step;
      said.push_back(p.last_complete_device_step < 0
                         ? std::string("its kernel records are incomplete in every traced step: its GPU figures are "
                                       "left out (its breakdown is host time)")
                         : fmt::format("its kernel records are incomplete after step {}: its GPU figures use the "
                                       "traced steps up to it", p.last_complete_device_step));
    }
    for (size_t i = 0; i < said.size(); ++i) p.left_out += (i ? "; " : "") + said[i];
  }
  return plan;
}

// Ranks whose event stream ends before the others' (a crash, a file cut between steps) are partial
// too, when the import did not say so already: the steps after their end are the others' alone.
void add_ranks_ending_early(const std::vector<RankSteps>& rank_steps, SkewReport& report) {
  std::vector<int64_t> last(rank_steps.size(), -1);
  for (size_t r = 0; r < rank_steps.size(); ++r) {
    if (!rank_steps[r].steps.empty()) last[r] = *std::max_element(rank_steps[r].steps.begin(), rank_steps[r].steps.end());
  }
  for (size_t r = 0; r < rank_steps.size(); ++r) {
    if (last[r] < 0) continue;
    int64_t others = -1;
    for (size_t o = 0; o < rank_steps.size(); ++o)
      if (o != r) others = std::max(others, last[o]);
    if (last[r] >= others) continue;
    const bool known = std::any_of(report.partial_ranks.begin(), report.partial_ranks.end(),
                                   [&](const PartialRank& p) { return p.rank == int(r); });
    if (known) continue;
    PartialRank p;
    p.rank = int(r);
    p.reason = fmt::format("its event stream ends at step {}, the other ranks' at {}", last[r], others);
    p.last_step = p.last_complete_step = last[r];
    p.left_out = fmt::format("the steps after {} hold the other ranks only", last[r]);
    report.partial_ranks.push_back(std::move(p));
  }
}

void add_partial_caveats(SkewReport& report) {
  for (Finding& f : report.findings) {
    for (const PartialRank& p : report.partial_ranks) {
      const bool named = std::find(f.ranks.begin(), f.ranks.end(), p.rank) != f.ranks.end() ||
                         std::any_of(f.waiters.begin(), f.waiters.end(), [&](const Waiter& w) { return w.rank == p.rank; });
      if (!named) continue;
      f.caveats.push_back(fmt::format("rests on rank {}, which was read in part ({}){}{}", p.rank, p.reason,
                                      p.left_out.empty() ? "" : ": ", p.left_out));
    }
  }
}

}  // namespace rankscope::analyzers
