// tp_slicing.cpp — index arithmetic of the Megatron layout (see tp_slicing.h).
#include "parallel/tp_slicing.h"

#include <algorithm>
#include <cstring>

namespace gpt2 {

namespace {

// Where one local row of a parameter comes from in the full tensor. full_row < 0: no source
// (a padding vocab row), the local row is zero.
struct RowSource {
  long full_row;
  int col_offset;
};

struct Geometry {
  int local_rows;
  int local_cols;
  int full_cols;
};

Geometry geometry_of(const ParamInfo& info) {
  Geometry g;
  g.local_rows = info.local_shape[0];
  g.local_cols = info.local_shape.size() > 1 ? info.local_shape[1] : 1;
  g.full_cols = info.full_shape.size() > 1 ? info.full_shape[1] : 1;
  return g;
}

RowSource source_of(const ParamInfo& info, const VocabShardMap& s, int r, long full_rows) {
  const int rank = s.tp_rank;
  switch (info.split) {
    case TpSplit::kReplicated: return {r, 0};
    case TpSplit::kVocabRows: {
      long id = s.global_id(r);
      if (id >= s.vocab_size || id >= full_rows) return {-1, 0};
      return {id, 0};
    }
    case TpSplit::kColumnQkv: {
      // Local rows are [Q heads of this rank | K heads | V heads], each third Cl = C/tp rows.
      const int Cl = info.local_shape[0] / 3;
      const int C = info.full_shape[0] / 3;
      const int part = r / Cl, within = r % Cl;
      return {static_cast<long>(part) * C + static_cast<long>(rank) * Cl + within, 0};
    }
    case TpSplit::kColumn: return {static_cast<long>(rank) * info.local_shape[0] + r, 0};
    case TpSplit::kRow: return {r, rank * info.local_shape[1]};
  }
  return {r, 0};
}

}  // namespace

LlmcTensor llmc_tensor_of(int param_index, int num_layers) {
  if (param_index == kParamWte) return LlmcTensor::kWte;
  if (param_index == kParamWpe) return LlmcTensor::kWpe;
  if (param_index == lnf_weight_index(num_layers)) return LlmcTensor::kLnfW;
  if (param_index == lnf_bias_index(num_layers)) return LlmcTensor::kLnfB;
  static constexpr LlmcTensor kByBlockParam[] = {
      LlmcTensor::kLn1W, LlmcTensor::kLn1B, LlmcTensor::kQkvW,     LlmcTensor::kQkvB,
      LlmcTensor::kAttProjW, LlmcTensor::kAttProjB, LlmcTensor::kLn2W, LlmcTensor::kLn2B,
      LlmcTensor::kFcW,  LlmcTensor::kFcB,  LlmcTensor::kFcProjW,  LlmcTensor::kFcProjB};
  return kByBlockParam[(param_index - 2) % static_cast<int>(BlockParam::kCount)];
}

std::span<const float> full_tensor_of(const FullWeights& full, const ParamInfo& info, int param_index) {
  return full.tensor(llmc_tensor_of(param_index, full.config.num_layers), info.layer);
}
std::span<float> full_tensor_of(FullWeights& full, const ParamInfo& info, int param_index) {
  return full.tensor(llmc_tensor_of(param_index, full.config.num_layers), info.layer);
}

void slice_param(std::span<const float> full_tensor, const ParamInfo& info, const VocabShardMap& shard,
                 float* dst) {
  const Geometry g = geometry_of(info);
  const long full_rows = static_cast<long>(full_tensor.size()) / g.full_cols;
  for (int r = 0; r < g.local_rows; r++) {
    const RowSource src = source_of(info, shard, r, full_rows);
    float* out = dst + static_cast<size_t>(r) * g.local_cols;
    if (src.full_row < 0) {
      std::memset(out, 0, sizeof(float) * g.local_cols);
    } else {
      std::memcpy(out, full_tensor.data() + src.full_row * g.full_cols + src.col_offset,
                  sizeof(float) * g.local_cols);
    }
  }
}

void unslice_param(const float* src, const ParamInfo& info, const VocabShardMap& shard,
                   std::span<float> full_tensor) {
  const Geometry g = geometry_of(info);
  const long full_rows = static_cast<long>(full_tensor.size()) / g.full_cols;
  for (int r = 0; r < g.local_rows; r++) {
    const RowSource s = source_of(info, shard, r, full_rows);
    if (s.full_row < 0) continue;
    std::memcpy(full_tensor.data() + s.full_row * g.full_cols + s.col_offset,
                src + static_cast<size_t>(r) * g.local_cols, sizeof(float) * g.local_cols);
  }
}

}  // namespace gpt2
