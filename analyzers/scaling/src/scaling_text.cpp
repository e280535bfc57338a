// scaling_text.cpp — see scaling_text.h. The columns are printf's, appended to a string.
#include "rankscope/analyzers/scaling/scaling_text.h"

#include <cstdint>
#include <cstdio>
#include <optional>

#include "rankscope/format/appendf.h"

namespace rankscope::analyzers {

std::string scaling_report_text(const ScalingReport& r) {
  using format::appendf;
  std::string out;
  char memory[48] = "";
  if (r.memory_exponent) std::snprintf(memory, sizeof memory, ", memory grows as T^%.1f", *r.memory_exponent);
  appendf(out, "rankscope scaling: %s (%zu points, attention %s%s)\n", r.sweep_dir.c_str(), r.points.size(),
          r.attention.c_str(), memory);
  appendf(out, "%8s %10s %12s %12s\n", "T", "step ms", "tokens/s", "peak MiB");
  for (const auto& p : r.points) {
    appendf(out, "%8lld %10.2f %12.0f %12s\n", (long long)p.seq_len, p.step_ms, p.tokens_per_s,
            p.peak_mem_bytes ? std::to_string(int64_t(*p.peak_mem_bytes / 1048576)).c_str() : "-");
  }
  appendf(out, "\n%-28s %8s %8s %8s\n", "range (top slope)", "slope", "R^2", "T*");
  for (const auto& range : r.ranges) {
    if (!range.aggregated && range.name.find("/block") != std::string::npos) continue;
    const auto top = range.slopes.empty() ? std::nullopt : range.slopes.back();
    const auto x = range.fit.crossover();
    appendf(out, "%-28s %8s %8.4f %8s\n", range.name.c_str(), top ? std::to_string(*top).substr(0, 5).c_str() : "-",
            range.fit.r2, x ? std::to_string(int64_t(*x)).c_str() : "-");
  }
  if (r.findings.empty()) appendf(out, "\nno findings: every range grows at most linearly\n");
  for (size_t i = 0; i < r.findings.size(); ++i)
    appendf(out, "%s%2zu. %s\n", i ? "" : "\n", i + 1, r.findings[i].text.c_str());
  for (size_t i = 0; i < r.forecasts.size(); ++i)
    appendf(out, "%sforecast %s\n", i ? "" : "\n", r.forecasts[i].text.c_str());
  for (const auto& p : r.problems) appendf(out, "problem: %s\n", p.c_str());
  return out;
}

}  // namespace rankscope::analyzers
