// main.cpp — `hangdoctor`: names the rank, the collective and what it was doing, for a stuck job.
// Thin: its command line is rankscope_cli's (hangdoctor_app.h; --slurm / --hosts gather the nodes'
// snapshots first, gather_cli.h). Anything thrown on the way (the
// gather included) is exit 2 and one line naming the input (format/command_boundary.h), never an abort.
#include <string_view>
#include <vector>

#include "rankscope/cli/gather_cli.h"
#include "rankscope/format/command_boundary.h"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  const rankscope::format::CommandBoundary
      boundary{"hangdoctor", rankscope::format::command_input(args, rankscope::cli::hangdoctor_value_flags())};
  return rankscope::format::run_guarded(boundary, [&] { return rankscope::cli::hangdoctor_main(args); });
}
