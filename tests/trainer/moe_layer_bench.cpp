// moe_layer_bench.cpp — step time of one MoE MLP layer (forward + backward, CPU, EP=1) with the
// grouped expert loop (one GEMM chain per expert segment) and the token loop (one chain per row,
// the incident's anti-pattern). Prints numbers and the ratio; asserts nothing (ctest label bench).
// Usage: trainer_moe_layer_bench [C] [experts] [top_k] [tokens] [reps]   (default 768 4 2 512 3)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "model/moe_mlp.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"

namespace {

int arg(int argc, char** argv, int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; }

}  // namespace

int main(int argc, char** argv) {
  const int C = arg(argc, argv, 1, 768), E = arg(argc, argv, 2, 4), K = arg(argc, argv, 3, 2);
  const int N = arg(argc, argv, 4, 512), reps = arg(argc, argv, 5, 3), H = 4 * C;
  if (C < 1 || E < 1 || K < 1 || K > E || N < 1 || reps < 1) {
    std::fprintf(stderr, "usage: trainer_moe_layer_bench [C] [experts] [top_k<=experts] [tokens] [reps]\n");
    return 2;
  }
  auto ops = gpt2::make_cpu_ops();
  auto mops = gpt2::make_cpu_moe_ops();
  const size_t expert = size_t(H) * C + H + size_t(C) * H + C;
  std::vector<float> w(size_t(E) * C + E * expert), g(w.size()), x(size_t(N) * C), out(x.size()), dx(x.size());
  for (size_t i = 0; i < w.size(); i++) w[i] = 0.02f * std::sin(0.37f * float(i));
  for (size_t i = 0; i < x.size(); i++) x[i] = std::cos(0.11f * float(i));
  auto view = [&](auto* base) {
    gpt2::MoeTensors<std::remove_pointer_t<decltype(base)>> t;
    t.router = base;
    for (int e = 0; e < E; e++) {
      auto* p = base + size_t(E) * C + size_t(e) * expert;
      t.fc_w.push_back(p);
      t.fc_b.push_back(p + size_t(H) * C);
      t.proj_w.push_back(p + size_t(H) * C + H);
      t.proj_b.push_back(p + size_t(H) * C + H + size_t(C) * H);
    }
    return t;
  };
  const gpt2::MoeWeights weights = view(static_cast<const float*>(w.data()));
  gpt2::MoeGrads grads = view(g.data());
  double ms[2] = {0, 0};
  for (int loop = 0; loop < 2; loop++) {
    gpt2::MoeLayerConfig cfg{E, K, 0.0f, 0.01f, loop == 0 ? gpt2::ExpertLoop::kGrouped : gpt2::ExpertLoop::kToken};
    gpt2::MoeMlp layer(cfg, gpt2::moe::ExpertLayout::make(E, 1, 0).value(), *ops, *mops, nullptr, N, C, "block0");
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {  // the first repetition warms buffers and is not counted
      const auto t0 = std::chrono::steady_clock::now();
      auto stats = layer.forward(out.data(), x.data(), weights, nullptr, nullptr);
      auto st = stats.ok() ? layer.backward(dx.data(), out.data(), x.data(), weights, grads, 1.0f, nullptr)
                           : stats.status();
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.to_string().c_str());
        return 1;
      }
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, t);
    }
    ms[loop] = best;
  }
  std::printf("moe layer C=%d E=%d K=%d tokens=%d (fwd+bwd, best of %d)\n", C, E, K, N, reps);
  std::printf("  grouped loop: %.2f ms\n  token loop:   %.2f ms\n  token/grouped: %.1fx\n", ms[0], ms[1],
              ms[1] / ms[0]);
  return 0;
}
