// tp_slicing.h — how a full (TP=1) parameter tensor maps onto one TP rank's slice, both ways.
//
// Is: Megatron's layout as index arithmetic: for every local row of a parameter, the full row it
// comes from and which columns. wte rows follow --vocab-shard (contiguous or strided; rows of
// padding ids >= V are zero); c_attn takes this rank's heads from each of the Q, K and V thirds;
// c_fc takes a contiguous block of output rows; c_proj weights a contiguous block of input
// columns; the rest is copied whole. slice_param (full -> local) is what makes TP=N start from the
// weights of TP=1; unslice_param (local -> full) is what gathers a TP group's checkpoint.
// Is not: communication (the model all-gathers the local buffers, then unslices each rank's).
// Compiled into gpt2_model (it works on ParamInfo); gpt2_parallel keeps the DDP buckets.
#pragma once

#include <span>

#include "model/checkpoint_io.h"
#include "model/ops.h"
#include "model/parameters.h"

namespace gpt2 {

// The llm.c tensor a parameter (index into ParameterSet::infos()) lives in.
LlmcTensor llmc_tensor_of(int param_index, int num_layers);

// The full tensor of one parameter inside `full` (one layer's slice for block parameters).
std::span<const float> full_tensor_of(const FullWeights& full, const ParamInfo& info, int param_index);
std::span<float> full_tensor_of(FullWeights& full, const ParamInfo& info, int param_index);

// dst (info.numel, host) = this rank's slice of `full_tensor`. `shard` says which TP rank and how
// the vocabulary is split; vocab rows of padding ids (>= V) or beyond the full tensor are zero.
void slice_param(std::span<const float> full_tensor, const ParamInfo& info, const VocabShardMap& shard,
                 float* dst);
// The inverse: writes the slice `src` (info.numel, host) of TP rank shard.tp_rank into full_tensor.
void unslice_param(const float* src, const ParamInfo& info, const VocabShardMap& shard,
                   std::span<float> full_tensor);

}  // namespace gpt2
