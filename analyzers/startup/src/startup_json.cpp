// startup_json.cpp — StartupReport -> JSON, schema_version kStartupSchemaVersion.
#include "rankscope/analyzers/startup/startup_json.h"

namespace rankscope::analyzers {
namespace {

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json startup_report_json(const StartupReport& r) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& x : r.ranks) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& p : x.phases) phases.push_back({{"name", p.name}, {"ms", p.ms}, {"count", p.count}});
    ranks.push_back({{"rank", x.rank},
                     {"readable", x.readable},
                     {"problem", x.problem},
                     {"launch_at_s", opt(x.launch_at_s)},
                     {"first_step_at_s", opt(x.first_step_at_s)},
                     {"to_first_step_s", opt(x.to_first_step_s)},
                     {"slowest_phase", x.slowest_phase},
                     {"slowest_phase_ms", x.slowest_phase_ms},
                     {"phases", phases}});
  }
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : r.findings)
    findings.push_back({{"kind", f.kind}, {"rank", f.rank}, {"phase", f.phase}, {"setting", f.setting},
                        {"cost_ms", f.cost_ms}, {"text", f.text}});
  return {{"schema_version", kStartupSchemaVersion},
          {"kind", "rankscope.startup"},
          {"run_dir", r.run_dir},
          {"world_size", r.world_size},
          {"median_to_first_step_s", opt(r.median_to_first_step_s)},
          {"ranks", ranks},
          {"findings", findings},
          {"problems", r.problems}};
}

}  // namespace rankscope::analyzers
