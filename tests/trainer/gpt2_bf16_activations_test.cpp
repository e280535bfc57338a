// gpt2_bf16_activations_test.cpp — the model's bf16 activation path, run on the CPU through
// Bf16EmulatingOps (every activation stored as bf16 between ops, fp32 math inside them): the tiny
// model trains like fp32 within bf16's precision, TP=2 (bf16 all-reduces) reproduces TP=1, the
// activation buffers take half the bytes, and the places that compute in fp32 only refuse bf16
// with a message instead of reading bf16 bits as floats.
//
// Tolerances: bf16 keeps 8 significant bits, so each stored activation is off by up to 2^-9
// relative, and these errors are independent from element to element. Measured on this model: losses
// within 0.0012 of fp32 over 5 steps (loss ~6.9), step-1 gradients within 0.6% in norm. The bounds
// (0.3% of the loss, 2% of the gradient norm) leave a 3x margin; a byte-size or offset mistake in
// the model's typed buffers shows up as garbage (losses off by whole units), far outside them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "bf16_emulating_ops.h"
#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"
#include "thread_group_comm.h"

namespace gpt2 {
namespace bf16_activation_tests {  // its own: in a unity build the test files of this binary share one translation unit
namespace {

struct Trace {
  std::string error;
  std::vector<float> losses;
  std::vector<float> first_grads;  // full (TP=1 layout) gradients of step 1: same weights in both runs
  size_t activation_bytes = 0;
};

constexpr int kSteps = 5;

GPT2::Options tiny_options(ActType acts, int tp = 1, int tp_rank = 0) {
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.vocab_size = 1000;
  o.config.max_seq_len = 64;
  o.batch = 2;
  o.seq_len = 48;
  o.attention = AttentionKind::kFlash;
  o.activations = acts;
  o.tp = {tp, tp_rank, VocabShard::kContiguous};
  return o;
}

Trace train(const GPT2::Options& o, Communicator* comm = nullptr) {
  Trace t;
  auto fail = [&](const Status& s) { t.error = s.to_string(); return t; };
  testing::Bf16EmulatingOps ops(make_cpu_ops());
  auto created = GPT2::create(o, ops, comm);
  if (!created.ok()) return fail(created.status());
  auto model = std::move(created).value();
  if (Status s = model->init_weights(5); !s.ok()) return fail(s);
  AdamWConfig cfg;
  cfg.weight_decay = 0.1f;
  AdamW opt(model->params(), ops, cfg);
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
  std::vector<int> in(o.batch * o.seq_len), tg(in.size());
  for (int step = 0; step < kSteps; step++) {
    for (size_t i = 0; i < in.size(); i++) in[i] = id(rng), tg[i] = id(rng);
    model->params().zero_grads();
    auto f = model->forward(in.data(), tg.data(), nullptr);
    if (!f.ok()) return fail(f.status());
    t.losses.push_back(f->loss);
    if (Status s = model->backward(1.0f, {}, nullptr); !s.ok()) return fail(s);
    if (step == 0) {
      auto g = model->gather_full_gradients();
      if (!g.ok()) return fail(g.status());
      t.first_grads = std::move(g->data);
    }
    opt.step(3e-3f);
  }
  t.activation_bytes = model->activation_bytes();
  return t;
}

// Largest |loss difference| and ||grad difference|| / ||grad|| between two traces.
struct Gap {
  float loss = 0;
  double grad_rel = 0;
};
Gap gap(const Trace& ref, const Trace& got) {
  Gap g;
  for (size_t s = 0; s < ref.losses.size(); s++) g.loss = std::max(g.loss, std::fabs(got.losses[s] - ref.losses[s]));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.first_grads.size(); i++) {
    diff += std::pow(double(got.first_grads[i]) - ref.first_grads[i], 2);
    norm += std::pow(double(ref.first_grads[i]), 2);
  }
  g.grad_rel = std::sqrt(diff / norm);
  return g;
}

TEST(Bf16Activations, TrainsLikeFp32WithinBf16Precision) {
  const Trace fp32 = train(tiny_options(ActType::kF32));
  const Trace bf16 = train(tiny_options(ActType::kBF16));
  ASSERT_EQ(fp32.error, "");
  ASSERT_EQ(bf16.error, "");
  ASSERT_EQ(bf16.losses.size(), fp32.losses.size());
  ASSERT_EQ(bf16.first_grads.size(), fp32.first_grads.size());
  EXPECT_NE(fp32.losses.front(), fp32.losses.back()) << "training must move for the comparison to mean anything";
  const Gap g = gap(fp32, bf16);
  EXPECT_GT(g.grad_rel, 0.0) << "bf16 storage must round something, or the emulation is not in the path";
  EXPECT_LE(g.loss, 0.003f * fp32.losses.front()) << "max |loss diff| over " << kSteps << " steps";
  EXPECT_LE(g.grad_rel, 0.02) << "||grad diff|| / ||grad|| of step 1";
  std::printf("bf16 vs fp32: max |loss diff| %.5f (loss %.3f), step-1 ||grad diff||/||grad|| %.5f\n", g.loss,
              fp32.losses.front(), g.grad_rel);
}

TEST(Bf16Activations, HalvesTheActivationBuffers) {
  const Trace fp32 = train(tiny_options(ActType::kF32));
  const Trace bf16 = train(tiny_options(ActType::kBF16));
  ASSERT_EQ(fp32.error, "");
  ASSERT_EQ(bf16.error, "");
  // What keeps its size whatever the activation type: ids/targets (int), LayerNorm mean/rstd,
  // flash's logsumexp (per layer) and D (one scratch), losses, row max, the packed softmax stats and
  // the classifier's partials.
  const GPT2::Options o = tiny_options(ActType::kF32);
  const size_t N = size_t(o.batch) * o.seq_len, L = o.config.num_layers;
  const size_t rows = size_t(o.batch) * o.config.num_heads * o.seq_len;
  const size_t fixed = 2 * N * sizeof(int) +                      // ids, targets
                       (4 * L + 2) * N * sizeof(float) +          // ln1/ln2 mean+rstd per block, ln_f's
                       (L + 1) * rows * sizeof(float) +           // flash saved per layer + scratch
                       (N + N + 2 * N) * sizeof(float) +          // losses, row_max, stats
                       3 * N * sizeof(float);                     // the fused classifier's partials (TP=1)
  ASSERT_GT(fp32.activation_bytes, fixed);
  EXPECT_EQ(bf16.activation_bytes - fixed, (fp32.activation_bytes - fixed) / 2);
}

TEST(Bf16Activations, TensorParallelReproducesTp1) {
  const Trace tp1 = train(tiny_options(ActType::kBF16));
  ASSERT_EQ(tp1.error, "");
  std::vector<Trace> ranks(2);
  testing::run_thread_group(2, [&](int rank, testing::ThreadGroupComm& comm) {
    ranks[rank] = train(tiny_options(ActType::kBF16, 2, rank), &comm);
  });
  for (const Trace& r : ranks) {
    ASSERT_EQ(r.error, "");
    // Partial sums are rounded to bf16 before the all-reduce: the gap is of bf16's size, not 0.
    const Gap g = gap(tp1, r);
    EXPECT_LE(g.loss, 0.003f * tp1.losses.front());
    EXPECT_LE(g.grad_rel, 0.02);
    std::printf("bf16 TP=2 rank vs TP=1: max |loss diff| %.5f, step-1 grad rel %.5f\n", g.loss, g.grad_rel);
  }
}

TEST(Bf16Activations, Fp32OnlyPlacesRefuseIt) {
  auto cpu = make_cpu_ops();
  auto on_cpu = GPT2::create(tiny_options(ActType::kBF16), *cpu, nullptr);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_NE(on_cpu.status().to_string().find("fp32 only"), std::string::npos) << on_cpu.status().to_string();
  EXPECT_NE(on_cpu.status().to_string().find("hint"), std::string::npos);

  testing::Bf16EmulatingOps ops(make_cpu_ops());
  GPT2::Options moe = tiny_options(ActType::kBF16);
  moe.moe.experts = 4;
  moe.moe.top_k = 2;
  auto moe_ops = make_cpu_moe_ops();
  auto with_moe = GPT2::create(moe, ops, nullptr, nullptr, moe_ops.get());
  ASSERT_FALSE(with_moe.ok());
  EXPECT_NE(with_moe.status().to_string().find("MoE"), std::string::npos) << with_moe.status().to_string();
}

}  // namespace
}  // namespace bf16_activation_tests
}  // namespace gpt2
