// scaling_json.cpp — see scaling_json.h. Units: ms for times; c in ms, a in ms per token, b in ms
// per token squared.
#include "rankscope/analyzers/scaling/scaling_json.h"

#include <cmath>

namespace rankscope::analyzers {
namespace {

using nlohmann::json;

json opt(const std::optional<double>& v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }

json opts(const std::vector<std::optional<double>>& v) {
  json a = json::array();
  for (const auto& x : v) a.push_back(opt(x));
  return a;
}

json estimate(const Estimate& e) { return {{"value", e.value}, {"low", e.low}, {"high", e.high}}; }

json estimate(const std::optional<Estimate>& e) { return e ? estimate(*e) : json(nullptr); }

}  // namespace

nlohmann::json to_json(const ScalingReport& report) {
  json j;
  j["schema_version"] = kScalingReportSchemaVersion;
  j["kind"] = "rankscope.scaling";
  j["sweep_dir"] = report.sweep_dir;
  j["attention"] = report.attention;
  j["memory_exponent"] = opt(report.memory_exponent);
  j["points"] = json::array();
  for (const auto& p : report.points) {
    j["points"].push_back({{"seq_len", p.seq_len},
                           {"run_dir", p.run_dir},
                           {"attention", p.attention},
                           {"tokens_per_s", p.tokens_per_s},
                           {"step_ms", p.step_ms},
                           {"peak_mem_bytes", opt(p.peak_mem_bytes)},
                           {"memory_exponent", opt(p.memory_exponent)},
                           {"attention_share_flops", opt(p.attention_share_flops)},
                           {"attention_share_measured", opt(p.attention_share_measured)}});
  }
  j["ranges"] = json::array();
  for (const auto& r : report.ranges) {
    j["ranges"].push_back({{"name", r.name},
                           {"aggregated", r.aggregated},
                           {"times_ms", opts(r.times_ms)},
                           {"c", r.fit.c},
                           {"a", r.fit.a},
                           {"b", r.fit.b},
                           {"r2", r.fit.r2},
                           {"slopes", opts(r.slopes)},
                           {"crossover_T", opt(r.fit.crossover())}});
  }
  j["findings"] = json::array();
  for (const auto& f : report.findings) {
    j["findings"].push_back({{"kind", f.kind},
                             {"range", f.range},
                             {"slope", f.slope},
                             {"share_at_max", f.share_at_max},
                             {"cost_ms_per_step", f.cost_ms_per_step},
                             {"text", f.text}});
  }
  j["forecasts"] = json::array();
  for (const auto& f : report.forecasts) {
    j["forecasts"].push_back({{"seq_len", f.seq_len},
                              {"extrapolated", f.extrapolated},
                              {"step_ms", estimate(f.step_ms)},
                              {"tokens_per_s", estimate(f.tokens_per_s)},
                              {"peak_mem_bytes", estimate(f.peak_mem_bytes)},
                              {"quadratic_range", f.quadratic_range.empty() ? json(nullptr) : json(f.quadratic_range)},
                              {"quadratic_range_share", f.quadratic_range_share},
                              {"memory_quadratic_share", opt(f.memory_quadratic_share)},
                              {"text", f.text}});
  }
  j["problems"] = report.problems;
  return j;
}

}  // namespace rankscope::analyzers
