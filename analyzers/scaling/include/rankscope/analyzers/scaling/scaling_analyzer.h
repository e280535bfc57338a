// scaling_analyzer.h — `rankscope scaling`: how step time and each range grow with seq len T.
//
// Is: for each point of a sweep (sweep.h), the skew analyzer's per-rank figures reduced to one
// number per range: the median over ranks of each rank's fastest step. A sweep measures what a
// range costs at each T; its steps are few, and on a shared machine noise only ever adds time, so
// the fastest step estimates the cost and the median would estimate the noise. Then per range, and per range
// aggregated over blocks ("forward/block*/attn" = the sum over blocks), and on a GPU the kernel time
// under each range ("forward/block*/attn [gpu kernels]", from CUPTI), the fit c + aT + bT^2 with
// R^2, log-log slopes between adjacent points and the crossover a/b; the attention kind (naive or
// flash, from run.json) the sweep ran with; the FLOP model's attention
// share; how peak memory grows (memory_growth.h); findings for superlinear ranges, throughput cliffs
// and memory cliffs; forecasts at larger T (forecast.h). Is not: the sweep driver (the
// trainer's --sweep-seq-len) or rendering.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/analyzers/scaling/forecast.h"
#include "rankscope/analyzers/scaling/quadratic_fit.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers {

inline constexpr int kScalingReportSchemaVersion = 1;
// Counter the trainer may record each step: the process's peak resident memory in bytes.
inline constexpr std::string_view kPeakMemoryCounter = "mem.peak_bytes";

// Attention kind of a run (run.json model.attention: "naive" | "flash"); runs written before the
// field existed say nothing, and the report says "unknown".
inline constexpr std::string_view kUnknownAttention = "unknown";

struct ScalingPoint {
  int64_t seq_len = 0;
  std::string run_dir;
  std::string attention{kUnknownAttention};    // run.json model.attention
  double step_ms = 0;                          // fastest step (median over ranks)
  double tokens_per_s = 0;                     // at step_ms; 0 when run.json lacks training.batch
  std::optional<double> peak_mem_bytes;        // max over ranks of mem.peak_bytes
  // memory_growth.h's exponent through this point and the two below it (nullopt for the first two
  // points, or where memory did not grow): 1 = linear in T, 2 = quadratic (naive attention's cliff).
  std::optional<double> memory_exponent;
  std::optional<double> attention_share_flops; // forward/block*/attn share by the FLOP model
  std::optional<double> attention_share_measured;  // (forward+backward)/block*/attn over step time
};

struct ScalingRange {
  std::string name;
  bool aggregated = false;                     // a block* aggregate
  std::vector<std::optional<double>> times_ms; // per point; nullopt where the range is absent
  QuadraticFit fit;
  std::vector<std::optional<double>> slopes;   // between adjacent points
};

struct ScalingFinding {
  std::string kind;  // "superlinear_range", "throughput_cliff", "memory_cliff" (range empty)
  std::string range;
  double slope = 0;
  double share_at_max = 0;     // of the step, at the largest T
  double cost_ms_per_step = 0; // time per step beyond linear growth from the point below
  std::string text;
};

struct ScalingReport {
  std::string sweep_dir;
  // The sweep's attention kind: the points' common one, "unknown" when no point names it, or
  // "mixed (naive, flash)" when they differ (then a problem says so too).
  std::string attention{kUnknownAttention};
  std::vector<ScalingPoint> points;
  // The top point's memory_exponent: how the sweep's peak memory grows at its largest T.
  std::optional<double> memory_exponent;
  std::vector<ScalingRange> ranges;
  std::vector<ScalingFinding> findings;
  std::vector<ScalingForecast> forecasts;      // one per ScalingOptions::forecast_seq_lens
  std::vector<std::string> problems;
};

struct ScalingOptions {
  double superlinear_slope = 1.3;   // slope at the top of the sweep above which a range is flagged
  double min_share = 0.05;          // ...if it is at least this share of the step there
  double cliff_drop = 0.25;         // throughput falling this much between adjacent points
  double memory_cliff_exponent = 1.5;  // memory growing faster than T^this at the top is a cliff...
  double memory_min_growth = 0.1;      // ...if the top step added at least this share of its peak
  std::vector<int64_t> forecast_seq_lens;  // forecast.h: step, tokens/s and peak memory at these T
};

Result<ScalingReport> analyze_scaling(const std::filesystem::path& sweep_dir, const ScalingOptions& options = {});

}  // namespace rankscope::analyzers
