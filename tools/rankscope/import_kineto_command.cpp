// import_kineto_command.cpp — `rankscope import-kineto TRACE... -o RUN_DIR`: PyTorch profiler
// (Kineto) traces, one per rank, written as a run directory; with --slurm/--hosts, read on the nodes
// where they were written (kineto_gather.h). Thin: rankscope_kineto, rankscope_gather.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "import_summary_output.h"
#include "rankscope/cli/gather_cli.h"
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
    "Traces on the nodes' own disks (a big job's are too many to copy):\n"
    "  rankscope import-kineto DIR --slurm JOBID -o RUN_DIR\n"
    "  rankscope import-kineto DIR --hosts FILE --exec 'ssh {host}' -o RUN_DIR\n"
    "DIR (or files) as the nodes see them. Every node reads its own traces (`rankscope kineto-pack`, the\n"
    "rankscope at this one's path or --remote-rankscope PATH), in parallel, and sends only what the import\n"
    "keeps; RUN_DIR is what a local import of the same files writes, each trace named host:path. Also\n"
    "--deadline SECONDS (default 600) and --max-parallel N, as for `rankscope gather`. A node that fails\n"
    "or stays silent is named, its ranks missing from the import (exit 1).\n\n"
    "Ranks: distributedInfo.rank, else a number in the file name (rank3.json.gz); never the sorted order.\n"
    "Clocks: each trace's baseTimeNanoseconds, aligned on the end times of the all-reduces the ranks share.\n"
    "Read: every category Kineto has written (2020 on) for CUDA, ROCm, XPU, PrivateUse1, HPU and MTIA; device\n"
    "records it cannot place are counted and reported as not read, never shown as device time.\n"
    "Best traces: one file per rank, with_stack=False (stacks only add bytes), record_shapes as you like.\n\n"
    "exit status: 0 written (a partial import says what it dropped), 2 bad arguments or unreadable traces\n";

// "412 kB", "3.1 MB": sizes of traces and of what moved, in the units a file listing uses.
std::string megabytes(uint64_t bytes) {
  return bytes < 1000000 ? fmt::format("{:.0f} kB", bytes / 1e3) : fmt::format("{:.1f} MB", bytes / 1e6);
}

}  // namespace

int import_kineto_command(Args args) {
  std::vector<std::filesystem::path> inputs;
  std::vector<std::string_view> gather_args;  // --slurm/--hosts and their company, with values
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
    bool gather_value = false;
    if (rankscope::cli::is_gather_flag(a, &gather_value)) {
      gather_args.push_back(a);
      if (gather_value && has_value) gather_args.push_back(args[++i]);
      continue;
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
  if (!gather_args.empty()) {
    std::vector<std::string> on_nodes;
    for (const auto& p : inputs) on_nodes.push_back(p.string());
    auto r = rankscope::cli::import_kineto_on_nodes(gather_args, on_nodes, out, options);
    if (!r.ok()) {
      std::fprintf(stderr, "rankscope import-kineto: %s\n", r.status().user_text().c_str());
      return 2;
    }
    if (!quiet) print_import_summary("import-kineto", r->summary, out);
    int with_traces = 0;
    for (const auto& n : r->nodes) with_traces += n.answered && n.traces > 0;
    std::printf("read on %d of %zu nodes: %s of traces there, %s moved to this host (%.1fx less), %.1f s\n", with_traces,
                r->nodes.size(), megabytes(r->trace_bytes).c_str(), megabytes(r->stream_bytes).c_str(),
                r->stream_bytes > 0 ? double(r->trace_bytes) / double(r->stream_bytes) : 0.0, r->seconds);
    for (const auto& n : r->nodes) {
      if (n.answered && n.traces == 0) std::printf("  %s: no trace there\n", n.host.c_str());
      else if (n.answered) std::printf("  %s: %d trace%s, %s, sent %s in %.1f s\n", n.host.c_str(), n.traces, n.traces == 1 ? "" : "s",
                                       megabytes(n.trace_bytes).c_str(), megabytes(n.stream_bytes).c_str(), n.seconds);
      else std::printf("  %s: no traces: %s\n", n.host.c_str(), n.reason.c_str());
    }
    return r->answered() < int(r->nodes.size()) ? 1 : 0;
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
