// parameters.cpp — builds the HF-named parameter list of one TP (and EP) rank and its flat buffers.
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

// The HF-named list of one TP (and EP) rank's tensors and their offsets in the flat buffers;
// nothing allocated, so memory_estimate.h can count a model before building it.
namespace {

struct ParameterLayout {
  std::vector<ParamInfo> infos;
  std::vector<int> block_first;  // index of h.l.ln_1.weight
  int lnf_weight = 0;
  size_t total_numel = 0;
};

ParameterLayout lay_out_parameters(const ModelConfig& config, const TensorParallel& tp, const MoeConfig& moe,
                                   const ExpertParallel& ep, int padded_vocab) {
  ParameterLayout out;
  const int C = config.channels;
  int key = 0;  // index in the EP=1 layout
  auto add = [&](std::string name, int layer, std::vector<int> full, TpSplit split, int init_key) {
    ParamInfo info;
    info.name = std::move(name);
    info.layer = layer;
    info.full_shape = full;
    info.local_shape = local_shape(full, split, tp.tp_size, padded_vocab);
    info.split = split;
    info.weight_decay = full.size() == 2;
    info.init_key = init_key;
    info.numel = 1;
    for (int d : info.local_shape) info.numel *= static_cast<size_t>(d);
    // Keep every tensor 16-float aligned so GEMMs and vector loops start on a cache line.
    info.offset = out.total_numel;
    out.total_numel += (info.numel + 15) / 16 * 16;
    out.infos.push_back(std::move(info));
  };
  add("wte.weight", -1, {padded_vocab, C}, TpSplit::kVocabRows, key++);
  add("wpe.weight", -1, {config.max_seq_len, C}, TpSplit::kReplicated, key++);
  const int E = moe.experts, local = moe.enabled() ? E / ep.ep_size : 0;
  const int first_expert = ep.ep_rank * local;
  constexpr const char* kExpertSuffix[] = {"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"};
  const std::vector<int> expert_shapes[] = {{4 * C, C}, {4 * C}, {C, 4 * C}, {C}};
  for (int l = 0; l < config.num_layers; l++) {
    out.block_first.push_back(static_cast<int>(out.infos.size()));
    const bool moe_block = moe.is_moe_block(l);
    const int dense_params = moe_block ? static_cast<int>(BlockParam::kFcW) : static_cast<int>(BlockParam::kCount);
    for (int p = 0; p < dense_params; p++) {
      add(fmt::format("h.{}.{}", l, kBlockSpecs[p].suffix), l,
          block_full_shape(static_cast<BlockParam>(p), C), kBlockSpecs[p].split, key++);
    }
    if (!moe_block) continue;
    add(fmt::format("h.{}.mlp.router.weight", l), l, {E, C}, TpSplit::kReplicated, key++);
    for (int j = 0; j < local; j++) {
      const int g = first_expert + j;
      for (int q = 0; q < static_cast<int>(ExpertParam::kCount); q++) {
        add(fmt::format("h.{}.mlp.experts.{}.{}", l, g, kExpertSuffix[q]), l, expert_shapes[q],
            TpSplit::kReplicated, key + g * static_cast<int>(ExpertParam::kCount) + q);
        out.infos.back().expert = true;
      }
    }
    key += E * static_cast<int>(ExpertParam::kCount);
  }
  out.lnf_weight = static_cast<int>(out.infos.size());
  add("ln_f.weight", -1, {C}, TpSplit::kReplicated, key++);
  add("ln_f.bias", -1, {C}, TpSplit::kReplicated, key++);
  return out;
}

}  // namespace

ParameterSet::ParameterSet(const ModelConfig& config, const TensorParallel& tp, Ops& ops,
                           const MoeConfig& moe, const ExpertParallel& ep)
    : config_(config), tp_(tp), moe_(moe), ep_(ep), ops_(ops),
      padded_vocab_(config.padded_vocab_size(tp.tp_size)) {
  ParameterLayout layout = lay_out_parameters(config, tp, moe, ep, padded_vocab_);
  infos_ = std::move(layout.infos);
  block_first_ = std::move(layout.block_first);
  lnf_weight_ = layout.lnf_weight;
  total_numel_ = layout.total_numel;
  params_ = static_cast<float*>(ops_.alloc(total_numel_ * sizeof(float)));
  grads_ = static_cast<float*>(ops_.alloc(total_numel_ * sizeof(float)));
}

size_t ParameterSet::count_numel(const ModelConfig& config, const TensorParallel& tp, const MoeConfig& moe,
                                 const ExpertParallel& ep) {
  return lay_out_parameters(config, tp, moe, ep, config.padded_vocab_size(tp.tp_size)).total_numel;
}

int ParameterSet::block_index(int layer, BlockParam p) const {
  return block_first_[static_cast<size_t>(layer)] + static_cast<int>(p);
}

int ParameterSet::router_index(int layer) const {
  return moe_.is_moe_block(layer) ? block_first_[static_cast<size_t>(layer)] + static_cast<int>(BlockParam::kFcW) : -1;
}

int ParameterSet::expert_index(int layer, int local_expert, ExpertParam p) const {
  return router_index(layer) + 1 + local_expert * static_cast<int>(ExpertParam::kCount) + static_cast<int>(p);
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
