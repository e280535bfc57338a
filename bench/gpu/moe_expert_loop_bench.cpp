// moe_expert_loop_bench.cpp — the experts of one MoE layer on one rank, grouped GEMM chain against
// the incident's token loop (model/moe_expert_chain.h over moe_expert_blocks.h), on the CPU or GPU.
//
// Is: a benchmark (ctest label bench; prints numbers, asserts nothing). It times forward + backward
// of the chain over the rows one EP rank received, split over its L local experts with the first
// one hot, and prints per loop: time, received tokens (rows) per second, expert time per token,
// GEMMs issued; then the token/grouped ratio. With `cuda` and no usable device it prints why and
// exits 0. The routing and exchange around the experts are not timed (gpt2-train's tokens/s covers
// the whole step: bench/gpu/moe_checks.sh).
// Usage: moe_expert_loop_bench [cpu|cuda] [C] [local experts] [rows] [hot share] [reps]
//   default: cuda 768 2 62515 0.6 2 — the incident's hot rank (E=8 top-2 over EP=4: 2 local
//   experts, 62,515 rows received) at GPT-2 small's width.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "model/moe_expert_chain.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_backend.h"

namespace {

struct Args {
  std::string device = "cuda";
  int C = 768, experts = 2;
  size_t rows = 62515;
  double hot_share = 0.6;
  int reps = 2;
};

// A backend buffer of n floats filled from a formula (no huge host vectors for the big ones).
float* filled(gpt2::Ops& ops, size_t n, float scale, float freq) {
  auto* p = static_cast<float*>(ops.alloc(n * sizeof(float)));
  std::vector<float> chunk(std::min<size_t>(n, size_t{1} << 20));
  for (size_t at = 0; at < n; at += chunk.size()) {
    const size_t m = std::min(chunk.size(), n - at);
    for (size_t i = 0; i < m; i++) chunk[i] = scale * std::sin(freq * float(at + i) + 0.3f);
    ops.copy_from_host(p + at, chunk.data(), m * sizeof(float));
  }
  return p;
}

int run(const Args& a) {
  std::unique_ptr<gpt2::Ops> ops;
  if (a.device == "cuda") {
    const gpt2::DeviceProbe probe = gpt2::probe_cuda_device(0);
    if (!probe.usable) {
      std::printf("moe_expert_loop_bench: skipped on cuda: %s\n", probe.reason.c_str());
      return 0;
    }
    auto made = gpt2::make_cuda_ops({});
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().to_string().c_str());
      return 1;
    }
    ops = std::move(made).value();
  } else {
    ops = gpt2::make_cpu_ops();
  }
  const int C = a.C, L = a.experts;
  const size_t H = 4 * size_t(C), R = a.rows;
  // Row split: expert 0 takes hot_share, the others share the rest evenly.
  std::vector<size_t> expert_rows(size_t(L), 0);
  expert_rows[0] = L == 1 ? R : static_cast<size_t>(std::llround(double(R) * a.hot_share));
  for (int j = 1; j < L; j++) expert_rows[size_t(j)] = (R - expert_rows[0]) / size_t(L - 1);
  expert_rows[size_t(L) - 1] += R - std::accumulate(expert_rows.begin(), expert_rows.end(), size_t{0});
  const size_t expert = H * C + H + C * H + C;
  float* w = filled(*ops, size_t(L) * expert, 0.02f, 0.37f);
  float* g = filled(*ops, size_t(L) * expert, 0.0f, 0.0f);
  gpt2::MoeWeights weights;
  gpt2::MoeGrads grads;
  for (int j = 0; j < L; j++) {
    float* e = w + size_t(j) * expert;
    float* d = g + size_t(j) * expert;
    weights.fc_w.push_back(e), weights.fc_b.push_back(e + H * C);
    weights.proj_w.push_back(e + H * C + H), weights.proj_b.push_back(e + H * C + H + C * H);
    grads.fc_w.push_back(d), grads.fc_b.push_back(d + H * C);
    grads.proj_w.push_back(d + H * C + H), grads.proj_b.push_back(d + H * C + H + C * H);
  }
  gpt2::moe::ExpertActivations acts{filled(*ops, R * C, 1.0f, 0.11f), filled(*ops, R * H, 0.0f, 0.0f),
                                    filled(*ops, R * H, 0.0f, 0.0f), filled(*ops, R * C, 0.0f, 0.0f)};
  float* dy = filled(*ops, R * C, 0.01f, 0.07f);
  float* dh = filled(*ops, R * H, 0.0f, 0.0f);
  float* dx = filled(*ops, R * C, 0.0f, 0.0f);
  std::printf("moe experts on %s: C=%d, %d local experts, %zu rows received (", ops->name(), C, L, R);
  for (int j = 0; j < L; j++) std::printf("%s%zu", j ? " + " : "", expert_rows[size_t(j)]);
  std::printf("), forward + backward, best of %d\n", a.reps);
  double seconds[2] = {0, 0};
  for (int loop = 0; loop < 2; loop++) {
    const auto kind = loop == 0 ? gpt2::ExpertLoop::kGrouped : gpt2::ExpertLoop::kToken;
    const auto blocks = gpt2::moe::expert_blocks(expert_rows, kind);
    double best = 1e30;
    for (int r = 0; r < a.reps + 1; r++) {  // the first repetition warms plans and caches, not counted
      const auto t0 = std::chrono::steady_clock::now();
      gpt2::moe::expert_chain_forward(*ops, blocks, weights, acts, C);
      gpt2::moe::expert_chain_backward(*ops, blocks, weights, grads, acts, dy, dh, dx, C);
      if (!gpt2::cuda_ops_synchronize(*ops).ok()) return 1;
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, t);
    }
    seconds[loop] = best;
    // Six GEMMs per block: c_fc and c_proj forward, and each one's input and weight gradients.
    std::printf("  %-7s loop: %10.2f ms  %12.0f tokens/s  %9.3f us/token  %zu GEMMs\n",
                loop == 0 ? "grouped" : "token", best * 1e3, double(R) / best, best * 1e6 / double(R),
                blocks.size() * 6);
  }
  std::printf("  token/grouped: %.1fx\n", seconds[1] / seconds[0]);
  for (float* p : {w, g, acts.x, acts.pre, acts.gelu, acts.y, dy, dh, dx}) ops->release(p);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc > 1) a.device = argv[1];
  if (argc > 2) a.C = std::atoi(argv[2]);
  if (argc > 3) a.experts = std::atoi(argv[3]);
  if (argc > 4) a.rows = std::strtoull(argv[4], nullptr, 10);
  if (argc > 5) a.hot_share = std::atof(argv[5]);
  if (argc > 6) a.reps = std::atoi(argv[6]);
  if ((a.device != "cpu" && a.device != "cuda") || a.C < 1 || a.experts < 1 || a.rows < size_t(a.experts) ||
      a.hot_share <= 0.0 || a.hot_share >= 1.0 || a.reps < 1) {
    std::fprintf(stderr, "usage: moe_expert_loop_bench [cpu|cuda] [C] [local experts] [rows>=experts] "
                         "[hot share in (0,1)] [reps]\n");
    return 2;
  }
  return run(a);
}
