// attention_step_timing.h — times one training step's worth of attention alone (forward of every
// layer, then backward of every layer) through an Ops backend: the number the attention budget of
// design.md §4 is about (d12 B=16 T=1024: <= 6 ms a step).
// Is: a measurement on random inputs, buffers reused across layers (so it needs one layer's saved
// tensors, not L of them), synchronised before and after. Is not: a correctness check (the gpu
// tests are), nor part of the model's step (gpt2_gpu_bench times that).
#pragma once

#include "model/ops.h"
#include "rankscope/format/status.h"

namespace gpt2::bench {

struct AttentionShape {
  int B, T, C, NH, layers;
};

// Milliseconds per step (layers forwards + layers backwards of `kind` on `type` activations),
// the mean of `reps` steps after one untimed step.
rankscope::Result<double> attention_ms_per_step(Ops& ops, AttentionKind kind, ActType type, const AttentionShape& s,
                                                int reps);

// FlashAttention's FLOP convention (forward 4*B*T^2*C halved when causal; backward 2.5x forward),
// for a step of `layers` layers: what TFLOP/s figures of attention are quoted against.
double attention_step_flops(const AttentionShape& s);

}  // namespace gpt2::bench
