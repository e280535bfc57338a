// crossentropy_fused_test.cpp — the fused vocab-parallel classifier (ops.h crossentropy_partials ->
// all_gather -> crossentropy_combine -> crossentropy_loss_backward_inplace) on the CPU oracle.
//
// Checks, for contiguous and strided shards, TP = 1, 2, 4 simulated in one process, padding columns
// holding NaN (so reading one would show), a shard with no real column, and a double-precision
// reference: the CPU one-pass ops == the composed defaults of ops.h == the old four-op path
// (logits_row_max -> max -> softmax_stats -> sum -> crossentropy_losses; crossentropy_backward_inplace).
// And through the model at TP=1 and TP=2 (threads, thread_group_comm.h): a forward given the
// backward's loss scale yields the loss and every gradient of the unfused forward + backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>
#include <random>

#include "model/gpt2.h"
#include "ops/cpu/cpu_ops.h"
#include "thread_group_comm.h"

namespace gpt2 {
namespace {

// Tolerances. Losses: the fused path sums exp(l - m_r) against each shard's own max and rescales
// by exp(m_r - M), the old path against the global max: both are fp32 sums of ~V terms in (0, 1],
// differing by a few ulps of the sum; 2e-6 relative on a loss of ~log(V) ~ 5 is ~10 ulps.
// dlogits = (p - onehot) * dloss with |p| <= 1: 1e-6 * dloss absolute is ~8 ulps of the largest p.
constexpr double kLossRelTol = 2e-6;
constexpr double kDlogitTol = 1e-6;

struct Case {
  int V, tp, N;
  bool strided;
  float spread;  // logits ~ N(0, spread): large spreads make one column dominate the sum
};

VocabShardMap shard_of(const Case& c, int rank) {
  const int Vp = ((c.V + 127) / 128) * 128;
  return {c.strided, c.tp, rank, Vp / c.tp, c.V};
}

struct Problem {
  std::vector<float> full;                 // (N, V) real logits
  std::vector<int> targets;                // (N)
  std::vector<std::vector<float>> local;   // per rank (N, Vl), padded columns NaN
};

Problem make_problem(const Case& c, uint64_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> logit(0.0f, c.spread);
  std::uniform_int_distribution<int> id(0, c.V - 1);
  Problem p;
  p.full.resize(static_cast<size_t>(c.N) * c.V);
  for (float& x : p.full) x = logit(rng);
  for (int n = 0; n < c.N; n++) p.targets.push_back(id(rng));
  for (int r = 0; r < c.tp; r++) {
    const VocabShardMap s = shard_of(c, r);
    std::vector<float> l(static_cast<size_t>(c.N) * s.local_rows, std::numeric_limits<float>::quiet_NaN());
    for (int n = 0; n < c.N; n++)
      for (int j = 0; j < s.local_rows; j++)
        if (s.global_id(j) < c.V) l[static_cast<size_t>(n) * s.local_rows + j] = p.full[static_cast<size_t>(n) * c.V + s.global_id(j)];
    p.local.push_back(std::move(l));
  }
  return p;
}

struct Result3 {
  std::vector<float> losses;                 // (N)
  std::vector<std::vector<float>> dlogits;   // per rank (N, Vl)
  std::vector<std::vector<float>> row_max, stats;  // per rank, after the combine / all-reduce
};

// The old path, the all-reduces done on the host.
Result3 unfused(Ops& ops, const Case& c, Problem p, float dloss) {
  const int N = c.N;
  Result3 out;
  std::vector<std::vector<float>> mx(c.tp, std::vector<float>(N)), st(c.tp, std::vector<float>(2 * N));
  for (int r = 0; r < c.tp; r++) ops.logits_row_max(mx[r].data(), p.local[r].data(), N, shard_of(c, r));
  for (int n = 0; n < N; n++)
    for (int r = 1; r < c.tp; r++) mx[0][n] = std::max(mx[0][n], mx[r][n]);
  for (int r = 0; r < c.tp; r++) {
    ops.softmax_stats(st[r].data(), p.local[r].data(), mx[0].data(), p.targets.data(), N, shard_of(c, r));
  }
  for (int i = 0; i < 2 * N; i++)
    for (int r = 1; r < c.tp; r++) st[0][i] += st[r][i];
  out.losses.resize(N);
  ops.crossentropy_losses(out.losses.data(), st[0].data(), mx[0].data(), N);
  for (int r = 0; r < c.tp; r++) {
    ops.crossentropy_backward_inplace(p.local[r].data(), mx[0].data(), st[0].data(), p.targets.data(), dloss, N,
                                      shard_of(c, r));
  }
  out.dlogits = std::move(p.local);
  return out;
}

// The fused path; `defaults` calls the composed defaults of ops.h instead of the backend's own.
Result3 fused(Ops& ops, const Case& c, Problem p, float dloss, bool defaults) {
  const int N = c.N;
  const size_t n3 = 3 * static_cast<size_t>(N);
  std::vector<float> gathered(n3 * c.tp);  // what all_gather returns: rank r at r * 3N
  for (int r = 0; r < c.tp; r++) {
    float* part = gathered.data() + r * n3;
    if (defaults) ops.Ops::crossentropy_partials(part, p.local[r].data(), p.targets.data(), N, shard_of(c, r));
    else ops.crossentropy_partials(part, p.local[r].data(), p.targets.data(), N, shard_of(c, r));
  }
  Result3 out;
  out.losses.resize(N);
  for (int r = 0; r < c.tp; r++) {  // every rank combines the same gathered buffer
    std::vector<float> mx(N), st(2 * N), losses(N);
    if (defaults) ops.Ops::crossentropy_combine(mx.data(), st.data(), gathered.data(), c.tp, N);
    else ops.crossentropy_combine(mx.data(), st.data(), gathered.data(), c.tp, N);
    if (defaults) {
      ops.Ops::crossentropy_loss_backward_inplace(losses.data(), p.local[r].data(), mx.data(), st.data(),
                                                  p.targets.data(), dloss, N, shard_of(c, r));
    } else {
      ops.crossentropy_loss_backward_inplace(losses.data(), p.local[r].data(), mx.data(), st.data(),
                                             p.targets.data(), dloss, N, shard_of(c, r));
    }
    if (r == 0) out.losses = losses;
    EXPECT_EQ(losses, out.losses) << "rank " << r << " computed other losses than rank 0";
    out.row_max.push_back(mx);
    out.stats.push_back(st);
  }
  out.dlogits = std::move(p.local);
  return out;
}

// Double-precision reference loss of row n.
double reference_loss(const Case& c, const Problem& p, int n) {
  const float* l = p.full.data() + static_cast<size_t>(n) * c.V;
  double m = -INFINITY, s = 0;
  for (int v = 0; v < c.V; v++) m = std::max(m, double(l[v]));
  for (int v = 0; v < c.V; v++) s += std::exp(double(l[v]) - m);
  return std::log(s) + m - l[p.targets[n]];
}

void expect_same(const Case& c, const Result3& a, const Result3& b, const char* what) {
  for (int n = 0; n < c.N; n++) {
    ASSERT_NEAR(a.losses[n], b.losses[n], kLossRelTol * std::fabs(b.losses[n])) << what << " loss row " << n;
  }
  const float dloss = 0.25f;
  for (int r = 0; r < c.tp; r++) {
    const VocabShardMap s = shard_of(c, r);
    for (size_t i = 0; i < a.dlogits[r].size(); i++) {
      const int j = static_cast<int>(i % s.local_rows);
      if (s.global_id(j) >= c.V) {
        ASSERT_EQ(a.dlogits[r][i], 0.0f) << what << ": padding column " << j << " of rank " << r;
        ASSERT_EQ(b.dlogits[r][i], 0.0f) << what << ": padding column " << j << " of rank " << r;
      } else {
        ASSERT_NEAR(a.dlogits[r][i], b.dlogits[r][i], kDlogitTol * dloss) << what << " rank " << r << " element " << i;
      }
    }
  }
}

class FusedClassifier : public ::testing::TestWithParam<Case> {};

TEST_P(FusedClassifier, OnePassOpsMatchTheComposedDefaultsAndTheFourOpPath) {
  const Case c = GetParam();
  auto ops = make_cpu_ops();
  const Problem p = make_problem(c, 1000 + c.V + c.tp);
  const float dloss = 0.25f;
  const Result3 old_path = unfused(*ops, c, p, dloss);
  const Result3 one_pass = fused(*ops, c, p, dloss, false);
  const Result3 defaults = fused(*ops, c, p, dloss, true);
  expect_same(c, one_pass, old_path, "cpu one-pass vs four-op path");
  expect_same(c, defaults, old_path, "composed defaults vs four-op path");
  for (int n = 0; n < c.N; n++) {
    EXPECT_NEAR(one_pass.losses[n], reference_loss(c, p, n), kLossRelTol * reference_loss(c, p, n)) << "row " << n;
  }
  // dlogits sum to 0 over the whole vocabulary (softmax sums to 1, minus the one-hot).
  for (int n = 0; n < c.N; n++) {
    double total = 0;
    for (int r = 0; r < c.tp; r++) {
      const int Vl = shard_of(c, r).local_rows;
      for (int j = 0; j < Vl; j++) total += one_pass.dlogits[r][static_cast<size_t>(n) * Vl + j];
    }
    EXPECT_NEAR(total, 0.0, 1e-6) << "row " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shardings, FusedClassifier,
    ::testing::Values(Case{101, 1, 7, false, 2.0f}, Case{101, 2, 7, false, 2.0f}, Case{101, 2, 7, true, 2.0f},
                      Case{101, 4, 5, true, 8.0f}, Case{300, 4, 5, false, 8.0f},
                      // contiguous, V = 60 of Vp = 128: rank 1 owns no real column at all
                      Case{60, 2, 6, false, 3.0f}, Case{1000, 2, 3, true, 30.0f}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "V" + std::to_string(c.V) + "_tp" + std::to_string(c.tp) + (c.strided ? "_strided" : "_contiguous");
    });

// --- through the model: forward(..., backward_loss_scale) + backward == forward + backward ---

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 300;  // Vp = 384: padding on the last shard
  c.max_seq_len = 16;
  c.num_layers = 1;
  c.num_heads = 2;
  c.channels = 32;
  return c;
}

struct ModelRun {
  std::string error;
  float loss = 0;
  std::vector<float> losses;
  std::vector<float> grads;
};

// scale_to_forward: nullopt = the unfused path; else given to forward (backward gets 0.5 always).
ModelRun run_model(int tp, int rank, Communicator* comm, std::optional<float> scale_to_forward) {
  ModelRun out;
  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = tiny_config();
  o.tp = {tp, rank, VocabShard::kStrided};
  o.batch = 2;
  o.seq_len = 8;
  auto model = GPT2::create(o, *ops, comm);
  if (!model.ok()) return out.error = model.status().to_string(), out;
  if (Status s = (*model)->init_weights(5); !s.ok()) return out.error = s.to_string(), out;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
  std::vector<int> in(16), tg(16);
  for (int i = 0; i < 16; i++) in[i] = id(rng), tg[i] = id(rng);
  (*model)->params().zero_grads();
  auto fwd = (*model)->forward(in.data(), tg.data(), nullptr, scale_to_forward);
  if (!fwd.ok()) return out.error = fwd.status().to_string(), out;
  out.loss = fwd->loss;
  out.losses.assign((*model)->losses(), (*model)->losses() + 16);
  if (Status s = (*model)->backward(0.5f, {}, nullptr); !s.ok()) return out.error = s.to_string(), out;
  auto g = (*model)->gather_full_gradients();
  if (!g.ok()) return out.error = g.status().to_string(), out;
  out.grads = g->data;
  return out;
}

std::vector<ModelRun> run_group(int tp, std::optional<float> scale_to_forward) {
  std::vector<ModelRun> runs(tp);
  if (tp == 1) {
    runs[0] = run_model(1, 0, nullptr, scale_to_forward);
  } else {
    testing::run_thread_group(tp, [&](int rank, testing::ThreadGroupComm& comm) {
      runs[rank] = run_model(tp, rank, &comm, scale_to_forward);
    });
  }
  return runs;
}

// Same TP degree: the unfused model path now also combines the gathered partials, so both compute
// the same row_max and stats and the same per-element dlogits formula: equal up to rounding of
// the rescale (exact for powers of two). Across TP degrees: gpt2_tp_test.cpp's 1e-5.
void expect_same_run(const ModelRun& a, const ModelRun& b, float grad_tol, const char* what) {
  ASSERT_EQ(a.error, "") << what;
  ASSERT_EQ(b.error, "") << what;
  EXPECT_NEAR(a.loss, b.loss, std::max(grad_tol, 1e-6f) * std::fabs(b.loss)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  float worst = 0;
  for (size_t i = 0; i < a.grads.size(); i++) worst = std::max(worst, std::fabs(a.grads[i] - b.grads[i]));
  EXPECT_LE(worst, grad_tol) << what << ": max |grad difference|";
}

TEST(FusedClassifierModel, ForwardWithTheLossScaleGivesTheUnfusedGradientsAtTp1AndTp2) {
  const std::vector<ModelRun> unfused1 = run_group(1, std::nullopt);
  for (int tp : {1, 2}) {
    const std::vector<ModelRun> fused_runs = run_group(tp, 0.5f);
    const std::vector<ModelRun> unfused_runs = run_group(tp, std::nullopt);
    for (int r = 0; r < tp; r++) {
      expect_same_run(fused_runs[r], unfused_runs[r], 1e-7f, tp == 1 ? "fused vs unfused, tp1" : "fused vs unfused, tp2");
      EXPECT_EQ(fused_runs[r].losses, unfused_runs[r].losses) << "per-token losses, rank " << r;
    }
    // TP=2 reproduces TP=1 (the vocab-parallel combine over a real all_gather).
    expect_same_run(fused_runs[0], unfused1[0], 1e-5f, "fused tp vs unfused tp1");
  }
}

TEST(FusedClassifierModel, BackwardWithAnotherScaleRescalesTheFp32Dlogits) {
  // forward prepared the dlogits for 2.0; backward asks for 0.5: the model rescales by 0.25.
  const std::vector<ModelRun> rescaled = run_group(1, 2.0f);
  const std::vector<ModelRun> unfused = run_group(1, std::nullopt);
  expect_same_run(rescaled[0], unfused[0], 1e-7f, "rescaled vs unfused");
}

TEST(FusedClassifierModel, BackwardAfterAForwardScaleOfZeroIsAClearError) {
  const std::vector<ModelRun> runs = run_group(1, 0.0f);
  EXPECT_NE(runs[0].error.find("hint: pass forward the scale"), std::string::npos) << runs[0].error;
}

TEST(FusedClassifierModel, ForwardWithoutTargetsLeavesTheLogitsIntactAndWithTheScaleHoldsDlogits) {
  auto ops = make_cpu_ops();
  GPT2::Options o;
  o.config = tiny_config();
  o.batch = 2;
  o.seq_len = 8;
  auto model = GPT2::create(o, *ops, nullptr);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  ASSERT_TRUE((*model)->init_weights(5).ok());
  std::vector<int> in(16), tg(16);
  for (int i = 0; i < 16; i++) in[i] = (i * 37) % o.config.vocab_size, tg[i] = (i * 91 + 3) % o.config.vocab_size;
  const size_t n = 16 * static_cast<size_t>((*model)->params().padded_vocab());
  ASSERT_TRUE((*model)->forward(in.data(), tg.data(), nullptr).ok());
  std::vector<float> with_targets(n), sampled(n), fused(n);
  (*model)->copy_logits_to_host(with_targets.data(), 0, 16);
  // Sampling: no targets, a scale given or not, the logits stay logits.
  ASSERT_TRUE((*model)->forward(in.data(), nullptr, nullptr, 0.5f).ok());
  (*model)->copy_logits_to_host(sampled.data(), 0, 16);
  EXPECT_EQ(sampled, with_targets);
  // With targets and the scale, the same buffer holds the dlogits: each row sums to 0.
  ASSERT_TRUE((*model)->forward(in.data(), tg.data(), nullptr, 0.5f).ok());
  (*model)->copy_logits_to_host(fused.data(), 0, 16);
  EXPECT_NE(fused, with_targets);
  const size_t Vp = n / 16;
  for (size_t row = 0; row < 16; row++) {
    double total = 0;
    for (size_t j = 0; j < Vp; j++) total += fused[row * Vp + j];
    EXPECT_NEAR(total, 0.0, 1e-7) << "row " << row;
  }
}

}  // namespace
}  // namespace gpt2
