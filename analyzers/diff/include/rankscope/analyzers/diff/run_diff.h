// run_diff.h — `rankscope diff BASE NEW`: why is this run slower (or faster) than that one.
//
// Is: two runs of any source (our probe, nsys and Kineto imports, gathered runs) read through the
// skew analyzer (one pass each), then compared: the step time (medians, with a noise band from each
// run's own spread), a waterfall of the mean step's change into parts that add up to it exactly
// (compute per top-level range, collective wait, collective transfer, memcpy, idle), each part with
// its cause where one is found (the range below it that changed most, block indices folded; a new
// straggler; more collective sites), and the settings that differ (run.json: model, training,
// layout, versions), with the factor a longer sequence predicts for attention and the MLP.
// Where both runs have kernel records (a capture window, an nsys or Kineto import), kernels are
// matched by family (template arguments and parameters folded) and, where families differ, by the
// range they ran in (src/kernel_match.h). Ranks are compared rank by rank, or by role where world
// sizes or groups differ (src/rank_roles.h); a straggler is "new" by that match. Is not: the HTML report.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/format/status.h"

namespace rankscope::analyzers {

inline constexpr int kDiffReportSchemaVersion = 2;  // 2: `kernels`; `ranks` added within 2 (docs/DIFF.md)

struct DiffPart {
  std::string name;        // "compute in forward", "collective wait", "idle"
  double base_ms = 0;      // mean per step, mean over ranks
  double new_ms = 0;
  double delta_ms = 0;     // new - base; the parts' deltas add up to DiffReport::mean_delta_ms
  std::string cause;       // "" where none is found
};

// One kernel family's change, per step and mean over ranks.
struct KernelDiff {
  std::string family;  // "flash_fwd_kernel", "at::native::vectorized_elementwise_kernel"
  double base_ms = 0, new_ms = 0;
  double base_calls = 0, new_calls = 0;
  std::string what;    // "slower per call", "faster per call", "more calls", "fewer calls", "new", "gone"
  std::string range;   // the range it ran in most (block indices folded; "" outside every range)
};

// Families gone from a range and others come into it: one kind of kernel replaced by another.
struct KernelSwap {
  std::string range;
  std::vector<std::string> gone, added;  // largest first
  double base_ms = 0, new_ms = 0;        // per step, of those families there
};

// The ranks of one role in both runs (src/rank_roles.h: "rank 5" where the runs match rank by rank,
// "tp rank 1" where world sizes or groups differ, "every rank" where no role is left).
struct RoleDiff {
  std::string role;
  std::vector<int> base_ranks, new_ranks;
  double base_ms = 0, new_ms = 0, delta_ms = 0;  // mean step, mean over the role's ranks; 0 where it has none
};

struct SettingChange {
  std::string key;         // "training.seq_len", "tp", "versions.nccl"
  std::string base, now;   // JSON text of each side ("" absent)
};

struct DiffReport {
  std::string base_dir, new_dir;
  int base_ranks = 0, new_ranks = 0;
  int64_t base_steps = 0, new_steps = 0;              // compared: after the warm-up steps
  int64_t base_warmup_steps = 0, new_warmup_steps = 0;  // left out at the start of each run
  double base_step_ms = 0, new_step_ms = 0;          // median over ranks of each rank's median
  double base_spread_ms = 0, new_spread_ms = 0;      // median over ranks of 1.4826 x MAD of the step times
  double noise_ms = 0;                               // what the runs' own spread allows
  bool significant = false;
  double base_mean_ms = 0, new_mean_ms = 0, mean_delta_ms = 0;  // the mean step the waterfall splits
  std::vector<DiffPart> parts;                       // largest |delta| first
  bool kernels_compared = false;                     // both runs have kernel records
  std::vector<KernelDiff> kernels;                   // largest |change| first, top 10
  std::vector<KernelSwap> kernel_swaps;              // largest |change| first
  bool ranks_by_rank = true;                          // else by role
  std::string rank_match;                            // how ranks were matched, one sentence
  std::vector<RoleDiff> roles;                       // largest |delta| first
  std::vector<SettingChange> settings;
  std::vector<std::string> explanations;             // settings that explain parts, with factors
  // What is left unexplained: the change in parts for which no cause was found (their sum, and
  // their names, largest first). The parts with causes explain mean_delta_ms - unexplained_ms.
  double unexplained_ms = 0;
  std::vector<std::string> unexplained_parts;
  std::string headline;
  std::vector<std::string> problems;
};

struct DiffOptions {
  double min_noise_fraction = 0.02;  // below 2% of the base step the difference is noise anyway
  // Steps left out at the start of each run that has more than warmup_steps + 2 (start-up:
  // allocation, caches, lazy initialisation make a first step many times the others).
  int64_t warmup_steps = 1;
};

Result<DiffReport> diff_runs(const std::filesystem::path& base, const std::filesystem::path& now,
                             const DiffOptions& options = {});

nlohmann::json diff_report_json(const DiffReport& r);
std::string diff_report_text(const DiffReport& r);

}  // namespace rankscope::analyzers
