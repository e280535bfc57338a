// skew_command.cpp — `rankscope skew`: per-rank imbalance of a run, as text, JSON and HTML.
// Thin: the analysis, its JSON and its text are rankscope_analyzers_skew's, the HTML
// rankscope_reports_html's; the command adds the provenance, the settings and the device analyses.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "command_line.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/analyzers/skew/skew_text.h"
#include "rankscope/analyzers/startup/config_findings.h"
#include "rankscope/format/option_table.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/trace_core/import_summary.h"
#include "report_output.h"
#include "skew_device_analyses.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kSkewOptions[] = {
    {"--json", "FILE", "write the report as JSON (schema reports/schemas/skew_report.schema.json); '-' = stdout"},
    {"--html", "FILE", "write a self-contained HTML report (opens offline)"},
    {"--quiet", "", "no text report (with --json - the text goes to stderr)", "-q"},
    {"--steps", "A-B", "only steps A..B (inclusive); e.g. --steps 10-20 to skip warm-up"},
    {"--comm-kernel", "REGEX",
     "GPU kernels whose name this finds are communication (transfer time), beside\n"
     "the built-in rules (NCCL, DeepEP, NVSHMEM, MSCCL++, custom all-reduce, ...;\n"
     "docs/FORMAT.md); repeat for more"},
};

const std::string& skew_help() {
  static const std::string text =
      "usage: rankscope skew RUN_DIR [--json FILE] [--html FILE] [--steps A-B] [--comm-kernel REGEX]... [--quiet]\n\n"
      "Per-rank imbalance of a run, from its event streams, built on arrival times at collectives\n"
      "(a collective's duration measures waiting, not work: the fast rank shows the longest one).\n"
      "Prints the findings, ranked by the time they cost per step, and a table of ranks.\n\n" +
      format::options_help(kSkewOptions, 16) + "\nexit status: 0 report made, 2 bad arguments or no readable run\n";
  return text;
}

// The values of --json, --html, --steps and --comm-kernel into `outputs` and `options`; false after
// saying which one is bad (an empty one too: a file name or an expression is needed).
bool read_skew_values(const format::ParsedOptions& parsed, ReportOutputs& outputs, analyzers::SkewOptions& options) {
  for (const char* flag : {"--json", "--html"}) {
    for (const std::string_view file : parsed.all_values(flag)) {
      if (!file.empty()) continue;
      std::fprintf(stderr, "rankscope skew: %s needs a file name\n", flag);
      return false;
    }
  }
  outputs = report_outputs(parsed);
  for (const std::string_view v : parsed.all_values("--steps")) {
    auto w = analyzers::parse_steps(v);
    if (!w.ok()) {
      std::fprintf(stderr, "rankscope skew: %s\n", w.status().message().c_str());
      return false;
    }
    options.first_step = w->first;
    options.last_step = w->second;
  }
  for (const std::string_view v : parsed.all_values("--comm-kernel")) {
    if (v.empty()) {
      std::fprintf(stderr, "rankscope skew: --comm-kernel needs a regular expression\n");
      return false;
    }
    options.comm_kernel_patterns.emplace_back(v);
  }
  return true;
}

// The command line: the exit code when the command stops here (0 after --help, 2 after saying what
// is wrong), nullopt when `run_dir`, `outputs` and `options` are set and it goes on.
std::optional<int> read_skew_args(Args args, std::string& run_dir, ReportOutputs& outputs,
                                  analyzers::SkewOptions& options) {
  format::OptionsRead read = format::read_options(kSkewOptions, args);
  // Each value flag says the same of a missing value as of an empty one.
  read_missing_value_as_empty(kSkewOptions, read);
  if (!read_skew_values(read.parsed, outputs, options)) return 2;
  const OneInput dir = one_input(read.parsed.positionals);
  if (dir.dash) return unknown_option("skew", "-", skew_help());
  if (dir.second) {
    std::fprintf(stderr, "rankscope skew: one run directory only (got '%s' and '%s')\n", dir.path.c_str(),
                 std::string(*dir.second).c_str());
    return 2;
  }
  if (read.refused) return unknown_option("skew", read.refused->arg, skew_help());
  if (read.parsed.help) {
    std::fputs(skew_help().c_str(), stdout);
    return 0;
  }
  if (dir.path.empty()) {
    std::fprintf(stderr, "rankscope skew: no run directory given\n\n%s", skew_help().c_str());
    return 2;
  }
  run_dir = dir.path;
  return std::nullopt;
}

}  // namespace

std::span<const format::Option> skew_options() { return kSkewOptions; }

int skew_command(Args args) {
  std::string run_dir;
  ReportOutputs outputs;
  analyzers::SkewOptions options;
  if (auto stop = read_skew_args(args, run_dir, outputs, options)) return *stop;
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
    std::fputs(analyzers::skew_report_text(*report).c_str(), outputs.json_path == "-" ? stderr : stdout);
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
