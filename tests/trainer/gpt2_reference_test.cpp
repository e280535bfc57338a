// gpt2_reference_test.cpp — the numerics acceptance: the C++ GPT-2 (CPU ops) against PyTorch.
//
// The fixture (trainer/reference/make_fixture.py, float64 PyTorch) gives weights, data, logits,
// loss, every parameter gradient, the gradient norm and the losses of 10 AdamW steps; every value
// must match at abs <= 1e-4.
#include <gtest/gtest.h>

#include <cmath>

#include "model/adamw.h"
#include "model/checkpoint_io.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"
#include "reference_fixture.h"

namespace gpt2 {
namespace {

using testing::fixture_dir;
using testing::ReferenceFixture;

constexpr float kTol = 1e-4f;

struct Loaded {
  FullWeights weights;
  ReferenceFixture ref;
};

Loaded load_all() {
  auto w = read_llmc_model(fixture_dir() / "gpt2_small_model.bin");
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  Loaded l{w.ok() ? std::move(w).value() : FullWeights{}, {}};
  l.ref = ReferenceFixture::load(l.weights.data.size());
  EXPECT_EQ(l.ref.error, "");
  return l;
}

std::unique_ptr<GPT2> make_model(const Loaded& l, Ops& ops, Recompute recompute = Recompute::kNone) {
  GPT2::Options o;
  o.config = l.weights.config;
  o.batch = l.ref.B;
  o.seq_len = l.ref.T;
  o.recompute = recompute;
  auto m = GPT2::create(o, ops, nullptr);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  auto model = std::move(m).value();
  Status s = model->load_full_weights(l.weights);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return model;
}

TEST(Gpt2Reference, FixtureDescribesTheModelFile) {
  Loaded l = load_all();
  ASSERT_EQ(l.ref.error, "");
  EXPECT_EQ(l.weights.config.vocab_size, l.ref.V);
  EXPECT_EQ(l.weights.padded_vocab, l.ref.Vp);
  EXPECT_EQ(l.weights.config.num_layers, l.ref.L);
  EXPECT_EQ(l.weights.config.channels, l.ref.C);
  EXPECT_LT(l.ref.V, l.ref.Vp) << "the fixture must exercise padded logits";
}

TEST(Gpt2Reference, LogitsLossAndEveryGradientMatchPyTorch) {
  Loaded l = load_all();
  ASSERT_EQ(l.ref.error, "");
  auto ops = make_cpu_ops();
  auto model = make_model(l, *ops);
  model->params().zero_grads();
  auto fwd = model->forward(l.ref.inputs.data(), l.ref.targets.data(), nullptr);
  ASSERT_TRUE(fwd.ok()) << fwd.status().to_string();
  EXPECT_NEAR(fwd->loss, l.ref.loss, kTol);

  const int Vl = model->params().padded_vocab();
  const float* logits = model->logits().f32("test");
  float worst = 0;
  for (int n = 0; n < l.ref.B * l.ref.T; n++) {
    for (int v = 0; v < l.ref.V; v++) {
      worst = std::max(worst, std::fabs(logits[static_cast<size_t>(n) * Vl + v] - l.ref.logits[static_cast<size_t>(n) * l.ref.V + v]));
    }
  }
  EXPECT_LE(worst, kTol) << "max |logit - reference|";

  ASSERT_TRUE(model->backward(1.0f, {}, nullptr).ok());
  auto grads = model->gather_full_gradients();
  ASSERT_TRUE(grads.ok());
  ASSERT_EQ(grads->data.size(), l.ref.grads.size());
  // Check tensor by tensor so a failure names the parameter.
  static const char* kNames[] = {"wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                                 "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};
  size_t offset = 0;
  for (int t = 0; t < static_cast<int>(LlmcTensor::kCount); t++) {
    auto ours = grads->tensor(static_cast<LlmcTensor>(t));
    float max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < ours.size(); i++) {
      max_diff = std::max(max_diff, std::fabs(ours[i] - l.ref.grads[offset + i]));
      max_ref = std::max(max_ref, std::fabs(l.ref.grads[offset + i]));
    }
    EXPECT_LE(max_diff, kTol) << "gradient of " << kNames[t];
    EXPECT_GT(max_ref, 0.0f) << kNames[t] << " has an all-zero reference gradient: the check would be empty";
    offset += ours.size();
  }
  auto norm = global_grad_norm(model->params(), *ops, nullptr);
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, l.ref.grad_norm, 1e-4f * l.ref.grad_norm);
}

TEST(Gpt2Reference, TenAdamWStepsFollowPyTorchsLossTrajectory) {
  Loaded l = load_all();
  ASSERT_EQ(l.ref.error, "");
  auto ops = make_cpu_ops();
  auto model = make_model(l, *ops);
  AdamWConfig cfg;
  cfg.beta1 = l.ref.beta1, cfg.beta2 = l.ref.beta2, cfg.eps = l.ref.eps, cfg.weight_decay = l.ref.weight_decay;
  AdamW opt(model->params(), *ops, cfg);
  for (int step = 0; step < l.ref.steps; step++) {
    model->params().zero_grads();
    auto fwd = model->forward(l.ref.inputs.data(), l.ref.targets.data(), nullptr);
    ASSERT_TRUE(fwd.ok());
    EXPECT_NEAR(fwd->loss, l.ref.step_losses[step], kTol) << "step " << step;
    ASSERT_TRUE(model->backward(1.0f, {}, nullptr).ok());
    opt.step(l.ref.lr);
  }
  EXPECT_LT(l.ref.step_losses.back(), l.ref.step_losses.front() - 1.0f) << "the trajectory must move";
}

}  // namespace
}  // namespace gpt2
