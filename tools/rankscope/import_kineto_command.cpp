// import_kineto_command.cpp — `rankscope import-kineto TRACE... -o RUN_DIR`: PyTorch profiler
// (Kineto) traces, one per rank, written as a run directory; with --slurm/--hosts, read on the nodes
// where they were written (kineto_gather.h). Thin: rankscope_kineto, rankscope_gather.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "command_line.h"
#include "import_summary_output.h"
#include "rankscope/cli/gather_cli.h"
#include "rankscope/format/option_table.h"
#include "rankscope/kineto/kineto_import.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kImportKinetoOptions[] = {
    {"--out", "RUN_DIR", "the run directory to write (created; an earlier import there is replaced)", "-o"},
    {"--step-range", "NAME", "the annotation that frames one iteration (default: ProfilerStep, i.e. ProfilerStep#N)"},
    {"--seq-len", "T", "record training.seq_len = T (one point of a scaling sweep)"},
    {"--batch", "B", "record training.batch = B (tokens/s in the scaling report)"},
    {"--no-trace", "", "no per-kernel detail (smaller; export --chrome then shows no ranges or kernels)"},
    {"--threads", "N", "traces read in parallel (default: one per core)"},
    {"--allow-mixed", "",
     "import traces of different jobs as one, with a warning in run.json (by default traces\n"
     "whose world size, process groups, devices differ, or recorded more than 10 min apart,\n"
     "are refused)"},
    {"--quiet", "", "no provenance table", "-q"},
    // The gathering flags (gather_cli.h is_gather_flag), for traces on the nodes' own disks (below).
    {"--slurm", "JOBID", "read the traces on the nodes of this running Slurm job"},
    {"--hosts", "FILE", "read them on these hosts, one a line, each reached with --exec"},
    {"--exec", "T", "the command that reaches a host, {host} replaced (e.g. 'ssh {host}')"},
    {"--deadline", "SECONDS", "nodes not done by then are stopped and named (default 600)"},
    {"--max-parallel", "N", "nodes asked at once (default 256)"},
    {"--remote-rankscope", "PATH", "the rankscope binary on the nodes (default: this one's path)"},
};

const std::string& import_kineto_help() {
  static const std::string text =
      "usage: rankscope import-kineto TRACE|DIR... -o RUN_DIR [--step-range NAME] [--seq-len T] [--batch B]\n"
      "                               [--no-trace] [--threads N] [--allow-mixed] [--quiet]\n\n"
      "Reads PyTorch profiler traces (torch.profiler's Chrome-trace JSON, .json or .json.gz, one per rank;\n"
      "a folder means its *.json and *.json.gz) in one streaming pass each and writes RUN_DIR as rankscope's\n"
      "probe would. Then rankscope skew, scaling, export --chrome and inspect work on it.\n\n" +
      format::options_help(kImportKinetoOptions) +
      "\n"
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
  return text;
}

// What the command line asked for.
struct KinetoRequest {
  std::vector<std::filesystem::path> inputs;
  std::vector<std::string_view> gather_args;  // --slurm/--hosts and their company, with values
  std::string out;
  bool quiet = false;
};

// The gathering flags and their values, for import_kineto_on_nodes to check. One left last with no
// value goes alone: the gathering says it needs one.
std::vector<std::string_view> gather_args_of(const format::OptionsRead& read) {
  std::vector<std::string_view> gather_args;
  for (const format::Option& o : kImportKinetoOptions) {
    if (!is_gather_flag(o.flag)) continue;
    for (const std::string_view v : read.parsed.all_values(o.flag)) gather_args.insert(gather_args.end(), {o.flag, v});
  }
  if (read.refused && read.refused->missing_value && is_gather_flag(read.refused->arg))
    gather_args.push_back(read.refused->arg);
  return gather_args;
}

// The command line into `request` and `options`: the exit code when the command stops here (0 after
// --help, 2 after saying what is wrong), nullopt when it goes on.
std::optional<int> read_import_kineto_args(Args args, KinetoRequest& request, kineto::ImportOptions& options) {
  format::OptionsRead read = format::read_options(kImportKinetoOptions, args);
  request.gather_args = gather_args_of(read);
  if (read.refused && read.refused->missing_value) {
    const std::string_view flag = read.refused->arg;
    if (flag == "-o" || flag == "--out" || flag == "--step-range") {
      std::fprintf(stderr, "rankscope import-kineto: %s needs a value\n", std::string(flag).c_str());
      return 2;
    }
    // A gathering flag with no value is in gather_args alone: the gathering says it needs one.
    if (is_gather_flag(flag)) read.refused.reset();
  }
  // --seq-len, --batch, --threads: "needs a positive number, got ''", as of an empty value.
  read_missing_value_as_empty(kImportKinetoOptions, read);
  const format::ParsedOptions& parsed = read.parsed;
  request.out = std::string(parsed.value("--out").value_or(""));
  if (const auto step_range = parsed.value("--step-range")) options.step_range = std::string(*step_range);
  if (!read_common_import_options("import-kineto", parsed, options, request.quiet)) return 2;
  if (std::find(parsed.positionals.begin(), parsed.positionals.end(), "-") != parsed.positionals.end())
    return unknown_option("import-kineto", "-", import_kineto_help());
  request.inputs.assign(parsed.positionals.begin(), parsed.positionals.end());
  if (read.refused) return unknown_option("import-kineto", read.refused->arg, import_kineto_help());
  if (parsed.help) {
    std::fputs(import_kineto_help().c_str(), stdout);
    return 0;
  }
  if (request.inputs.empty() || request.out.empty()) {
    std::fprintf(stderr, "rankscope import-kineto: %s\n\n%s",
                 request.inputs.empty() ? "no traces given" : "no run directory given (-o RUN_DIR)",
                 import_kineto_help().c_str());
    return 2;
  }
  return std::nullopt;
}

// "412 kB", "3.1 MB": sizes of traces and of what moved, in the units a file listing uses.
std::string megabytes(uint64_t bytes) {
  return bytes < 1000000 ? fmt::format("{:.0f} kB", bytes / 1e3) : fmt::format("{:.1f} MB", bytes / 1e6);
}

}  // namespace

std::span<const format::Option> import_kineto_options() { return kImportKinetoOptions; }

int import_kineto_command(Args args) {
  KinetoRequest request;
  kineto::ImportOptions options;
  options.command_line = {"rankscope", "import-kineto"};
  for (auto a : args) options.command_line.emplace_back(a);
  if (auto stop = read_import_kineto_args(args, request, options)) return *stop;
  const auto& [inputs, gather_args, out, quiet] = request;
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
