// cuda_kernel_ranges_test.cpp — with the probe on (NVTX + CUPTI, as in every benchmark), every kernel
// of a GPU training step — fused ops, flash attention, bf16 activations, AdamW's one launch, and
// cuBLASLt's GEMMs, which it launches through the driver API (cuLaunchKernelEx) — is attributed to
// the probe range that launched it: no kernel runs outside a named range, the step's always-on
// figures of kernel time outside every range are zero, and the attention kernels land under
// .../attn/sdpa. Label `gpu`: skips itself without a usable device.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <string_view>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "ops/cuda/cuda_backend.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/kernel_counters.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/plugins.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {
namespace {

namespace fs = std::filesystem;
using rankscope::probe::Probe;
using rankscope::probe::ScopedRange;

// cuBLASLt's kernels as they are named on an H100 (nvjet_sm90_*, sm90_xmma_gemm_*,
// splitKreduce_kernel); none of our own kernels has such a name.
bool is_cublaslt_kernel(std::string_view name) {
  return name.rfind("nvjet", 0) == 0 || name.find("gemm") != std::string_view::npos ||
         name.find("xmma") != std::string_view::npos || name.find("splitKreduce") != std::string_view::npos ||
         name.find("cutlass") != std::string_view::npos;
}

TEST(CudaKernelRanges, EveryKernelOfAStepIsInANamedRange) {
  if (!probe_cuda_device(0).usable) GTEST_SKIP() << probe_cuda_device(0).reason;
  const fs::path dir = fs::temp_directory_path() /
                       ("cuda_kernel_ranges_test." + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  rankscope::probe::Options po;
  po.read_environment = false;
  po.run_dir = dir;
  po.run_id = "kernel-ranges";
  po.trace_step_begin = 1;  // step 0 warms up (plans, scratch); step 1 is traced
  po.trace_step_end = 1;
  auto probe_r = Probe::create(po);
  ASSERT_TRUE(probe_r.ok()) << probe_r.status().to_string();
  Probe& probe = **probe_r;
  const auto plugins = rankscope::probe::attach_default_plugins(probe);
  if (!plugins.cupti) GTEST_SKIP() << "CUPTI kernel timing is not available in this build or on this device";

  auto ops_r = make_cuda_ops({.precision = CudaPrecision::kBf16});
  ASSERT_TRUE(ops_r.ok()) << ops_r.status().to_string();
  Ops& ops = **ops_r;
  GPT2::Options o;
  o.config = ModelConfig::preset("tiny").value();
  o.config.vocab_size = 1000;
  o.batch = 2;
  o.seq_len = 64;
  o.attention = AttentionKind::kFlash;
  o.activations = ActType::kBF16;
  auto model_r = GPT2::create(o, ops, nullptr);
  ASSERT_TRUE(model_r.ok()) << model_r.status().to_string();
  GPT2& model = **model_r;
  ASSERT_TRUE(model.init_weights(7).ok());
  AdamW opt(model.params(), ops, AdamWConfig{0.9f, 0.95f, 1e-8f, 0.1f});
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> id(0, o.config.vocab_size - 1);
  std::vector<int> in(o.batch * o.seq_len), tg(in.size());
  for (size_t i = 0; i < in.size(); i++) in[i] = id(rng), tg[i] = id(rng);
  for (int64_t step = 0; step < 2; step++) {
    probe.begin_step(step);
    model.params().zero_grads();
    ASSERT_TRUE(model.forward(in.data(), tg.data(), &probe, /*backward_loss_scale=*/1.0f).ok());  // fused classifier
    ASSERT_TRUE(model.backward(1.0f, {}, &probe).ok());
    {
      ScopedRange r(&probe, "optimizer");
      auto norm = global_grad_norm(model.params(), ops, nullptr);
      ASSERT_TRUE(norm.ok());
      clip_grads_to_norm(model.params(), ops, *norm, 1.0f);
      opt.step(1e-3f);
      ASSERT_TRUE(cuda_ops_synchronize(ops).ok());
    }
    probe.end_step();
  }
  probe.shutdown();

  auto es = rankscope::format::read_event_stream(rankscope::format::event_stream_path(dir, 0));
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  ASSERT_EQ(es->traces.size(), 1u);
  const auto& kernels = es->traces[0].kernels;
  ASSERT_GT(kernels.size(), 20u) << "a training step launches many kernels";
  std::map<std::string, int> per_range;
  int cublaslt_kernels = 0;
  for (const auto& k : kernels) {
    EXPECT_NE(k.range_id, 0u) << "kernel " << es->name(k.name_id) << " ran outside any probe range";
    if (k.range_id != 0) per_range[std::string(es->name(k.range_id))]++;
    if (is_cublaslt_kernel(es->name(k.name_id))) {
      cublaslt_kernels++;
      std::printf("cuBLASLt kernel %s in %s\n", std::string(es->name(k.name_id)).c_str(),
                  k.range_id ? std::string(es->name(k.range_id)).c_str() : "(outside any range)");
    }
  }
  EXPECT_GT(cublaslt_kernels, 0) << "every GEMM goes through cuBLASLt: its kernels must be in the trace";
  // The always-on figures say the same for the traced step (index 1): no kernel time outside a range.
  ASSERT_EQ(es->steps.size(), 2u);
  std::map<std::string, double> counters;
  for (const auto& c : es->steps[1].counters) counters[std::string(es->name(c.name_id))] = c.value;
  ASSERT_TRUE(counters.count(std::string(rankscope::format::kKernelNsOutsideRangesCounter)));
  EXPECT_EQ(counters[std::string(rankscope::format::kKernelNsOutsideRangesCounter)], 0.0);
  EXPECT_EQ(counters[std::string(rankscope::format::kKernelNsNoLaunchSeenCounter)], 0.0);
  EXPECT_GT(per_range["forward/block0/attn/sdpa"], 0);
  EXPECT_GT(per_range["backward/block0/attn/sdpa"], 0);
  EXPECT_GT(per_range["optimizer"], 0);
  for (const auto& [range, n] : per_range) std::printf("%4d kernels in %s\n", n, range.c_str());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpt2
