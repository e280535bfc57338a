// diff_output.cpp — a DiffReport as JSON (kind "rankscope.diff", kDiffReportSchemaVersion) and as text.
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rankscope/analyzers/diff/run_diff.h"

namespace rankscope::analyzers {

nlohmann::json diff_report_json(const DiffReport& r) {
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& p : r.parts)
    parts.push_back({{"name", p.name}, {"base_ms", p.base_ms}, {"new_ms", p.new_ms}, {"delta_ms", p.delta_ms},
                     {"cause", p.cause.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.cause)}});
  nlohmann::json kernels = nlohmann::json::array(), swaps = nlohmann::json::array();
  for (const auto& k : r.kernels)
    kernels.push_back({{"family", k.family}, {"what", k.what}, {"range", k.range}, {"base_ms", k.base_ms}, {"new_ms", k.new_ms},
                       {"base_calls", k.base_calls}, {"new_calls", k.new_calls}});
  for (const auto& s : r.kernel_swaps)
    swaps.push_back({{"range", s.range}, {"gone", s.gone}, {"added", s.added}, {"base_ms", s.base_ms}, {"new_ms", s.new_ms}});
  nlohmann::json settings = nlohmann::json::array();
  for (const auto& s : r.settings) settings.push_back({{"key", s.key}, {"base", s.base}, {"new", s.now}});
  nlohmann::json roles = nlohmann::json::array();
  for (const auto& d : r.roles)
    roles.push_back({{"role", d.role}, {"base_ranks", d.base_ranks}, {"new_ranks", d.new_ranks}, {"base_ms", d.base_ms},
                     {"new_ms", d.new_ms}, {"delta_ms", d.delta_ms}});
  return {{"kind", "rankscope.diff"},
          {"schema_version", kDiffReportSchemaVersion},
          {"base", {{"run_dir", r.base_dir}, {"ranks", r.base_ranks}, {"steps", r.base_steps}, {"warmup_steps", r.base_warmup_steps},
                    {"step_ms_median", r.base_step_ms}, {"spread_ms", r.base_spread_ms}, {"mean_step_ms", r.base_mean_ms}}},
          {"new", {{"run_dir", r.new_dir}, {"ranks", r.new_ranks}, {"steps", r.new_steps}, {"warmup_steps", r.new_warmup_steps},
                   {"step_ms_median", r.new_step_ms}, {"spread_ms", r.new_spread_ms}, {"mean_step_ms", r.new_mean_ms}}},
          {"noise_ms", r.noise_ms},
          {"significant", r.significant},
          {"mean_delta_ms", r.mean_delta_ms},
          {"waterfall", parts},
          {"kernels", {{"compared", r.kernels_compared}, {"changes", kernels}, {"replaced", swaps}}},
          {"ranks", {{"match", r.ranks_by_rank ? "rank" : "role"}, {"how", r.rank_match}, {"roles", roles}}},
          {"settings", settings},
          {"explanations", r.explanations},
          {"unexplained", {{"ms", r.unexplained_ms}, {"parts", r.unexplained_parts}}},
          {"headline", r.headline},
          {"problems", r.problems}};
}

