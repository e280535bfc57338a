// gpt2_tp_test.cpp — tensor parallelism (Megatron) in one process: TP=2 and TP=4 over threads
// (thread_group_comm.h) reproduce TP=1's weights, loss, every gradient, gradient norm and AdamW
// trajectory; contiguous and strided vocab shards agree; the head issues exactly one collective,
// an all_gather of the packed (3N) loss partials (the fused classifier); contiguous shards are skewed on Zipf-like ids and strided ones are not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"
#include "thread_group_comm.h"

namespace gpt2 {
namespace {

using testing::run_thread_group;
using testing::ThreadGroupComm;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 500;  // Vp = 512 at TP 1, 2 and 4: padding ids land on the last shard(s)
  c.max_seq_len = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.channels = 64;
  return c;
}

constexpr int kB = 2, kT = 16, kSteps = 3;
constexpr uint64_t kSeed = 42;

struct Batch {
  std::vector<int> inputs, targets;
};
Batch random_batch(int V, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, V - 1);
  Batch b;
  for (int i = 0; i < kB * kT; i++) b.inputs.push_back(id(rng)), b.targets.push_back(id(rng));
  return b;
}

struct RankResult {
  std::string error;
  FullWeights initial_weights;
  float loss = 0;
  FullWeights grads;
  float grad_norm = 0;
  std::vector<float> step_losses;
  std::vector<ThreadGroupComm::LoggedReduce> forward_reduces;
  std::vector<size_t> forward_gathers;
};

// One TP rank: init from the seed, one forward/backward, then kSteps AdamW steps.
RankResult run_rank(int tp, int rank, VocabShard shard, Communicator* comm, ThreadGroupComm* log) {
  RankResult out;
  auto fail = [&](const Status& s) { out.error = s.to_string(); return out; };
  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = small_config();
  o.tp = {tp, rank, shard};
  o.batch = kB;
  o.seq_len = kT;
  auto created = GPT2::create(o, *ops, comm);
  if (!created.ok()) return fail(created.status());
  auto model = std::move(created).value();
  if (Status s = model->init_weights(kSeed); !s.ok()) return fail(s);
  auto w = model->gather_full_weights();
  if (!w.ok()) return fail(w.status());
  out.initial_weights = std::move(w).value();

  const Batch batch = random_batch(o.config.vocab_size, 7);
  model->params().zero_grads();
  if (log) log->clear_log();
  auto fwd = model->forward(batch.inputs.data(), batch.targets.data(), nullptr);
  if (!fwd.ok()) return fail(fwd.status());
  if (log) out.forward_reduces = log->reduce_log(), out.forward_gathers = log->gather_log();
  out.loss = fwd->loss;
  if (Status s = model->backward(1.0f, {}, nullptr); !s.ok()) return fail(s);
  auto norm = global_grad_norm(model->params(), *ops, comm);
  if (!norm.ok()) return fail(norm.status());
  out.grad_norm = *norm;
  auto g = model->gather_full_gradients();
  if (!g.ok()) return fail(g.status());
  out.grads = std::move(g).value();

  AdamWConfig cfg;
  cfg.weight_decay = 0.1f;
  AdamW opt(model->params(), *ops, cfg);
  opt.step(1e-3f);
  for (int step = 0; step < kSteps; step++) {
    model->params().zero_grads();
    auto f = model->forward(batch.inputs.data(), batch.targets.data(), nullptr);
    if (!f.ok()) return fail(f.status());
    out.step_losses.push_back(f->loss);
    if (Status s = model->backward(1.0f, {}, nullptr); !s.ok()) return fail(s);
    opt.step(1e-3f);
  }
  return out;
}

