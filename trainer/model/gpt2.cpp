// gpt2.cpp — GPT-2 forward and backward on one TP rank, as a sequence of Ops calls and TP
// collectives. No element loop lives here (see ops.h); the backend does the arithmetic.
//
// Megatron layout per block (f/g are Megatron's conjugate identity/all-reduce operators):
//   ln_1 -> [f] c_attn (column: this rank's heads of Q,K,V) -> attention over local heads
//        -> c_proj (row: partial sums) -> [g: all-reduce] + bias -> residual
//   ln_2 -> [f] c_fc (column) -> GELU -> c_proj (row) -> [g: all-reduce] + bias -> residual
// Backward: [f] becomes an all-reduce of the LayerNorm-output gradient, [g] an identity.
// Embedding: each rank looks up the ids it owns (0 for foreign ones), all-reduce, + wpe.
// Head: logits over the local vocab shard; the fused classifier: each shard's (max, sum exp, target
// logit) partials, one all_gather, a combine, then losses and dlogits in one pass (when forward knows
// the backward's loss scale); the LM head shares wte, so wte's gradient is final only after backward/embed.
#include "model/gpt2.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>

#include "model/moe_mlp.h"
#include "model/weight_init.h"
#include "parallel/tp_slicing.h"

namespace gpt2 {

using rankscope::probe::Probe;
using rankscope::probe::ScopedRange;

namespace {

// Finer ranges inside forward/block{i}/{attn,mlp} and backward/block{i}/{mlp,attn}. GELU has no
// range of its own: it is fused into the fc GEMM (forward) and the projection's backward GEMM.
enum Range : int {
  kFwdAttn, kFwdAttnLn, kFwdAttnQkv, kFwdAttnSdpa, kFwdAttnProj,
  kFwdMlp, kFwdMlpLn, kFwdMlpFc, kFwdMlpProj,
  kBwdMlp, kBwdMlpProj, kBwdMlpFc, kBwdMlpLn,
  kBwdAttn, kBwdAttnProj, kBwdAttnSdpa, kBwdAttnQkv, kBwdAttnLn,
  kFwdMoe, kFwdMoeLn, kBwdMoe, kBwdMoeLn,
  kRangeCount
};
constexpr const char* kRangeFormats[kRangeCount] = {
    "forward/block{}/attn", "forward/block{}/attn/ln_1", "forward/block{}/attn/qkv",
    "forward/block{}/attn/sdpa", "forward/block{}/attn/proj",
    "forward/block{}/mlp", "forward/block{}/mlp/ln_2", "forward/block{}/mlp/fc",
    "forward/block{}/mlp/proj",
    "backward/block{}/mlp", "backward/block{}/mlp/proj", "backward/block{}/mlp/fc",
    "backward/block{}/mlp/ln_2",
    "backward/block{}/attn", "backward/block{}/attn/proj", "backward/block{}/attn/sdpa",
    "backward/block{}/attn/qkv", "backward/block{}/attn/ln_1",
    "forward/block{}/moe", "forward/block{}/moe/ln_2", "backward/block{}/moe", "backward/block{}/moe/ln_2",
};

// Activations of one block kept for backward. Under recompute some point at shared scratch.
struct BlockActs {
  ActPtr ln1;        // (N,C)
  float* ln1_mean;   // (N)
  float* ln1_rstd;   // (N)
  ActPtr qkv;        // (N,3Cl)
  ActPtr atty;       // (N,Cl)
  float* att_saved;  // Ops::attention_saved_floats: naive (B,NHl,T,T), flash (B,NHl,T)
  ActPtr residual2;  // (N,C)
  ActPtr ln2;        // (N,C)
  float* ln2_mean;   // (N)
  float* ln2_rstd;   // (N)
  ActPtr fch;        // (N,4Cl) fc pre-activation
  ActPtr fch_gelu;   // (N,4Cl)
  ActPtr residual3;  // (N,C) block output
};

}  // namespace

struct GPT2::Impl {
  Ops& ops;
  int B, T, N, C, Cl, NHl, Fl, Vl, L;
  VocabShardMap shard;
  Recompute recompute;
  AttentionKind attention = AttentionKind::kNaive;
  ActType act_type = ActType::kF32;
  std::vector<void*> allocations;
  size_t activation_bytes = 0;

  int* ids = nullptr;       // (N)
  int* targets = nullptr;   // (N)
  ActPtr encoded = nullptr; // (N,C)
  std::vector<BlockActs> blocks;
  ActPtr lnf = nullptr;      // (N,C)
  float* lnf_mean = nullptr; // (N)
  float* lnf_rstd = nullptr; // (N)
  ActPtr logits = nullptr;   // (N,Vl); dlogits in place during backward
  float* losses = nullptr;   // (N)
  float* row_max = nullptr;  // (N)
  float* stats = nullptr;    // (2N): [sum exp | target logit]
  float* ce_partials = nullptr; // (3N): this shard's [max | sum exp | target logit]
  float* ce_gathered = nullptr; // (tp, 3N): every TP rank's partials (null when tp == 1)
  bool dlogits_ready = false;   // the forward already turned logits into dlogits ...
  float dlogits_scale = 0.0f;   // ... for this backward loss_scale
  ActPtr proj_out = nullptr; // (N,C) row-parallel projection output before the residual add
  // backward scratch
  ActPtr dresidual = nullptr; // (N,C)
  ActPtr dln = nullptr;       // (N,C)
  ActPtr datty = nullptr;     // (N,Cl)
  ActPtr dqkv = nullptr;      // (N,3Cl)
  float* att_scratch = nullptr; // Ops::attention_scratch_floats: naive (B,NHl,T,T), flash (B,NHl,T)
  ActPtr dfch = nullptr;      // (N,4Cl)
  // recompute scratch (null when not recomputing)
  ActPtr gelu_scratch = nullptr; // (N,4Cl)
  ActPtr ln_scratch = nullptr;   // (N,C)

