// skew_analyzer.cpp — see skew_analyzer.h. Scans ranks one by one; the cross-rank parts follow.
#include "rankscope/analyzers/skew/skew_analyzer.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "arrival_table.h"
#include "device_timeline.h"
#include "name_table.h"
#include "partial_ranks.h"
#include "rank_scan.h"
#include "rankscope/format/rank_list.h"
#include "rankscope/analyzers/skew/stats.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/saturating.h"
#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<std::pair<int64_t, int64_t>> parse_steps(std::string_view text) {
  const size_t dash = text.find('-', 1);
  int64_t a = 0, b = 0;
  const bool ok = dash == std::string_view::npos
                      ? (parse_int(text, a) && (b = a, true))
                      : (parse_int(text.substr(0, dash), a) && parse_int(text.substr(dash + 1), b));
  if (!ok || a < 0 || b < a) {
    return invalid_argument(fmt::format("bad step window '{}': expected A-B with 0 <= A <= B, or A (e.g. --steps 10-20)", text));
  }
  return std::make_pair(a, b);
}

Result<SkewReport> analyze_skew(const std::filesystem::path& run_dir, const SkewOptions& options) {
  format::OpenOptions open;
  open.read_flight_recorders = false;  // the skew report needs only run.json and the event streams
  RS_ASSIGN_OR_RETURN(format::RunDirectory run, format::open_run_directory(run_dir, open));
  return analyze_skew(run, options);
}

Result<SkewReport> analyze_skew(const format::RunDirectory& run, const SkewOptions& options) {
  SkewReport report;
  report.run_dir = run.dir.string();
  report.world_size = run.world_size;
  if (run.metadata) report.run_id = run.metadata->run_id;
  report.problems = run.problems;
  if (run.world_size <= 0) return invalid_argument(fmt::format("{}: world size unknown (no run.json and no rank files)", run.dir.string()));

  RS_ASSIGN_OR_RETURN(const format::KernelClassifier classifier, format::KernelClassifier::with_patterns(options.comm_kernel_patterns));
  NameTable names;
  ExpertSeries expert_series;
  ArrivalTable arrivals(run.world_size);
  std::vector<RankSteps> rank_steps(size_t(run.world_size));
  std::vector<double> collective_ms_mean(size_t(run.world_size), 0.0);
  report.ranks.resize(size_t(run.world_size));
  for (int r = 0; r < run.world_size; ++r) report.ranks[size_t(r)].rank = r;

  // Ranks the import read in part: where their evidence stops, from a pre-pass over every event
  // stream (only on such runs). Steps after the cut are left out, never read as idle.
  const format::RunMetadata* meta = run.metadata ? &*run.metadata : nullptr;
  const PartialPlan plan = plan_partial_ranks(run, meta, options);
  report.partial_ranks = plan.ranks;

  std::vector<int> no_events;
  for (const format::RankFiles& files : run.ranks) {
    if (files.rank < 0 || files.rank >= run.world_size) continue;
    if (!files.has_events()) {
      no_events.push_back(files.rank);  // one line for all of them, below
      continue;
    }
    if (plan.left_out.count(files.rank)) continue;
    RankScan scan(files.rank, names, arrivals, options.first_step, plan.last_step);
    if (auto d = plan.device_last_step.find(files.rank); d != plan.device_last_step.end()) scan.limit_device_steps(d->second);
    scan.collect_expert_load(&expert_series);
    scan.classify_kernels_with(&classifier);
    auto scanned = format::scan_rank_events(files, scan);
    if (!scanned.ok()) {
      report.problems.push_back(fmt::format("rank {}: {}", files.rank, scanned.status().user_text()));
      continue;
    }
    for (auto& w : scanned->warnings) report.problems.push_back(fmt::format("rank {}: {}", files.rank, w));
    RankScanResult result = scan.finish();
    for (auto& w : result.warnings) report.problems.push_back(std::move(w));
    collective_ms_mean[size_t(files.rank)] = result.collective_ms_mean;
    rank_steps[size_t(files.rank)] = RankSteps{std::move(result.step_numbers), std::move(result.step_ms), std::move(result.noncomm_ms)};
    report.ranks[size_t(files.rank)] = std::move(result.summary);
  }
  if (!no_events.empty())
    report.problems.push_back(fmt::format("{} of {} ranks have no event stream (rank{} {}); they are left out of the report",
                                          no_events.size(), run.world_size, no_events.size() == 1 ? "" : "s",
                                          format::compress_ranks(no_events)));

  // Step window actually seen, and the figures across ranks.
  std::vector<double> medians, noncomm;
  for (size_t r = 0; r < rank_steps.size(); ++r) {
    const auto& rs = rank_steps[r];
    if (rs.steps.empty()) continue;
    const auto [lo, hi] = std::minmax_element(rs.steps.begin(), rs.steps.end());
    report.first_step = report.first_step < 0 ? *lo : std::min(report.first_step, *lo);
    report.last_step = std::max(report.last_step, *hi);
    medians.push_back(report.ranks[r].step_ms_median);
    noncomm.push_back(report.ranks[r].noncomm_ms_median);
  }
  if (medians.empty()) {
    return not_found(fmt::format("{}: no step records{} in any rank's event stream; "
                                 "hint: was the run stopped before its first step ended?",
                                 run.dir.string(), options.first_step > 0 || options.last_step < INT64_MAX ? " in the step window" : ""));
  }
  // Step numbers come from the files: a span past INT64_MAX is held there (format/saturating.h).
  report.steps = format::add_saturating(format::sub_saturating(report.last_step, report.first_step), 1);
  report.step_ms_median = median(medians);
  const double fastest = *std::min_element(noncomm.begin(), noncomm.end());
  for (RankSkew& rs : report.ranks) {
    if (rs.steps == 0) continue;
    rs.relative_score = rs.noncomm_ms_median > 0 ? std::clamp(fastest / rs.noncomm_ms_median, 0.0, 1.0) : 1.0;
  }

  add_ranks_ending_early(rank_steps, report);
  arrivals.summarize(names, collective_ms_mean, typical_step(rank_steps), report);
  measure_collective_bandwidth(report);
  // Where kernel records exist, the breakdown is the device's (the host returns at launch).
  for (RankSkew& rs : report.ranks) apply_device_breakdown(rs);
  report.device = summarize_device(report.ranks);
  build_heatmap(rank_steps, options, report);
  measure_step_noise(rank_steps, report);
  compute_counter_skew(meta, options, report);
  compute_expert_load(meta, options, expert_series, report);
  derive_findings(meta, options, report);
  add_partial_caveats(report);
  return report;
}

}  // namespace rankscope::analyzers
