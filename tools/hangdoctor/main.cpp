// main.cpp — `hangdoctor`: names the rank, the collective and what it was doing, for a stuck job.
// Thin: the diagnosis is rankscope_analyzers_hang (hangdoctor_app.h); --slurm / --hosts gather the
// nodes' snapshots first (rankscope_analyzers_gather, gather_cli.h).
#include <string_view>
#include <vector>

#include "rankscope/analyzers/gather/gather_cli.h"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  return rankscope::gather::hangdoctor_main(args);
}
