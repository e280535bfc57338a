// gpu_test_util.h — shared pieces of the GPU tests: skip without a device, a fixture holding the CPU
// oracle and the CUDA backend, move host vectors in and out of an Ops backend (also as bf16
// activations), random inputs, and a tolerance comparison that names the worst element.
// Is not: a test. Includes no CUDA header (tests talk to the backend through ops.h only).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/ops.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_backend.h"

// Ends the current test as skipped (with the probe's one-line reason) when no CUDA device is usable.
#define RS_SKIP_WITHOUT_CUDA()                                               \
  do {                                                                       \
    const ::gpt2::DeviceProbe rs_probe_ = ::gpt2::probe_cuda_device(0);      \
    if (!rs_probe_.usable) GTEST_SKIP() << rs_probe_.reason;                 \
  } while (0)

namespace gpt2::gputest {

// A backend buffer holding a copy of `host`; released with the ops.
template <class T>
class Buffer {
 public:
  Buffer(Ops& ops, const std::vector<T>& host) : ops_(ops), n_(host.size()) {
    ptr_ = static_cast<T*>(ops_.alloc(bytes()));
    if (n_ > 0) ops_.copy_from_host(ptr_, host.data(), bytes());
  }
  Buffer(Ops& ops, size_t n) : ops_(ops), n_(n) { ptr_ = static_cast<T*>(ops_.alloc(bytes())); }
  ~Buffer() { ops_.release(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* get() { return ptr_; }
  const T* get() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    if (n_ > 0) ops_.copy_to_host(out.data(), ptr_, bytes());
    return out;
  }

 private:
  Ops& ops_;
  size_t n_;
  T* ptr_ = nullptr;
};

// bf16 on the host, element by element (rankscope/format/bfloat16.h): the GPU's rounding.
inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = float_to_bf16(v[i]);
  return out;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = bf16_to_float(v[i]);
  return out;
}
// Values a bf16 buffer holds exactly, so the CPU oracle (fp32) reads the very inputs the GPU does.
// NaN stays NaN.
inline std::vector<float> round_to_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}

// An activation buffer in a backend holding `host` as `type` (bf16: rounded); host() widens back.
class ActBuffer {
 public:
  ActBuffer(Ops& ops, const std::vector<float>& host, ActType type)
      : ops_(ops), n_(host.size()), type_(type), ptr_(ops.alloc(n_ * act_type_bytes(type))) {
    if (n_ == 0) return;
    if (type == ActType::kBF16) {
      ops_.copy_from_host(ptr_, to_bf16(host).data(), n_ * 2);
    } else {
      ops_.copy_from_host(ptr_, host.data(), n_ * 4);
    }
  }
  ~ActBuffer() { ops_.release(ptr_); }
  ActBuffer(const ActBuffer&) = delete;
  ActBuffer& operator=(const ActBuffer&) = delete;

  ActPtr ptr() const { return ActPtr(ptr_, type_); }
  std::vector<float> host() const {
    if (type_ == ActType::kF32) {
      std::vector<float> out(n_);
      if (n_ > 0) ops_.copy_to_host(out.data(), ptr_, n_ * 4);
      return out;
    }
    std::vector<uint16_t> narrow(n_);
    if (n_ > 0) ops_.copy_to_host(narrow.data(), ptr_, n_ * 2);
    return from_bf16(narrow);
  }

 private:
  Ops& ops_;
  size_t n_;
  ActType type_;
  void* ptr_;
};

// A fixture base with the CPU oracle and the CUDA backend (default options); skips without a device.
// Base: ::testing::Test, or ::testing::TestWithParam<P> for parameterised suites.
template <class Base = ::testing::Test>
class CpuAndGpu : public Base {
 public:
  void SetUp() override {
    RS_SKIP_WITHOUT_CUDA();
    auto gpu = make_cuda_ops({});
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    gpu_ = std::move(gpu).value();
    cpu_ = make_cpu_ops();
  }

 protected:
  std::unique_ptr<Ops> cpu_, gpu_;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<int> random_ids(size_t n, int upper, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, upper - 1);
  std::vector<int> v(n);
  for (int& x : v) x = dist(rng);
  return v;
}

// |got - want| <= atol + rtol * |want| everywhere; on failure names the worst index and values.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want,
                                            double atol, double rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  }
  double worst_excess = 0;
  size_t worst = 0;
  bool bad = false;
  for (size_t i = 0; i < got.size(); i++) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double limit = atol + rtol * std::fabs(static_cast<double>(want[i]));
    const bool nan_mismatch = std::isnan(got[i]) != std::isnan(want[i]);
    if (nan_mismatch || diff > limit) {
      const double excess = nan_mismatch ? INFINITY : diff - limit;
      if (!bad || excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
      bad = true;
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst << " of " << got.size() << ": got "
                                       << got[worst] << ", want " << want[worst] << " (atol " << atol
                                       << ", rtol " << rtol << ")";
}

}  // namespace gpt2::gputest
