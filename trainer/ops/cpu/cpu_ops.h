// cpu_ops.h — the CPU backend of gpt2::Ops: fp32, OpenBLAS sgemm for every matmul, OpenMP over rows.
//
// Is: the factory of the CPU implementation of ops.h (one op per .cpp file in this folder, each
// with its shape comments). Buffers are plain host memory. Threads: OpenMP's default team
// (OMP_NUM_THREADS); GEMMs run outside parallel regions so OpenBLAS uses its own threads.
// Is not: a tensor library; nothing here knows GPT-2's structure.
#pragma once

#include <memory>

#include "model/ops.h"

namespace gpt2 {

std::unique_ptr<Ops> make_cpu_ops();

}  // namespace gpt2