  // MoE blocks (null entries for dense blocks)
  std::vector<std::unique_ptr<MoeMlp>> moe;
  std::vector<MoeWeights> moe_w;
  std::vector<MoeGrads> moe_g;
  float* router_bias = nullptr;  // (E) route-skew fault; null: none
  CombineMiscount miscount;

  bool have_targets = false;
  bool logits_valid = false;
  std::vector<std::array<std::string, kRangeCount>> range_names;

  explicit Impl(Ops& o) : ops(o) {}
  ~Impl() {
    moe.clear();  // their scratch goes back to ops first
    for (void* p : allocations) ops.release(p);
    if (router_bias) ops.release(router_bias);
  }
  // Backend memory that lives as long as the model, counted in activation_bytes().
  void* take_bytes(size_t bytes) {
    void* p = ops.alloc(bytes);
    allocations.push_back(p);
    activation_bytes += bytes;
    return p;
  }
  template <class E>
  E* take(size_t count) {
    return static_cast<E*>(take_bytes(count * sizeof(E)));
  }
  // An activation buffer of `count` elements of the model's activation type.
  ActPtr take_act(size_t count) { return {take_bytes(count * act_type_bytes(act_type)), act_type}; }
  const char* range(int layer, Range r) const { return range_names[layer][r].c_str(); }
};

GPT2::GPT2(const Options& options, Ops& ops, Communicator* tp_comm)
    : options_(options), ops_(ops), tp_comm_(tp_comm) {}

GPT2::~GPT2() = default;

namespace {

// Everything create() refuses before it allocates anything.
Status check_options(const GPT2::Options& options, Ops& ops, Communicator* tp_comm, Communicator* ep_comm,
                     MoeOps* moe_ops) {
  const TensorParallel& tp = options.tp;
  RS_RETURN_IF_ERROR(options.config.validate(tp.tp_size));
  RS_RETURN_IF_ERROR(options.moe.validate(options.ep.ep_size));
  if (options.moe.enabled() && moe_ops == nullptr)
    return rankscope::invalid_argument("an MoE model needs the backend's MoE ops (hint: make_cpu_moe_ops())");
  if (options.ep.ep_size > 1 && (ep_comm == nullptr || ep_comm->size() != options.ep.ep_size ||
                                 ep_comm->rank() != options.ep.ep_rank))
    return rankscope::invalid_argument(fmt::format(
        "--ep {} needs this rank's ep{{k}} communicator of that size at rank {} (hint: make_process_groups "
        "with the same --ep)", options.ep.ep_size, options.ep.ep_rank));
  if (options.activations != ActType::kF32) {
    if (!ops.supports_activations(options.activations))
      return rankscope::unsupported(fmt::format(
          "the {} backend computes activations in fp32 only, {} was asked (hint: bf16 activations need "
          "--device cuda; the CPU backend is the fp32 oracle)", ops.name(), act_type_name(options.activations)));
    if (options.moe.enabled())
      return rankscope::unsupported(fmt::format(
          "{} activations with MoE blocks: the MoE ops compute in fp32 only (hint: --precision fp32 for "
          "MoE models)", act_type_name(options.activations)));
  }
  if (tp.tp_rank < 0 || tp.tp_rank >= tp.tp_size) {
    return rankscope::invalid_argument(fmt::format("tp rank {} outside [0, {})", tp.tp_rank, tp.tp_size));
  }
  if (tp.tp_size > 1) {
    if (tp_comm == nullptr) {
      return rankscope::invalid_argument(fmt::format(
          "--tp {} needs a TP communicator (hint: split the world into tp groups first)", tp.tp_size));
    }
    if (tp_comm->size() != tp.tp_size || tp_comm->rank() != tp.tp_rank) {
      return rankscope::invalid_argument(fmt::format(
          "TP communicator '{}' has rank {} of {}, but the model was asked for rank {} of {}",
          tp_comm->name(), tp_comm->rank(), tp_comm->size(), tp.tp_rank, tp.tp_size));
    }
  }
  if (options.batch < 1 || options.seq_len < 1 || options.seq_len > options.config.max_seq_len) {
    return rankscope::invalid_argument(fmt::format(
        "batch {} / seq len {} invalid (hint: batch >= 1 and 1 <= seq len <= max seq len {})",
        options.batch, options.seq_len, options.config.max_seq_len));
  }
  return Status::ok_status();
}

void set_shape(GPT2::Impl& a, const GPT2::Options& options, const VocabShardMap& shard) {
  const ModelConfig& c = options.config;
  const TensorParallel& tp = options.tp;
  a.B = options.batch;
  a.T = options.seq_len;
  a.N = a.B * a.T;
  a.C = c.channels;
  a.Cl = c.channels / tp.tp_size;
  a.NHl = c.num_heads / tp.tp_size;
  a.Fl = 4 * a.Cl;
  a.L = c.num_layers;
  a.shard = shard;
  a.Vl = a.shard.local_rows;
  a.recompute = options.recompute;
  a.attention = options.attention;
  a.act_type = options.activations;
}

// Every buffer for (B,T) up front: a step allocates nothing.
void allocate_buffers(GPT2::Impl& a, const GPT2::Options& options, Ops& ops) {
  const size_t N = a.N, C = a.C, Cl = a.Cl, Fl = a.Fl;
  // Opaque to the model: the backend says how many floats its kind of attention keeps and uses.
  const size_t att_saved_numel = ops.attention_saved_floats(a.attention, a.B, a.T, a.NHl);
  const size_t att_scratch_numel = ops.attention_scratch_floats(a.attention, a.B, a.T, a.NHl);

  a.ids = a.take<int>(N);
  a.targets = a.take<int>(N);
  a.encoded = a.take_act(N * C);
  const bool keep_gelu = a.recompute == Recompute::kNone;
  const bool keep_ln = a.recompute != Recompute::kGeluAndLayerNorm;
  if (!keep_gelu) a.gelu_scratch = a.take_act(N * Fl);
  if (!keep_ln) a.ln_scratch = a.take_act(N * C);
  a.blocks.resize(a.L);
  for (BlockActs& b : a.blocks) {
    b.ln1 = keep_ln ? a.take_act(N * C) : a.ln_scratch;
    b.ln1_mean = a.take<float>(N);
    b.ln1_rstd = a.take<float>(N);
    b.qkv = a.take_act(N * 3 * Cl);
    b.atty = a.take_act(N * Cl);
    b.att_saved = a.take<float>(att_saved_numel);
    b.residual2 = a.take_act(N * C);
    b.ln2 = keep_ln ? a.take_act(N * C) : a.ln_scratch;
    b.ln2_mean = a.take<float>(N);
    b.ln2_rstd = a.take<float>(N);
    const bool dense_mlp = !options.moe.is_moe_block(static_cast<int>(&b - a.blocks.data()));
    b.fch = dense_mlp ? a.take_act(N * Fl) : nullptr;
    b.fch_gelu = !dense_mlp ? ActPtr() : keep_gelu ? a.take_act(N * Fl) : a.gelu_scratch;
    b.residual3 = a.take_act(N * C);
  }
  a.lnf = keep_ln ? a.take_act(N * C) : a.ln_scratch;
  a.lnf_mean = a.take<float>(N);
  a.lnf_rstd = a.take<float>(N);
  a.logits = a.take_act(N * a.Vl);
  a.losses = a.take<float>(N);
  a.row_max = a.take<float>(N);
  a.stats = a.take<float>(2 * N);
  a.ce_partials = a.take<float>(3 * N);
  a.ce_gathered = options.tp.tp_size > 1 ? a.take<float>(3 * N * options.tp.tp_size) : nullptr;
  a.proj_out = a.take_act(N * C);
  a.dresidual = a.take_act(N * C);
  a.dln = a.take_act(N * C);
  a.datty = a.take_act(N * Cl);
  a.dqkv = a.take_act(N * 3 * Cl);
  a.att_scratch = a.take<float>(att_scratch_numel);
  a.dfch = a.take_act(N * Fl);
}

// Formatted once here, so that a step hands the probe ready strings.
void name_ranges(GPT2::Impl& a) {
  a.range_names.resize(a.L);
  for (int l = 0; l < a.L; l++) {
    for (int r = 0; r < kRangeCount; r++) a.range_names[l][r] = fmt::format(fmt::runtime(kRangeFormats[r]), l);
  }
}

// An MoeMlp for every MoE block, and where its weights and gradients lie in `ps`.
Status attach_moe_layers(GPT2::Impl& a, const GPT2::Options& options, ParameterSet& ps, Ops& ops, MoeOps* moe_ops,
                         Communicator* ep_comm) {
  a.moe.resize(a.L);
  a.moe_w.resize(a.L);
  a.moe_g.resize(a.L);
  if (!options.moe.enabled()) return Status::ok_status();
  RS_ASSIGN_OR_RETURN(moe::ExpertLayout layout,
                      moe::ExpertLayout::make(options.moe.experts, options.ep.ep_size, options.ep.ep_rank));
  const MoeLayerConfig lc{options.moe.experts, options.moe.top_k, options.moe.capacity_factor,
                          options.moe.aux_loss_coef, options.moe.loop};
  for (int l = 0; l < a.L; l++) {
    if (!options.moe.is_moe_block(l)) continue;
    a.moe[l] = std::make_unique<MoeMlp>(lc, layout, ops, *moe_ops, options.ep.ep_size > 1 ? ep_comm : nullptr, a.N, a.C,
                                        fmt::format("block{}", l));
    auto at = [&](float* base, int index) { return base + ps.infos()[index].offset; };
    a.moe_w[l].router = at(ps.params(), ps.router_index(l));
    a.moe_g[l].router = at(ps.grads(), ps.router_index(l));
    for (int j = 0; j < layout.local_experts(); j++) {
      a.moe_w[l].fc_w.push_back(at(ps.params(), ps.expert_index(l, j, ExpertParam::kFcW)));
      a.moe_w[l].fc_b.push_back(at(ps.params(), ps.expert_index(l, j, ExpertParam::kFcB)));
      a.moe_w[l].proj_w.push_back(at(ps.params(), ps.expert_index(l, j, ExpertParam::kProjW)));
      a.moe_w[l].proj_b.push_back(at(ps.params(), ps.expert_index(l, j, ExpertParam::kProjB)));
      a.moe_g[l].fc_w.push_back(at(ps.grads(), ps.expert_index(l, j, ExpertParam::kFcW)));
      a.moe_g[l].fc_b.push_back(at(ps.grads(), ps.expert_index(l, j, ExpertParam::kFcB)));
      a.moe_g[l].proj_w.push_back(at(ps.grads(), ps.expert_index(l, j, ExpertParam::kProjW)));
      a.moe_g[l].proj_b.push_back(at(ps.grads(), ps.expert_index(l, j, ExpertParam::kProjB)));
    }
  }
  return Status::ok_status();
}

}  // namespace

Result<std::unique_ptr<GPT2>> GPT2::create(const Options& options, Ops& ops, Communicator* tp_comm,
                                           Communicator* ep_comm, MoeOps* moe_ops) {
  RS_RETURN_IF_ERROR(check_options(options, ops, tp_comm, ep_comm, moe_ops));
  std::unique_ptr<GPT2> model(new GPT2(options, ops, tp_comm));
  model->params_ = std::make_unique<ParameterSet>(options.config, options.tp, ops, options.moe, options.ep);
  auto impl = std::make_unique<Impl>(ops);
  set_shape(*impl, options, model->params_->vocab_shard_map());
  allocate_buffers(*impl, options, ops);
  name_ranges(*impl);
  RS_RETURN_IF_ERROR(attach_moe_layers(*impl, options, *model->params_, ops, moe_ops, ep_comm));
  model->impl_ = std::move(impl);
  return model;
}

namespace {

// Activations travel in their own type (bf16 halves the TP traffic, as in Megatron).
Status tp_all_reduce(Communicator* comm, int tp_size, ActPtr buf, size_t count, ReduceOp op) {
  if (tp_size == 1) return Status::ok_status();
  return comm->all_reduce(buf.data(), count,
                          buf.type() == ActType::kBF16 ? DataType::kBFloat16 : DataType::kFloat32, op);
}

}  // namespace

ConstActPtr GPT2::logits() const { return impl_->logits; }
void GPT2::copy_logits_to_host(float* host, size_t first_row, size_t rows) const {
  const Impl& a = *impl_;
  const size_t n = rows * static_cast<size_t>(a.Vl);
  const ActPtr from = a.logits + first_row * static_cast<size_t>(a.Vl);
  if (from.type() == ActType::kF32) {
    ops_.copy_to_host(host, from.data(), n * sizeof(float));
    return;
  }
  std::vector<uint16_t> narrow(n);
  ops_.copy_to_host(narrow.data(), from.data(), n * sizeof(uint16_t));
  for (size_t i = 0; i < n; i++) host[i] = bf16_to_float(narrow[i]);
}
const float* GPT2::losses() const { return impl_->losses; }
size_t GPT2::activation_bytes() const { return impl_->activation_bytes; }

Status GPT2::init_weights(uint64_t seed) {
  ParameterSet& ps = *params_;
  const VocabShardMap shard = ps.vocab_shard_map();
  std::vector<float> full, local;
  for (size_t i = 0; i < ps.count(); i++) {
    const ParamInfo& info = ps.infos()[i];
    size_t full_numel = 1;
    for (int d : info.full_shape) full_numel *= static_cast<size_t>(d);
    full.resize(full_numel);
    local.resize(info.numel);
    init_full_param(full, info, info.init_key, options_.config, seed);
    slice_param(full, info, shard, local.data());
    ops_.copy_from_host(ps.param(i).data(), local.data(), info.numel * sizeof(float));
  }
  return Status::ok_status();
}

Status GPT2::refuse_llmc_for_moe(const char* what) const {
  if (!options_.moe.enabled()) return Status::ok_status();
  return rankscope::unsupported(fmt::format(
      "{}: llm.c's model file and FullWeights hold a dense GPT-2 only, this model has {} experts per "
      "MoE block (hint: checkpoints, --resume and --init-from work for dense models)", what,
      options_.moe.experts));
}

Status GPT2::set_router_logit_bias(const std::vector<float>& bias) {
  Impl& a = *impl_;
  if (!options_.moe.enabled())
    return rankscope::invalid_argument("a router logit bias needs an MoE model (hint: --moe-experts E)");
  if (bias.empty()) {
    if (a.router_bias) ops_.release(a.router_bias);
    a.router_bias = nullptr;
    return Status::ok_status();
  }
  if (bias.size() != static_cast<size_t>(options_.moe.experts))
    return rankscope::invalid_argument(fmt::format("router logit bias has {} values for {} experts",
                                                   bias.size(), options_.moe.experts));
  if (!a.router_bias) a.router_bias = static_cast<float*>(ops_.alloc(bias.size() * sizeof(float)));
  ops_.copy_from_host(a.router_bias, bias.data(), bias.size() * sizeof(float));
  return Status::ok_status();
}

void GPT2::inject_combine_miscount(CombineMiscount miscount) { impl_->miscount = miscount; }

Status GPT2::load_full_weights(const FullWeights& w) {
  RS_RETURN_IF_ERROR(refuse_llmc_for_moe("loading full weights"));
  const ModelConfig& c = options_.config;
  const ModelConfig& f = w.config;
  if (f.num_layers != c.num_layers || f.num_heads != c.num_heads || f.channels != c.channels ||
      f.vocab_size != c.vocab_size || f.max_seq_len != c.max_seq_len) {
    return rankscope::invalid_argument(fmt::format(
        "weights are for a model {} but this model is {} (hint: take the model shape from the "
        "file, or pass matching --layers/--heads/--channels/--vocab-size)", f.describe(), c.describe()));
  }
  ParameterSet& ps = *params_;
  const VocabShardMap shard = ps.vocab_shard_map();
  std::vector<float> local;
  for (size_t i = 0; i < ps.count(); i++) {
    const ParamInfo& info = ps.infos()[i];
    local.resize(info.numel);
    slice_param(full_tensor_of(w, info, static_cast<int>(i)), info, shard, local.data());
    ops_.copy_from_host(ps.param(i).data(), local.data(), info.numel * sizeof(float));
  }
  return Status::ok_status();
}

Result<FullWeights> GPT2::gather_full_weights() { return gather_full(params_->params()); }
Result<FullWeights> GPT2::gather_full_gradients() { return gather_full(params_->grads()); }

Result<FullWeights> GPT2::gather_full(const float* buffer) {
  RS_RETURN_IF_ERROR(refuse_llmc_for_moe("gathering full weights"));
  ParameterSet& ps = *params_;
  const int tp = options_.tp.tp_size;
  const size_t total = ps.total_numel();
  std::vector<float> local(total);
  ops_.copy_to_host(local.data(), buffer, total * sizeof(float));
  std::vector<float> all;
  if (tp > 1) {
    all.resize(total * tp);
    RS_RETURN_IF_ERROR(tp_comm_->all_gather(local.data(), all.data(), total, DataType::kFloat32));
  } else {
    all = std::move(local);
  }
  FullWeights w = FullWeights::zeros(options_.config);
  for (int r = 0; r < tp; r++) {
    VocabShardMap shard = ps.vocab_shard_map();
    shard.tp_rank = r;
    for (size_t i = 0; i < ps.count(); i++) {
      const ParamInfo& info = ps.infos()[i];
      // Replicated tensors are identical on every rank: take rank 0's.
      if (!info.is_sharded() && r > 0) continue;
      unslice_param(all.data() + r * total + info.offset, info, shard,
                    full_tensor_of(w, info, static_cast<int>(i)));
    }
  }
  return w;
}

namespace {

Status check_token_ids(const int* inputs, const int* targets, int N, int V) {
  for (int n = 0; n < N; n++) {
    const bool bad_input = inputs[n] < 0 || inputs[n] >= V;
    const bool bad_target = targets != nullptr && (targets[n] < 0 || targets[n] >= V);
    if (bad_input || bad_target) {
      return rankscope::invalid_argument(fmt::format(
          "token id {} at position {} is outside the vocabulary [0, {}) (hint: check --vocab-size "
          "against the data)", bad_input ? inputs[n] : targets[n], n, V));
    }
  }
  return Status::ok_status();
}

// What the phases of one forward or backward share. P/G: a parameter or its gradient in the flat
// buffers; BP/BG: the same for a block's parameter.
struct Pass {
  GPT2::Impl& a;
  ParameterSet& ps;
  Ops& ops;
  Communicator* tp_comm;
  int tp;
  Probe* probe;

