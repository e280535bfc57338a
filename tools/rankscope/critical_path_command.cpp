// critical_path_command.cpp — `rankscope critical-path RUN_DIR`: what set each step's length,
// across ranks (analyzers/critical_path). Thin: options in, report out.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/format/json_text.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kCriticalPathHelp =
    "usage: rankscope critical-path RUN_DIR [--json FILE] [--steps A-B] [--comm-kernel REGEX]...\n\n"
    "Walks each step back from its end through what held it: host ranges, GPU kernels on their\n"
    "streams, launches, and every collective to the rank that reached it last. Prints the time on\n"
    "the path by kind, by rank, by rank and range, by kernel and collective, and the last step's\n"
    "path. Uses the capture window's ranges, kernels and launches where the run has them; without\n"
    "them host time on the path is unnamed (docs/CRITICAL_PATH.md).\n\n"
    "  --json FILE   write the report as JSON ('-' = stdout; every step's segments)\n"
    "  --steps A-B   only steps A..B (inclusive)\n"
    "  --comm-kernel REGEX\n"
    "                kernels whose name this finds are communication (docs/FORMAT.md, TRACE_KERNELS)\n\n"
    "exit status: 0 report made, 2 bad arguments or no readable run\n";

}  // namespace

int critical_path_command(Args args) {
  std::string run_dir, json_path;
  analyzers::CriticalPathOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string_view { return i + 1 < args.size() ? args[++i] : std::string_view(); };
    if (a == "--help" || a == "-h") {
      std::fputs(kCriticalPathHelp, stdout);
      return 0;
    } else if (a == "--json" || a == "--comm-kernel") {
      const std::string_view v = value();
      if (v.empty()) {
        std::fprintf(stderr, "rankscope critical-path: %s needs a value\n", std::string(a).c_str());
        return 2;
      }
      if (a == "--json") json_path = std::string(v);
      else options.comm_kernel_patterns.emplace_back(v);
    } else if (a == "--steps") {
      auto w = analyzers::parse_steps(value());
      if (!w.ok()) {
        std::fprintf(stderr, "rankscope critical-path: %s\n", w.status().message().c_str());
        return 2;
      }
      options.first_step = w->first;
      options.last_step = w->second;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope critical-path: unknown option '%s'\n\n%s", std::string(a).c_str(), kCriticalPathHelp);
      return 2;
    } else if (run_dir.empty()) {
      run_dir = std::string(a);
    } else {
      std::fprintf(stderr, "rankscope critical-path: one run directory only\n");
      return 2;
    }
  }
  if (run_dir.empty()) {
    std::fprintf(stderr, "rankscope critical-path: no run directory given\n\n%s", kCriticalPathHelp);
    return 2;
  }
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
