// skew_run_report.h — what `rankscope skew` reports of a run: the skew analysis, and beside it where
// an imported run's ranks came from, the settings in run.json known to slow a job, and, where the run
// has kernel records, HTA's analyses and the critical path of the last traced steps.
//
// Is: one result holding the analyses the report joins, its JSON and its text. Is not: any of those
// analyses (skew_analyzer.h, analyzers/startup's config_findings.h, analyzers/device_timeline,
// analyzers/critical_path), nor the HTML page (reports/html draws the JSON).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/analyzers/device_timeline/kernels_report.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/startup/config_findings.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers {

struct SkewRunReport {
  SkewReport skew;
  nlohmann::json provenance;            // run.json's "source" for an imported run; null for our own
  std::vector<ConfigFinding> settings;  // known to slow a job, or differing across ranks
  std::optional<KernelsReport> kernels;
  std::optional<CriticalPathReport> critical_path;
  int64_t critical_first_step = 0, critical_last_step = 0;  // the traced steps the path covers
  std::vector<std::string> problems;                        // "kernels: why" of an analysis that could not run
};

Result<SkewRunReport> analyze_skew_run(const std::filesystem::path& run_dir, const SkewOptions& options = {});

// The skew report's JSON with `provenance`, `settings_findings`, `kernels` and `critical_path` (the
// latter without its per-step segments: `rankscope critical-path --json` has them).
nlohmann::json skew_run_json(const SkewRunReport& r);

// The provenance line, the skew text, the settings, and a short summary of the GPU analyses.
std::string skew_run_text(const SkewRunReport& r);

}  // namespace rankscope::analyzers
