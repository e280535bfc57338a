// inspect_command.cpp — `rankscope inspect RUN_DIR [--json] [--last N]`.
#include <charconv>
#include <cstdio>
#include <string>

#include "inspect_report.h"
#include "rankscope/format/json_text.h"
#include "rankscope/format/run_directory.h"
#include "subcommands.h"

namespace rankscope::cli {

namespace {
constexpr const char* kInspectHelp =
    "usage: rankscope inspect RUN_DIR [--json] [--last N]\n\n"
    "Shows every rank's state from its flight recorder: heartbeat age, step, open ranges, and the last\n"
    "collectives of each communicator with their states. Safe on a live, stuck or dead job.\n\n"
    "  --json     print JSON (schema_version 1) instead of text\n"
    "  --last N   collectives shown per communicator (default 4)\n";
}

int inspect_command(Args args) {
  std::string dir;
  bool json = false;
  analyzers::InspectOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kInspectHelp, stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--last" && i + 1 < args.size()) {
      const auto v = args[++i];
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), options.last_collectives);
      if (ec != std::errc() || p != v.data() + v.size() || options.last_collectives < 0) {
        std::fprintf(stderr, "rankscope inspect: --last needs a non-negative number, got '%s'\n", std::string(v).c_str());
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope inspect: unknown option '%s'\n\n%s", std::string(a).c_str(), kInspectHelp);
      return 2;
    } else if (dir.empty()) {
      dir = a;
    } else {
      std::fprintf(stderr, "rankscope inspect: one run directory only\n");
      return 2;
    }
  }
  if (dir.empty()) {
    std::fputs(kInspectHelp, stderr);
    return 2;
  }
  auto run = format::open_run_directory(dir);
  if (!run.ok()) {
    std::fprintf(stderr, "rankscope inspect: %s\n", run.status().message().c_str());
    return 2;
  }
  if (json)
    std::printf("%s\n", format::json_text(analyzers::inspect_json(*run, options), 2).c_str());
  else
    std::fputs(analyzers::inspect_text(*run, options).c_str(), stdout);
  return 0;
}

}  // namespace rankscope::cli
