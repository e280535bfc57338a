// main.cpp — `hangdoctor`: names the rank, the collective and what it was doing, for a stuck job.
// Thin: everything is in rankscope_analyzers_hang (hangdoctor_app.h).
#include <string_view>
#include <vector>

#include "rankscope/analyzers/hang/hangdoctor_app.h"

int main(int argc, char** argv) {
  std::vector<std::string_view> args(argv + 1, argv + argc);
  return rankscope::hang::run_hangdoctor(args);
}
