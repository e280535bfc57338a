// main.cpp — `rankscope`: one CLI, subcommands dispatched by name. Thin: all work is in the
// subcommand files and the analyzer libraries they call. Every subcommand runs inside one exception
// boundary (format/command_boundary.h): anything thrown is exit 2 and one line naming the input.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/command_boundary.h"
#include "rankscope/format/option_table.h"
#include "subcommands.h"

namespace {

namespace cli = rankscope::cli;

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(cli::Args);
  cli::OptionTable (*options)();  // its option table: the boundary skips the values of its value flags
  std::string_view failed = "could not be analysed";  // said when it throws
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", "per rank: heartbeat age, step, open ranges, last collectives", cli::inspect_command,
     cli::inspect_options},
    {"synth", "write a synthetic run directory (healthy or with a fault) in the real format", cli::synth_command,
     cli::synth_options, "could not be written"},
    {"skew", "per-rank imbalance from arrival times at collectives; findings ranked by cost", cli::skew_command,
     cli::skew_options},
    {"scaling", "how step and ranges grow with seq len over a sweep (fit c + aT + bT^2)", cli::scaling_command,
     cli::scaling_options},
    {"export", "write the run as a Chrome trace for Perfetto (--chrome FILE)", cli::export_command, cli::export_options,
     "could not be exported"},
    {"kernels", "per rank: compute/comm overlap, idle by cause, kernel breakdown, launches, queue length (HTA's)",
     cli::kernels_command, cli::kernels_options},
    {"critical-path", "what set each step's length, across ranks: ranges, kernels, launches, collectives",
     cli::critical_path_command, cli::critical_path_options},
    {"diff", "why is NEW slower (or faster) than BASE: step time, a waterfall of the change, settings",
     cli::diff_command, cli::diff_options},
    {"startup", "per rank: time to the first step, start-up phases, late ranks, harmful settings", cli::startup_command,
     cli::startup_options},
    {"import-nsys", "write a run directory from Nsight Systems SQLite exports (any program, one per rank)",
     cli::import_nsys_command, cli::import_nsys_options, "could not be imported"},
    {"import-kineto", "write a run directory from PyTorch profiler (Kineto) traces, one per rank",
     cli::import_kineto_command, cli::import_kineto_options, "could not be imported"},
    {"snapshot", "this node's recorders and process states as one stream on stdout (for gather)", cli::snapshot_command,
     cli::snapshot_options, "could not be snapshotted"},
    {"gather", "snapshot every node of a job (--slurm JOBID or --hosts FILE --exec CMD) into one run directory",
     cli::gather_command, cli::gather_options, "could not be gathered"},
    {"kineto-pack", "this node's profiler traces, read here, as one stream on stdout (for import-kineto --slurm)",
     cli::kineto_pack_command, cli::kineto_pack_options, "could not be packed"},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: rankscope <command> [options]\n\n"
                    "Tells why a distributed training job is stuck or slow, from its run directory.\n\n"
                    "commands:\n");
  for (const auto& c : kSubcommands) std::fprintf(out, "  %-14.*s %.*s\n", int(c.name.size()), c.name.data(), int(c.summary.size()), c.summary.data());
  std::fprintf(out, "\n'rankscope <command> --help' describes one command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("rankscope %s\n", RANKSCOPE_VERSION);
    return 0;
  }
  for (const auto& c : kSubcommands) {
    if (c.name != args[0]) continue;
    const cli::Args rest = cli::Args(args).subspan(1);
    const std::string tool = "rankscope " + std::string(c.name);
    const std::vector<std::string_view> value_flags = rankscope::format::value_flags(c.options());
    const rankscope::format::CommandBoundary boundary{tool, rankscope::format::command_input(rest, value_flags),
                                                      c.failed};
    return rankscope::format::run_guarded(boundary, [&] { return c.run(rest); });
  }
  std::fprintf(stderr, "rankscope: unknown command '%s'\n\n", std::string(args[0]).c_str());
  print_usage(stderr);
  return 2;
}