  float* P(int i) const { return ps.params() + ps.infos()[i].offset; }
  float* G(int i) const { return ps.grads() + ps.infos()[i].offset; }
  float* BP(int l, BlockParam p) const { return P(ps.block_index(l, p)); }
  float* BG(int l, BlockParam p) const { return G(ps.block_index(l, p)); }
  // The residual stream entering block l.
  ConstActPtr block_input(int l) const { return l == 0 ? a.encoded : a.blocks[l - 1].residual3; }
};

struct ForwardPass : Pass {
  ForwardStats& out;

  Status embed_tokens();
  Status attention_half(int l);
  Status mlp_half(int l);
  Status moe_half(int l);
  Status head(std::optional<float> backward_loss_scale);
  Status loss(std::optional<float> backward_loss_scale);
  Status row_parallel_projection(ConstActPtr in, const float* weight, const float* bias, int in_channels);
};

Status ForwardPass::embed_tokens() {
  ScopedRange r(probe, "forward/embed");
  const int N = a.N, C = a.C;
  out.embed_local_tokens = ops.embedding_lookup(a.encoded, a.ids, P(kParamWte), N, C, a.shard);
  RS_RETURN_IF_ERROR(tp_all_reduce(tp_comm, tp, a.encoded, static_cast<size_t>(N) * C, ReduceOp::kSum));
  ops.add_position(a.encoded, P(kParamWpe), a.B, a.T, C);
  return Status::ok_status();
}

// Row-parallel: partial products, all-reduce, then the bias once. Into proj_out.
Status ForwardPass::row_parallel_projection(ConstActPtr in, const float* weight, const float* bias, int in_channels) {
  const int N = a.N, C = a.C;
  ops.matmul_forward(a.proj_out, in, weight, tp == 1 ? bias : nullptr, N, in_channels, C);
  RS_RETURN_IF_ERROR(tp_all_reduce(tp_comm, tp, a.proj_out, static_cast<size_t>(N) * C, ReduceOp::kSum));
  if (tp > 1) ops.add_bias(a.proj_out, bias, N, C);
  return Status::ok_status();
}

Status ForwardPass::attention_half(int l) {
  BlockActs& b = a.blocks[l];
  ConstActPtr residual = block_input(l);
  const int N = a.N, C = a.C, Cl = a.Cl;
  ScopedRange r(probe, a.range(l, kFwdAttn));
  {
    ScopedRange r2(probe, a.range(l, kFwdAttnLn));
    if (l == 0) {
      ops.layernorm_forward(b.ln1, b.ln1_mean, b.ln1_rstd, residual, BP(l, BlockParam::kLn1W), BP(l, BlockParam::kLn1B),
                            N, C);
    } else {
      const BlockActs& prev = a.blocks[l - 1];
      ops.residual_layernorm_forward(prev.residual3, b.ln1, b.ln1_mean, b.ln1_rstd, prev.residual2, a.proj_out,
                                     BP(l, BlockParam::kLn1W), BP(l, BlockParam::kLn1B), N, C);
    }
  }
  {
    ScopedRange r2(probe, a.range(l, kFwdAttnQkv));
    ops.matmul_forward(b.qkv, b.ln1, BP(l, BlockParam::kQkvW), BP(l, BlockParam::kQkvB), N, C, 3 * Cl);
  }
  {
    ScopedRange r2(probe, a.range(l, kFwdAttnSdpa));
    ops.attention_forward(a.attention, b.atty, b.att_saved, b.qkv, a.B, a.T, Cl, a.NHl);
  }
  {
    ScopedRange r2(probe, a.range(l, kFwdAttnProj));
    const float* bias = BP(l, BlockParam::kAttnProjB);
    RS_RETURN_IF_ERROR(row_parallel_projection(b.atty, BP(l, BlockParam::kAttnProjW), bias, Cl));
  }
  return Status::ok_status();
}

Status ForwardPass::mlp_half(int l) {
  BlockActs& b = a.blocks[l];
  ConstActPtr residual = block_input(l);
  const int N = a.N, C = a.C, Fl = a.Fl;
  ScopedRange r(probe, a.range(l, kFwdMlp));
  {
    ScopedRange r2(probe, a.range(l, kFwdMlpLn));
    ops.residual_layernorm_forward(b.residual2, b.ln2, b.ln2_mean, b.ln2_rstd, residual, a.proj_out,
                                   BP(l, BlockParam::kLn2W), BP(l, BlockParam::kLn2B), N, C);
  }
  {
    ScopedRange r2(probe, a.range(l, kFwdMlpFc));
    // fch keeps the pre-activation for backward; fch_gelu = GELU(fch) (the GEMM's epilogue).
    ops.matmul_gelu_forward(b.fch_gelu, b.fch, b.ln2, BP(l, BlockParam::kFcW), BP(l, BlockParam::kFcB), N, C, Fl);
  }
  {
    ScopedRange r2(probe, a.range(l, kFwdMlpProj));
    const float* bias = BP(l, BlockParam::kFcProjB);
    RS_RETURN_IF_ERROR(row_parallel_projection(b.fch_gelu, BP(l, BlockParam::kFcProjW), bias, Fl));
    // residual3 = residual2 + proj_out: fused with the next LayerNorm.
  }
  return Status::ok_status();
}

Status ForwardPass::moe_half(int l) {
  BlockActs& b = a.blocks[l];
  ConstActPtr residual = block_input(l);
  ScopedRange r(probe, a.range(l, kFwdMoe));
  {
    ScopedRange r2(probe, a.range(l, kFwdMoeLn));
    ops.residual_layernorm_forward(b.residual2, b.ln2, b.ln2_mean, b.ln2_rstd, residual, a.proj_out,
                                   BP(l, BlockParam::kLn2W), BP(l, BlockParam::kLn2B), a.N, a.C);
  }
  if (a.miscount.peer >= 0) {
    a.moe[l]->set_combine_miscount(a.miscount.peer, a.miscount.delta);
    a.miscount = {};
  }
  RS_ASSIGN_OR_RETURN(MoeStats ms, a.moe[l]->forward(a.proj_out.f32("MoE forward"), b.ln2.f32("MoE forward"),
                                                     a.moe_w[l], a.router_bias, probe));
  out.moe_routed.resize(ms.routed.size(), 0);
  for (size_t e = 0; e < ms.routed.size(); e++) out.moe_routed[e] += ms.routed[e];
  out.moe_received += ms.received;
  out.moe_dropped += ms.dropped;
  out.moe_aux_loss += ms.aux_loss;
  return Status::ok_status();  // residual3 = residual2 + proj_out: fused with the next LayerNorm
}

Status ForwardPass::head(std::optional<float> backward_loss_scale) {
  ScopedRange r(probe, "forward/head");
  const int N = a.N, C = a.C;
  ConstActPtr last = a.L > 0 ? a.blocks[a.L - 1].residual3 : a.encoded;
  const int lnf_w = ps.lnf_weight(), lnf_b = ps.lnf_bias();
  {
    ScopedRange r2(probe, "forward/head/ln_f");
    if (a.L == 0) {
      ops.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, P(lnf_w), P(lnf_b), N, C);
    } else {
      const BlockActs& prev = a.blocks[a.L - 1];
      ops.residual_layernorm_forward(prev.residual3, a.lnf, a.lnf_mean, a.lnf_rstd, prev.residual2, a.proj_out,
                                     P(lnf_w), P(lnf_b), N, C);
    }
  }
  {
    ScopedRange r2(probe, "forward/head/logits");
    ops.matmul_forward(a.logits, a.lnf, P(kParamWte), nullptr, N, C, a.Vl);  // tied LM head
  }
  out.loss = std::numeric_limits<float>::quiet_NaN();
  if (a.have_targets) {
    RS_RETURN_IF_ERROR(loss(backward_loss_scale));
  }
  return Status::ok_status();
}

// The fused classifier: one read of the logits for this shard's [max | sum | target], ONE
// all_gather of those partials, a combine every rank computes alike, then (given the backward's
// scale) losses and dlogits in one more pass; the probabilities are never stored.
Status ForwardPass::loss(std::optional<float> backward_loss_scale) {
  ScopedRange r2(probe, "forward/head/loss");
  const int N = a.N;
  ops.crossentropy_partials(a.ce_partials, a.logits, a.targets, N, a.shard);
  const float* gathered = a.ce_partials;
  if (tp > 1) {
    RS_RETURN_IF_ERROR(
        tp_comm->all_gather(a.ce_partials, a.ce_gathered, 3 * static_cast<size_t>(N), DataType::kFloat32));
    gathered = a.ce_gathered;
  }
  ops.crossentropy_combine(a.row_max, a.stats, gathered, tp, N);
  if (backward_loss_scale) {
    const float dloss = *backward_loss_scale / static_cast<float>(N);
    ops.crossentropy_loss_backward_inplace(a.losses, a.logits, a.row_max, a.stats, a.targets, dloss, N, a.shard);
    a.dlogits_ready = true;
    a.dlogits_scale = *backward_loss_scale;
  } else {
    ops.crossentropy_losses(a.losses, a.stats, a.row_max, N);
  }
  out.loss = static_cast<float>(ops.sum(a.losses, N) / N) + out.moe_aux_loss;
  return Status::ok_status();
}

}  // namespace

