// main.cpp — `hangdoctor`: names the rank, the collective and what it was doing, for a stuck job.
// Thin: the diagnosis is rankscope_analyzers_hang (hangdoctor_app.h); --slurm / --hosts gather the
// nodes' snapshots first (rankscope_gather, gather_cli.h). Anything thrown on the way (the
// gather included) is exit 2 and one line naming the input (format/command_boundary.h), never an abort.
#include <string_view>
#include <vector>

#include "rankscope/format/command_boundary.h"
#include "rankscope/gather/gather_cli.h"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  const rankscope::format::CommandBoundary boundary{
      "hangdoctor", rankscope::format::command_input(args, rankscope::gather::hangdoctor_value_flags())};
  return rankscope::format::run_guarded(boundary, [&] { return rankscope::gather::hangdoctor_main(args); });
}
