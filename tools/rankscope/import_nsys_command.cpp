// import_nsys_command.cpp — `rankscope import-nsys REP.sqlite... -o RUN_DIR`: Nsight Systems SQLite
// exports of any job written as a run directory. Thin: rankscope_nsys.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/nsys/nsys_import.h"
#include "import_summary_output.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr const char* kImportNsysHelp =
    "usage: rankscope import-nsys REP.sqlite... -o RUN_DIR [--step-range NAME] [--nvtx-domain D]...\n"
    "                             [--seq-len T] [--batch B] [--no-trace] [--threads N] [--allow-mixed] [--quiet]\n\n"
    "Reads Nsight Systems SQLite exports (nsys export --type sqlite), one per rank or several ranks per\n"
    "export, read-only, and writes RUN_DIR as rankscope's probe would: run.json and per rank an event\n"
    "stream of ranges, collectives and kernels. Then rankscope skew, scaling, export and inspect work on it.\n\n"
    "  -o, --out RUN_DIR    the run directory to write (created; its old rank files are replaced)\n"
    "  --step-range NAME    the range that frames one iteration (e.g. train_step; 'train_step 12' numbers it);\n"
    "                       default: 'step' (rankscope's own), else steps from a collective that repeats once\n"
    "                       per iteration (the report says so)\n"
    "  --nvtx-domain D      keep the ranges of NVTX domain D (repeatable; 'default' = the unnamed domain);\n"
    "                       default: 'rankscope' when present, else every domain but NCCL. Names outside the\n"
    "                       rankscope domain are nesting paths prefixed with their domain (Megatron:fwd/layer3)\n"
    "  --seq-len T          record training.seq_len = T (one point of a scaling sweep)\n"
    "  --batch B            record training.batch = B (tokens/s in the scaling report)\n"
    "  --no-trace           no per-kernel detail (smaller; export --chrome then shows no ranges or kernels)\n"
    "  --threads N          exports read in parallel (default: one per core)\n"
    "  --allow-mixed        import exports of different jobs (world sizes or clocks far apart) as one, with a warning\n"
    "  --quiet, -q          no provenance table\n\n"
    "Ranks: a rankscope:rank=R/W NVTX mark, else the MPI_RANKS table (nsys profile -t mpi), else RANK in the\n"
    "recorded environment, else a number in the file name (rep_%q{RANK}); never the sorted order.\n"
    "Clocks: session start (UTC), refined by the end times of all-reduce/all-gather kernels, which end together\n"
    "on every member; exact with rankscope:sync marks.\n\n"
    "exit status: 0 written, 2 bad arguments or unreadable exports\n";
}  // namespace

int import_nsys_command(Args args) {
  std::vector<std::filesystem::path> files;
  std::string out;
  bool quiet = false;
  nsys::ImportOptions options;
  options.command_line.push_back("rankscope");
  options.command_line.push_back("import-nsys");
  for (auto a : args) options.command_line.emplace_back(a);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    auto value = [&]() -> std::string_view { return i + 1 < args.size() ? args[++i] : std::string_view(); };
    auto need = [&](std::string_view v) {
      if (!v.empty()) return true;
      std::fprintf(stderr, "rankscope import-nsys: %s needs a value\n", std::string(a).c_str());
      return false;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kImportNsysHelp, stdout);
      return 0;
    } else if (a == "-o" || a == "--out") {
      const auto v = value();
      if (!need(v)) return 2;
      out = std::string(v);
    } else if (a == "--step-range") {
      const auto v = value();
      if (!need(v)) return 2;
      options.step_range = std::string(v);
    } else if (a == "--nvtx-domain") {
      const auto v = value();
      if (!need(v)) return 2;
      options.nvtx_domains.emplace_back(v);
    } else if (const int common = parse_common_import_option("import-nsys", args, i, options, quiet); common != 0) {
      if (common < 0) return 2;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope import-nsys: unknown option '%s'\n\n%s", std::string(a).c_str(), kImportNsysHelp);
      return 2;
    } else {
      files.emplace_back(std::string(a));
    }
  }
  if (files.empty() || out.empty()) {
    std::fprintf(stderr, "rankscope import-nsys: %s\n\n%s", files.empty() ? "no exports given" : "no run directory given (-o RUN_DIR)", kImportNsysHelp);
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