Result<ForwardStats> GPT2::forward(const int* inputs, const int* targets, Probe* probe,
                                   std::optional<float> backward_loss_scale) {
  Impl& a = *impl_;
  RS_RETURN_IF_ERROR(check_token_ids(inputs, targets, a.N, options_.config.vocab_size));
  ForwardStats out;
  a.dlogits_ready = false;
  ops_.copy_from_host(a.ids, inputs, sizeof(int) * a.N);
  a.have_targets = targets != nullptr;
  if (a.have_targets) ops_.copy_from_host(a.targets, targets, sizeof(int) * a.N);

  ForwardPass pass{{a, *params_, ops_, tp_comm_, options_.tp.tp_size, probe}, out};
  RS_RETURN_IF_ERROR(pass.embed_tokens());
  // Each residual add is fused with the LayerNorm after it (Ops::residual_layernorm_forward) and
  // runs in that LayerNorm's range: residual2 = residual + attention projection in .../ln_2, and
  // residual3 = residual2 + MLP (or MoE) output in the next block's attn/ln_1 (forward/head/ln_f
  // after the last block). Until then the block output waits in proj_out.
  for (int l = 0; l < a.L; l++) {
    RS_RETURN_IF_ERROR(pass.attention_half(l));
    RS_RETURN_IF_ERROR(a.moe[l] ? pass.moe_half(l) : pass.mlp_half(l));
  }
  RS_RETURN_IF_ERROR(pass.head(backward_loss_scale));
  a.logits_valid = true;
  return out;
}

