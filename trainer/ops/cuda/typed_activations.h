// typed_activations.h — host-side views of ActPtr / ConstActPtr as the CUDA element types the
// kernels' launch wrappers are overloaded for (float or __nv_bfloat16).
// Is: the casts, and the one check every CudaOps method makes: all activation arguments of one call
// have the same type (ops.h). Is not: a conversion (cast.cu converts).
#pragma once

#include <cuda_bf16.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "model/activation_ptr.h"

namespace gpt2::cuda {

// The activation type of a call whose activation arguments must all share it (ops.h); a mix is a
// caller bug, stopped with the op's name. Null arguments (an unwanted output) are fp32 by default:
// leave them out of the list.
inline ActType one_act_type(const char* op, std::initializer_list<ActType> types) {
  const ActType first = *types.begin();
  for (ActType t : types) {
    if (t != first) {
      std::fprintf(stderr, "rankscope cuda ops: %s was handed both fp32 and bf16 activations (hint: every "
                   "activation argument of one op call has the model's one activation type)\n", op);
      std::abort();
    }
  }
  return first;
}
inline __nv_bfloat16* act_bf16(ActPtr p) { return static_cast<__nv_bfloat16*>(p.data()); }
inline const __nv_bfloat16* act_bf16(ConstActPtr p) { return static_cast<const __nv_bfloat16*>(p.data()); }
inline float* act_f32(ActPtr p) { return static_cast<float*>(p.data()); }
inline const float* act_f32(ConstActPtr p) { return static_cast<const float*>(p.data()); }

}  // namespace gpt2::cuda
