// startup_command.cpp — `rankscope startup`: how long each rank took to reach its first step, the
// phases of its start-up, who was late and why, and harmful settings. Thin:
// rankscope_analyzers_startup.
#include <cstdio>
#include <filesystem>
#include <string>

#include "rankscope/analyzers/startup/log_startup.h"
#include "rankscope/analyzers/startup/startup_json.h"
#include "rankscope/analyzers/startup/startup_report.h"
#include "rankscope/analyzers/startup/startup_text.h"
#include "rankscope/format/option_table.h"
#include "rankscope/logs/log_import.h"
#include "report_output.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kStartupOptions[] = {
    {"--json", "FILE",
     "write the report as JSON (schema reports/schemas/startup_report.schema.json);\n"
     "'-' = stdout, and then the text goes to stderr"},
    {"--html", "FILE", "write a self-contained HTML report (opens offline)"},
    {"--quiet", "", "no text report", "-q"},
};

const std::string& startup_help() {
  static const std::string text =
      "usage: rankscope startup RUN_DIR [--json FILE] [--html FILE]\n"
      "       rankscope startup LOG [--json FILE]\n\n"
      "Per-rank start-up timeline from the run directory (gpt2-train records the start-up as step 0:\n"
      "init/launch from the process's start, init/comm, init/device, init/clock_align, init/model,\n"
      "init/checkpoint, init/data): time to the first step, the phases, the slowest phase per rank.\n"
      "Findings name a rank that reached step 1 late and the phase that made it late, and settings\n"
      "recorded in run.json that are known to hurt (CUDA_LAUNCH_BLOCKING=1, OMP_WAIT_POLICY=ACTIVE on\n"
      "oversubscribed cores, debug levels left on) or that differ across ranks.\n"
      "LOG is a job's output with NCCL_DEBUG=INFO lines (a file or a directory of *.log/*.out/*.err/*.txt):\n"
      "the start-up as NCCL printed it: communicators whose init never completed, settings from the\n"
      "environment that take a transport away or replace the topology, hosts on sockets where others use\n"
      "InfiniBand, topology searches that found few NVLink channels, mixed NCCL versions.\n\n" +
      format::options_help(kStartupOptions, 16) +
      "\nexit status: 0 no findings, 1 findings, 2 bad arguments or no readable start-up\n";
  return text;
}

// A log: NCCL's start-up as its lines say (docs/LOGS.md), the findings that are not about a hang.
int startup_from_log(const std::string& path, const ReportOutputs& outputs) {
  if (!outputs.html_path.empty()) {
    std::fprintf(stderr, "rankscope startup: --html needs a run directory; a log's start-up is text or --json\n");
    return 2;
  }
  auto log = logs::import_logs({path});
  if (!log.ok()) {
    std::fprintf(stderr, "rankscope startup: %s\n", log.status().message().c_str());
    return 2;
  }
  const analyzers::LogStartupReport report = analyzers::startup_from_log(*log);
  if (!outputs.quiet)
    std::fputs(analyzers::log_startup_text(report).c_str(), outputs.json_path == "-" ? stderr : stdout);
  if (!write_report_outputs(analyzers::log_startup_json(report), outputs, "rankscope startup: " + path)) return 2;
  return report.problems ? 1 : 0;
}

}  // namespace

std::span<const format::Option> startup_options() { return kStartupOptions; }

int startup_command(Args args) {
  std::string run_dir;
  ReportOutputs outputs;
  const format::OptionsRead read = format::read_options(kStartupOptions, args);
  if (auto stop = read_report_args(read, "startup", startup_help(), "run directory", run_dir, outputs)) return *stop;
  {
    std::error_code ec;
    const std::filesystem::path p(run_dir);
    if (std::filesystem::is_regular_file(p, ec) ||
        (std::filesystem::is_directory(p, ec) && !std::filesystem::exists(p / "run.json", ec) &&
         !std::filesystem::exists(p / "rank00000.flight", ec)))
      return startup_from_log(run_dir, outputs);
  }
  auto report = analyzers::analyze_startup(run_dir);
  if (!report.ok()) {
    std::fprintf(stderr, "rankscope startup: %s\n", report.status().user_text().c_str());
    return 2;
  }
  // With JSON on stdout, stdout carries only JSON.
  if (!outputs.quiet)
    std::fputs(analyzers::startup_report_text(*report).c_str(), outputs.json_path == "-" ? stderr : stdout);
  if (!write_report_outputs(analyzers::startup_report_json(*report), outputs, "rankscope startup: " + run_dir)) return 2;
  return report->findings.empty() ? 0 : 1;
}

}  // namespace rankscope::cli
