// gpt2_moe_step_bench.cpp — prints the CPU training-step time (forward, backward, AdamW) of GPT-2
// with MoE MLP blocks under the grouped expert loop (one GEMM chain per expert) and the incident's
// token loop (one per routed row), and the ratio token / grouped.
// Is not: a test (it asserts nothing; ctest label `bench`) nor the trainer (no data, no probe).
// Usage: trainer_moe_step_bench [preset=d6] [experts=8] [top_k=2] [B=4] [T=64] [steps=2]
// (d6 8 2 4 64 2 on a loaded 2-core VM: grouped 22.0 s/step, token 184.9 s/step, 8.4x, same losses)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"

namespace {

// Mean ms per step over `steps` steps after one warm-up step; -1 on an error.
double step_ms(const gpt2::GPT2::Options& o, gpt2::Ops& ops, gpt2::MoeOps& moe_ops, int steps) {
  using Clock = std::chrono::steady_clock;
  auto created = gpt2::GPT2::create(o, ops, nullptr, nullptr, &moe_ops);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().to_string().c_str());
    return -1;
  }
  auto model = std::move(created).value();
  (void)model->init_weights(1);
  gpt2::AdamW opt(model->params(), ops, {0.9f, 0.999f, 1e-8f, 0.0f});
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
  std::vector<int> in(size_t(o.batch) * o.seq_len), tg(in.size());
  double total = 0;
  for (int step = 0; step <= steps; step++) {
    for (size_t i = 0; i < in.size(); i++) in[i] = id(rng), tg[i] = id(rng);
    const auto t0 = Clock::now();
    model->params().zero_grads();
    auto f = model->forward(in.data(), tg.data(), nullptr);
    if (!f.ok() || !model->backward(1.0f, {}, nullptr).ok()) return -1;
    opt.step(1e-4f);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf("  %s loop step %d: loss %.4f, %.0f ms\n", std::string(gpt2::expert_loop_name(o.moe.loop)).c_str(),
                step, f->loss, ms);
    std::fflush(stdout);
    if (step > 0) total += ms;
  }
  return total / steps;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "d6";
  const int E = argc > 2 ? std::atoi(argv[2]) : 8;
  const int K = argc > 3 ? std::atoi(argv[3]) : 2;
  const int B = argc > 4 ? std::atoi(argv[4]) : 4;
  const int T = argc > 5 ? std::atoi(argv[5]) : 64;
  const int steps = argc > 6 ? std::atoi(argv[6]) : 2;
  auto config = gpt2::ModelConfig::preset(preset);
  if (!config.ok() || B < 1 || T < 1 || steps < 1) {
    std::fprintf(stderr, "usage: %s [d12|d6|tiny] [experts] [top_k] [B] [T] [steps]\n", argv[0]);
    return 2;
  }
  auto ops = gpt2::make_cpu_ops();
  auto moe_ops = gpt2::make_cpu_moe_ops();
  gpt2::GPT2::Options o;
  o.config = *config;
  o.batch = B;
  o.seq_len = T;
  o.moe.experts = E;
  o.moe.top_k = K;
  o.moe.aux_loss_coef = 0.01f;
  double ms[2];
  for (int loop = 0; loop < 2; loop++) {
    o.moe.loop = loop == 0 ? gpt2::ExpertLoop::kGrouped : gpt2::ExpertLoop::kToken;
    ms[loop] = step_ms(o, *ops, *moe_ops, steps);
    if (ms[loop] < 0) return 1;
  }
  std::printf("RESULT %s E=%d K=%d B=%d T=%d: grouped %.1f ms/step, token %.1f ms/step, token/grouped %.2fx\n",
              preset.c_str(), E, K, B, T, ms[0], ms[1], ms[1] / ms[0]);
  return 0;
}
