// skew_command.cpp — `rankscope skew`: per-rank imbalance of a run, as text, JSON and HTML.
// Thin: the analysis is rankscope_analyzers_skew, the HTML rankscope_reports_html.
#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "rankscope/analyzers/startup/config_findings.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/trace_core/import_summary.h"
#include "report_output.h"
#include "skew_device_analyses.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kSkewHelp =
    "usage: rankscope skew RUN_DIR [--json FILE] [--html FILE] [--steps A-B] [--comm-kernel REGEX]... [--quiet]\n\n"
    "Per-rank imbalance of a run, from its event streams, built on arrival times at collectives\n"
    "(a collective's duration measures waiting, not work: the fast rank shows the longest one).\n"
    "Prints the findings, ranked by the time they cost per step, and a table of ranks.\n\n"
    "  --json FILE   write the report as JSON (schema reports/schemas/skew_report.schema.json); '-' = stdout\n"
    "  --html FILE   write a self-contained HTML report (opens offline)\n"
    "  --quiet, -q   no text report (with --json - the text goes to stderr)\n"
    "  --steps A-B   only steps A..B (inclusive); e.g. --steps 10-20 to skip warm-up\n"
    "  --comm-kernel REGEX\n"
    "                GPU kernels whose name this finds are communication (transfer time), beside\n"
    "                the built-in rules (NCCL, DeepEP, NVSHMEM, MSCCL++, custom all-reduce, ...;\n"
    "                docs/FORMAT.md); repeat for more\n\n"
    "exit status: 0 report made, 2 bad arguments or no readable run\n";

// On a GPU the host returns from a range at launch: the breakdown is the device's, from the kernel
// records of the traced steps. Says so, with the GPU time by range and the kernel time no range owns.
void print_device(const analyzers::DeviceSummary& s, std::FILE* out) {
  const analyzers::DeviceBreakdown& d = s.mean;
  auto pct = [&](double ms) { return d.step_ms > 0 ? 100.0 * ms / d.step_ms : 0.0; };
  std::fprintf(out, "GPU time per step (device timeline: kernel records of steps %lld-%lld, %d rank%s): %.2f ms = "
               "compute %.2f (%.0f%%) + transfer %.2f (communication kernels, %.0f%%) + memcpy %.2f (memcpys/memsets, %.0f%%) + "
               "idle %.2f (gaps on the device timeline, %.0f%%; %.2f of it host-bound: the host's step longer than the GPU's work)\n",
               (long long)d.first_traced_step, (long long)d.last_traced_step, s.ranks, s.ranks == 1 ? "" : "s", d.step_ms,
               d.compute_ms, pct(d.compute_ms), d.transfer_ms, pct(d.transfer_ms), d.memcpy_ms, pct(d.memcpy_ms), d.idle_ms, pct(d.idle_ms),
               d.host_bound_ms);
  // Unions of kernel intervals over the step's window on the device: shares are of the busy time.
  std::fprintf(out, "outside any range: %.2f ms of the %.2f ms the GPU was busy (%.0f%%) ran kernels launched outside every range\n",
               d.outside_ranges_ms, d.busy_ms, d.busy_ms > 0 ? 100.0 * d.outside_ranges_ms / d.busy_ms : 0.0);
  std::fprintf(out, "GPU time by range (ms per step some kernel of the range runs; %% of busy time):\n");
  // The unattributed kernel time takes its place among the ranges, so its size reads at a glance.
  auto ranges = s.ranges_ms;
  if (d.outside_ranges_ms > 0) ranges.emplace_back("(outside any range)", d.outside_ranges_ms);
  std::stable_sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const size_t shown = std::min<size_t>(ranges.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    const auto& [range, ms] = ranges[i];
    std::fprintf(out, "  %9.2f  %5.1f%%  %s\n", ms, d.busy_ms > 0 ? 100.0 * ms / d.busy_ms : 0.0, range.c_str());
  }
  if (shown < ranges.size()) std::fprintf(out, "  ... %zu more ranges (--json has them all)\n", ranges.size() - shown);
  std::fprintf(out, "\n");
}

std::string rate_text(double gbps) {
  return gbps >= 1 ? fmt::format("{:.2f} GB/s", gbps) : fmt::format("{:.1f} MB/s", gbps * 1e3);
}