namespace {

// The backward mirrors ForwardPass, calling on_grad_ready as each parameter's gradient is final.
struct BackwardPass : Pass {
  const GradReadyFn& on_grad_ready;
  float loss_scale;
  bool recompute_gelu;
  bool recompute_ln;

  void ready(int index) const {
    if (on_grad_ready) on_grad_ready(index);
  }
  void ready_block(int l, BlockParam p) const { ready(ps.block_index(l, p)); }

  Status head();
  Status dlogits();
  Status moe_half(int l);
  Status mlp_half(int l);
  void ln2_backward(int l, Range range);
  Status attention_half(int l);
  void embed();
};

Status BackwardPass::head() {
  ScopedRange r(probe, "backward/head");
  const int N = a.N, C = a.C;
  const size_t NC = static_cast<size_t>(N) * C;
  ConstActPtr last = a.L > 0 ? a.blocks[a.L - 1].residual3 : a.encoded;
  const int lnf_w = ps.lnf_weight(), lnf_b = ps.lnf_bias();
  if (recompute_ln) {
    ops.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, P(lnf_w), P(lnf_b), N, C);
  }
  RS_RETURN_IF_ERROR(dlogits());
  a.dlogits_ready = false;
  // dlnf (N,C) = dlogits @ wte_local: partial over the vocab shards -> all-reduce.
  ops.matmul_backward(a.dln, G(kParamWte), nullptr, a.logits, a.lnf, P(kParamWte), N, C, a.Vl);
  RS_RETURN_IF_ERROR(tp_all_reduce(tp_comm, tp, a.dln, NC, ReduceOp::kSum));
  ops.fill_zero(a.dresidual.data(), a.dresidual.bytes(NC));
  ops.layernorm_backward(a.dresidual, G(lnf_w), G(lnf_b), a.dln, last, P(lnf_w), a.lnf_mean, a.lnf_rstd, N, C);
  ready(lnf_b);
  ready(lnf_w);
  return Status::ok_status();
}

