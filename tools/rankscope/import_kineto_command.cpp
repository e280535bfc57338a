// import_kineto_command.cpp — `rankscope import-kineto TRACE... -o RUN_DIR`: PyTorch profiler
// (Kineto) traces, one per rank, written as a run directory. Thin: rankscope_kineto.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "import_summary_output.h"
#include "rankscope/kineto/kineto_import.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kImportKinetoHelp =
    "usage: rankscope import-kineto TRACE|DIR... -o RUN_DIR [--step-range NAME] [--seq-len T] [--batch B]\n"
    "                               [--no-trace] [--threads N] [--allow-mixed] [--quiet]\n\n"
    "Reads PyTorch profiler traces (torch.profiler's Chrome-trace JSON, .json or .json.gz, one per rank;\n"
    "a folder means its *.json and *.json.gz) in one streaming pass each and writes RUN_DIR as rankscope's\n"
    "probe would. Then rankscope skew, scaling, export --chrome and inspect work on it.\n\n"
    "  -o, --out RUN_DIR    the run directory to write (created; an earlier import there is replaced)\n"
    "  --step-range NAME    the annotation that frames one iteration (default: ProfilerStep, i.e. ProfilerStep#N)\n"
    "  --seq-len T          record training.seq_len = T (one point of a scaling sweep)\n"
    "  --batch B            record training.batch = B (tokens/s in the scaling report)\n"
    "  --no-trace           no per-kernel detail (smaller; export --chrome then shows no ranges or kernels)\n"
    "  --threads N          traces read in parallel (default: one per core)\n"
    "  --allow-mixed        import traces of different jobs as one, with a warning in run.json (by default traces\n"
    "                       whose world size, process groups, devices differ, or recorded more than 10 min apart,\n"
    "                       are refused)\n"
    "  --quiet, -q          no provenance table\n\n"
    "Ranks: distributedInfo.rank, else a number in the file name (rank3.json.gz); never the sorted order.\n"
    "Clocks: each trace's baseTimeNanoseconds, aligned on the end times of the all-reduces the ranks share.\n"
    "Read: every category Kineto has written (2020 on) for CUDA, ROCm, XPU, PrivateUse1, HPU and MTIA; device\n"
    "records it cannot place are counted and reported as not read, never shown as device time.\n"
    "Best traces: one file per rank, with_stack=False (stacks only add bytes), record_shapes as you like.\n\n"
    "exit status: 0 written (a partial import says what it dropped), 2 bad arguments or unreadable traces\n";

}  // namespace

int import_kineto_command(Args args) {
  std::vector<std::filesystem::path> inputs;
  std::string out;
  bool quiet = false;
  kineto::ImportOptions options;
  options.command_line = {"rankscope", "import-kineto"};
  for (auto a : args) options.command_line.emplace_back(a);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--help" || a == "-h") {
      std::fputs(kImportKinetoHelp, stdout);
      return 0;
    }
    if (a == "-o" || a == "--out" || a == "--step-range") {
      if (!has_value) {
        std::fprintf(stderr, "rankscope import-kineto: %s needs a value\n", std::string(a).c_str());
        return 2;
      }
      (a == "--step-range" ? options.step_range : out) = std::string(args[++i]);
    } else if (const int common = parse_common_import_option("import-kineto", args, i, options, quiet); common != 0) {
      if (common < 0) return 2;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope import-kineto: unknown option '%s'\n\n%s", std::string(a).c_str(), kImportKinetoHelp);
      return 2;
    } else {
      inputs.emplace_back(std::string(a));
    }
  }
  if (inputs.empty() || out.empty()) {
    std::fprintf(stderr, "rankscope import-kineto: %s\n\n%s", inputs.empty() ? "no traces given" : "no run directory given (-o RUN_DIR)", kImportKinetoHelp);
    return 2;
  }
  auto summary = kineto::import_kineto(inputs, out, options);
  if (!summary.ok()) {
    std::fprintf(stderr, "rankscope import-kineto: %s\n", summary.status().user_text().c_str());
    return 2;
  }
  if (!quiet) print_import_summary("import-kineto", *summary, out);
  return 0;
}

}  // namespace rankscope::cli
