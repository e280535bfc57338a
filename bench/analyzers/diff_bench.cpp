// diff_bench.cpp — `rankscope diff` of two 64-rank runs of 100 steps (budget: under 2 s on 2 cores).
// The runs are synthetic (synth/: TP 8, the NEW one with a 20 ms delay on one rank),
// written first (not timed). Usage: diff_bench [RANKS [STEPS]]. Prints numbers; asserts nothing.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "rankscope/analyzers/diff/run_diff.h"
#include "rankscope/synth/synth.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace rankscope;
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 64;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 100;
  const fs::path root = fs::temp_directory_path() / ("rs_diff_bench_" + std::to_string(::getpid()));
  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.tp = ranks % 8 == 0 ? 8 : 1;
  if (!synth::write_synthetic_run(root / "base", o).ok()) return 1;
  o.fault.kind = synth::FaultKind::kDelay;
  o.fault.rank = ranks / 2 + 1;
  o.fault.ms = 20;
  if (!synth::write_synthetic_run(root / "new", o).ok()) return 1;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = analyzers::diff_runs(root / "base", root / "new");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rankscope diff of two %d-rank runs of %d steps: %.3f s\n", ranks, steps, s);
  if (r.ok()) std::printf("%s\n", r->headline.c_str());
  else std::printf("error: %s\n", r.status().message().c_str());
  fs::remove_all(root);
  return r.ok() ? 0 : 1;
}
