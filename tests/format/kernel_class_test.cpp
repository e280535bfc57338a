// kernel_class_test.cpp — format::KernelClassifier: which GPU ops are communication, memory or
// compute, and the rule that said so. Names are real kernel names as traces show them (sources in
// format/src/kernel_class.cpp and docs/FORMAT.md, TRACE_KERNELS).
#include "rankscope/format/kernel_class.h"

#include <gtest/gtest.h>

namespace rankscope::format {
namespace {

KernelVerdict builtin(std::string_view name) { return KernelClassifier().classify(name); }

TEST(KernelClassifier, NcclAndRcclKernelsAreCommunicationInEverySpelling) {
  for (std::string_view n : {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                             "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "void ncclKernel_SendRecv(ncclDevComm*)",
                             "_Z30ncclDevKernel_Generic_4PKvS0_"}) {
    const KernelVerdict v = builtin(n);
    EXPECT_EQ(v.kind, KernelClass::kCommunication) << n;
    EXPECT_EQ(v.rule, "nccl") << n;
  }
}

TEST(KernelClassifier, MoeAndCustomCollectiveLibrariesAreCommunication) {
  struct Case {
    std::string_view name, rule;
  };
  for (const Case& c : {
           Case{"void dpsk::ep::internode::dispatch<true, 8, 3, 6, 24>(int4*, float*)", "deepep"},
           Case{"void dpsk::ep::internode::cached_notify<4>(int, int)", "deepep"},
           Case{"void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(...)", "deepep"},
           Case{"void deep_ep::internode_ll::dispatch<false, 3, 7168>(...)", "deepep"},
           Case{"_ZN7deep_ep9internode8dispatchILb0ELi8EEEvPv", "deepep"},
           Case{"nvshmemi_transfer_rma_kernel", "nvshmem"},
           Case{"void mscclpp::allreduce7<float>(float*, ...)", "mscclpp"},
           Case{"mscclKernel_Sum_half_LL128", "msccl"},
           Case{"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", "custom-allreduce"},
           Case{"void tensorrt_llm::kernels::oneShotAllReduceKernel<float, 8, true>(...)", "custom-allreduce"},
           Case{"userbuffers_fp16_sum_inplace_gpu_rr_rs", "userbuffers"},
           Case{"void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(...)", "collective-name"},
       }) {
    const KernelVerdict v = builtin(c.name);
    EXPECT_EQ(v.kind, KernelClass::kCommunication) << c.name;
    EXPECT_EQ(v.rule, c.rule) << c.name;
  }
}

TEST(KernelClassifier, ComputeAndMemoryStayWhatTheyAre) {
  // DeepEP's layout kernel counts tokens: compute, although it lives in deep_ep.
  for (std::string_view n : {"void deep_ep::layout::get_dispatch_layout<256, 32, 8>(...)", "nvjet_tst_128x256_64x4_2x1_v_bz_TNT",
                             "void at::native::reduce_kernel<512, 1>(...)", "void flash_fwd_kernel<Flash_fwd_kernel_traits>(...)",
                             "triton_per_fused_add_mean_mul_pow_rsqrt_0"}) {
    const KernelVerdict v = builtin(n);
    EXPECT_EQ(v.kind, KernelClass::kCompute) << n;
    EXPECT_EQ(v.rule, "default") << n;
  }
  EXPECT_EQ(builtin("Memcpy HtoD (Pinned -> Device)").rule, "memcpy");
  EXPECT_EQ(builtin("[CUDA memset]").rule, "memset");
  EXPECT_EQ(builtin("Memset (Device)").kind, KernelClass::kMemory);
  // The function without a classifier agrees with the built-in rules.
  EXPECT_EQ(classify_kernel("void dpsk::ep::internode::combine<8>()"), KernelClass::kCommunication);
  EXPECT_EQ(classify_kernel("Memcpy DtoD (Device -> Device)"), KernelClass::kMemory);
  EXPECT_EQ(classify_kernel("gemm_kernel"), KernelClass::kCompute);
}

TEST(KernelClassifier, UserPatternsWinAndNameThemselves) {
  auto c = KernelClassifier::with_patterns({"^my_a2a_", "PeerCopy"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->classify("my_a2a_dispatch<8>").kind, KernelClass::kCommunication);
  EXPECT_EQ(c->classify("my_a2a_dispatch<8>").rule, "user:^my_a2a_");
  EXPECT_EQ(c->classify("not_my_a2a_dispatch").kind, KernelClass::kCompute);  // anchored
  // A pattern may claim a memory operation: a peer copy that is the job's transfer.
  EXPECT_EQ(c->classify("Memcpy PtoP (PeerCopy)").rule, "user:PeerCopy");
  EXPECT_EQ(c->user_patterns().size(), 2u);
  // Copies keep their patterns.
  const KernelClassifier copy = *c;
  EXPECT_EQ(copy.classify("my_a2a_x").kind, KernelClass::kCommunication);
}

TEST(KernelClassifier, BadPatternsAreClearErrors) {
  auto bad = KernelClassifier::with_patterns({"dispatch("});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'dispatch('"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(KernelClassifier::with_patterns({""}).ok());
  EXPECT_TRUE(KernelClassifier::with_patterns({}).ok());
}

}  // namespace
}  // namespace rankscope::format
