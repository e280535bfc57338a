// import_nsys_command.cpp — `rankscope import-nsys REP.sqlite... -o RUN_DIR`: Nsight Systems SQLite
// exports of any job written as a run directory. Thin: rankscope_nsys.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "command_line.h"
#include "import_summary_output.h"
#include "rankscope/format/option_table.h"
#include "rankscope/nsys/nsys_import.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kImportNsysOptions[] = {
    {"--out", "RUN_DIR", "the run directory to write (created; its old rank files are replaced)", "-o"},
    {"--step-range", "NAME",
     "the range that frames one iteration (e.g. train_step; 'train_step 12' numbers it);\n"
     "default: 'step' (rankscope's own), else steps from a collective that repeats once\n"
     "per iteration (the report says so)"},
    {"--nvtx-domain", "D",
     "keep the ranges of NVTX domain D (repeatable; 'default' = the unnamed domain);\n"
     "default: 'rankscope' when present, else every domain but NCCL. Names outside the\n"
     "rankscope domain are nesting paths prefixed with their domain (Megatron:fwd/layer3)"},
    {"--seq-len", "T", "record training.seq_len = T (one point of a scaling sweep)"},
    {"--batch", "B", "record training.batch = B (tokens/s in the scaling report)"},
    {"--no-trace", "", "no per-kernel detail (smaller; export --chrome then shows no ranges or kernels)"},
    {"--threads", "N", "exports read in parallel (default: one per core)"},
    {"--allow-mixed", "", "import exports of different jobs (world sizes or clocks far apart) as one, with a warning"},
    {"--quiet", "", "no provenance table", "-q"},
};

const std::string& import_nsys_help() {
  static const std::string text =
      "usage: rankscope import-nsys REP.sqlite... -o RUN_DIR [--step-range NAME] [--nvtx-domain D]...\n"
      "                             [--seq-len T] [--batch B] [--no-trace] [--threads N] [--allow-mixed] [--quiet]\n\n"
      "Reads Nsight Systems SQLite exports (nsys export --type sqlite), one per rank or several ranks per\n"
      "export, read-only, and writes RUN_DIR as rankscope's probe would: run.json and per rank an event\n"
      "stream of ranges, collectives and kernels. Then rankscope skew, scaling, export and inspect work on it.\n\n" +
      format::options_help(kImportNsysOptions) +
      "\n"
      "Ranks: a rankscope:rank=R/W NVTX mark, else the MPI_RANKS table (nsys profile -t mpi), else RANK in the\n"
      "recorded environment, else a number in the file name (rep_%q{RANK}); never the sorted order.\n"
      "Clocks: session start (UTC), refined by the end times of all-reduce/all-gather kernels, which end together\n"
      "on every member; exact with rankscope:sync marks.\n\n"
      "exit status: 0 written, 2 bad arguments or unreadable exports\n";
  return text;
}

// The options whose value is a number (the imports' common ones): with no value, they say what they
// say of an empty one.
bool takes_number(std::string_view flag) { return flag == "--seq-len" || flag == "--batch" || flag == "--threads"; }

// The flag as it was typed before `value` ("-o" or "--out"): a parsed value is a view of its argument.
std::string_view typed_flag(Args args, std::string_view value, std::string_view flag) {
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i].data() == value.data()) return args[i - 1];
  return flag;
}

// The values of -o, --step-range and --nvtx-domain into `out` and `options`; false after saying which
// one is empty (a missing value reads as an empty one: the words are the same).
bool read_import_nsys_values(Args args, const format::ParsedOptions& parsed, std::string& out,
                             nsys::ImportOptions& options) {
  for (const char* flag : {"--out", "--step-range", "--nvtx-domain"}) {
    for (const std::string_view v : parsed.all_values(flag)) {
      if (!v.empty()) continue;
      std::fprintf(stderr, "rankscope import-nsys: %s needs a value\n", std::string(typed_flag(args, v, flag)).c_str());
      return false;
    }
  }
  out = std::string(parsed.value("--out").value_or(""));
  if (const auto step_range = parsed.value("--step-range")) options.step_range = std::string(*step_range);
  for (const std::string_view domain : parsed.all_values("--nvtx-domain")) options.nvtx_domains.emplace_back(domain);
  return true;
}

}  // namespace

std::span<const format::Option> import_nsys_options() { return kImportNsysOptions; }

int import_nsys_command(Args args) {
  std::string out;
  bool quiet = false;
  nsys::ImportOptions options;
  options.command_line.push_back("rankscope");
  options.command_line.push_back("import-nsys");
  for (auto a : args) options.command_line.emplace_back(a);
  format::OptionsRead read = format::read_options(kImportNsysOptions, args);
  // "-o needs a value", the flag as typed; a number's flag says what it says of an empty value (below).
  if (read.refused && read.refused->missing_value && !takes_number(read.refused->arg)) {
    std::fprintf(stderr, "rankscope import-nsys: %s needs a value\n", std::string(read.refused->arg).c_str());
    return 2;
  }
  // --seq-len, --batch, --threads: "needs a positive number, got ''", as of an empty value.
  read_missing_value_as_empty(kImportNsysOptions, read);
  const format::ParsedOptions& parsed = read.parsed;
  if (!read_import_nsys_values(args, parsed, out, options)) return 2;
  if (!read_common_import_options("import-nsys", parsed, options, quiet)) return 2;
  // Every path is an export; "-" is not one (no export comes on stdin).
  if (std::find(parsed.positionals.begin(), parsed.positionals.end(), "-") != parsed.positionals.end())
    return unknown_option("import-nsys", "-", import_nsys_help());
  const std::vector<std::filesystem::path> files(parsed.positionals.begin(), parsed.positionals.end());
  if (read.refused) return unknown_option("import-nsys", read.refused->arg, import_nsys_help());
  if (parsed.help) {
    std::fputs(import_nsys_help().c_str(), stdout);
    return 0;
  }
  if (files.empty() || out.empty()) {
    std::fprintf(stderr, "rankscope import-nsys: %s\n\n%s",
                 files.empty() ? "no exports given" : "no run directory given (-o RUN_DIR)",
                 import_nsys_help().c_str());
    return 2;
  }
  auto summary = nsys::import_nsys(files, out, options);
  if (!summary.ok()) {
    std::fprintf(stderr, "rankscope import-nsys: %s\n", summary.status().user_text().c_str());
    return 2;
  }
  if (!quiet) print_import_summary("import-nsys", *summary, out);
  return 0;
}

}  // namespace rankscope::cli