// The logits become the dlogits of loss_scale in place, unless the forward's fused classifier
// already made them (then only a different scale costs a pass).
Status BackwardPass::dlogits() {
  const int N = a.N;
  if (!a.dlogits_ready) {
    const float dloss = loss_scale / static_cast<float>(N);  // d(mean loss)/d(per-token loss)
    ops.crossentropy_backward_inplace(a.logits, a.row_max, a.stats, a.targets, dloss, N, a.shard);
  } else if (loss_scale != a.dlogits_scale) {
    // dlogits are linear in the scale; bf16 has no in-place scale op (and would round twice).
    if (a.act_type != ActType::kF32 || a.dlogits_scale == 0.0f) {
      return rankscope::invalid_argument(
          fmt::format("backward(loss_scale={}) after a forward that prepared the dlogits for loss_scale={} "
                      "(hint: pass forward the scale the next backward uses)",
                      loss_scale, a.dlogits_scale));
    }
    ops.scale(a.logits.f32("dlogits rescale"), loss_scale / a.dlogits_scale, static_cast<size_t>(N) * a.Vl);
  }
  return Status::ok_status();
}

Status BackwardPass::moe_half(int l) {
  BlockActs& b = a.blocks[l];
  const int N = a.N, C = a.C;
  const size_t NC = static_cast<size_t>(N) * C;
  ScopedRange r(probe, a.range(l, kBwdMoe));
  if (recompute_ln) {
    ops.layernorm_forward(b.ln2, b.ln2_mean, b.ln2_rstd, b.residual2, BP(l, BlockParam::kLn2W),
                          BP(l, BlockParam::kLn2B), N, C);
  }
  // Every TP rank ran the whole layer, so dln is complete here: no [f] all-reduce.
  ops.fill_zero(a.dln.data(), a.dln.bytes(NC));
  RS_RETURN_IF_ERROR(a.moe[l]->backward(a.dln.f32("MoE backward"), a.dresidual.f32("MoE backward"),
                                        b.ln2.f32("MoE backward"), a.moe_w[l], a.moe_g[l], loss_scale, probe));
  const int local = static_cast<int>(a.moe_w[l].fc_w.size());
  for (int j = local - 1; j >= 0; j--)
    for (int q = static_cast<int>(ExpertParam::kCount) - 1; q >= 0; q--)
      ready(ps.expert_index(l, j, static_cast<ExpertParam>(q)));
  ready(ps.router_index(l));
  ln2_backward(l, kBwdMoeLn);
  return Status::ok_status();
}