std::string diff_report_text(const DiffReport& r) {
  std::string out = r.headline + "\n\n";
  auto warmup = [](int64_t n) { return n > 0 ? fmt::format(" after {} warm-up step{}", n, n == 1 ? "" : "s") : std::string(); };
  out += fmt::format("  BASE {}: {} rank{}, {} steps{}, median step {:.2f} ms (spread {:.2f} ms)\n", r.base_dir,
                     r.base_ranks, r.base_ranks == 1 ? "" : "s", r.base_steps, warmup(r.base_warmup_steps), r.base_step_ms,
                     r.base_spread_ms);
  out += fmt::format("  NEW  {}: {} rank{}, {} steps{}, median step {:.2f} ms (spread {:.2f} ms)\n\n", r.new_dir,
                     r.new_ranks, r.new_ranks == 1 ? "" : "s", r.new_steps, warmup(r.new_warmup_steps), r.new_step_ms,
                     r.new_spread_ms);
  out += fmt::format("where the mean step's {:+.2f} ms went ({:.2f} -> {:.2f} ms; the parts add up to it):\n", r.mean_delta_ms,
                     r.base_mean_ms, r.new_mean_ms);
  for (const auto& p : r.parts) {
    if (std::fabs(p.delta_ms) < 0.005 && p.base_ms < 0.005 && p.new_ms < 0.005) continue;
    out += fmt::format("  {:+9.2f} ms  {:<40} {:9.2f} -> {:9.2f}{}\n", p.delta_ms, p.name, p.base_ms, p.new_ms,
                       p.cause.empty() ? "" : "   " + p.cause);
  }
  if (!r.unexplained_parts.empty() && std::fabs(r.unexplained_ms) >= 0.01)
    out += fmt::format("  left unexplained: {:+.2f} ms of the {:+.2f} ms, in parts with no cause found ({})\n", r.unexplained_ms,
                       r.mean_delta_ms, fmt::join(r.unexplained_parts, ", "));
  std::string kernel_lines;
  if (r.kernels_compared) {
    for (const auto& k : r.kernels) {
      if (std::fabs(k.new_ms - k.base_ms) < 0.005) continue;
      kernel_lines += fmt::format("  {:+9.2f} ms  {:<15} {}  {:.2f} ms x{:.0f} -> {:.2f} ms x{:.0f}{}\n", k.new_ms - k.base_ms, k.what, k.family,
                         k.base_ms, k.base_calls, k.new_ms, k.new_calls, k.range.empty() ? "" : "  in " + k.range);
    }
    for (const auto& s : r.kernel_swaps)
      kernel_lines += fmt::format("  in {}: {} replaced by {} ({:.2f} -> {:.2f} ms)\n", s.range.empty() ? "(no range)" : s.range,
                         fmt::join(s.gone, " + "), fmt::join(s.added, " + "), s.base_ms, s.new_ms);
  }
  if (!kernel_lines.empty())
    out += "\nkernels (ms and calls a step, mean over ranks; template arguments and parameters folded):\n" + kernel_lines;
  // Roles (or ranks) whose step changed most: where a run's ranks are alike, the parts say it all.
  if (r.roles.size() > 1 || !r.ranks_by_rank) {
    out += fmt::format("\nranks: {}; mean step of each{}:\n", r.rank_match, r.roles.size() > 5 ? " (the 5 that changed most)" : "");
    auto list = [](const std::vector<int>& ranks) {
      if (ranks.empty()) return std::string("none");
      std::string s;
      for (size_t i = 0; i < ranks.size() && i < 8; ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
      return ranks.size() > 8 ? s + fmt::format(",... ({})", ranks.size()) : s;
    };
    for (size_t i = 0; i < r.roles.size() && i < 5; ++i) {
      const RoleDiff& d = r.roles[i];
      out += fmt::format("  {:+9.2f} ms  {:<24} {:9.2f} -> {:9.2f}", d.delta_ms, d.role, d.base_ms, d.new_ms);
      if (!r.ranks_by_rank) out += fmt::format("   ranks {} -> {}", list(d.base_ranks), list(d.new_ranks));
      out += "\n";
    }
  }
  if (!r.settings.empty()) {
    out += "\nsettings that differ:\n";
    for (const auto& s : r.settings)
      out += fmt::format("  {}: {} -> {}\n", s.key, s.base.empty() ? "(absent)" : s.base, s.now.empty() ? "(absent)" : s.now);
  }
  for (const auto& e : r.explanations) out += "\n" + e + "\n";
  for (const auto& p : r.problems) out += "problem: " + p + "\n";
  return out;
}

}  // namespace rankscope::analyzers
