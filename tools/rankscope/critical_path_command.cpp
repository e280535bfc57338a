// critical_path_command.cpp — `rankscope critical-path RUN_DIR`: what set each step's length,
// across ranks (analyzers/critical_path). Thin: options in, report out.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/format/json_text.h"
#include "rankscope/format/option_table.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kCriticalPathOptions[] = {
    {"--json", "FILE", "write the report as JSON ('-' = stdout; every step's segments)"},
    {"--steps", "A-B", "only steps A..B (inclusive)"},
    {"--comm-kernel", "REGEX", "kernels whose name this finds are communication (docs/FORMAT.md, TRACE_KERNELS)"},
};

const std::string& critical_path_help() {
  static const std::string text =
      "usage: rankscope critical-path RUN_DIR [--json FILE] [--steps A-B] [--comm-kernel REGEX]...\n\n"
      "Walks each step back from its end through what held it: host ranges, GPU kernels on their\n"
      "streams, launches, and every collective to the rank that reached it last. Prints the time on\n"
      "the path by kind, by rank, by rank and range, by kernel and collective, and the last step's\n"
      "path. Uses the capture window's ranges, kernels and launches where the run has them; without\n"
      "them host time on the path is unnamed (docs/CRITICAL_PATH.md).\n\n" +
      format::options_help(kCriticalPathOptions, 16) +
      "\nexit status: 0 report made, 2 bad arguments or no readable run\n";
  return text;
}

// The values of --json, --comm-kernel and --steps into `json_path` and `options`; false after saying
// which one is bad (an empty one too).
bool read_critical_path_values(const format::ParsedOptions& parsed, std::string& json_path,
                               analyzers::CriticalPathOptions& options) {
  for (const char* flag : {"--json", "--comm-kernel"}) {
    for (const std::string_view v : parsed.all_values(flag)) {
      if (!v.empty()) continue;
      std::fprintf(stderr, "rankscope critical-path: %s needs a value\n", flag);
      return false;
    }
  }
  json_path = std::string(parsed.value("--json").value_or(""));
  for (const std::string_view v : parsed.all_values("--comm-kernel")) options.comm_kernel_patterns.emplace_back(v);
  for (const std::string_view v : parsed.all_values("--steps")) {
    auto w = analyzers::parse_steps(v);
    if (!w.ok()) {
      std::fprintf(stderr, "rankscope critical-path: %s\n", w.status().message().c_str());
      return false;
    }
    options.first_step = w->first;
    options.last_step = w->second;
  }
  return true;
}

// The command line: the exit code when the command stops here (0 after --help, 2 after saying what
// is wrong), nullopt when `run_dir`, `json_path` and `options` are set and it goes on.
std::optional<int> read_critical_path_args(Args args, std::string& run_dir, std::string& json_path,
                                           analyzers::CriticalPathOptions& options) {
  format::OptionsRead read = format::read_options(kCriticalPathOptions, args);
  // Each value flag says the same of a missing value as of an empty one.
  read_missing_value_as_empty(kCriticalPathOptions, read);
  if (!read_critical_path_values(read.parsed, json_path, options)) return 2;
  const OneInput dir = one_input(read.parsed.positionals);
  if (dir.dash) return unknown_option("critical-path", "-", critical_path_help());
  if (dir.second) {
    std::fprintf(stderr, "rankscope critical-path: one run directory only\n");
    return 2;
  }
  if (read.refused) return unknown_option("critical-path", read.refused->arg, critical_path_help());
  if (read.parsed.help) {
    std::fputs(critical_path_help().c_str(), stdout);
    return 0;
  }
  if (dir.path.empty()) {
    std::fprintf(stderr, "rankscope critical-path: no run directory given\n\n%s", critical_path_help().c_str());
    return 2;
  }
  run_dir = dir.path;
  return std::nullopt;
}

}  // namespace

std::span<const format::Option> critical_path_options() { return kCriticalPathOptions; }

int critical_path_command(Args args) {
  std::string run_dir, json_path;
  analyzers::CriticalPathOptions options;
  if (auto stop = read_critical_path_args(args, run_dir, json_path, options)) return *stop;
  auto report = analyzers::analyze_critical_path(run_dir, options);
  if (!report.ok()) {
    std::fprintf(stderr, "rankscope critical-path: %s\n", report.status().user_text().c_str());
    return 2;
  }
  if (json_path != "-") analyzers::write_critical_path_text(*report, std::cout);
  if (!json_path.empty()) {
    const std::string text = format::json_text(analyzers::critical_path_json(*report)) + "\n";
    if (json_path == "-") {
      std::cout << text;
    } else {
      std::ofstream out(json_path, std::ios::binary);
      out << text;
      if (!out.flush()) {
        std::fprintf(stderr, "rankscope critical-path: cannot write %s\n", json_path.c_str());
        return 2;
      }
    }
  }
  return 0;
}

}  // namespace rankscope::cli
