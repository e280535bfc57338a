// memory_estimate_test.cpp — the memory estimate (model/memory_estimate.h) against the bytes the
// CPU backend really hands out to ParameterSet, AdamW, GPT2::create and the MoE layers over one
// training step, for d12 and tiny, naive and flash, every recompute level, TP=2, MoE and bf16
// activations; and the out-of-memory decision with its numbers and hints.
// Is not: a GPU test (the CUDA backend's workspace is checked on the GPU by gpt2-train's own
// up-front check; here workspace_bytes is 0).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <vector>

#include "bf16_emulating_ops.h"
#include "model/adamw.h"
#include "model/gpt2.h"
#include "model/memory_estimate.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cpu/cpu_ops.h"
#include "thread_group_comm.h"

namespace gpt2 {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The estimate mirrors every buffer, so for dense models and dropless balanced MoE it is exact;
// the margin leaves room for a small buffer added to the model later, not for a missing tensor.
constexpr double kRelativeMargin = 0.01;

GPT2::Options options(const char* preset, int B, int T, AttentionKind attention, Recompute recompute) {
  GPT2::Options o;
  o.config = ModelConfig::preset(preset).value();
  o.batch = B;
  o.seq_len = T;
  o.attention = attention;
  o.recompute = recompute;
  return o;
}

std::vector<int> token_ids(int n, int vocab) {
  std::vector<int> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) ids[static_cast<size_t>(i)] = (i * 7919 + 13) % vocab;
  return ids;
}

// Builds the model and its optimizer on `ops`, runs one forward + backward + AdamW step and
// returns the backend's high-water mark of allocated bytes.
size_t peak_bytes_of_one_step(const GPT2::Options& o, Ops& ops, Communicator* tp_comm = nullptr,
                              MoeOps* moe_ops = nullptr) {
  auto created = GPT2::create(o, ops, tp_comm, nullptr, moe_ops);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  if (!created.ok()) return 0;
  std::unique_ptr<GPT2> model = std::move(created).value();
  EXPECT_TRUE(model->init_weights(1234).ok());
  AdamW optimizer(model->params(), ops, AdamWConfig{});
  const int n = o.batch * o.seq_len;
  const std::vector<int> inputs = token_ids(n, o.config.vocab_size);
  const std::vector<int> targets = token_ids(n + 1, o.config.vocab_size);
  model->params().zero_grads();
  auto stats = model->forward(inputs.data(), targets.data() + 1, nullptr, 1.0f);
  EXPECT_TRUE(stats.ok()) << stats.status().to_string();
  EXPECT_TRUE(model->backward(1.0f, {}, nullptr).ok());
  optimizer.step(1e-4f);
  return ops.allocation_stats().peak;
}

void expect_close(size_t estimated, size_t measured, const std::string& what) {
  ASSERT_GT(measured, 0u) << what << ": the backend counted nothing";
  const double rel = std::abs(double(estimated) - double(measured)) / double(measured);
  std::printf("  %s: estimated %zu bytes, allocated %zu (relative difference %.2e)\n", what.c_str(), estimated,
              measured, rel);
  EXPECT_LE(rel, kRelativeMargin) << what << ": estimated " << estimated << " bytes, allocated " << measured;
}

void check_single_rank(const GPT2::Options& o, const std::string& what) {
  auto ops = make_cpu_ops();
  auto estimate = estimate_training_memory(o, *ops);
  ASSERT_TRUE(estimate.ok()) << estimate.status().to_string();
  std::unique_ptr<MoeOps> moe_ops = o.moe.enabled() ? make_cpu_moe_ops() : nullptr;
  const size_t measured = peak_bytes_of_one_step(o, *ops, nullptr, moe_ops.get());
  expect_close(estimate->total(), measured, what);
}

TEST(MemoryEstimate, MatchesTheCpuAllocationsOfOneStepForEveryAttentionAndRecompute) {
  for (AttentionKind kind : {AttentionKind::kNaive, AttentionKind::kFlash})
    for (Recompute r : {Recompute::kNone, Recompute::kGelu, Recompute::kGeluAndLayerNorm})
      check_single_rank(options("tiny", 2, 64, kind, r),
                        std::string("tiny ") + attention_kind_name(kind) + " recompute " +
                            std::to_string(static_cast<int>(r)));
}

TEST(MemoryEstimate, MatchesTheCpuAllocationsOfD12) {
  // One d12 step is seconds of CPU: one config here; the others vary in the tiny tests above.
  check_single_rank(options("d12", 1, 32, AttentionKind::kNaive, Recompute::kGelu), "d12 naive recompute 1");
}

TEST(MemoryEstimate, MatchesTheCpuAllocationsWithMixtureOfExperts) {
  GPT2::Options o = options("tiny", 2, 32, AttentionKind::kNaive, Recompute::kNone);
  o.moe.experts = 4;
  o.moe.top_k = 2;
  o.moe.every = 1;
  check_single_rank(o, "tiny MoE E4 top-2 dropless");
  o.moe.aux_loss_coef = 0.01f;
  o.moe.every = 2;
  check_single_rank(o, "tiny MoE E4 top-2 every 2 with aux loss");
}

