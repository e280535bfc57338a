// kernels_command.cpp — `rankscope kernels`: the device timeline of each rank as Holistic Trace
// Analysis shows it (compute/communication overlap, idle time by cause, kernel breakdown, launch
// statistics, queue length), from the capture window of a run directory. Thin:
// rankscope_analyzers_device_timeline.
#include <charconv>
#include <cstdio>
#include <string>

#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"
#include "rankscope/analyzers/device_timeline/kernels_text.h"
#include "rankscope/format/json_text.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kKernelsHelp =
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
    "Launch figures need launch records, which imports write (re-import older run directories).\n\n"
    "  --json        print the report as JSON on stdout (kind rankscope.kernels, schema_version 1)\n"
    "  --rank N      only rank N\n"
    "  --comm-kernel REGEX\n"
    "                GPU kernels whose name this finds are communication, beside the built-in rules\n"
    "                (NCCL, DeepEP, NVSHMEM, MSCCL++, custom all-reduce, ...); repeat for more\n\n"
    "exit status: 0 no findings, 1 findings, 2 bad arguments, no readable run, or no traced kernels\n";

}  // namespace

int kernels_command(Args args) {
  std::string run_dir;
  bool json = false;
  analyzers::KernelsOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kKernelsHelp, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--rank" || a == "--comm-kernel") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "rankscope kernels: %s needs a value\n", std::string(a).c_str());
        return 2;
      }
      const std::string_view v = args[++i];
      if (a == "--comm-kernel") {
        options.comm_kernel_patterns.emplace_back(v);
        continue;
      }
      int rank = -1;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), rank);
      if (ec != std::errc() || end != v.data() + v.size() || rank < 0) {
        std::fprintf(stderr, "rankscope kernels: --rank takes a rank number, not '%s'\n", std::string(v).c_str());
        return 2;
      }
      options.rank = rank;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope kernels: unknown option '%s' (see --help)\n", std::string(a).c_str());
      return 2;
    } else if (run_dir.empty()) {
      run_dir = std::string(a);
    } else {
      std::fprintf(stderr, "rankscope kernels: one run directory only (got '%s' and '%s')\n", run_dir.c_str(), std::string(a).c_str());
      return 2;
    }
  }
  if (run_dir.empty()) {
    std::fputs(kKernelsHelp, stderr);
    return 2;
  }
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
