// gpt2_recompute_test.cpp — --recompute 1 and 2 give the losses and gradients of 0 while keeping
// fewer activation bytes.
#include <gtest/gtest.h>

#include <random>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"

namespace gpt2 {
namespace {

struct Trace {
  std::vector<float> losses;
  std::vector<float> final_grads;
  size_t activation_bytes = 0;
};

Trace train(Recompute recompute) {
  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.vocab_size = 1000;
  o.config.max_seq_len = 64;
  o.batch = 2;
  o.seq_len = 32;
  o.recompute = recompute;
  auto model = std::move(GPT2::create(o, *ops, nullptr)).value();
  EXPECT_TRUE(model->init_weights(3).ok());
  AdamWConfig cfg;
  cfg.weight_decay = 0.1f;
  AdamW opt(model->params(), *ops, cfg);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
  std::vector<int> in(o.batch * o.seq_len), tg(in.size());
  Trace t;
  for (int step = 0; step < 5; step++) {
    for (size_t i = 0; i < in.size(); i++) in[i] = id(rng), tg[i] = id(rng);
    model->params().zero_grads();
    auto f = model->forward(in.data(), tg.data(), nullptr);
    EXPECT_TRUE(f.ok());
    t.losses.push_back(f->loss);
    EXPECT_TRUE(model->backward(1.0f, {}, nullptr).ok());
    opt.step(3e-3f);
  }
  const auto& ps = model->params();
  t.final_grads.assign(ps.grads(), ps.grads() + ps.total_numel());
  t.activation_bytes = model->activation_bytes();
  return t;
}

TEST(Recompute, LevelsOneAndTwoGiveTheNumbersOfZeroWithLessMemory) {
  const Trace r0 = train(Recompute::kNone);
  const Trace r1 = train(Recompute::kGelu);
  const Trace r2 = train(Recompute::kGeluAndLayerNorm);
  for (size_t s = 0; s < r0.losses.size(); s++) {
    EXPECT_NEAR(r1.losses[s], r0.losses[s], 1e-5f) << "step " << s;
    EXPECT_NEAR(r2.losses[s], r0.losses[s], 1e-5f) << "step " << s;
  }
  EXPECT_EQ(r1.final_grads, r0.final_grads);  // the same ops on the same inputs: bit-identical
  EXPECT_EQ(r2.final_grads, r0.final_grads);
  EXPECT_LT(r1.activation_bytes, r0.activation_bytes);
  EXPECT_LT(r2.activation_bytes, r1.activation_bytes);
  EXPECT_NE(r0.losses.front(), r0.losses.back()) << "training must move for the comparison to mean anything";
}

}  // namespace
}  // namespace gpt2
