// kernels_command.cpp — `rankscope kernels`: the device timeline of each rank as Holistic Trace
// Analysis shows it (compute/communication overlap, idle time by cause, kernel breakdown, launch
// statistics, queue length), from the capture window of a run directory. Thin:
// rankscope_analyzers_device_timeline.
#include <cstdio>
#include <optional>
#include <string>

#include "command_line.h"
#include "option_values.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"
#include "rankscope/analyzers/device_timeline/kernels_text.h"
#include "rankscope/format/json_text.h"
#include "rankscope/format/option_table.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kKernelsOptions[] = {
    {"--json", "", "print the report as JSON on stdout (kind rankscope.kernels, schema_version 1)"},
    {"--rank", "N", "only rank N"},
    {"--comm-kernel", "REGEX",
     "GPU kernels whose name this finds are communication, beside the built-in rules\n"
     "(NCCL, DeepEP, NVSHMEM, MSCCL++, custom all-reduce, ...); repeat for more"},
};

const std::string& kernels_help() {
  static const std::string text =
      "usage: rankscope kernels RUN_DIR [--json] [--rank N] [--comm-kernel REGEX]...\n\n"
      "Each rank's GPU timeline in the traced steps (the capture window: probe --trace-steps, or an nsys\n"
      "or Kineto import), analysed as Holistic Trace Analysis does (docs/KINETO.md says where we differ):\n"
      "  overlap      the share of communication-kernel time during which a compute kernel also runs,\n"
      "               and the communication time per step that is not hidden\n"
      "  idle         GPU gaps by cause, per stream and for the device: host wait (the next op was\n"
      "               launched after the gap began: the CPU was late), kernel wait (gaps under 30 us\n"
      "               between back-to-back ops), other; a rank waiting mostly on its host is host-bound\n"
      "  breakdown    kernel time by kind (compute, communication, memory), the top kernels of each,\n"
      "               and their spread across ranks (min, median, max and which rank)\n"
      "  launches     per launch: the call's host time, the op's device time, the launch delay (op begin\n"
      "               minus call end); outliers: calls over 50 us, delays over 100 us\n"
      "  queue        ops launched and not yet started, per stream: its maximum and the time spent there\n"
      "Launch figures need launch records, which imports write (re-import older run directories).\n\n" +
      format::options_help(kKernelsOptions, 16) +
      "\nexit status: 0 no findings, 1 findings, 2 bad arguments, no readable run, or no traced kernels\n";
  return text;
}

// Says "unknown option" as this command always has: without the help, pointing to it; returns 2.
int unknown_kernels_option(std::string_view arg) {
  std::fprintf(stderr, "rankscope kernels: unknown option '%s' (see --help)\n", std::string(arg).c_str());
  return 2;
}

// The command line: the exit code when the command stops here (0 after --help, 2 after saying what
// is wrong), nullopt when `run_dir`, `json` and `options` are set and it goes on.
std::optional<int> read_kernels_args(Args args, std::string& run_dir, bool& json, analyzers::KernelsOptions& options) {
  const format::OptionsRead read = format::read_options(kKernelsOptions, args);
  for (const std::string_view v : read.parsed.all_values("--rank")) {
    const auto rank = number_at_least(v, 0);
    if (!rank) {
      std::fprintf(stderr, "rankscope kernels: --rank takes a rank number, not '%s'\n", std::string(v).c_str());
      return 2;
    }
    options.rank = *rank;
  }
  for (const std::string_view v : read.parsed.all_values("--comm-kernel")) options.comm_kernel_patterns.emplace_back(v);
  const OneInput dir = one_input(read.parsed.positionals);
  if (dir.dash) return unknown_kernels_option("-");
  if (dir.second) {
    std::fprintf(stderr, "rankscope kernels: one run directory only (got '%s' and '%s')\n", dir.path.c_str(),
                 std::string(*dir.second).c_str());
    return 2;
  }
  if (read.refused && read.refused->missing_value) {
    std::fprintf(stderr, "rankscope kernels: %s needs a value\n", std::string(read.refused->arg).c_str());
    return 2;
  }
  if (read.refused) return unknown_kernels_option(read.refused->arg);
  if (read.parsed.help) {
    std::fputs(kernels_help().c_str(), stdout);
    return 0;
  }
  if (dir.path.empty()) {
    std::fputs(kernels_help().c_str(), stderr);
    return 2;
  }
  run_dir = dir.path;
  json = read.parsed.has("--json");
  return std::nullopt;
}

}  // namespace

std::span<const format::Option> kernels_options() { return kKernelsOptions; }

int kernels_command(Args args) {
  std::string run_dir;
  bool json = false;
  analyzers::KernelsOptions options;
  if (auto stop = read_kernels_args(args, run_dir, json, options)) return *stop;
  auto report = analyzers::analyze_kernels(run_dir, options);
  if (!report.ok()) {
    std::fprintf(stderr, "rankscope kernels: %s\n", report.status().user_text().c_str());
    return 2;
  }
  if (json) std::fputs((format::json_text(analyzers::kernels_report_json(*report), 2) + "\n").c_str(), stdout);
  else std::fputs(analyzers::kernels_report_text(*report).c_str(), stdout);
  bool any = false;
  for (const auto& r : report->ranks) any |= r.problem.empty();
  if (!any) {
    std::fprintf(stderr, "rankscope kernels: %s has no traced GPU kernels to analyse (trace some steps: --trace-steps, or "
                         "import a profiler trace with GPU activity)\n", run_dir.c_str());
    return 2;
  }
  return report->findings.empty() ? 0 : 1;
}

}  // namespace rankscope::cli
