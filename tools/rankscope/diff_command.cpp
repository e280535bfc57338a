// diff_command.cpp — `rankscope diff BASE NEW`: why is this run slower than that one. Thin:
// rankscope_analyzers_diff.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rankscope/analyzers/diff/run_diff.h"
#include "report_output.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kDiffHelp =
    "usage: rankscope diff BASE NEW [--warmup-steps N] [--json FILE] [--html FILE] [--quiet]\n\n"
    "Compares two runs (run directories of any source: our probe, rankscope import-nsys or\n"
    "import-kineto, a gathered run): the median step time of each with the noise its own spread allows,\n"
    "then where the mean step's change went, in parts that add up to it (compute per top-level range,\n"
    "collective wait and transfer, memcpy, idle), each with its cause where one is found (the range\n"
    "below it that changed most, block indices folded; a new straggler; more collectives), the ranks\n"
    "compared rank by rank, or by role (tp rank, ep rank) where the world sizes or groups differ, and\n"
    "the settings that differ in run.json, with the factor a longer sequence predicts for attention.\n\n"
    "  --warmup-steps N  steps left out at the start of each run with more than N + 2 (default 1:\n"
    "                the first step's start-up is not the job's pace); 0 compares every step\n"
    "  --json FILE   write the report as JSON (kind rankscope.diff, schema_version 2); '-' = stdout,\n"
    "                and then the text goes to stderr\n"
    "  --html FILE   write a self-contained HTML report (the waterfall, each part in both runs)\n"
    "  --quiet, -q   no text report\n\n"
    "exit status: 0 no significant difference, 1 NEW differs, 2 bad arguments or unreadable runs\n";

}  // namespace

int diff_command(Args args) {
  std::string base, now;
  ReportOutputs outputs;
  analyzers::DiffOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kDiffHelp, stdout);
      return 0;
    } else if ((a == "--json" || a == "--html") && i + 1 < args.size()) {
      (a == "--json" ? outputs.json_path : outputs.html_path) = std::string(args[++i]);
    } else if (a == "--warmup-steps" && i + 1 < args.size()) {
      const std::string v(args[++i]);
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > 1000000) {
        std::fprintf(stderr, "rankscope diff: --warmup-steps takes a whole number of steps, 0 or more (got '%s')\n", v.c_str());
        return 2;
      }
      options.warmup_steps = n;
    } else if (a == "--quiet" || a == "-q") {
      outputs.quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope diff: unknown option or missing value: '%s'\n\n%s", std::string(a).c_str(), kDiffHelp);
      return 2;
    } else if (base.empty()) {
      base = a;
    } else if (now.empty()) {
      now = a;
    } else {
      std::fprintf(stderr, "rankscope diff: two runs, BASE and NEW (got a third: '%s')\n", std::string(a).c_str());
      return 2;
    }
  }
  if (now.empty()) {
    std::fputs(kDiffHelp, stderr);
    return 2;
  }
  auto r = analyzers::diff_runs(base, now, options);
  if (!r.ok()) {
    std::string message = r.status().user_text();
    // Other software's files are not run directories until imported: say how.
    if (message.find("not a rankscope run directory") != std::string::npos)
      message += "\n(profiler traces and Nsight Systems exports become run directories with `rankscope import-kineto` "
                 "and `rankscope import-nsys`; PyTorch Flight Recorder dumps and logs are read by `hangdoctor DIR`)";
    std::fprintf(stderr, "rankscope diff: %s\n", message.c_str());
    return 2;
  }
  if (!outputs.quiet) std::fputs(analyzers::diff_report_text(*r).c_str(), outputs.json_path == "-" ? stderr : stdout);
  if (!write_report_outputs(analyzers::diff_report_json(*r), outputs, "rankscope diff: " + base + " vs " + now)) return 2;
  return r->significant ? 1 : 0;
}

}  // namespace rankscope::cli