// Each group's collectives of a step: how many calls, a rank's bytes, the transfer and its rate;
// the groups that transfer longest first.
void print_groups(const analyzers::SkewReport& r, std::FILE* out) {
  std::vector<const analyzers::GroupBandwidth*> groups;
  for (const auto& g : r.groups)
    if (g.transfer_ms_per_step > 0 || g.bytes_per_step > 0) groups.push_back(&g);
  if (groups.empty()) return;
  std::stable_sort(groups.begin(), groups.end(), [](auto* a, auto* b) { return a->transfer_ms_per_step > b->transfer_ms_per_step; });
  std::fprintf(out, "collectives a step by group (a rank's bytes; the time some call of the group moved data after its last "
               "rank arrived, hidden behind compute or not, and the rate over it):\n");
  const size_t shown = std::min<size_t>(groups.size(), 8);
  for (size_t i = 0; i < shown; ++i) {
    const auto& g = *groups[i];
    std::string rate;
    if (g.bytes_per_step > 0 && g.transfer_ms_per_step > 0) {
      rate = ": " + rate_text(g.algbw_gbps);
      if (g.busbw_gbps > 0) rate += fmt::format(" (bus {})", rate_text(g.busbw_gbps));
    }
    const std::string bytes = g.bytes_per_step > 0 ? fmt::format("{:.2f} MB", g.bytes_per_step / 1e6) : "bytes not recorded";
    std::fprintf(out, "  %s (%d ranks): %.0f call%s, %s in %.2f ms%s\n", g.comm.c_str(), g.ranks, g.calls_per_step,
                 g.calls_per_step >= 1.5 ? "s" : "", bytes.c_str(), g.transfer_ms_per_step, rate.c_str());
  }
  if (shown < groups.size()) std::fprintf(out, "  ... %zu more groups (--json has them all)\n", groups.size() - shown);
}

void print_text(const analyzers::SkewReport& r, bool to_stderr) {
  std::FILE* out = to_stderr ? stderr : stdout;
  std::fprintf(out, "rankscope skew: %s (world %d, steps %lld-%lld, median step %.2f ms)\n", r.run_dir.c_str(),
               r.world_size, (long long)r.first_step, (long long)r.last_step, r.step_ms_median);
  // A rank read in part is said first: every figure below is made without its missing steps.
  for (const auto& p : r.partial_ranks) {
    std::fprintf(out, "partial rank %d: %s%s%s\n", p.rank, p.reason.c_str(), p.left_out.empty() ? "" : "; ", p.left_out.c_str());
  }
  if (r.device) print_device(*r.device, out);
  if (r.findings.empty()) std::fprintf(out, "no findings: ranks are in step\n");
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const auto& f = r.findings[i];
    // A share of work with no measurable cost yet shows what it predicts ("[ 22:1 share]").
    const std::string cost = f.cost_ms_per_step < 0.05 && !f.share_text.empty() ? fmt::format("{:>7} share", f.share_text)
                                                                           : fmt::format("{:6.1f} ms/step", f.cost_ms_per_step);
    std::fprintf(out, "%2zu. [%s] %s: %s\n", i + 1, cost.c_str(), f.kind.c_str(), f.text.c_str());
    for (const auto& c : f.caveats) std::fprintf(out, "    caveat: %s\n", c.c_str());
  }
  if (!r.below_noise.empty()) {
    std::string line;
    for (const auto& b : r.below_noise) {
      line += fmt::format("{}rank {} {} by {:.1f} ms (noise {:.1f} ms)", line.empty() ? "" : "; ", b.rank,
                          b.kind == "straggler" ? "slower"
                          : b.sites > 1         ? fmt::format("last at {} collectives", b.sites)
                                                : std::string("last at a collective"),
                          b.delay_ms, b.noise_ms);
    }
    std::fprintf(out, "below the run's noise (under %.0fx), not findings: %s\n", analyzers::kFindingSignificance, line.c_str());
  }
  if (r.what_if) std::fprintf(out, "what if: %s\n", r.what_if->text.c_str());
  if (r.expert_load && r.expert_load->balanced) std::fprintf(out, "what if: %s\n", r.expert_load->balanced->text.c_str());
  // The slowest ranks first (by step time without communication); all of them for small jobs.
  std::vector<const analyzers::RankSkew*> ranks;
  for (const auto& rs : r.ranks) {
    if (rs.present) ranks.push_back(&rs);
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->noncomm_ms_median > b->noncomm_ms_median; });
  const size_t shown = std::min<size_t>(ranks.size(), 16);
  if (r.device) {
    std::fprintf(out, "\ncompute, wait, transfer, memcpy and idle: GPU time of the traced steps for ranks with kernel records "
                 "(wait 0: an NCCL kernel waiting for a peer looks like one moving data), host time for the others\n");
  }
  std::fprintf(out, "\n%6s %9s %9s %9s %9s %9s %9s %9s %9s %6s %6s%s\n", "rank", "median", "p90", "max", "compute", "wait",
               "transfer", "memcpy", "idle", "rel", "indiv", shown < ranks.size() ? "   (16 slowest)" : "");
  for (size_t i = 0; i < shown; ++i) {
    const auto& x = *ranks[i];
    std::fprintf(out, "%6d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %6.3f %6.3f\n", x.rank, x.step_ms_median,
                 x.step_ms_p90, x.step_ms_max, x.compute_ms, x.collective_wait_ms, x.collective_transfer_ms, x.memcpy_ms, x.idle_ms,
                 x.relative_score, x.individual_score);
  }
  for (size_t i = 0; i < shown; ++i) {
    const auto& x = *ranks[i];
    if (x.idle_collective_wait_ms <= 0) continue;
    std::fprintf(out, "rank %d: %.2f ms of its %.2f ms GPU idle is its host waiting in collectives for the last arriver "
                 "(no NCCL kernels: host collectives such as Gloo)\n", x.rank, x.idle_collective_wait_ms, x.idle_ms);
  }
  std::string hidden;
  for (size_t i = 0; i < shown; ++i)
    if (ranks[i]->collective_overlap_ms > 0) hidden += fmt::format("{}rank {} {:.2f} ms", hidden.empty() ? "" : ", ", ranks[i]->rank, ranks[i]->collective_overlap_ms);
  if (!hidden.empty())
    std::fprintf(out, "collectives hidden behind the main thread's ops (overlap, not in the columns), a step: %s\n", hidden.c_str());
  print_groups(r, out);
  for (const auto& p : r.problems) std::fprintf(out, "problem: %s\n", p.c_str());
}

}  // namespace

