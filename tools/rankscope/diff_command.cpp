// diff_command.cpp — `rankscope diff BASE NEW`: why is this run slower than that one. Thin:
// rankscope_analyzers_diff.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/format/option_table.h"
#include "report_output.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kDiffOptions[] = {
    {"--warmup-steps", "N",
     "steps left out at the start of each run with more than N + 2 (default 1:\n"
     "the first step's start-up is not the job's pace); 0 compares every step"},
    {"--json", "FILE",
     "write the report as JSON (kind rankscope.diff, schema_version 2); '-' = stdout,\n"
     "and then the text goes to stderr"},
    {"--html", "FILE", "write a self-contained HTML report (the waterfall, each part in both runs)"},
    {"--quiet", "", "no text report", "-q"},
};

const std::string& diff_help() {
  static const std::string text =
      "usage: rankscope diff BASE NEW [--warmup-steps N] [--json FILE] [--html FILE] [--quiet]\n\n"
      "Compares two runs (run directories of any source: our probe, rankscope import-nsys or\n"
      "import-kineto, a gathered run): the median step time of each with the noise its own spread allows,\n"
      "then where the mean step's change went, in parts that add up to it (compute per top-level range,\n"
      "collective wait and transfer, memcpy, idle), each with its cause where one is found (the range\n"
      "below it that changed most, block indices folded; a new straggler; more collectives), the ranks\n"
      "compared rank by rank, or by role (tp rank, ep rank) where the world sizes or groups differ, and\n"
      "the settings that differ in run.json, with the factor a longer sequence predicts for attention.\n\n" +
      format::options_help(kDiffOptions, 16) +
      "\nexit status: 0 no significant difference, 1 NEW differs, 2 bad arguments or unreadable runs\n";
  return text;
}

// Says what is wrong with `arg`, in the words this command has always used for an unknown option and a
// value flag with nothing after it alike; returns 2.
int refuse(std::string_view arg) {
  std::fprintf(stderr, "rankscope diff: unknown option or missing value: '%s'\n\n%s", std::string(arg).c_str(),
               diff_help().c_str());
  return 2;
}

// --warmup-steps N: a whole number of steps, read with strtol (so "+5" and " 5" count, as they always did).
std::optional<int64_t> warmup_steps(std::string_view text) {
  const std::string v(text);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > 1000000) return std::nullopt;
  return n;
}

// The command line: the exit code when the command stops here (0 after --help, 2 after saying what
// is wrong), nullopt when `base`, `now`, `outputs` and `options` are set and it goes on.
std::optional<int> read_diff_args(Args args, std::string& base, std::string& now, ReportOutputs& outputs,
                                  analyzers::DiffOptions& options) {
  const format::OptionsRead read = format::read_options(kDiffOptions, args);
  for (const std::string_view v : read.parsed.all_values("--warmup-steps")) {
    const auto n = warmup_steps(v);
    if (!n) {
      std::fprintf(stderr, "rankscope diff: --warmup-steps takes a whole number of steps, 0 or more (got '%s')\n",
                   std::string(v).c_str());
      return 2;
    }
    options.warmup_steps = *n;
  }
  for (const std::string_view p : read.parsed.positionals) {
    if (p == "-") return refuse(p);
    if (base.empty()) {
      base = p;
    } else if (now.empty()) {
      now = p;
    } else {
      std::fprintf(stderr, "rankscope diff: two runs, BASE and NEW (got a third: '%s')\n", std::string(p).c_str());
      return 2;
    }
  }
  if (read.refused) return refuse(read.refused->arg);
  if (read.parsed.help) {
    std::fputs(diff_help().c_str(), stdout);
    return 0;
  }
  if (now.empty()) {
    std::fputs(diff_help().c_str(), stderr);
    return 2;
  }
  outputs = report_outputs(read.parsed);
  return std::nullopt;
}

}  // namespace

std::span<const format::Option> diff_options() { return kDiffOptions; }

int diff_command(Args args) {
  std::string base, now;
  ReportOutputs outputs;
  analyzers::DiffOptions options;
  if (auto stop = read_diff_args(args, base, now, outputs, options)) return *stop;
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