// The second layernorm's backward, into the residual gradient: the last step of either the MoE or
// the MLP half, each under its own range.
void BackwardPass::ln2_backward(int l, Range range) {
  BlockActs& b = a.blocks[l];
  ScopedRange r(probe, a.range(l, range));
  ops.layernorm_backward(a.dresidual, BG(l, BlockParam::kLn2W), BG(l, BlockParam::kLn2B), a.dln, b.residual2,
                         BP(l, BlockParam::kLn2W), b.ln2_mean, b.ln2_rstd, a.N, a.C);
  ready_block(l, BlockParam::kLn2B);
  ready_block(l, BlockParam::kLn2W);
}

Status BackwardPass::mlp_half(int l) {
  BlockActs& b = a.blocks[l];
  const int N = a.N, C = a.C, Fl = a.Fl;
  const size_t NC = static_cast<size_t>(N) * C;
  ScopedRange r(probe, a.range(l, kBwdMlp));
  {
    ScopedRange r2(probe, a.range(l, kBwdMlpProj));
    // Recompute: the projection's weight gradient needs GELU(fch), which was not kept.
    if (recompute_gelu) ops.gelu_forward(b.fch_gelu, b.fch, static_cast<size_t>(N) * Fl);
    // The residual gradient flows unchanged into the row-parallel projection ([g] backward);
    // dfch comes out through GELU' already (the gradient of the fc GEMM's output).
    ops.matmul_backward_dgelu(a.dfch, BG(l, BlockParam::kFcProjW), BG(l, BlockParam::kFcProjB), a.dresidual, b.fch_gelu,
                              BP(l, BlockParam::kFcProjW), b.fch, N, Fl, C);
    ready_block(l, BlockParam::kFcProjB);
    ready_block(l, BlockParam::kFcProjW);
  }
  {
    ScopedRange r2(probe, a.range(l, kBwdMlpFc));
    if (recompute_ln) {
      ops.layernorm_forward(b.ln2, b.ln2_mean, b.ln2_rstd, b.residual2, BP(l, BlockParam::kLn2W),
                            BP(l, BlockParam::kLn2B), N, C);
    }
    ops.matmul_backward(a.dln, BG(l, BlockParam::kFcW), BG(l, BlockParam::kFcB), a.dfch, b.ln2, BP(l, BlockParam::kFcW),
                        N, C, Fl);
    ready_block(l, BlockParam::kFcB);
    ready_block(l, BlockParam::kFcW);
    RS_RETURN_IF_ERROR(tp_all_reduce(tp_comm, tp, a.dln, NC, ReduceOp::kSum));  // [f] backward
  }
  ln2_backward(l, kBwdMlpLn);
  return Status::ok_status();
}

