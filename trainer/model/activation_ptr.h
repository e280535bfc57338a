// activation_ptr.h — typed pointers to activation buffers: how the model carries its activation
// precision through the Ops interface without forking gpt2.cpp.
//
// Is: ActType (fp32 or bf16 elements), ActPtr / ConstActPtr (a backend pointer plus its element
// type, with element arithmetic so `acts + l * N * C` reads as it does for float*), and the bf16
// rounding the host side needs (round to nearest even, as CUDA's __float2bfloat16).
// Is not: a tensor library (no shapes, no ownership). Weights, gradients, optimizer state, LayerNorm
// statistics, softmax statistics and losses are always fp32 and stay plain float* in ops.h.
//
// A float* converts implicitly to an fp32 ActPtr, so fp32 code (the CPU backend, the oracle, and
// the tests that call ops directly) reads as before. A backend that computes in fp32 only asks for
// f32(), which stops the program with a message naming the op if it is handed bf16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rankscope/format/bfloat16.h"

namespace gpt2 {

enum class ActType : uint8_t { kF32 = 0, kBF16 = 1 };

constexpr size_t act_type_bytes(ActType type) { return type == ActType::kBF16 ? 2 : 4; }
constexpr const char* act_type_name(ActType type) { return type == ActType::kBF16 ? "bf16" : "fp32"; }

namespace detail {
[[noreturn]] inline void act_type_mismatch(ActType got, const char* where) {
  std::fprintf(stderr,
               "rankscope: %s was handed %s activations but computes in fp32 only (hint: the CPU "
               "backend is the fp32 oracle; bf16 activations run on --device cuda)\n",
               where, act_type_name(got));
  std::abort();
}
}  // namespace detail

class ActPtr {
 public:
  ActPtr() = default;
  ActPtr(std::nullptr_t) {}                                  // NOLINT: implicit, like a pointer
  ActPtr(float* p) : data_(p), type_(ActType::kF32) {}       // NOLINT: fp32 code reads unchanged
  ActPtr(void* p, ActType type) : data_(p), type_(type) {}

  void* data() const { return data_; }
  ActType type() const { return type_; }
  explicit operator bool() const { return data_ != nullptr; }
  // The element `elements` further on (element size of this type).
  ActPtr operator+(size_t elements) const {
    return {data_ == nullptr ? nullptr : static_cast<char*>(data_) + elements * act_type_bytes(type_), type_};
  }
  size_t bytes(size_t elements) const { return elements * act_type_bytes(type_); }
  // The buffer as fp32; an fp32-only op calls this and names itself.
  float* f32(const char* where = "an fp32-only op") const {
    if (type_ != ActType::kF32) detail::act_type_mismatch(type_, where);
    return static_cast<float*>(data_);
  }

 private:
  void* data_ = nullptr;
  ActType type_ = ActType::kF32;
};

class ConstActPtr {
 public:
  ConstActPtr() = default;
  ConstActPtr(std::nullptr_t) {}                                  // NOLINT
  ConstActPtr(const float* p) : data_(p), type_(ActType::kF32) {} // NOLINT
  ConstActPtr(ActPtr p) : data_(p.data()), type_(p.type()) {}     // NOLINT: mutable to const
  ConstActPtr(const void* p, ActType type) : data_(p), type_(type) {}

  const void* data() const { return data_; }
  ActType type() const { return type_; }
  explicit operator bool() const { return data_ != nullptr; }
  ConstActPtr operator+(size_t elements) const {
    return {data_ == nullptr ? nullptr : static_cast<const char*>(data_) + elements * act_type_bytes(type_),
            type_};
  }
  const float* f32(const char* where = "an fp32-only op") const {
    if (type_ != ActType::kF32) detail::act_type_mismatch(type_, where);
    return static_cast<const float*>(data_);
  }

 private:
  const void* data_ = nullptr;
  ActType type_ = ActType::kF32;
};

// bf16 on the host (rankscope/format/bfloat16.h): round to nearest even, as the GPU does.
using rankscope::format::bf16_to_float;
using rankscope::format::float_to_bf16;

}  // namespace gpt2
