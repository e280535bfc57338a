// inspect_command.cpp — `rankscope inspect RUN_DIR [--json] [--last N]`.
#include <cstdio>
#include <string>

#include "command_line.h"
#include "inspect_report.h"
#include "option_values.h"
#include "rankscope/format/json_text.h"
#include "rankscope/format/option_table.h"
#include "rankscope/format/run_directory.h"
#include "subcommands.h"

namespace rankscope::cli {

namespace {

constexpr format::Option kInspectOptions[] = {
    {"--json", "", "print JSON (schema_version 1) instead of text"},
    {"--last", "N", "collectives shown per communicator (default 4)"},
};

const std::string& inspect_help() {
  static const std::string text =
      "usage: rankscope inspect RUN_DIR [--json] [--last N]\n\n"
      "Shows every rank's state from its flight recorder: heartbeat age, step, open ranges, and the last\n"
      "collectives of each communicator with their states. Safe on a live, stuck or dead job.\n\n" +
      format::options_help(kInspectOptions, 13);
  return text;
}

}  // namespace

std::span<const format::Option> inspect_options() { return kInspectOptions; }

int inspect_command(Args args) {
  const format::OptionsRead read = format::read_options(kInspectOptions, args);
  analyzers::InspectOptions options;
  for (const std::string_view v : read.parsed.all_values("--last")) {
    const auto last = number_at_least(v, 0);
    if (!last) {
      std::fprintf(stderr, "rankscope inspect: --last needs a non-negative number, got '%s'\n", std::string(v).c_str());
      return 2;
    }
    options.last_collectives = *last;
  }
  const OneInput dir = one_input(read.parsed.positionals);
  if (dir.dash) return unknown_option("inspect", "-", inspect_help());
  if (dir.second) {
    std::fprintf(stderr, "rankscope inspect: one run directory only\n");
    return 2;
  }
  // --last with nothing after it was an unknown option to this command, and still is.
  if (read.refused) return unknown_option("inspect", read.refused->arg, inspect_help());
  if (read.parsed.help) {
    std::fputs(inspect_help().c_str(), stdout);
    return 0;
  }
  if (dir.path.empty()) {
    std::fputs(inspect_help().c_str(), stderr);
    return 2;
  }
  auto run = format::open_run_directory(dir.path);
  if (!run.ok()) {
    std::fprintf(stderr, "rankscope inspect: %s\n", run.status().message().c_str());
    return 2;
  }
  if (read.parsed.has("--json"))
    std::printf("%s\n", format::json_text(analyzers::inspect_json(*run, options), 2).c_str());
  else
    std::fputs(analyzers::inspect_text(*run, options).c_str(), stdout);
  return 0;
}

}  // namespace rankscope::cli