std::vector<RankResult> run_tp(int tp, VocabShard shard) {
  std::vector<RankResult> results(tp);
  if (tp == 1) {
    results[0] = run_rank(1, 0, shard, nullptr, nullptr);
  } else {
    run_thread_group(tp, [&](int rank, ThreadGroupComm& comm) {
      results[rank] = run_rank(tp, rank, shard, &comm, &comm);
    });
  }
  return results;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

class TensorParallelEquivalence : public ::testing::TestWithParam<std::tuple<int, VocabShard>> {};

TEST_P(TensorParallelEquivalence, ReproducesTp1) {
  const auto [tp, shard] = GetParam();
  static const std::vector<RankResult> base = run_tp(1, VocabShard::kContiguous);
  ASSERT_EQ(base[0].error, "");
  const std::vector<RankResult> results = run_tp(tp, shard);
  for (int r = 0; r < tp; r++) {
    const RankResult& got = results[r];
    ASSERT_EQ(got.error, "") << "rank " << r;
    // Same starting weights, bit for bit: full weights from one seed, then sliced.
    EXPECT_EQ(got.initial_weights.data, base[0].initial_weights.data) << "rank " << r;
    EXPECT_NEAR(got.loss, base[0].loss, 1e-5f * base[0].loss) << "rank " << r;
    ASSERT_EQ(got.grads.data.size(), base[0].grads.data.size());
    EXPECT_LE(max_abs_diff(got.grads.data, base[0].grads.data), 1e-5f) << "rank " << r;
    EXPECT_NEAR(got.grad_norm, base[0].grad_norm, 1e-5f * base[0].grad_norm) << "rank " << r;
    ASSERT_EQ(got.step_losses.size(), base[0].step_losses.size());
    for (size_t s = 0; s < got.step_losses.size(); s++) {
      EXPECT_NEAR(got.step_losses[s], base[0].step_losses[s], 1e-4f * base[0].step_losses[s]) << "step " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TpAndShard, TensorParallelEquivalence,
    ::testing::Combine(::testing::Values(1, 2, 4),
                       ::testing::Values(VocabShard::kContiguous, VocabShard::kStrided)),
    [](const ::testing::TestParamInfo<std::tuple<int, VocabShard>>& info) {
      return "tp" + std::to_string(std::get<0>(info.param)) + "_" +
             std::string(vocab_shard_name(std::get<1>(info.param)));
    });

TEST(TensorParallel, ForwardIssuesOneAllGatherOfThePackedLossPartials) {
  const std::vector<RankResult> results = run_tp(2, VocabShard::kContiguous);
  ASSERT_EQ(results[0].error, "");
  const auto& log = results[0].forward_reduces;
  const size_t N = kB * kT, NC = N * small_config().channels;
  // embed: one (N,C) sum; each block: attn proj and mlp proj (N,C) sums; head: no all-reduce ...
  ASSERT_EQ(log.size(), 1u + 2u * small_config().num_layers);
  for (const auto& reduce : log) {
    EXPECT_EQ(reduce.op, ReduceOp::kSum);
    EXPECT_EQ(reduce.count, NC);
  }
  // ... but one all_gather of [max | sum exp | target logit] (3N) per rank.
  ASSERT_EQ(results[0].forward_gathers.size(), 1u);
  EXPECT_EQ(results[0].forward_gathers[0], 3 * N);
}

// Zipf-Mandelbrot over token ids (frequent tokens have small ids, as GPT-2 BPE ids roughly do).
std::vector<int> zipf_ids(int V, size_t count, uint64_t seed) {
  std::vector<double> cdf(V);
  double acc = 0;
  for (int k = 0; k < V; k++) cdf[k] = (acc += 1.0 / std::pow(k + 2.7, 1.0));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, acc);
  std::vector<int> ids(count);
  for (auto& id : ids) id = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
  return ids;
}

std::vector<int64_t> local_token_counts(VocabShard shard) {
  ModelConfig c;
  c.vocab_size = 50257;
  c.max_seq_len = 128;
  c.num_layers = 1;
  c.num_heads = 2;
  c.channels = 32;
  constexpr int B = 2, T = 128, kBatches = 8;
  const std::vector<int> ids = zipf_ids(c.vocab_size, static_cast<size_t>(B) * T * kBatches, 5);
  std::vector<int64_t> counts(2, 0);
  std::vector<std::string> errors(2);
  run_thread_group(2, [&](int rank, ThreadGroupComm& comm) {
    auto ops = make_cpu_ops();
    GPT2::Options o{c, {2, rank, shard}, Recompute::kNone, B, T, {}, {}};
    auto model = GPT2::create(o, *ops, &comm);
    if (!model.ok()) {
      errors[rank] = model.status().to_string();
      return;  // both ranks fail identically here, before any collective
    }
    (void)(*model)->init_weights(1);
    for (int b = 0; b < kBatches; b++) {
      auto f = (*model)->forward(ids.data() + static_cast<size_t>(b) * B * T, nullptr, nullptr);
      if (f.ok()) counts[rank] += f->embed_local_tokens;
      else errors[rank] = f.status().to_string();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(counts[0] + counts[1], static_cast<int64_t>(B) * T * kBatches) << "every id has one owner";
  return counts;
}

TEST(TensorParallel, ContiguousVocabShardIsSkewedOnZipfIds) {
  const auto counts = local_token_counts(VocabShard::kContiguous);
  ASSERT_GT(counts[1], 0);
  EXPECT_GE(static_cast<double>(counts[0]) / counts[1], 5.0) << counts[0] << ":" << counts[1];
}

TEST(TensorParallel, StridedVocabShardIsBalancedOnZipfIds) {
  const auto counts = local_token_counts(VocabShard::kStrided);
  const double hi = std::max(counts[0], counts[1]), lo = std::min(counts[0], counts[1]);
  ASSERT_GT(lo, 0);
  EXPECT_LE(hi / lo, 1.10) << counts[0] << ":" << counts[1];
}

}  // namespace
}  // namespace gpt2
