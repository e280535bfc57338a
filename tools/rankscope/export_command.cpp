// export_command.cpp — `rankscope export RUN_DIR --chrome FILE`: a Chrome trace for Perfetto.
// Thin: rankscope_reports_trace.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/reports/chrome_trace.h"
#include "rankscope/torch_fr/fr_chrome.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kExportHelp =
    "usage: rankscope export RUN_DIR --chrome FILE [--steps A-B] [--comm-kernel REGEX]...\n\n"
    "Writes the run as a Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing):\n"
    "(RUN_DIR may also be PyTorch Flight Recorder dumps, a directory or a file prefix: then one\n"
    "track per rank and process group, each collective from enqueue to completion)\n"
    "one process per rank on the aligned clock; steps, collectives per communicator with flow\n"
    "arrows from the last arriver to the ranks that waited for it, the capture window's ranges\n"
    "(--trace-steps of gpt2-train), GPU kernels and counters.\n\n"
    "  --chrome FILE  the trace file to write\n"
    "  --steps A-B    only steps A..B (inclusive); a long run's full trace is large\n"
    "  --comm-kernel REGEX\n"
    "                 kernels whose name this finds are communication (category \"comm\"), beside\n"
    "                 the built-in rules; repeat for more\n\n"
    "exit status: 0 written, 2 bad arguments, no readable run or a write error\n";

}  // namespace

int export_command(Args args) {
  std::string run_dir, chrome;
  reports::ChromeTraceOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kExportHelp, stdout);
      return 0;
    } else if (a == "--chrome") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "rankscope export: --chrome needs a file name\n");
        return 2;
      }
      chrome = std::string(args[++i]);
    } else if (a == "--steps") {
      auto w = analyzers::parse_steps(i + 1 < args.size() ? args[++i] : std::string_view());
      if (!w.ok()) {
        std::fprintf(stderr, "rankscope export: %s\n", w.status().message().c_str());
        return 2;
      }
      options.first_step = w->first;
      options.last_step = w->second;
    } else if (a == "--comm-kernel") {
      if (i + 1 >= args.size() || args[i + 1].empty()) {
        std::fprintf(stderr, "rankscope export: --comm-kernel needs a regular expression\n");
        return 2;
      }
      options.comm_kernel_patterns.emplace_back(args[++i]);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope export: unknown option '%s'\n\n%s", std::string(a).c_str(), kExportHelp);
      return 2;
    } else if (run_dir.empty()) {
      run_dir = std::string(a);
    } else {
      std::fprintf(stderr, "rankscope export: one run directory only\n");
      return 2;
    }
  }
  if (run_dir.empty() || chrome.empty()) {
    std::fprintf(stderr, "rankscope export: %s\n\n%s", run_dir.empty() ? "no run directory given" : "say where: --chrome FILE", kExportHelp);
    return 2;
  }
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
