// metrics_log.cpp — metrics.jsonl lines and the progress line.
#include "metrics_log.h"

#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpt2 {

std::string human_rate(double v) {
  if (v >= 1e6) return fmt::format("{:.1f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string progress_line(const StepMetrics& m) {
  std::string line = fmt::format("step {}/{} | loss {:.2f} | {} tok/s | {:.0f} ms", m.step, m.total_steps,
                                 m.loss, human_rate(m.tokens_per_s), m.step_ms);
  if (m.val_loss) line += fmt::format(" | val {:.4f}", *m.val_loss);
  return line;
}

rankscope::Result<std::unique_ptr<MetricsLog>> MetricsLog::open(const std::filesystem::path& run_dir) {
  const auto path = run_dir / "metrics.jsonl";
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr)
    return rankscope::io_error(fmt::format("{}: cannot open for appending (is the run directory writable?)",
                                           path.string()));
  return std::unique_ptr<MetricsLog>(new MetricsLog(f));
}

MetricsLog::~MetricsLog() { std::fclose(file_); }

void MetricsLog::append(const StepMetrics& m) {
  nlohmann::json j = {{"step", m.step},       {"loss", m.loss},
                      {"lr", m.lr},           {"grad_norm", m.grad_norm},
                      {"tokens_per_s", m.tokens_per_s}, {"step_ms", m.step_ms}};
  if (m.val_loss) j["val_loss"] = *m.val_loss;
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace gpt2
