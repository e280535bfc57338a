// gpt2_step_bench.cpp — prints the CPU model's training-step time and tokens/s (forward, backward,
// AdamW) for a preset, to compare with llm.c's train_gpt2.c on the same machine and config.
// Is not: a test (it asserts nothing; ctest label `bench`) nor the trainer (no data, no probe).
// Usage: trainer_model_bench [preset=d12] [B=4] [T=64] [steps=3] [recompute=0]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  const std::string preset = argc > 1 ? argv[1] : "d12";
  const int B = argc > 2 ? std::atoi(argv[2]) : 4;
  const int T = argc > 3 ? std::atoi(argv[3]) : 64;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 3;
  const int recompute = argc > 5 ? std::atoi(argv[5]) : 0;
  auto config = gpt2::ModelConfig::preset(preset);
  if (!config.ok() || B < 1 || T < 1 || steps < 1 || recompute < 0 || recompute > 2) {
    std::fprintf(stderr, "usage: %s [d12|d6|tiny] [B] [T] [steps] [recompute 0|1|2]\n%s\n", argv[0],
                 config.ok() ? "" : config.status().to_string().c_str());
    return 2;
  }
  auto ops = gpt2::make_cpu_ops();
  gpt2::GPT2::Options o{*config, {}, static_cast<gpt2::Recompute>(recompute), B, T, {}, {}};
  auto created = gpt2::GPT2::create(o, *ops, nullptr);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().to_string().c_str());
    return 1;
  }
  auto model = std::move(created).value();
  (void)model->init_weights(1);
  gpt2::AdamW opt(model->params(), *ops, {0.9f, 0.999f, 1e-8f, 0.0f});
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
  std::vector<int> in(B * T), tg(B * T);
  double total_ms = 0;
  for (int step = 0; step <= steps; step++) {  // step 0 warms up and is not counted
    for (int i = 0; i < B * T; i++) in[i] = id(rng), tg[i] = id(rng);
    auto t0 = Clock::now();
    model->params().zero_grads();
    auto f = model->forward(in.data(), tg.data(), nullptr);
    auto t1 = Clock::now();
    (void)model->backward(1.0f, {}, nullptr);
    auto t2 = Clock::now();
    opt.step(1e-4f);
    auto t3 = Clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    std::printf("%s B=%d T=%d step %d: loss %.4f | fwd %.0f ms | bwd %.0f ms | adamw %.0f ms | total %.0f ms\n",
                preset.c_str(), B, T, step, f.ok() ? f->loss : -1.0f, ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t0, t3));
    std::fflush(stdout);
    if (step > 0) total_ms += ms(t0, t3);
  }
  const double mean = total_ms / steps;
  std::printf("RESULT %s B=%d T=%d recompute=%d: %.1f ms/step, %.0f tokens/s, activations %.1f MiB\n",
              preset.c_str(), B, T, recompute, mean, B * T / (mean / 1000.0),
              model->activation_bytes() / 1048576.0);
  return 0;
}
