// parameters.cpp — builds the HF-named parameter list of one TP rank and its flat buffers.
#include "model/parameters.h"

#include <fmt/format.h>

namespace gpt2 {

namespace {

struct BlockParamSpec {
  const char* suffix;
  TpSplit split;
};
// Order of BlockParam.
constexpr BlockParamSpec kBlockSpecs[] = {
    {"ln_1.weight", TpSplit::kReplicated},   {"ln_1.bias", TpSplit::kReplicated},
    {"attn.c_attn.weight", TpSplit::kColumnQkv}, {"attn.c_attn.bias", TpSplit::kColumnQkv},
    {"attn.c_proj.weight", TpSplit::kRow},   {"attn.c_proj.bias", TpSplit::kReplicated},
    {"ln_2.weight", TpSplit::kReplicated},   {"ln_2.bias", TpSplit::kReplicated},
    {"mlp.c_fc.weight", TpSplit::kColumn},   {"mlp.c_fc.bias", TpSplit::kColumn},
    {"mlp.c_proj.weight", TpSplit::kRow},    {"mlp.c_proj.bias", TpSplit::kReplicated},
};
static_assert(sizeof(kBlockSpecs) / sizeof(kBlockSpecs[0]) == static_cast<int>(BlockParam::kCount));

// Full (TP=1) shape of a block parameter, (out, in) for matrices.
std::vector<int> block_full_shape(BlockParam p, int C) {
  switch (p) {
    case BlockParam::kQkvW: return {3 * C, C};
    case BlockParam::kQkvB: return {3 * C};
    case BlockParam::kAttnProjW: return {C, C};
    case BlockParam::kFcW: return {4 * C, C};
    case BlockParam::kFcB: return {4 * C};
    case BlockParam::kFcProjW: return {C, 4 * C};
    default: return {C};
  }
}

std::vector<int> local_shape(const std::vector<int>& full, TpSplit split, int tp, int Vp) {
  std::vector<int> s = full;
  switch (split) {
    case TpSplit::kReplicated: break;
    case TpSplit::kVocabRows: s[0] = Vp / tp; break;
    case TpSplit::kColumnQkv:
    case TpSplit::kColumn: s[0] /= tp; break;
    case TpSplit::kRow: s[1] /= tp; break;
  }
  return s;
}

}  // namespace

ParameterSet::ParameterSet(const ModelConfig& config, const TensorParallel& tp, Ops& ops)
    : config_(config), tp_(tp), ops_(ops), padded_vocab_(config.padded_vocab_size(tp.tp_size)) {
  const int C = config.channels;
  auto add = [&](std::string name, int layer, std::vector<int> full, TpSplit split) {
    ParamInfo info;
    info.name = std::move(name);
    info.layer = layer;
    info.full_shape = full;
    info.local_shape = local_shape(full, split, tp.tp_size, padded_vocab_);
    info.split = split;
    info.weight_decay = full.size() == 2;
    info.numel = 1;
    for (int d : info.local_shape) info.numel *= static_cast<size_t>(d);
    // Keep every tensor 16-float aligned so GEMMs and vector loops start on a cache line.
    info.offset = total_numel_;
    total_numel_ += (info.numel + 15) / 16 * 16;
    infos_.push_back(std::move(info));
  };
  add("wte.weight", -1, {padded_vocab_, C}, TpSplit::kVocabRows);
  add("wpe.weight", -1, {config.max_seq_len, C}, TpSplit::kReplicated);
  for (int l = 0; l < config.num_layers; l++) {
    for (int p = 0; p < static_cast<int>(BlockParam::kCount); p++) {
      add(fmt::format("h.{}.{}", l, kBlockSpecs[p].suffix), l,
          block_full_shape(static_cast<BlockParam>(p), C), kBlockSpecs[p].split);
    }
  }
  add("ln_f.weight", -1, {C}, TpSplit::kReplicated);
  add("ln_f.bias", -1, {C}, TpSplit::kReplicated);
  params_ = static_cast<float*>(ops_.alloc(total_numel_ * sizeof(float)));
  grads_ = static_cast<float*>(ops_.alloc(total_numel_ * sizeof(float)));
}

ParameterSet::~ParameterSet() {
  ops_.release(params_);
  ops_.release(grads_);
}

int ParameterSet::index_of(std::string_view name) const {
  for (size_t i = 0; i < infos_.size(); i++) {
    if (infos_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

void ParameterSet::zero_grads() { ops_.fill_zero(grads_, total_numel_ * sizeof(float)); }

VocabShardMap ParameterSet::vocab_shard_map() const {
  VocabShardMap m;
  m.strided = tp_.vocab_shard == VocabShard::kStrided;
  m.tp_size = tp_.tp_size;
  m.tp_rank = tp_.tp_rank;
  m.local_rows = padded_vocab_ / tp_.tp_size;
  m.vocab_size = config_.vocab_size;
  return m;
}

}  // namespace gpt2
