// export_command.cpp — `rankscope export RUN_DIR --chrome FILE`: a Chrome trace for Perfetto.
// Thin: rankscope_reports_trace.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "command_line.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/format/option_table.h"
#include "rankscope/reports/chrome_trace.h"
#include "rankscope/torch_fr/fr_chrome.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kExportOptions[] = {
    {"--chrome", "FILE", "the trace file to write"},
    {"--steps", "A-B", "only steps A..B (inclusive); a long run's full trace is large"},
    {"--comm-kernel", "REGEX",
     "kernels whose name this finds are communication (category \"comm\"), beside\n"
     "the built-in rules; repeat for more"},
};

const std::string& export_help() {
  static const std::string text =
      "usage: rankscope export RUN_DIR --chrome FILE [--steps A-B] [--comm-kernel REGEX]...\n\n"
      "Writes the run as a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing):\n"
      "(RUN_DIR may also be PyTorch Flight Recorder dumps, a directory or a file prefix: then one\n"
      "track per rank and process group, each collective from enqueue to completion)\n"
      "one process per rank on the aligned clock; steps, collectives per communicator with flow\n"
      "arrows from the last arriver to the ranks that waited for it, the capture window's ranges\n"
      "(--trace-steps of gpt2-train), GPU kernels and counters.\n\n" +
      format::options_help(kExportOptions, 17) +
      "\nexit status: 0 written, 2 bad arguments, no readable run or a write error\n";
  return text;
}

// The values of --steps and --comm-kernel into `options`; false after saying which one is bad (an
// empty one too).
bool read_export_values(const format::ParsedOptions& parsed, reports::ChromeTraceOptions& options) {
  for (const std::string_view v : parsed.all_values("--steps")) {
    auto w = analyzers::parse_steps(v);
    if (!w.ok()) {
      std::fprintf(stderr, "rankscope export: %s\n", w.status().message().c_str());
      return false;
    }
    options.first_step = w->first;
    options.last_step = w->second;
  }
  for (const std::string_view v : parsed.all_values("--comm-kernel")) {
    if (v.empty()) {
      std::fprintf(stderr, "rankscope export: --comm-kernel needs a regular expression\n");
      return false;
    }
    options.comm_kernel_patterns.emplace_back(v);
  }
  return true;
}

// The command line: the exit code when the command stops here (0 after --help, 2 after saying what
// is wrong), nullopt when `run_dir`, `chrome` and `options` are set and it goes on.
std::optional<int> read_export_args(Args args, std::string& run_dir, std::string& chrome,
                                    reports::ChromeTraceOptions& options) {
  format::OptionsRead read = format::read_options(kExportOptions, args);
  if (read.refused && read.refused->missing_value && read.refused->arg == "--chrome") {
    std::fprintf(stderr, "rankscope export: --chrome needs a file name\n");
    return 2;
  }
  // --steps and --comm-kernel say the same of a missing value as of an empty one.
  read_missing_value_as_empty(kExportOptions, read);
  if (!read_export_values(read.parsed, options)) return 2;
  chrome = std::string(read.parsed.value("--chrome").value_or(""));
  const OneInput dir = one_input(read.parsed.positionals);
  if (dir.dash) return unknown_option("export", "-", export_help());
  if (dir.second) {
    std::fprintf(stderr, "rankscope export: one run directory only\n");
    return 2;
  }
  if (read.refused) return unknown_option("export", read.refused->arg, export_help());
  if (read.parsed.help) {
    std::fputs(export_help().c_str(), stdout);
    return 0;
  }
  run_dir = dir.path;
  if (run_dir.empty() || chrome.empty()) {
    std::fprintf(stderr, "rankscope export: %s\n\n%s",
                 run_dir.empty() ? "no run directory given" : "say where: --chrome FILE", export_help().c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace

std::span<const format::Option> export_options() { return kExportOptions; }

int export_command(Args args) {
  std::string run_dir, chrome;
  reports::ChromeTraceOptions options;
  if (auto stop = read_export_args(args, run_dir, chrome, options)) return *stop;
  const std::string tmp = chrome + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  if (!out) {
    std::fprintf(stderr, "rankscope export: cannot write %s; hint: does its directory exist?\n", chrome.c_str());
    return 2;
  }
  if (!std::filesystem::exists(std::filesystem::path(run_dir) / "run.json") && torch_fr::looks_like_fr_dumps(run_dir)) {
    // PyTorch Flight Recorder dumps: one track per rank and process group.
    auto imp = torch_fr::import_fr_dumps(run_dir);
    Result<torch_fr::FrChromeSummary> fr = imp.ok() ? torch_fr::write_fr_chrome_trace(*imp, out) : Result<torch_fr::FrChromeSummary>(imp.status());
    out.close();
    if (!fr.ok() || !out || std::rename(tmp.c_str(), chrome.c_str()) != 0) {
      std::remove(tmp.c_str());
      std::fprintf(stderr, "rankscope export: %s\n", fr.ok() ? "write failed" : fr.status().user_text().c_str());
      return 2;
    }
    std::printf("%s\nrankscope export: %s: %d ranks, %llu events\n", imp->summary.c_str(), chrome.c_str(), fr->ranks,
                static_cast<unsigned long long>(fr->events));
    return 0;
  }
  auto summary = reports::export_chrome_trace(run_dir, out, options);
  out.close();
  if (!summary.ok() || !out) {
    std::remove(tmp.c_str());
    std::fprintf(stderr, "rankscope export: %s\n", summary.ok() ? "write failed" : summary.status().user_text().c_str());
    return 2;
  }
  if (std::rename(tmp.c_str(), chrome.c_str()) != 0) {
    std::fprintf(stderr, "rankscope export: cannot rename %s into place\n", tmp.c_str());
    return 2;
  }
  for (const auto& p : summary->problems) std::fprintf(stderr, "problem: %s\n", p.c_str());
  std::printf("rankscope export: %s: %d ranks, %llu events, %llu flow arrows\n", chrome.c_str(), summary->ranks,
              (unsigned long long)summary->events, (unsigned long long)summary->flows);
  return 0;
}

}  // namespace rankscope::cli