TEST(MemoryEstimate, MatchesTheCpuAllocationsOfEachTensorParallelRank) {
  constexpr int kTp = 2;
  std::vector<size_t> estimated(kTp), measured(kTp);
  testing::run_thread_group(kTp, [&](int rank, testing::ThreadGroupComm& comm) {
    GPT2::Options o = options("tiny", 2, 32, AttentionKind::kFlash, Recompute::kNone);
    o.tp = {kTp, rank, VocabShard::kContiguous};
    auto ops = make_cpu_ops();
    auto estimate = estimate_training_memory(o, *ops);
    EXPECT_TRUE(estimate.ok()) << estimate.status().to_string();
    if (!estimate.ok()) return;
    estimated[size_t(rank)] = estimate->total();
    measured[size_t(rank)] = peak_bytes_of_one_step(o, *ops, &comm);
  });
  for (int r = 0; r < kTp; r++) expect_close(estimated[size_t(r)], measured[size_t(r)], "tp rank " + std::to_string(r));
  // TP splits the weights: each rank needs less than the TP=1 model.
  auto ops = make_cpu_ops();
  auto tp1 = estimate_training_memory(options("tiny", 2, 32, AttentionKind::kFlash, Recompute::kNone), *ops);
  ASSERT_TRUE(tp1.ok());
  EXPECT_LT(estimated[0], tp1->total());
}

TEST(MemoryEstimate, MatchesTheAllocationsOfBf16Activations) {
  GPT2::Options o = options("tiny", 2, 64, AttentionKind::kFlash, Recompute::kNone);
  o.activations = ActType::kBF16;
  testing::Bf16EmulatingOps ops(make_cpu_ops());
  auto estimate = estimate_training_memory(o, ops);
  ASSERT_TRUE(estimate.ok()) << estimate.status().to_string();
  expect_close(estimate->total(), peak_bytes_of_one_step(o, ops), "tiny bf16 activations");
  GPT2::Options f32 = o;
  f32.activations = ActType::kF32;
  auto wide = estimate_training_memory(f32, ops);
  ASSERT_TRUE(wide.ok());
  EXPECT_LT(estimate->activations, wide->activations);
  EXPECT_EQ(estimate->weights, wide->weights);  // master weights stay fp32
}

// The crash: d12, B=16, T=4096, naive keeps 12 layers of (B,NH,T,T) fp32 probabilities,
// 12*16*12*4096*4096*4 bytes = 144 GiB, far over an 80 GiB H100; flash keeps (B,NH,T).
TEST(MemoryEstimate, NaiveAttentionAtT4096DoesNotFitAnH100AndSaysWhatWould) {
  auto ops = make_cpu_ops();
  const GPT2::Options naive = options("d12", 16, 4096, AttentionKind::kNaive, Recompute::kNone);
  GPT2::Options d12_long = naive;
  d12_long.config.max_seq_len = 4096;
  auto estimate = estimate_training_memory(d12_long, *ops);
  ASSERT_TRUE(estimate.ok()) << estimate.status().to_string();
  const double probabilities = 12.0 * 16 * 12 * 4096.0 * 4096.0 * 4;
  EXPECT_GT(double(estimate->activations), probabilities);
  const size_t h100_free = size_t(78) << 30;
  Status fits = check_memory_fits(*estimate, d12_long, *ops, h100_free, size_t(1) << 30, "cuda device 0");
  ASSERT_EQ(fits.code(), rankscope::StatusCode::kOutOfMemory) << fits.to_string();
  const std::string& m = fits.message();
  EXPECT_NE(m.find("78.00 GiB is free"), std::string::npos) << m;
  EXPECT_NE(m.find(fmt::format("needs {:.2f} GiB", (estimate->total() + (size_t(1) << 30)) / kGiB)), std::string::npos)
      << m;
  EXPECT_NE(m.find("--attention flash"), std::string::npos) << m;
  EXPECT_NE(m.find("--batch"), std::string::npos) << m;
  EXPECT_NE(m.find("--recompute 2"), std::string::npos) << m;
}

TEST(MemoryEstimate, FitsWhenFreeMemoryCoversItAndNamesTheLargestBatchOtherwise) {
  auto ops = make_cpu_ops();
  const GPT2::Options o = options("tiny", 8, 64, AttentionKind::kFlash, Recompute::kNone);
  auto estimate = estimate_training_memory(o, *ops);
  ASSERT_TRUE(estimate.ok());
  EXPECT_TRUE(check_memory_fits(*estimate, o, *ops, estimate->total(), 0, "test").ok());
  // One byte short: out of memory, and a smaller batch that fits is named, never the same one.
  Status s = check_memory_fits(*estimate, o, *ops, estimate->total() - 1, 0, "test");
  ASSERT_EQ(s.code(), rankscope::StatusCode::kOutOfMemory);
  EXPECT_NE(s.message().find("--batch 7"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("--attention flash"), std::string::npos) << "already flash: " << s.message();
}

TEST(MemoryEstimate, RefusesOptionsTheModelWouldRefuse) {
  auto ops = make_cpu_ops();
  GPT2::Options o = options("tiny", 0, 64, AttentionKind::kFlash, Recompute::kNone);
  EXPECT_FALSE(estimate_training_memory(o, *ops).ok());
  o.batch = 1;
  o.tp = {3, 0, VocabShard::kContiguous};  // 4 heads do not split over 3 ranks
  EXPECT_FALSE(estimate_training_memory(o, *ops).ok());
}

}  // namespace
}  // namespace gpt2
