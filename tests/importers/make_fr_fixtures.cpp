// make_fr_fixtures.cpp — writes the checked-in Flight Recorder fixtures of issue 13 under
// DIR/<scenario>/comm_lib_trace_rank_<r> (usage: make_fr_fixtures DIR). The tests check that this
// writer still reproduces the checked-in bytes, so regenerate with it, never by hand.
#include <cstdio>

#include "fr_fixture_writer.h"
#include "fr_scenarios.h"
#include "fr_fixture_set.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fr_fixtures DIR\n");
    return 2;
  }
  for (const auto& [rel, bytes] : rankscope::torch_fr::testing::fixture_set()) {
    rankscope::torch_fr::testing::write_file(std::filesystem::path(argv[1]) / rel, bytes);
  }
  return 0;
}
