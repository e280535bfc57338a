// gpt2_moe_test.cpp — GPT-2 with MoE MLP blocks (MoeConfig) on the CPU backend, in one process.
//
// Checks: the parameter list (HF names, only this EP rank's experts, dense MLP in non-MoE blocks),
// that weight init is per full tensor (EP=2's experts and dense tensors equal EP=1's), the
// gradient-ready order (descending but wte last); EP=2 over two threads gives each rank EP=1's
// loss, router and dense gradients for its batch, and expert gradients that are the sum of both
// ranks' EP=1 gradients (what edp/DP reduction expects); TP=2 x EP=2 over four threads gives TP=1's
// loss; the token loop trains exactly like the grouped loop; llm.c weight files are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <thread>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"
#include "thread_group_comm.h"

namespace gpt2 {
namespace moe_model_tests {  // its own: in a unity build the test files of this binary share one translation unit
namespace {

using testing::run_thread_group;
using testing::ThreadGroup;
using testing::ThreadGroupComm;

constexpr int kB = 2, kT = 8, kE = 4;
constexpr uint64_t kSeed = 5;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 100;
  c.max_seq_len = 16;
  c.num_layers = 3;  // blocks 0 and 2 MoE with every = 2, block 1 dense
  c.num_heads = 2;
  c.channels = 16;
  return c;
}

MoeConfig moe_config(int top_k = 2, float capacity = 0.0f, ExpertLoop loop = ExpertLoop::kGrouped) {
  MoeConfig m;
  m.experts = kE;
  m.top_k = top_k;
  m.every = 2;
  m.capacity_factor = capacity;
  m.aux_loss_coef = 0.01f;
  m.loop = loop;
  return m;
}

void run_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; i++) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

struct Batch {
  std::vector<int> inputs, targets;
};
Batch batch_of(int rank) {
  std::mt19937 rng(100 + rank);
  std::uniform_int_distribution<int> id(0, small_config().vocab_size - 1);
  Batch b;
  for (int i = 0; i < kB * kT; i++) b.inputs.push_back(id(rng)), b.targets.push_back(id(rng));
  return b;
}

struct Made {
  std::unique_ptr<Ops> ops;
  std::unique_ptr<MoeOps> moe_ops;
  std::unique_ptr<GPT2> model;
};

Made make(const MoeConfig& moe, ExpertParallel ep = {}, Communicator* ep_comm = nullptr, int tp = 1,
          int tp_rank = 0, Communicator* tp_comm = nullptr) {
  Made m;
  m.ops = make_cpu_ops();
  m.moe_ops = make_cpu_moe_ops();
  GPT2::Options o;
  o.config = small_config();
  o.tp = {tp, tp_rank, VocabShard::kContiguous};
  o.batch = kB;
  o.seq_len = kT;
  o.moe = moe;
  o.ep = ep;
  auto created = GPT2::create(o, *m.ops, tp_comm, ep_comm, m.moe_ops.get());
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return m;
  m.model = std::move(created).value();
  EXPECT_TRUE(m.model->init_weights(kSeed).ok());
  return m;
}

std::vector<float> tensor(const ParameterSet& ps, std::string_view name, bool grad) {
  const int i = ps.index_of(name);
  EXPECT_GE(i, 0) << name;
  if (i < 0) return {};
  auto s = grad ? ps.grad(static_cast<size_t>(i)) : ps.param(static_cast<size_t>(i));
  return {s.begin(), s.end()};
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float worst = 0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LE(worst, tol) << what;
}

TEST(Gpt2Moe, ParameterListHoldsLocalExpertsWithHfNames) {
  Made one = make(moe_config());
  const ParameterSet& ps = one.model->params();
  EXPECT_GE(ps.index_of("h.0.mlp.router.weight"), 0);
  EXPECT_GE(ps.index_of("h.2.mlp.experts.3.c_proj.bias"), 0);
  EXPECT_LT(ps.index_of("h.0.mlp.c_fc.weight"), 0);  // the dense MLP is gone from MoE blocks
  EXPECT_GE(ps.index_of("h.1.mlp.c_fc.weight"), 0);  // and kept in the others
  EXPECT_LT(ps.index_of("h.1.mlp.router.weight"), 0);
  EXPECT_EQ(ps.infos()[ps.index_of("h.0.mlp.router.weight")].full_shape, (std::vector<int>{kE, 16}));
  EXPECT_TRUE(ps.infos()[ps.index_of("h.0.mlp.experts.1.c_fc.weight")].expert);
  EXPECT_FALSE(ps.infos()[ps.index_of("h.0.mlp.router.weight")].expert);
  EXPECT_EQ(ps.infos()[ps.lnf_bias()].name, "ln_f.bias");

  // EP=2, rank 1: experts 2 and 3 only, with EP=1's initial values; dense tensors equal too.
  auto group = std::make_shared<ThreadGroup>(2);
  ThreadGroupComm ep1(group, 1, "ep0");
  Made half = make(moe_config(), {2, 1}, &ep1);
  const ParameterSet& hs = half.model->params();
  EXPECT_LT(hs.index_of("h.0.mlp.experts.1.c_fc.weight"), 0);
  for (const char* name : {"h.0.mlp.experts.2.c_fc.weight", "h.2.mlp.experts.3.c_proj.weight",
                           "h.0.mlp.router.weight", "h.1.mlp.c_fc.weight", "h.2.attn.c_attn.weight", "wte.weight"})
    expect_near(tensor(hs, name, false), tensor(ps, name, false), 0.0f, name);
}

TEST(Gpt2Moe, GradientsBecomeReadyInDescendingOrderWteLast) {
  Made m = make(moe_config());
  const Batch b = batch_of(0);
  m.model->params().zero_grads();
  ASSERT_TRUE(m.model->forward(b.inputs.data(), b.targets.data(), nullptr).ok());
  std::vector<int> order;
  ASSERT_TRUE(m.model->backward(1.0f, [&](int p) { order.push_back(p); }, nullptr).ok());
  ASSERT_EQ(order.size(), m.model->params().count());
  EXPECT_EQ(order.back(), kParamWte);
  for (size_t i = 1; i + 1 < order.size(); i++) EXPECT_LT(order[i], order[i - 1]) << "at " << i;
}

struct RankRun {
  std::string error;
  std::vector<float> losses;       // first forward, then after each AdamW step
  ForwardStats first;
  std::vector<std::pair<std::string, std::vector<float>>> grads;  // after the first backward
};

// Forward/backward on `batch` (gradients kept), then `steps` AdamW steps (no DP reduction: the caller compares
// only the first step's gradients across layouts, and later losses within one layout).
RankRun train(GPT2& model, Ops& ops, const Batch& b, int steps, Communicator* tp_comm = nullptr,
              Communicator* ep_comm = nullptr) {
  RankRun r;
  AdamW opt(model.params(), ops, {0.9f, 0.95f, 1e-8f, 0.1f});
  for (int s = 0; s <= steps; s++) {
    model.params().zero_grads();
    auto f = model.forward(b.inputs.data(), b.targets.data(), nullptr);
    if (!f.ok()) return r.error = f.status().to_string(), r;
    if (s == 0) r.first = *f;
    r.losses.push_back(f->loss);
    if (Status st = model.backward(1.0f, {}, nullptr); !st.ok()) return r.error = st.to_string(), r;
    if (s == 0)
      for (size_t i = 0; i < model.params().count(); i++)
        r.grads.push_back({model.params().infos()[i].name, tensor(model.params(), model.params().infos()[i].name, true)});
    if (s == steps) break;
    auto norm = global_grad_norm(model.params(), ops, tp_comm, ep_comm);
    if (!norm.ok()) return r.error = norm.status().to_string(), r;
    opt.step(1e-3f);
  }
  return r;
}

const std::vector<float>* find(const RankRun& r, const std::string& name) {
  for (const auto& [n, g] : r.grads)
    if (n == name) return &g;
  return nullptr;
}

TEST(Gpt2Moe, ExpertParallel2MatchesEp1PerRank) {
  for (float capacity : {0.0f, 1.0f}) {
    SCOPED_TRACE(capacity);
    const MoeConfig moe = moe_config(2, capacity);
    RankRun ref[2];
    for (int r = 0; r < 2; r++) {
      Made m = make(moe);
      ref[r] = train(*m.model, *m.ops, batch_of(r), 0);
      ASSERT_TRUE(ref[r].error.empty()) << ref[r].error;
    }
    RankRun ep[2];
    run_thread_group(2, [&](int rank, ThreadGroupComm& comm) {
      Made m = make(moe, {2, rank}, &comm);
      ep[rank] = train(*m.model, *m.ops, batch_of(rank), 0, nullptr, &comm);
    }, "ep0");
    for (int r = 0; r < 2; r++) {
      ASSERT_TRUE(ep[r].error.empty()) << ep[r].error;
      ASSERT_EQ(ep[r].grads.size(), 2 + 3 * 8 + 1 + 2 * 4 + 4 + 1 + 2 * 4 + 2u);  // EP=2: 2 experts per block
      EXPECT_NEAR(ep[r].losses[0], ref[r].losses[0], 1e-5f) << "rank " << r;
      EXPECT_EQ(ep[r].first.moe_routed, ref[r].first.moe_routed);
      EXPECT_EQ(ep[r].first.moe_dropped, ref[r].first.moe_dropped);
      if (capacity > 0.0f) EXPECT_GT(ref[r].first.moe_dropped, 0);
      for (const auto& [name, g] : ep[r].grads) {
        const std::vector<float>* mine = find(ref[r], name);
        ASSERT_NE(mine, nullptr) << name;
        if (name.find(".experts.") == std::string::npos) {
          expect_near(g, *mine, 1e-5f, name);
          continue;
        }
        // An expert rank's gradient holds the rows of both ranks' tokens.
        std::vector<float> sum = *mine;
        const std::vector<float>* other = find(ref[1 - r], name);
        for (size_t i = 0; i < sum.size(); i++) sum[i] += (*other)[i];
        expect_near(g, sum, 1e-5f, name);
      }
    }
    // Tokens received over the two ranks = slots kept over the two ranks.
    const int64_t kept = 2 * int64_t(kB) * kT * 2 * 2 - ref[0].first.moe_dropped - ref[1].first.moe_dropped;
    EXPECT_EQ(ep[0].first.moe_received + ep[1].first.moe_received, kept);
  }
}

TEST(Gpt2Moe, TensorParallel2xExpertParallel2MatchesTp1) {
  const MoeConfig moe = moe_config(2, 0.0f);
  RankRun ref[2];
  for (int r = 0; r < 2; r++) {
    Made m = make(moe);
    ref[r] = train(*m.model, *m.ops, batch_of(r), 0);
  }
  // World rank w: tp rank w % 2, ep (= dp) rank w / 2, as in process_groups.h.
  std::shared_ptr<ThreadGroup> tp_groups[2] = {std::make_shared<ThreadGroup>(2), std::make_shared<ThreadGroup>(2)};
  std::shared_ptr<ThreadGroup> ep_groups[2] = {std::make_shared<ThreadGroup>(2), std::make_shared<ThreadGroup>(2)};
  RankRun got[4];
  run_threads(4, [&](int w) {
    const int tp_rank = w % 2, ep_rank = w / 2;
    ThreadGroupComm tp(tp_groups[ep_rank], tp_rank, "tp");
    ThreadGroupComm ep(ep_groups[tp_rank], ep_rank, "ep");
    Made m = make(moe, {2, ep_rank}, &ep, 2, tp_rank, &tp);
    got[w] = train(*m.model, *m.ops, batch_of(ep_rank), 0, &tp, &ep);
  });
  for (int w = 0; w < 4; w++) {
    ASSERT_TRUE(got[w].error.empty()) << got[w].error;
    EXPECT_NEAR(got[w].losses[0], ref[w / 2].losses[0], 1e-5f) << "world rank " << w;
    // Experts are replicated over TP: both TP ranks hold the same expert gradient.
    const std::string expert = "h.0.mlp.experts." + std::to_string(2 * (w / 2)) + ".c_fc.weight";
    ASSERT_NE(find(got[w], expert), nullptr);
    expect_near(*find(got[w], expert), *find(got[w ^ 1], expert), 0.0f, "expert gradient across TP");
  }
}

TEST(Gpt2Moe, TokenLoopTrainsLikeGroupedLoop) {
  for (int top_k : {1, 2}) {
    Made grouped = make(moe_config(top_k, 1.25f, ExpertLoop::kGrouped));
    Made token = make(moe_config(top_k, 1.25f, ExpertLoop::kToken));
    const RankRun a = train(*grouped.model, *grouped.ops, batch_of(0), 3);
    const RankRun b = train(*token.model, *token.ops, batch_of(0), 3);
    ASSERT_TRUE(a.error.empty() && b.error.empty()) << a.error << b.error;
    ASSERT_EQ(a.losses.size(), 4u);
    for (size_t i = 0; i < a.losses.size(); i++) EXPECT_NEAR(a.losses[i], b.losses[i], 1e-5f) << "step " << i;
    EXPECT_LT(a.losses.back(), a.losses.front());
  }
}

TEST(Gpt2Moe, AuxLossIsInTheLossAndCountersAddUp) {
  Made m = make(moe_config(2, 1.0f));
  const Batch b = batch_of(0);
  auto f = m.model->forward(b.inputs.data(), b.targets.data(), nullptr);
  ASSERT_TRUE(f.ok());
  // Two MoE blocks, near-uniform routing at init: each aux loss is about the coefficient (0.01).
  EXPECT_GT(f->moe_aux_loss, 0.015f);
  EXPECT_LT(f->moe_aux_loss, 0.04f);
  int64_t routed = 0;
  for (int64_t r : f->moe_routed) routed += r;
  EXPECT_EQ(routed, 2 * int64_t(kB) * kT * 2);  // every slot of both blocks, before drops
  EXPECT_EQ(f->moe_received + f->moe_dropped, routed);
}

TEST(Gpt2Moe, RouterBiasMakesAHotExpert) {
  Made m = make(moe_config(1));
  std::vector<float> bias(kE, 0.0f);
  bias[3] = 10.0f;
  ASSERT_TRUE(m.model->set_router_logit_bias(bias).ok());
  const Batch b = batch_of(0);
  auto f = m.model->forward(b.inputs.data(), b.targets.data(), nullptr);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->moe_routed[3], 2 * kB * kT);
  EXPECT_FALSE(m.model->set_router_logit_bias({1.0f}).ok());
}

TEST(Gpt2Moe, LlmcWeightFilesAreRefusedClearly) {
  Made m = make(moe_config());
  auto w = m.model->gather_full_weights();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("dense GPT-2 only"), std::string::npos) << w.status().to_string();
}

TEST(Gpt2Moe, BadMoeOptionsAreRefused) {
  auto ops = make_cpu_ops();
  auto moe_ops = make_cpu_moe_ops();
  GPT2::Options o;
  o.config = small_config();
  o.batch = kB;
  o.seq_len = kT;
  o.moe = moe_config();
  o.moe.experts = 3;
  o.ep = {2, 0};
  auto bad = GPT2::create(o, *ops, nullptr, nullptr, moe_ops.get());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot be sharded over --ep 2"), std::string::npos);
  o.moe = moe_config();
  o.ep = {};
  EXPECT_FALSE(GPT2::create(o, *ops, nullptr, nullptr, nullptr).ok());  // no MoE ops
}

}  // namespace
}  // namespace moe_model_tests
}  // namespace gpt2
