// gpt2_model_api_test.cpp — the model's contract with the trainer: HF parameter names and shapes,
// presets and validation messages, gradient-ready order (each parameter once, reverse order, wte
// last), gradient accumulation, probe ranges, and clear errors on misuse.
#include <gtest/gtest.h>

#include <numeric>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"

namespace gpt2 {
namespace {

GPT2::Options tiny_options() {
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.vocab_size = 300;
  o.config.max_seq_len = 16;
  o.batch = 2;
  o.seq_len = 8;
  return o;
}

std::vector<int> ids(int n, int V, int salt) {
  std::vector<int> v(n);
  for (int i = 0; i < n; i++) v[i] = (i * 37 + salt * 11) % V;
  return v;
}

TEST(ModelConfig, PresetsAndValidation) {
  auto d12 = ModelConfig::preset("d12");
  ASSERT_TRUE(d12.ok());
  EXPECT_EQ(d12->num_layers, 12);
  EXPECT_EQ(d12->channels, 768);
  EXPECT_EQ(d12->padded_vocab_size(1), 50304);
  EXPECT_EQ(d12->padded_vocab_size(2), 50432);  // multiple of 256
  EXPECT_EQ(d12->padded_vocab_size(4) % 512, 0);
  EXPECT_EQ(ModelConfig::preset("tiny")->num_heads, 4);
  EXPECT_EQ(ModelConfig::preset("d6")->num_layers, 6);
  auto bad = ModelConfig::preset("d13");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hint"), std::string::npos);
  EXPECT_FALSE(d12->validate(5).ok()) << "12 heads do not split over 5 ranks";
  EXPECT_TRUE(d12->validate(4).ok());
  ModelConfig odd = *d12;
  odd.channels = 770;
  EXPECT_FALSE(odd.validate(1).ok());
  EXPECT_FALSE(parse_vocab_shard("round-robin").ok());
  EXPECT_EQ(*parse_vocab_shard("strided"), VocabShard::kStrided);
  EXPECT_EQ(*parse_recompute("2"), Recompute::kGeluAndLayerNorm);
  EXPECT_FALSE(parse_recompute("3").ok());
}

TEST(Parameters, HuggingFaceNamesAndMegatronShapes) {
  auto ops = make_cpu_ops();
  ModelConfig c = ModelConfig::preset("d12").value();
  ParameterSet full(c, {1, 0, VocabShard::kContiguous}, *ops);
  ASSERT_EQ(full.count(), 2u + 12u * 12u + 2u);
  EXPECT_EQ(full.infos()[0].name, "wte.weight");
  EXPECT_EQ(full.infos()[1].name, "wpe.weight");
  EXPECT_EQ(full.infos()[2].name, "h.0.ln_1.weight");
  EXPECT_EQ(full.infos().back().name, "ln_f.bias");
  size_t real = 0;
  for (const auto& p : full.infos()) real += p.numel;
  // GPT-2 124M with the vocabulary padded to 50304: llm.c's 124,475,904 parameters.
  EXPECT_EQ(real, 124475904u);

  ParameterSet shard(c, {4, 1, VocabShard::kStrided}, *ops);
  auto local = [&](const char* name) { return shard.infos()[shard.index_of(name)].local_shape; };
  EXPECT_EQ(local("wte.weight"), (std::vector<int>{c.padded_vocab_size(4) / 4, 768}));
  EXPECT_EQ(local("h.3.attn.c_attn.weight"), (std::vector<int>{3 * 768 / 4, 768}));
  EXPECT_EQ(local("h.3.attn.c_proj.weight"), (std::vector<int>{768, 768 / 4}));
  EXPECT_EQ(local("h.3.mlp.c_fc.bias"), (std::vector<int>{4 * 768 / 4}));
  EXPECT_EQ(local("h.3.mlp.c_proj.bias"), (std::vector<int>{768}));
  EXPECT_FALSE(shard.infos()[shard.index_of("h.3.mlp.c_proj.bias")].is_sharded());
  EXPECT_TRUE(shard.infos()[shard.index_of("h.3.mlp.c_proj.weight")].weight_decay);
  EXPECT_FALSE(shard.infos()[shard.index_of("h.3.ln_2.weight")].weight_decay);
  EXPECT_EQ(shard.index_of("h.99.ln_1.weight"), -1);
}

TEST(Gpt2, GradReadyReportsEveryParameterOnceInReverseOrderWithWteLast) {
  auto ops = make_cpu_ops();
  auto model = std::move(GPT2::create(tiny_options(), *ops, nullptr)).value();
  ASSERT_TRUE(model->init_weights(1).ok());
  const int n = 16, V = 300;
  auto in = ids(n, V, 1), tg = ids(n, V, 2);
  ASSERT_TRUE(model->forward(in.data(), tg.data(), nullptr).ok());
  std::vector<int> order;
  ASSERT_TRUE(model->backward(1.0f, [&](int i) { order.push_back(i); }, nullptr).ok());
  const int count = static_cast<int>(model->params().count());
  ASSERT_EQ(static_cast<int>(order.size()), count);
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(count);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected) << "each parameter reported exactly once";
  EXPECT_EQ(order.front(), lnf_bias_index(2));
  EXPECT_EQ(order.back(), kParamWte);
  // Apart from wte (tied), readiness follows descending buffer order: DDP buckets taken from the
  // end of the gradient buffer fill contiguously.
  for (size_t i = 1; i + 1 < order.size(); i++) EXPECT_LT(order[i], order[i - 1]);
}

TEST(Gpt2, GradientsAccumulateUntilZeroed) {
  auto ops = make_cpu_ops();
  auto model = std::move(GPT2::create(tiny_options(), *ops, nullptr)).value();
  ASSERT_TRUE(model->init_weights(2).ok());
  auto in = ids(16, 300, 3), tg = ids(16, 300, 4);
  ParameterSet& ps = model->params();
  ps.zero_grads();
  ASSERT_TRUE(model->forward(in.data(), tg.data(), nullptr).ok());
  ASSERT_TRUE(model->backward(1.0f, {}, nullptr).ok());
  std::vector<float> once(ps.grads(), ps.grads() + ps.total_numel());
  // Two half-scaled micro-steps on the same batch = one full step (gradient accumulation).
  ps.zero_grads();
  for (int k = 0; k < 2; k++) {
    ASSERT_TRUE(model->forward(in.data(), tg.data(), nullptr).ok());
    ASSERT_TRUE(model->backward(0.5f, {}, nullptr).ok());
  }
  double worst = 0, biggest = 0;
  for (size_t i = 0; i < once.size(); i++) {
    worst = std::max(worst, static_cast<double>(std::fabs(ps.grads()[i] - once[i])));
    biggest = std::max(biggest, static_cast<double>(std::fabs(once[i])));
  }
  EXPECT_LE(worst, 1e-6 * std::max(1.0, biggest));
  EXPECT_GT(biggest, 0.0);
}

TEST(Gpt2, ClippingScalesToTheRequestedNorm) {
  auto ops = make_cpu_ops();
  auto model = std::move(GPT2::create(tiny_options(), *ops, nullptr)).value();
  ASSERT_TRUE(model->init_weights(5).ok());
  auto in = ids(16, 300, 5), tg = ids(16, 300, 6);
  model->params().zero_grads();
  ASSERT_TRUE(model->forward(in.data(), tg.data(), nullptr).ok());
  ASSERT_TRUE(model->backward(1.0f, {}, nullptr).ok());
  const float norm = *global_grad_norm(model->params(), *ops, nullptr);
  ASSERT_GT(norm, 0.1f);
  const float factor = clip_grads_to_norm(model->params(), *ops, norm, norm / 4);
  EXPECT_NEAR(factor, 0.25f, 1e-6f);
  EXPECT_NEAR(*global_grad_norm(model->params(), *ops, nullptr), norm / 4, 1e-4f * norm);
  EXPECT_EQ(clip_grads_to_norm(model->params(), *ops, norm / 4, norm), 1.0f);
}

TEST(Gpt2, ClearErrorsOnMisuse) {
  auto ops = make_cpu_ops();
  GPT2::Options o = tiny_options();
  o.seq_len = 17;  // > max_seq_len 16
  EXPECT_FALSE(GPT2::create(o, *ops, nullptr).ok());
  o = tiny_options();
  o.tp.tp_size = 2;
  auto no_comm = GPT2::create(o, *ops, nullptr);
  ASSERT_FALSE(no_comm.ok());
  EXPECT_NE(no_comm.status().message().find("communicator"), std::string::npos);

  auto model = std::move(GPT2::create(tiny_options(), *ops, nullptr)).value();
  EXPECT_FALSE(model->backward(1.0f, {}, nullptr).ok()) << "backward before forward";
  auto in = ids(16, 300, 1);
  in[5] = 300;  // == V
  auto f = model->forward(in.data(), nullptr, nullptr);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("outside the vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace gpt2
