// hang_bench.cpp — hangdoctor's time on 1024 ranks' flight recorders (design budget: < 1 s on a
// 2-core machine). Writes a `rankscope synth` run (1024 ranks, TP 8 x DP 128, one rank stalled),
// then times what `hangdoctor RUN_DIR --json FILE` does: open the run directory (every recorder),
// classify, render text and JSON. Prints numbers; asserts only that the diagnosis is right.
// `hang_bench RANKS STEPS DIR`: writes the run into DIR only when DIR has no run.json yet, and keeps
// it (profiling at 16K ranks without writing 2 GB each time).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "hang_timing.h"
#include "rankscope/synth/synth.h"

int main(int argc, char** argv) {
  using namespace rankscope;
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 100;
  const bool keep = argc > 3;
  const auto dir = keep ? std::filesystem::path(argv[3])
                        : std::filesystem::temp_directory_path() / fmt::format("rs_hang_bench_{}", ::getpid());
  if (!keep) std::filesystem::remove_all(dir);

  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.tp = ranks % 8 == 0 ? 8 : 1;
  o.fault = *synth::parse_fault("stall:rank=5,range=backward/block1/mlp");
  const auto t0 = std::chrono::steady_clock::now();
  if (!keep || !std::filesystem::exists(dir / "run.json")) {
    auto summary = synth::write_synthetic_run(dir, o);
    if (!summary.ok()) {
      std::fprintf(stderr, "hang_bench: %s\n", summary.status().to_string().c_str());
      return 2;
    }
    std::printf("synth: %d ranks (tp %d x dp %d), %d steps, stall on rank 5: %.2f s, %.1f MiB\n", ranks, o.tp,
                ranks / o.tp, steps, bench::seconds_since(t0), double(summary->bytes_written) / (1 << 20));
  }

  const bench::HangTiming t = bench::time_hangdoctor(dir);
  if (!t.ok) return 2;
  const analyzers::hang::Diagnosis& d = t.diagnosis;
  std::printf("hangdoctor on %d ranks: %.3f s median (min %.3f s, max %.3f s); medians of its parts: reading "
              "recorders %.3f s, diagnosis %.3f s, text and JSON reports %.3f s; budget < 1 s\n",
              ranks, t.median(), t.total_s.front(), t.total_s.back(), t.open_s[2], t.diagnose_s[2], t.render_s[2]);
  std::printf("verdict: %s\n", d.headline.c_str());
  if (!keep) std::filesystem::remove_all(dir);
  const bool right = d.verdict == analyzers::hang::Verdict::kHang && d.culprit_ranks == std::vector<int>{5};
  if (!right) std::fprintf(stderr, "hang_bench: wrong diagnosis\n");
  return right ? 0 : 1;
}
