// skew_make_fixture.cpp — regenerates tests/fixtures/analyzers/skew_tp2_delay, the checked-in run
// directory the skew fixture test reads (format schema v1). Run by hand only when the fixture must
// change: `skew_make_fixture <source dir>/tests/fixtures/analyzers/skew_tp2_delay`.
//
// The run: 2 ranks, TP 2, 12 steps, two blocks; rank 1 spends 18 ms more in forward/block0/mlp
// in steps 2..11 (steps 0..1 are clean, as a warm-up would be); embed.local_tokens 3900 vs 196
// with contiguous vocab shards; rank 1's clock 2.5 s behind rank 0's; steps 4..5 traced.
#include <cstdio>
#include <filesystem>

#include "skew_fake_run.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: skew_make_fixture OUT_DIR\n");
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path out = argv[1];
  fs::remove_all(out);
  rankscope::testing::FakeRunSpec spec;
  spec.world_size = 2;
  spec.tp = 2;
  spec.steps = 12;
  spec.trace_first = 4;
  spec.trace_last = 5;
  spec.script = rankscope::testing::standard_step(2, [](int r, int64_t s) { return r == 1 && s >= 2 ? 18.0 : 0.0; });
  spec.counters = [](int r, int64_t) {
    return std::vector<std::pair<std::string, double>>{{"embed.local_tokens", r == 0 ? 3900.0 : 196.0}};
  };
  spec.clock_offset_ns = [](int r) { return r == 1 ? int64_t(2'500'000'000) : int64_t(0); };
  spec.model = {{"layers", 2}, {"heads", 4}, {"channels", 128}, {"vocab_size", 50257}, {"vocab_shard", "contiguous"}};
  spec.training = {{"seq_len", 64}, {"batch", 4}};
  rankscope::testing::write_fake_run(out, spec);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
