// skew_command.cpp — `rankscope skew`: per-rank imbalance of a run, as text, JSON and HTML.
// Thin: the report (skew, with the provenance, the settings and the device analyses beside it), its
// JSON and its text are rankscope_analyzers_skew's (skew_run_report.h), the HTML rankscope_reports_html's.
#include <cstdio>
#include <optional>
#include <string>

#include "command_line.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_run_report.h"
#include "rankscope/format/option_table.h"
#include "report_output.h"
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
  auto report = analyzers::analyze_skew_run(run_dir, options);
  if (!report.ok()) {
    std::fprintf(stderr, "rankscope skew: %s\n", report.status().user_text().c_str());
    return 2;
  }
  // With --json - the JSON owns stdout; the text goes to stderr.
  if (!outputs.quiet) std::fputs(analyzers::skew_run_text(*report).c_str(), outputs.json_path == "-" ? stderr : stdout);
  const nlohmann::json json = analyzers::skew_run_json(*report);
  if (!write_report_outputs(json, outputs, "rankscope skew: " + run_dir)) return 2;
  return 0;
}

}  // namespace rankscope::cli
