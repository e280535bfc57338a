// startup_report.h — how long each rank took to reach its first training step, and why.
//
// Is: the per-rank start-up timeline read from a run directory (step 0 of each rank's event stream
// holds the init/* ranges: init/launch from the process's start, init/comm, init/device,
// init/clock_align, init/model, init/checkpoint, init/data; see docs/FORMAT.md), the slowest
// phase per rank, findings ("rank 1 reached step 1 3.1 s after the others: init/data took 3.2 s"),
// and findings on behaviour-changing settings recorded in run.json's config block
// (config_findings.h). Is not: rendering (startup_json.h, the CLI's text).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analyzers/startup/config_findings.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers {

inline constexpr int kStartupSchemaVersion = 1;

struct StartupPhase {
  std::string name;      // "init/data"
  double ms = 0;         // summed over its instances
  int count = 0;
};

struct RankStartup {
  int rank = 0;
  bool readable = false;
  std::string problem;                    // why not readable
  std::vector<StartupPhase> phases;       // in the order they first appear
  std::optional<double> launch_at_s;      // process start, aligned to rank 0's clock (s since the earliest launch)
  std::optional<double> first_step_at_s;  // begin of the first training step, same clock
  std::optional<double> to_first_step_s;  // first step begin - process start (own clock)
  std::string slowest_phase;
  double slowest_phase_ms = 0;
};

struct StartupFinding {
  std::string kind;    // late_rank | setting
  int rank = -1;       // -1: the whole job
  std::string phase;   // late_rank: the phase that made the difference
  std::string setting; // setting: the variable
  double cost_ms = 0;  // late_rank: how much later than the others' median
  std::string text;
};

struct StartupReport {
  std::string run_dir;
  int world_size = 0;
  std::vector<RankStartup> ranks;
  std::optional<double> median_to_first_step_s;
  std::vector<StartupFinding> findings;  // late ranks by cost, then settings
  std::vector<std::string> problems;
};

Result<StartupReport> analyze_startup(const std::filesystem::path& run_dir);

}  // namespace rankscope::analyzers
