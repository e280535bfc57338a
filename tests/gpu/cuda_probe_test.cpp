// cuda_probe_test.cpp — the runtime device probe and the factory agree, on any machine: with a usable
// device the factory gives the "cuda" backend; without one (no driver, no GPU, or a build without
// CUDA) the probe gives a one-line reason and the factory fails with exactly that reason. Also the
// --precision parser. No label: it runs everywhere, GPU or not.
#include <gtest/gtest.h>

#include "model/ops.h"
#include "ops/cuda/cuda_backend.h"

namespace gpt2 {
namespace {

TEST(CudaProbe, ProbeAndFactoryAgree) {
  const DeviceProbe probe = probe_cuda_device(0);
  ASSERT_FALSE(probe.reason.empty());
  EXPECT_EQ(probe.reason.find('\n'), std::string::npos) << "one line";
  auto ops = make_cuda_ops({});
  if (probe.usable) {
    ASSERT_TRUE(ops.ok()) << ops.status().to_string();
    EXPECT_STREQ((*ops)->name(), "cuda");
    EXPECT_NE(cuda_ops_stream(**ops), nullptr);
    EXPECT_TRUE(cuda_ops_memory(**ops).ok());
    EXPECT_GT(probe.device_count, 0);
    EXPECT_EQ(probe.reason.rfind("cuda device 0 of ", 0), 0u) << probe.reason;
  } else {
    ASSERT_FALSE(ops.ok());
    EXPECT_EQ(ops.status().code(), rankscope::StatusCode::kUnsupported);
    EXPECT_NE(ops.status().message().find(probe.reason), std::string::npos) << ops.status().message();
    EXPECT_TRUE(probe.reason.rfind("no CUDA device", 0) == 0 || probe.reason.rfind("built without CUDA", 0) == 0 ||
                probe.reason.find("unusable") != std::string::npos || probe.reason.find("no kernels") != std::string::npos)
        << probe.reason;
  }
}

TEST(CudaProbe, ProfilerRangeNeedsADevice) {
  const DeviceProbe probe = probe_cuda_device(0);
  if (probe.usable) {
    EXPECT_TRUE(cuda_profiler_start().ok());
    EXPECT_TRUE(cuda_profiler_stop().ok());
  } else {
    const rankscope::Status s = cuda_profiler_start();
    EXPECT_FALSE(s.ok()) << "cudaProfilerStart succeeded without a usable device";
    EXPECT_FALSE(s.message().empty());
  }
}

TEST(CudaProbe, OutOfRangeDeviceIsNotUsable) {
  const DeviceProbe probe = probe_cuda_device(4096);
  EXPECT_FALSE(probe.usable);
  EXPECT_FALSE(probe.reason.empty());
}

TEST(CudaProbe, PrecisionFlag) {
  EXPECT_EQ(*parse_cuda_precision("fp32"), CudaPrecision::kFp32);
  EXPECT_EQ(*parse_cuda_precision("bf16"), CudaPrecision::kBf16);
  auto bad = parse_cuda_precision("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hint"), std::string::npos);
  EXPECT_EQ(cuda_precision_name(CudaPrecision::kBf16), "bf16");
}

}  // namespace
}  // namespace gpt2
