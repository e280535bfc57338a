// metrics_log.h — what rank 0 tells the user about each optimizer step.
//
// Is: metrics.jsonl in the run directory (one JSON object per line and step: step, loss, lr,
// grad_norm, tokens_per_s, step_ms, and val_loss on validation steps; flushed per line, so a
// crashed run keeps its curve) and the console progress line
//   step 12/200 | loss 5.21 | 3.2k tok/s | 41 ms
// Is not: the probe's event stream (per-rank performance data for the analyzers).
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "rankscope/format/status.h"

namespace gpt2 {

struct StepMetrics {
  int step = 0;
  int total_steps = 0;
  float loss = 0;
  float lr = 0;
  float grad_norm = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  std::optional<float> val_loss;
};

// "step 12/200 | loss 5.21 | 3.2k tok/s | 41 ms" (plus " | val 5.30" on validation steps).
std::string progress_line(const StepMetrics& m);
// 3200 -> "3.2k", 1.5e6 -> "1.5M", 950 -> "950".
std::string human_rate(double per_second);

class MetricsLog {
 public:
  // Opens RUN_DIR/metrics.jsonl for appending (a resumed run continues the file).
  static rankscope::Result<std::unique_ptr<MetricsLog>> open(const std::filesystem::path& run_dir);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void append(const StepMetrics& m);

 private:
  explicit MetricsLog(std::FILE* f) : file_(f) {}
  std::FILE* file_;
};

}  // namespace gpt2
