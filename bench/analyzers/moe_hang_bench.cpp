// moe_hang_bench.cpp — hangdoctor's time on 1024 ranks of an MoE job whose all_to_all_v counts
// disagree (design budget: < 1 s on a 2-core machine). Writes a `rankscope synth` MoE run (1024
// ranks, TP 8 x DP 128, experts over ep{k} groups of EP ranks, a hot expert, rank 5 expecting one
// row more than its peer sends in a combine), then times what `hangdoctor RUN_DIR --json FILE`
// does: open every recorder (peer counts included), classify, render text and JSON. With EP > 32
// the recorders keep digests only and the pair is found from the sketches.
// Usage: moe_hang_bench [RANKS [STEPS [EP]]]. Prints numbers; asserts only the diagnosis.
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
  const int ep = argc > 3 ? std::atoi(argv[3]) : 8;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("rs_moe_hang_bench_{}", ::getpid());
  std::filesystem::remove_all(dir);

  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.tp = ranks % 8 == 0 ? 8 : 1;
  o.moe_experts = 2 * ep;
  o.ep = ep;
  o.hot_expert = 1;
  o.fault = *synth::parse_fault(fmt::format("a2a-miscount:rank=5,step={},delta=1", steps / 2));
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = synth::write_synthetic_run(dir, o);
  if (!summary.ok()) {
    std::fprintf(stderr, "moe_hang_bench: %s\n", summary.status().to_string().c_str());
    return 2;
  }
  std::printf("synth: %d ranks (tp %d x dp %d), %d experts over ep groups of %d, %d steps, %s: %.2f s, %.1f MiB\n",
              ranks, o.tp, ranks / o.tp, o.moe_experts, ep, steps, synth::describe_fault(summary->fault).c_str(),
              bench::seconds_since(t0), double(summary->bytes_written) / (1 << 20));

  const bench::HangTiming t = bench::time_hangdoctor(dir);
  if (!t.ok) return 2;
  const analyzers::hang::Diagnosis& d = t.diagnosis;
  std::printf("hangdoctor on %d MoE ranks (ep %d, %s counts): %.3f s median (min %.3f s, max %.3f s) of which reading "
              "recorders %.3f s; budget < 1 s\n",
              ranks, ep, ep <= 32 ? "exact" : "digest", t.median(), t.total_s.front(), t.total_s.back(), t.open_s[2]);
  std::printf("verdict: %s\n", d.headline.c_str());
  std::filesystem::remove_all(dir);
  const auto& f = summary->fault;
  const int peer_world = (5 / o.tp / ep * ep + f.peer) * o.tp + 5 % o.tp;  // the miscounted peer's world rank
  const bool right = d.kind == analyzers::hang::Kind::kA2aCountMismatch && d.count_mismatch &&
                     d.count_mismatch->receiver == 5 && d.count_mismatch->sender == peer_world;
  if (!right) std::fprintf(stderr, "moe_hang_bench: wrong diagnosis\n");
  return right ? 0 : 1;
}
