// skew_run_report.cpp — see skew_run_report.h.
#include "rankscope/analyzers/skew/skew_run_report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/analyzers/skew/skew_text.h"
#include "rankscope/format/appendf.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/trace_core/import_summary.h"

namespace rankscope::analyzers {
namespace {

using format::appendf;

// The critical path covers the last ten traced steps at most: the path of a step needs every rank's
// detail of it at once, so a long capture (a 100 MB trace holds 200 steps) would cost memory for
// little news; `rankscope critical-path --steps` takes any window.
constexpr int64_t kCriticalPathSteps = 10;

// HTA's analyses and the critical path of the traced steps, where the run has kernel records.
void add_device_analyses(const std::filesystem::path& run_dir, const SkewOptions& options, SkewRunReport& r) {
  if (!r.skew.device) return;
  const int64_t first = r.skew.device->mean.first_traced_step, last = r.skew.device->mean.last_traced_step;
  KernelsOptions ko;
  ko.comm_kernel_patterns = options.comm_kernel_patterns;
  if (auto k = analyze_kernels(run_dir, ko); k.ok())
    r.kernels = std::move(*k);
  else
    r.problems.push_back("kernels: " + k.status().user_text());
  CriticalPathOptions co;
  co.comm_kernel_patterns = options.comm_kernel_patterns;
  co.last_step = last;
  co.first_step = std::max(first, last - (kCriticalPathSteps - 1));
  r.critical_first_step = co.first_step;
  r.critical_last_step = co.last_step;
  if (auto p = analyze_critical_path(run_dir, co); p.ok())
    r.critical_path = std::move(*p);
  else
    r.problems.push_back("critical path: " + p.status().user_text());
}

void kernels_text(const KernelsReport& k, std::string& out) {
  std::vector<double> overlap;
  std::vector<int> host_bound;
  double exposed = 0;
  int analysed = 0;
  for (const auto& r : k.ranks) {
    if (!r.problem.empty()) continue;
    ++analysed;
    if (r.overlap.ratio) overlap.push_back(100 * *r.overlap.ratio);
    exposed += r.overlap.exposed_ms_per_step;
    if (r.idle.host_bound) host_bound.push_back(r.rank);
  }
  if (analysed == 0) return;
  out += "\nGPU analyses (HTA's; `rankscope kernels` has them all):\n";
  if (!overlap.empty()) {
    std::sort(overlap.begin(), overlap.end());
    appendf(out,
            "  communication overlapped by compute: %.0f%% median over %zu ranks (%.0f%% to %.0f%%); exposed "
            "communication %.2f ms a step\n",
            overlap[overlap.size() / 2], overlap.size(), overlap.front(), overlap.back(), exposed / analysed);
  }
  if (!host_bound.empty())
    appendf(out, "  host-bound (the GPU waits for its host): rank%s %s\n", host_bound.size() == 1 ? "" : "s",
            fmt::format("{}", fmt::join(host_bound.begin(),
                                        host_bound.begin() + std::min<size_t>(host_bound.size(), 16), ","))
                .c_str());
  for (size_t i = 0; i < k.findings.size() && i < 3; ++i) appendf(out, "  %s\n", k.findings[i].text.c_str());
}

void critical_path_text(const SkewRunReport& r, std::string& out) {
  const CriticalPathReport& p = *r.critical_path;
  if (p.summary.empty()) return;
  appendf(out, "\ncritical path of traced steps %lld-%lld (`rankscope critical-path` shows it): %s\n",
          static_cast<long long>(r.critical_first_step), static_cast<long long>(r.critical_last_step),
          p.summary.c_str());
  for (size_t i = 0; i < p.by_rank.size() && i < 4; ++i)
    appendf(out, "  %9.2f ms %5.1f%%  %s\n", p.by_rank[i].ms_per_step, 100 * p.by_rank[i].share,
            p.by_rank[i].what.c_str());
}

}  // namespace

Result<SkewRunReport> analyze_skew_run(const std::filesystem::path& run_dir, const SkewOptions& options) {
  auto skew = analyze_skew(run_dir, options);
  if (!skew.ok()) return skew.status();
  SkewRunReport r;
  r.skew = std::move(*skew);
  auto meta = format::read_run_metadata(run_dir);
  // A run imported from Nsight Systems or Kineto: where each rank came from and how its clock was placed.
  if (meta.ok() && meta->extra.contains("source")) r.provenance = meta->extra["source"];
  if (meta.ok() && meta->extra.contains("config")) {
    int per_host = 0;
    std::map<std::string, int> hosts;
    for (const auto& h : meta->hosts) per_host = std::max(per_host, ++hosts[h]);
    r.settings = config_findings(meta->extra["config"], meta->world_size, per_host);
  }
  add_device_analyses(run_dir, options, r);
  return r;
}

nlohmann::json skew_run_json(const SkewRunReport& r) {
  nlohmann::json json = to_json(r.skew);
  if (!r.provenance.is_null()) json["provenance"] = r.provenance;
  json["settings_findings"] = nlohmann::json::array();
  for (const auto& s : r.settings)
    json["settings_findings"].push_back(
        {{"setting", s.setting}, {"value", s.value}, {"ranks", s.ranks}, {"text", s.text}});
  if (r.kernels) json["kernels"] = kernels_report_json(*r.kernels);
  if (r.critical_path) {
    nlohmann::json j = critical_path_json(*r.critical_path);
    j["steps_analysed"] = j["steps"].size();
    j.erase("steps");  // every segment of every step: `rankscope critical-path --json`
    json["critical_path"] = std::move(j);
  }
  for (const auto& p : r.problems) {
    if (!json.contains("problems") || !json["problems"].is_array()) json["problems"] = nlohmann::json::array();
    json["problems"].push_back(p);
  }
  return json;
}

std::string skew_run_text(const SkewRunReport& r) {
  std::string out;
  if (const std::string p = trace_core::provenance_text(r.provenance); !p.empty()) out += p + "\n";
  out += skew_report_text(r.skew);
  for (size_t i = 0; i < r.settings.size(); ++i)
    appendf(out, "%ssetting: %s\n", i ? "" : "\n", r.settings[i].text.c_str());
  if (r.kernels) kernels_text(*r.kernels, out);
  if (r.critical_path) critical_path_text(r, out);
  return out;
}

}  // namespace rankscope::analyzers
