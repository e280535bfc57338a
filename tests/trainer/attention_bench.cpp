// attention_bench.cpp — CPU attention, naive vs flash: forward + backward time and the bytes each
// kind keeps per layer, for a list of T (prints numbers, asserts nothing; ctest label `bench`).
// Usage: trainer_attention_bench [B] [NH] [hs] [reps] T...   (defaults: 4 12 64 3, T 128 256 512 1024)
// This is what gpt2-train's CPU default for --attention auto was chosen from (device_plan.cpp).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "model/ops.h"
#include "ops/cpu/cpu_ops.h"

namespace {

double seconds_per_pass(gpt2::Ops& ops, gpt2::AttentionKind kind, int B, int T, int C, int NH, int reps) {
  const size_t btc = static_cast<size_t>(B) * T * C;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qkv(3 * btc), dout(btc), out(btc), dqkv(3 * btc);
  for (float& x : qkv) x = dist(rng);
  for (float& x : dout) x = dist(rng);
  std::vector<float> saved(ops.attention_saved_floats(kind, B, T, NH));
  std::vector<float> scratch(ops.attention_scratch_floats(kind, B, T, NH));
  double best = 1e30;
  for (int r = 0; r < reps + 1; r++) {  // the first pass warms the caches and the thread pool
    const auto t0 = std::chrono::steady_clock::now();
    ops.attention_forward(kind, out.data(), saved.data(), qkv.data(), B, T, C, NH);
    ops.attention_backward(kind, dqkv.data(), scratch.data(), dout.data(), qkv.data(), out.data(), saved.data(),
                           B, T, C, NH);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0 && s < best) best = s;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 4;
  const int NH = argc > 2 ? std::atoi(argv[2]) : 12;
  const int hs = argc > 3 ? std::atoi(argv[3]) : 64;
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  std::vector<int> Ts;
  for (int i = 5; i < argc; i++) Ts.push_back(std::atoi(argv[i]));
  if (Ts.empty()) Ts = {128, 256, 512, 1024};
  if (B < 1 || NH < 1 || hs < 1 || reps < 1) {
    std::fprintf(stderr, "usage: trainer_attention_bench [B] [NH] [hs] [reps] T...\n");
    return 2;
  }
  auto ops = gpt2::make_cpu_ops();
  std::printf("attention fwd+bwd on cpu, B %d NH %d hs %d, best of %d\n", B, NH, hs, reps);
  std::printf("%6s %12s %12s %8s %16s %16s\n", "T", "naive ms", "flash ms", "ratio", "naive MiB/layer",
              "flash MiB/layer");
  for (int T : Ts) {
    const double naive = seconds_per_pass(*ops, gpt2::AttentionKind::kNaive, B, T, NH * hs, NH, reps);
    const double flash = seconds_per_pass(*ops, gpt2::AttentionKind::kFlash, B, T, NH * hs, NH, reps);
    auto mib = [&](gpt2::AttentionKind k) {
      return static_cast<double>(ops->attention_saved_floats(k, B, T, NH)) * sizeof(float) / (1 << 20);
    };
    std::printf("%6d %12.2f %12.2f %8.2f %16.2f %16.3f\n", T, naive * 1e3, flash * 1e3, flash / naive,
                mib(gpt2::AttentionKind::kNaive), mib(gpt2::AttentionKind::kFlash));
  }
  return 0;
}
