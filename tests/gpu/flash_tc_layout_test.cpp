// flash_tc_layout_test.cpp — the building blocks of the tensor-core attention kernels on the GPU,
// alone: cp.async into swizzled tiles, the three ldmatrix patterns, mma.sync m16n8k16 and the reuse
// of accumulators as the A operand (kernels/flash_attention_tc.cu's probe kernel, which calls the
// very helpers the attention kernels call). s (16,64) = q k^T and o (16,64) = bf16(s) v against
// plain loops. Label `gpu`: skips itself without a device. The same computation is emulated on the
// CPU by tests/trainer/mma_layout_test.cpp; if that passes and this fails, a fragment fact of
// mma_layout.h is wrong for the hardware, and the first wrong (row, col) says which.
// Tolerances: s sums 64 exact bf16 products in fp32 (order differs): 1e-5 (1 + |s|); o sums 64
// products of the same bf16(s) (rounded here as on the device) and v: 1e-4 (1 + |o|).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu_test_util.h"
#include "ops/cuda/kernels/launch.h"

namespace gpt2 {
namespace {

using gputest::from_bf16;
using gputest::random_floats;
using gputest::to_bf16;

// A device copy of `host`, freed at scope exit.
template <class T>
struct DeviceArray {
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    void* raw = nullptr;
    EXPECT_EQ(cudaMalloc(&raw, n * sizeof(T)), cudaSuccess);
    ptr = static_cast<T*>(raw);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  size_t n;
  T* ptr = nullptr;
};

TEST(FlashTensorCoreLayout, ProbeKernelComputesQKTransposeAndPVAsPlainLoopsDo) {
  RS_SKIP_WITHOUT_CUDA();
  constexpr int kRows = 16, kKeys = 64, kHead = 64;
  const auto q_bits = to_bf16(random_floats(kRows * kHead, 1)), k_bits = to_bf16(random_floats(kKeys * kHead, 2)),
             v_bits = to_bf16(random_floats(kKeys * kHead, 3));
  const auto q = from_bf16(q_bits), k = from_bf16(k_bits), v = from_bf16(v_bits);
  DeviceArray<uint16_t> dq(q_bits), dk(k_bits), dv(v_bits);
  DeviceArray<float> ds(std::vector<float>(kRows * kHead, NAN)), dout(std::vector<float>(kRows * kHead, NAN));
  ASSERT_EQ(cuda::launch_flash_attention_tc_layout_probe(ds.ptr, dout.ptr, reinterpret_cast<const __nv_bfloat16*>(dq.ptr),
                                                   reinterpret_cast<const __nv_bfloat16*>(dk.ptr),
                                                   reinterpret_cast<const __nv_bfloat16*>(dv.ptr), nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto s = ds.host(), o = dout.host();
  std::vector<float> s_bf16(kRows * kKeys);
  for (int r = 0; r < kRows; r++)
    for (int key = 0; key < kKeys; key++) {
      double want = 0;
      for (int d = 0; d < kHead; d++) want += double(q[r * kHead + d]) * k[key * kHead + d];
      ASSERT_NEAR(s[r * kKeys + key], want, 1e-5 * (1 + std::fabs(want))) << "s at row " << r << ", key " << key;
      s_bf16[r * kKeys + key] = from_bf16(to_bf16({s[r * kKeys + key]}))[0];
    }
  for (int r = 0; r < kRows; r++)
    for (int d = 0; d < kHead; d++) {
      double want = 0;
      for (int key = 0; key < kKeys; key++) want += double(s_bf16[r * kKeys + key]) * v[key * kHead + d];
      ASSERT_NEAR(o[r * kHead + d], want, 1e-4 * (1 + std::fabs(want))) << "o at row " << r << ", column " << d;
    }
}

}  // namespace
}  // namespace gpt2