Status BackwardPass::attention_half(int l) {
  BlockActs& b = a.blocks[l];
  ConstActPtr residual = block_input(l);
  const int N = a.N, C = a.C, Cl = a.Cl;
  const size_t NC = static_cast<size_t>(N) * C;
  ScopedRange r(probe, a.range(l, kBwdAttn));
  {
    ScopedRange r2(probe, a.range(l, kBwdAttnProj));
    ops.matmul_backward(a.datty, BG(l, BlockParam::kAttnProjW), BG(l, BlockParam::kAttnProjB), a.dresidual, b.atty,
                        BP(l, BlockParam::kAttnProjW), N, Cl, C);
    ready_block(l, BlockParam::kAttnProjB);
    ready_block(l, BlockParam::kAttnProjW);
  }
  {
    ScopedRange r2(probe, a.range(l, kBwdAttnSdpa));
    ops.attention_backward(a.attention, a.dqkv, a.att_scratch, a.datty, b.qkv, b.atty, b.att_saved, a.B, a.T, Cl,
                           a.NHl);
  }
  {
    ScopedRange r2(probe, a.range(l, kBwdAttnQkv));
    if (recompute_ln) {
      ops.layernorm_forward(b.ln1, b.ln1_mean, b.ln1_rstd, residual, BP(l, BlockParam::kLn1W), BP(l, BlockParam::kLn1B),
                            N, C);
    }
    ops.matmul_backward(a.dln, BG(l, BlockParam::kQkvW), BG(l, BlockParam::kQkvB), a.dqkv, b.ln1,
                        BP(l, BlockParam::kQkvW), N, C, 3 * Cl);
    ready_block(l, BlockParam::kQkvB);
    ready_block(l, BlockParam::kQkvW);
    RS_RETURN_IF_ERROR(tp_all_reduce(tp_comm, tp, a.dln, NC, ReduceOp::kSum));  // [f] backward
  }
  {
    ScopedRange r2(probe, a.range(l, kBwdAttnLn));
    ops.layernorm_backward(a.dresidual, BG(l, BlockParam::kLn1W), BG(l, BlockParam::kLn1B), a.dln, residual,
                           BP(l, BlockParam::kLn1W), b.ln1_mean, b.ln1_rstd, N, C);
    ready_block(l, BlockParam::kLn1B);
    ready_block(l, BlockParam::kLn1W);
  }
  return Status::ok_status();
}

void BackwardPass::embed() {
  ScopedRange r(probe, "backward/embed");
  ops.embedding_backward(G(kParamWte), G(kParamWpe), a.dresidual, a.ids, a.B, a.T, a.C, a.shard);
  ready(kParamWpe);
  ready(kParamWte);
}

}  // namespace

Status GPT2::backward(float loss_scale, const GradReadyFn& on_grad_ready, Probe* probe) {
  Impl& a = *impl_;
  if (!a.logits_valid || !a.have_targets) {
    return rankscope::internal_error(
        "backward without a preceding forward with targets (hint: call forward(inputs, targets) "
        "before every backward)");
  }
  a.logits_valid = false;
  BackwardPass pass{{a, *params_, ops_, tp_comm_, options_.tp.tp_size, probe},
                    on_grad_ready,
                    loss_scale,
                    a.recompute != Recompute::kNone,
                    a.recompute == Recompute::kGeluAndLayerNorm};
  RS_RETURN_IF_ERROR(pass.head());
  for (int l = a.L - 1; l >= 0; l--) {
    RS_RETURN_IF_ERROR(a.moe[l] ? pass.moe_half(l) : pass.mlp_half(l));
    RS_RETURN_IF_ERROR(pass.attention_half(l));
  }
  pass.embed();
  return Status::ok_status();
}

}  // namespace gpt2
