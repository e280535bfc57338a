// typed_activations.h — host-side views of ActPtr / ConstActPtr as the CUDA element types the
// kernels' launch wrappers are overloaded for (float or __nv_bfloat16).
// Is: the casts and the one check every CudaOps method makes: all activation arguments of one call
// have the same type (ops.h). Is not: a conversion (cast.cu converts).
#pragma once

#include <cuda_bf16.h>

#include <initializer_list>

#include "model/activation_ptr.h"

namespace gpt2::cuda {

inline bool is_bf16(ConstActPtr p) { return p.type() == ActType::kBF16; }
inline __nv_bfloat16* as_bf16(ActPtr p) { return static_cast<__nv_bfloat16*>(p.data()); }
inline const __nv_bfloat16* as_bf16(ConstActPtr p) { return static_cast<const __nv_bfloat16*>(p.data()); }

// Stops with a message naming the op when its activation arguments mix types (a model bug).
inline void require_same_type(const char* op, std::initializer_list<ConstActPtr> args) {
  const ActType first = args.begin()->type();
  for (ConstActPtr a : args) {
    if (a && a.type() != first) {
      std::fprintf(stderr, "rankscope: cuda %s was handed activations of mixed types (%s and %s)\n", op,
                   act_type_name(first), act_type_name(a.type()));
      std::abort();
    }
  }
}

}  // namespace gpt2::cuda
