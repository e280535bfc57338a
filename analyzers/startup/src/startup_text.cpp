// startup_text.cpp — see startup_text.h. The columns are printf's, appended to a string.
#include "rankscope/analyzers/startup/startup_text.h"

#include <optional>

#include "rankscope/format/appendf.h"

namespace rankscope::analyzers {

std::string startup_report_text(const StartupReport& r) {
  using format::appendf;
  std::string out;
  appendf(out, "rankscope startup: %s (%d ranks)", r.run_dir.c_str(), r.world_size);
  if (r.median_to_first_step_s) appendf(out, ", median time to the first step %.2f s", *r.median_to_first_step_s);
  appendf(out, "\n%6s %10s %12s %14s  %s\n", "rank", "launch s", "step 1 at s", "to step 1 s", "slowest phase");
  auto num = [](const std::optional<double>& v) { return v ? std::to_string(*v).substr(0, 6) : std::string("-"); };
  for (const auto& x : r.ranks) {
    if (!x.readable) {
      appendf(out, "%6d  %s\n", x.rank, x.problem.c_str());
      continue;
    }
    appendf(out, "%6d %10s %12s %14s  %s (%.0f ms)\n", x.rank, num(x.launch_at_s).c_str(),
            num(x.first_step_at_s).c_str(), num(x.to_first_step_s).c_str(), x.slowest_phase.c_str(),
            x.slowest_phase_ms);
  }
  if (r.findings.empty()) appendf(out, "\nno findings: every rank started alike and no harmful setting is recorded\n");
  for (size_t i = 0; i < r.findings.size(); ++i)
    appendf(out, "%s%2zu. %s\n", i ? "" : "\n", i + 1, r.findings[i].text.c_str());
  for (const auto& p : r.problems) appendf(out, "problem: %s\n", p.c_str());
  return out;
}

}  // namespace rankscope::analyzers