int skew_command(Args args) {
  std::string run_dir;
  ReportOutputs outputs;
  analyzers::SkewOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string_view { return i + 1 < args.size() ? args[++i] : std::string_view(); };
    if (a == "--help" || a == "-h") {
      std::fputs(kSkewHelp, stdout);
      return 0;
    } else if (a == "--quiet" || a == "-q") {
      outputs.quiet = true;
    } else if (a == "--json" || a == "--html") {
      const std::string_view v = value();
      if (v.empty()) {
        std::fprintf(stderr, "rankscope skew: %s needs a file name\n", std::string(a).c_str());
        return 2;
      }
      (a == "--json" ? outputs.json_path : outputs.html_path) = std::string(v);
    } else if (a == "--steps") {
      auto w = analyzers::parse_steps(value());
      if (!w.ok()) {
        std::fprintf(stderr, "rankscope skew: %s\n", w.status().message().c_str());
        return 2;
      }
      options.first_step = w->first;
      options.last_step = w->second;
    } else if (a == "--comm-kernel") {
      const std::string_view v = value();
      if (v.empty()) {
        std::fprintf(stderr, "rankscope skew: --comm-kernel needs a regular expression\n");
        return 2;
      }
      options.comm_kernel_patterns.emplace_back(v);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope skew: unknown option '%s'\n\n%s", std::string(a).c_str(), kSkewHelp);
      return 2;
    } else if (run_dir.empty()) {
      run_dir = std::string(a);
    } else {
      std::fprintf(stderr, "rankscope skew: one run directory only (got '%s' and '%s')\n", run_dir.c_str(), std::string(a).c_str());
      return 2;
    }
  }
  if (run_dir.empty()) {
    std::fprintf(stderr, "rankscope skew: no run directory given\n\n%s", kSkewHelp);
    return 2;
  }
  auto report = analyzers::analyze_skew(run_dir, options);
  if (!report.ok()) {
    std::fprintf(stderr, "rankscope skew: %s\n", report.status().user_text().c_str());
    return 2;
  }
  auto meta = format::read_run_metadata(run_dir);
  // A run imported from Nsight Systems: where each rank came from and how its clock was placed.
  const nlohmann::json source = meta.ok() && meta->extra.contains("source") ? meta->extra["source"] : nlohmann::json();
  // With --json - the JSON owns stdout; the text goes to stderr.
  if (!outputs.quiet) {
    if (const std::string p = trace_core::provenance_text(source); !p.empty()) {
      std::fprintf(outputs.json_path == "-" ? stderr : stdout, "%s\n", p.c_str());
    }
    print_text(*report, outputs.json_path == "-");
  }
  // Settings recorded in run.json that are known to slow a job, or differ across ranks.
  nlohmann::json json = analyzers::to_json(*report);
  if (!source.is_null()) json["provenance"] = source;
  json["settings_findings"] = nlohmann::json::array();
  if (meta.ok() && meta->extra.contains("config")) {
    int per_host = 0;
    std::map<std::string, int> hosts;
    for (const auto& h : meta->hosts) per_host = std::max(per_host, ++hosts[h]);
    const auto settings = analyzers::config_findings(meta->extra["config"], meta->world_size, per_host);
    std::FILE* out = outputs.quiet ? nullptr : outputs.json_path == "-" ? stderr : stdout;
    for (size_t i = 0; i < settings.size(); ++i) {
      if (out) std::fprintf(out, "%ssetting: %s\n", i ? "" : "\n", settings[i].text.c_str());
      json["settings_findings"].push_back({{"setting", settings[i].setting}, {"value", settings[i].value},
                                           {"ranks", settings[i].ranks}, {"text", settings[i].text}});
    }
  }
  // HTA's analyses and the critical path of the traced steps, where the run has kernel records.
  DeviceAnalysesInput device{run_dir, options.comm_kernel_patterns, std::nullopt};
  if (report->device) device.traced_steps = {report->device->mean.first_traced_step, report->device->mean.last_traced_step};
  add_device_analyses(device, json, outputs.quiet ? nullptr : outputs.json_path == "-" ? stderr : stdout);
  if (!write_report_outputs(json, outputs, "rankscope skew: " + run_dir)) return 2;
  return 0;
}

}  // namespace rankscope::cli
