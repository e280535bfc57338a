// skew_device_analyses.cpp — see skew_device_analyses.h.
#include "skew_device_analyses.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"

namespace rankscope::cli {
namespace {

constexpr int64_t kCriticalPathSteps = 10;

void kernels_text(const analyzers::KernelsReport& k, std::FILE* out) {
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
  std::fprintf(out, "\nGPU analyses (HTA's; `rankscope kernels` has them all):\n");
  if (!overlap.empty()) {
    std::sort(overlap.begin(), overlap.end());
    std::fprintf(out, "  communication overlapped by compute: %.0f%% median over %zu ranks (%.0f%% to %.0f%%); exposed communication %.2f ms a step\n",
                 overlap[overlap.size() / 2], overlap.size(), overlap.front(), overlap.back(), exposed / analysed);
  }
  if (!host_bound.empty())
    std::fprintf(out, "  host-bound (the GPU waits for its host): rank%s %s\n", host_bound.size() == 1 ? "" : "s",
                 fmt::format("{}", fmt::join(host_bound.begin(), host_bound.begin() + std::min<size_t>(host_bound.size(), 16), ",")).c_str());
  for (size_t i = 0; i < k.findings.size() && i < 3; ++i) std::fprintf(out, "  %s\n", k.findings[i].text.c_str());
}

}  // namespace

void add_device_analyses(const DeviceAnalysesInput& in, nlohmann::json& json, std::FILE* text) {
  auto problem = [&](const std::string& what, const std::string& why) {
    if (!json.contains("problems") || !json["problems"].is_array()) json["problems"] = nlohmann::json::array();
    json["problems"].push_back(what + ": " + why);
  };
  if (in.traced_steps) {
    analyzers::KernelsOptions ko;
    ko.comm_kernel_patterns = in.comm_kernel_patterns;
    auto k = analyzers::analyze_kernels(in.run_dir, ko);
    if (k.ok()) {
      json["kernels"] = analyzers::kernels_report_json(*k);
      if (text) kernels_text(*k, text);
    } else {
      problem("kernels", k.status().user_text());
    }
    analyzers::CriticalPathOptions co;
    co.comm_kernel_patterns = in.comm_kernel_patterns;
    // The last ten traced steps at most: the path of a step needs every rank's detail of it at
    // once, so a long capture (a 100 MB trace holds 200 steps) would cost memory for little news;
    // `rankscope critical-path --steps` takes any window.
    co.last_step = in.traced_steps->second;
    co.first_step = std::max(in.traced_steps->first, in.traced_steps->second - (kCriticalPathSteps - 1));
    auto p = analyzers::analyze_critical_path(in.run_dir, co);
    if (p.ok()) {
      nlohmann::json j = analyzers::critical_path_json(*p);
      j["steps_analysed"] = j["steps"].size();
      j.erase("steps");  // every segment of every step: `rankscope critical-path --json`
      json["critical_path"] = std::move(j);
      if (text && !p->summary.empty()) {
        std::fprintf(text, "\ncritical path of traced steps %lld-%lld (`rankscope critical-path` shows it): %s\n",
                     static_cast<long long>(co.first_step), static_cast<long long>(co.last_step), p->summary.c_str());
        for (size_t i = 0; i < p->by_rank.size() && i < 4; ++i)
          std::fprintf(text, "  %9.2f ms %5.1f%%  %s\n", p->by_rank[i].ms_per_step, 100 * p->by_rank[i].share, p->by_rank[i].what.c_str());
      }
    } else {
      problem("critical path", p.status().user_text());
    }
  }
}

}  // namespace rankscope::cli
