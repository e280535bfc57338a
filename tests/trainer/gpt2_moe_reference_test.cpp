// gpt2_moe_reference_test.cpp — the C++ GPT-2 with an MoE block against PyTorch (float64).
//
// The fixture (trainer/reference/make_moe_fixture.py; layout in tests/fixtures/trainer/README.md)
// gives parameter names and weights in ParameterSet order, data, and for top-1 / top-2, dropless
// and with capacity drops: logits, loss (cross-entropy + aux loss), the gradient norm, every
// gradient (router included) and the losses of 10 AdamW steps. All compared at abs <= 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"
#include "reference_fixture.h"

namespace gpt2 {
namespace {

struct MoeCase {
  int top_k = 0;
  float capacity = 0;
  std::vector<float> logits, grads, step_losses;
  float loss = 0, grad_norm = 0;
};

struct MoeFixture {
  int B = 0, T = 0, V = 0, Vp = 0, L = 0, NH = 0, C = 0, maxT = 0, steps = 0, E = 0, every = 0;
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, wd = 0, aux = 0;
  std::vector<std::string> names;
  std::vector<int> inputs, targets;
  std::vector<float> weights;  // every parameter, ParameterSet order, no padding
  std::vector<MoeCase> cases;
  std::string error;
};

template <class T>
bool read(FILE* f, T* out, size_t n) { return std::fread(out, sizeof(T), n, f) == n; }

MoeFixture load_fixture(const std::vector<size_t>& numels_of, bool& numels_known) {
  MoeFixture x;
  const auto path = testing::fixture_dir() / "moe_small_reference.bin";
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return x.error = "cannot open " + path.string(), x;
  int32_t h[64];
  float hyper[8];
  int32_t name_bytes = 0;
  bool ok = read(f, h, 64) && read(f, hyper, 8) && h[0] == 20251124 && h[1] == 1 && read(f, &name_bytes, 1);
  if (ok) {
    x.B = h[2], x.T = h[3], x.V = h[4], x.Vp = h[5], x.L = h[6], x.NH = h[7], x.C = h[8], x.maxT = h[9];
    x.steps = h[10], x.E = h[11], x.every = h[12];
    x.lr = hyper[0], x.beta1 = hyper[1], x.beta2 = hyper[2], x.eps = hyper[3], x.wd = hyper[4], x.aux = hyper[5];
    std::string blob(static_cast<size_t>(name_bytes), '\0');
    ok = read(f, blob.data(), blob.size());
    std::istringstream lines(blob);
    for (std::string line; std::getline(lines, line);) x.names.push_back(line);
    const size_t N = size_t(x.B) * x.T;
    x.inputs.resize(N), x.targets.resize(N);
    ok = ok && read(f, x.inputs.data(), N) && read(f, x.targets.data(), N);
    size_t total = 0;
    for (size_t n : numels_of) total += n;
    numels_known = x.names.size() == numels_of.size();
    x.weights.resize(total);
    ok = ok && numels_known && read(f, x.weights.data(), total);
    for (int c = 0; ok && c < h[13]; c++) {
      MoeCase mc;
      int32_t k = 0;
      float cap[3];
      mc.logits.resize(N * x.V), mc.grads.resize(total), mc.step_losses.resize(x.steps);
      float lg[2];
      ok = read(f, &k, 1) && read(f, cap, 3) && read(f, mc.logits.data(), mc.logits.size()) && read(f, lg, 2) &&
           read(f, mc.grads.data(), total) && read(f, mc.step_losses.data(), mc.step_losses.size());
      mc.top_k = k, mc.capacity = cap[0], mc.loss = lg[0], mc.grad_norm = lg[1];
      x.cases.push_back(std::move(mc));
    }
  }
  if (!ok) x.error = "bad or truncated " + path.string();
  std::fclose(f);
  return x;
}

GPT2::Options options_for(const MoeFixture& x, int top_k, float capacity) {
  GPT2::Options o;
  o.config.vocab_size = x.V;
  o.config.max_seq_len = x.maxT;
  o.config.num_layers = x.L;
  o.config.num_heads = x.NH;
  o.config.channels = x.C;
  o.batch = x.B;
  o.seq_len = x.T;
  o.moe.experts = x.E;
  o.moe.every = x.every;
  o.moe.top_k = top_k;
  o.moe.capacity_factor = capacity;
  o.moe.aux_loss_coef = x.aux;
  return o;
}

TEST(Gpt2MoeReference, MatchesPyTorchTop1Top2DroplessAndWithDrops) {
  auto ops = make_cpu_ops();
  auto moe_ops = make_cpu_moe_ops();
  // The fixture's model shape (its header) is V=100 L=2 NH=2 C=16 maxT=16, E=4 every=2: build
  // the parameter list from it to learn the tensor sizes, then read the rest.
  MoeFixture probe_shape;
  probe_shape.V = 100, probe_shape.maxT = 16, probe_shape.L = 2, probe_shape.NH = 2, probe_shape.C = 16;
  probe_shape.B = 2, probe_shape.T = 8, probe_shape.E = 4, probe_shape.every = 2, probe_shape.aux = 0.01f;
  auto shape_model = GPT2::create(options_for(probe_shape, 1, 0.0f), *ops, nullptr, nullptr, moe_ops.get());
  ASSERT_TRUE(shape_model.ok()) << shape_model.status().to_string();
  std::vector<size_t> numels;
  for (const ParamInfo& info : (*shape_model)->params().infos()) numels.push_back(info.numel);
  bool numels_known = false;
  const MoeFixture x = load_fixture(numels, numels_known);
  ASSERT_TRUE(x.error.empty()) << x.error << (numels_known ? "" : " (parameter count differs)");
  ASSERT_EQ(x.cases.size(), 4u);

  int cases_with_drops = 0;
  for (const MoeCase& mc : x.cases) {
    SCOPED_TRACE(::testing::Message() << "top-" << mc.top_k << " capacity " << mc.capacity);
    auto created = GPT2::create(options_for(x, mc.top_k, mc.capacity), *ops, nullptr, nullptr, moe_ops.get());
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    GPT2& model = **created;
    ParameterSet& ps = model.params();
    ASSERT_EQ(ps.count(), x.names.size());
    size_t at = 0;
    for (size_t i = 0; i < ps.count(); i++) {
      ASSERT_EQ(ps.infos()[i].name, x.names[i]);
      ops->copy_from_host(ps.param(i).data(), x.weights.data() + at, ps.infos()[i].numel * sizeof(float));
      at += ps.infos()[i].numel;
    }
    ps.zero_grads();
    auto fwd = model.forward(x.inputs.data(), x.targets.data(), nullptr);
    ASSERT_TRUE(fwd.ok()) << fwd.status().to_string();
    if (fwd->moe_dropped > 0) ++cases_with_drops;
    EXPECT_EQ(fwd->moe_dropped > 0, mc.capacity > 0.0f) << "capacity 1.0 must drop some slots here";
    EXPECT_NEAR(fwd->loss, mc.loss, 1e-4f);
    const size_t N = size_t(x.B) * x.T;
    std::vector<float> logits(N * ps.padded_vocab());
    model.copy_logits_to_host(logits.data(), 0, N);
    float worst = 0;
    for (size_t n = 0; n < N; n++)
      for (int v = 0; v < x.V; v++)
        worst = std::max(worst, std::fabs(logits[n * ps.padded_vocab() + v] - mc.logits[n * x.V + v]));
    EXPECT_LE(worst, 1e-4f) << "logits";
    ASSERT_TRUE(model.backward(1.0f, {}, nullptr).ok());
    at = 0;
    for (size_t i = 0; i < ps.count(); i++) {
      const auto g = ps.grad(i);
      float gw = 0, scale = 0;
      for (size_t j = 0; j < g.size(); j++) {
        gw = std::max(gw, std::fabs(g[j] - mc.grads[at + j]));
        scale = std::max(scale, std::fabs(mc.grads[at + j]));
      }
      EXPECT_LE(gw, 1e-4f) << ps.infos()[i].name;
      if (ps.infos()[i].name.find("router") != std::string::npos) EXPECT_GT(scale, 1e-4f) << "router gradient is not trivial";
      at += g.size();
    }
    auto norm = global_grad_norm(ps, *ops, nullptr);
    ASSERT_TRUE(norm.ok());
    EXPECT_NEAR(*norm, mc.grad_norm, 1e-4f * std::max(1.0f, mc.grad_norm));

    AdamW opt(ps, *ops, {x.beta1, x.beta2, x.eps, x.wd});
    for (int s = 0; s < x.steps; s++) {
      ps.zero_grads();
      auto f = model.forward(x.inputs.data(), x.targets.data(), nullptr);
      ASSERT_TRUE(f.ok());
      EXPECT_NEAR(f->loss, mc.step_losses[s], 1e-4f) << "AdamW step " << s;
      ASSERT_TRUE(model.backward(1.0f, {}, nullptr).ok());
      opt.step(x.lr);
    }
  }
  EXPECT_EQ(cases_with_drops, 2);
}

}  // namespace
}  // namespace gpt2
