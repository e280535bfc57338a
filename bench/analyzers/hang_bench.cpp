// hang_bench.cpp — hangdoctor's time on 1024 ranks' flight recorders (design budget: < 1 s on a
// 2-core machine). Writes a `rankscope synth` run (1024 ranks, TP 8 x DP 128, one rank stalled),
// then times what `hangdoctor RUN_DIR --json FILE` does: open the run directory (every recorder),
// classify, render text and JSON. Prints numbers; asserts only that the diagnosis is right.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/analyzers/synth.h"
#include "rankscope/format/run_directory.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rankscope;
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 100;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("rs_hang_bench_{}", ::getpid());
  std::filesystem::remove_all(dir);

  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.tp = ranks % 8 == 0 ? 8 : 1;
  o.fault = *synth::parse_fault("stall:rank=5,range=backward/block1/mlp");
  auto t0 = std::chrono::steady_clock::now();
  auto summary = synth::write_synthetic_run(dir, o);
  if (!summary.ok()) {
    std::fprintf(stderr, "hang_bench: %s\n", summary.status().to_string().c_str());
    return 2;
  }
  std::printf("synth: %d ranks (tp %d x dp %d), %d steps, stall on rank 5: %.2f s, %.1f MiB\n", ranks, o.tp,
              ranks / o.tp, steps, seconds_since(t0), double(summary->bytes_written) / (1 << 20));

  hang::SystemProcessTable procs;
  std::vector<double> open_s, total_s;
  hang::Diagnosis d;
  for (int rep = 0; rep < 5; ++rep) {
    t0 = std::chrono::steady_clock::now();
    auto run = format::open_run_directory(dir);
    if (!run.ok()) return 2;
    open_s.push_back(seconds_since(t0));
    d = hang::diagnose(*run, procs);
    const std::string text = hang::render_text(d);
    const std::string json = hang::render_json(d).dump(2);
    total_s.push_back(seconds_since(t0));
    if (text.empty() || json.empty()) return 2;
  }
  std::sort(open_s.begin(), open_s.end());
  std::sort(total_s.begin(), total_s.end());
  std::printf("hangdoctor on %d ranks: %.3f s median (min %.3f s, max %.3f s) of which reading recorders %.3f s; "
              "budget < 1 s\n",
              ranks, total_s[2], total_s.front(), total_s.back(), open_s[2]);
  std::printf("verdict: %s\n", d.headline.c_str());
  std::filesystem::remove_all(dir);
  const bool right = d.verdict == hang::Verdict::kHang && d.culprit_ranks == std::vector<int>{5};
  if (!right) std::fprintf(stderr, "hang_bench: wrong diagnosis\n");
  return right ? 0 : 1;
}
