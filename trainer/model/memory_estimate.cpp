// memory_estimate.cpp — the bytes one training rank allocates, counted buffer by buffer the way
// ParameterSet, AdamW, GPT2::create and MoeMlp ask the backend for them (memory_estimate.h).
// Keep this in step with gpt2.cpp's create(): memory_estimate_test fails when they part.
#include "model/memory_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace gpt2 {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Sums byte requests as the backend rounds them.
class AllocationTally {
 public:
  explicit AllocationTally(size_t granularity) : granularity_(std::max<size_t>(granularity, 1)) {}
  void add(size_t bytes) {
    const size_t rounded = (bytes + granularity_ - 1) / granularity_ * granularity_;
    total_ += rounded == 0 ? granularity_ : rounded;
  }
  size_t total() const { return total_; }

 private:
  size_t granularity_;
  size_t total_ = 0;
};

// GPT2::create's buffers, in its order (gpt2.cpp).
size_t activation_buffer_bytes(const GPT2::Options& o, const Ops& ops) {
  const ModelConfig& c = o.config;
  const size_t B = size_t(o.batch), T = size_t(o.seq_len), N = B * T, C = size_t(c.channels);
  const size_t Cl = C / size_t(o.tp.tp_size), NHl = size_t(c.num_heads / o.tp.tp_size), Fl = 4 * Cl;
  const size_t Vl = size_t(c.padded_vocab_size(o.tp.tp_size) / o.tp.tp_size);
  const size_t act = act_type_bytes(o.activations);
  const size_t saved = ops.attention_saved_floats(o.attention, o.batch, o.seq_len, int(NHl));
  const size_t scratch = ops.attention_scratch_floats(o.attention, o.batch, o.seq_len, int(NHl));
  const bool keep_gelu = o.recompute == Recompute::kNone;
  const bool keep_ln = o.recompute != Recompute::kGeluAndLayerNorm;
  AllocationTally t(ops.alloc_granularity());
  t.add(N * sizeof(int));  // ids
  t.add(N * sizeof(int));  // targets
  t.add(N * C * act);      // encoded
  if (!keep_gelu) t.add(N * Fl * act);  // shared GELU output, recomputed in backward
  if (!keep_ln) t.add(N * C * act);     // shared LayerNorm output, recomputed in backward
  for (int l = 0; l < c.num_layers; l++) {
    const bool dense_mlp = !o.moe.is_moe_block(l);
    if (keep_ln) t.add(N * C * act);  // ln1
    t.add(N * sizeof(float));         // ln1 mean
    t.add(N * sizeof(float));         // ln1 rstd
    t.add(N * 3 * Cl * act);          // qkv
    t.add(N * Cl * act);              // attention output
    t.add(saved * sizeof(float));     // attention's saved state (naive: B,NH,T,T; flash: B,NH,T)
    t.add(N * C * act);               // residual2
    if (keep_ln) t.add(N * C * act);  // ln2
    t.add(N * sizeof(float));         // ln2 mean
    t.add(N * sizeof(float));         // ln2 rstd
    if (dense_mlp) t.add(N * Fl * act);               // fc pre-activation
    if (dense_mlp && keep_gelu) t.add(N * Fl * act);  // GELU output
    t.add(N * C * act);                                // residual3
  }
  if (keep_ln) t.add(N * C * act);  // lnf
  t.add(N * sizeof(float));         // lnf mean
  t.add(N * sizeof(float));         // lnf rstd
  t.add(N * Vl * act);              // logits (dlogits in place)
  t.add(N * sizeof(float));         // losses
  t.add(N * sizeof(float));         // row max
  t.add(2 * N * sizeof(float));     // sum exp | target logit
  t.add(3 * N * sizeof(float));     // cross-entropy partials
  if (o.tp.tp_size > 1) t.add(3 * N * size_t(o.tp.tp_size) * sizeof(float));  // gathered partials
  t.add(N * C * act);               // projection output
  t.add(N * C * act);               // dresidual
  t.add(N * C * act);               // dln
  t.add(N * Cl * act);              // datty
  t.add(N * 3 * Cl * act);          // dqkv
  t.add(scratch * sizeof(float));   // attention's backward scratch
  t.add(N * Fl * act);              // dfch
  return t.total();
}

// One MoeMlp's grow-only scratch after a forward and a backward (moe_mlp.cpp's slots), for
// balanced routing without drops: every EP rank receives the N*K rows it sends, on average.
size_t moe_layer_scratch_bytes(const GPT2::Options& o, const Ops& ops) {
  const size_t N = size_t(o.batch) * size_t(o.seq_len), C = size_t(o.config.channels), H = 4 * C;
  const size_t E = size_t(o.moe.experts), K = size_t(o.moe.top_k);
  const size_t slots = N * K, rows = slots, received = rows;
  std::vector<size_t> floats = {
      N * E, N * E, slots, slots, slots,              // router logits, probs, expert, gate, row of slot
      rows, received, rows * C, received * C,         // token of row, grouped of received, sorted, recv
      received * C, received * H, received * H,       // x grouped, pre-GELU, GELU
      received * C, received * C, rows * C,           // y grouped, y received, y sorted
      rows * C, slots, received * C, received * C,    // backward: d rows, d gate, d recv, d grouped
      received * H, received * C, received * C,       // d hidden, dx grouped, dx received
      rows * C, N * C,                                // dx sorted, router's input gradient
  };
  if (o.moe.aux_loss_coef > 0.0f) {
    floats.push_back(E);  // per-expert probability sums
    floats.push_back(E);  // the aux loss's gradient per expert
  }
  AllocationTally t(ops.alloc_granularity());
  for (size_t f : floats) t.add(std::max<size_t>(f, 16) * sizeof(float));  // MoeMlp::buffer's minimum
  return t.total();
}

}  // namespace

std::string MemoryEstimate::describe(AttentionKind attention) const {
  std::string out = fmt::format("{:.2f} GiB: weights {:.2f} GiB, gradients {:.2f} GiB, AdamW {:.2f} GiB, "
                                "activations {:.2f} GiB (attention {})",
                                total() / kGiB, weights / kGiB, gradients / kGiB, optimizer_state / kGiB,
                                activations / kGiB, attention_kind_name(attention));
  if (moe_scratch > 0) out += fmt::format(", MoE scratch {:.2f} GiB", moe_scratch / kGiB);
  if (backend_workspace > 0) out += fmt::format(", backend workspace {:.2f} GiB", backend_workspace / kGiB);
  return out;
}

Result<MemoryEstimate> estimate_training_memory(const GPT2::Options& o, const Ops& ops) {
  const ModelConfig& c = o.config;
  RS_RETURN_IF_ERROR(c.validate(o.tp.tp_size));
  if (o.batch < 1 || o.seq_len < 1 || o.seq_len > c.max_seq_len)
    return rankscope::invalid_argument(fmt::format("batch {} / seq len {}: nothing to estimate", o.batch, o.seq_len));
  if (o.moe.enabled()) RS_RETURN_IF_ERROR(o.moe.validate(o.ep.ep_size));
  MemoryEstimate e;
  const size_t parameters = ParameterSet::count_numel(c, o.tp, o.moe, o.ep);
  AllocationTally params(ops.alloc_granularity());
  params.add(parameters * sizeof(float));
  e.weights = params.total();
  e.gradients = params.total();
  e.optimizer_state = 2 * params.total();  // AdamW m and v
  e.activations = activation_buffer_bytes(o, ops);
  if (o.moe.enabled()) {
    const size_t per_layer = moe_layer_scratch_bytes(o, ops);
    for (int l = 0; l < c.num_layers; l++)
      if (o.moe.is_moe_block(l)) e.moe_scratch += per_layer;
  }
  Ops::WorkspaceShape shape;
  shape.B = o.batch;
  shape.T = o.seq_len;
  shape.C = c.channels;
  shape.Cl = c.channels / o.tp.tp_size;
  shape.NHl = c.num_heads / o.tp.tp_size;
  shape.Vl = c.padded_vocab_size(o.tp.tp_size) / o.tp.tp_size;
  shape.attention = o.attention;
  shape.activations = o.activations;
  shape.parameters = parameters;
  e.backend_workspace = ops.workspace_bytes(shape);
  return e;
}

Status check_memory_fits(const MemoryEstimate& estimate, const GPT2::Options& o, const Ops& ops,
                         size_t free_bytes, size_t headroom_bytes, const std::string& device) {
  const size_t need = estimate.total() + headroom_bytes;
  if (need <= free_bytes) return Status::ok_status();
  std::vector<std::string> hints;
  // Naive attention's (B,NH,T,T) buffers grow with T^2: flash keeps (B,NH,T).
  if (o.attention == AttentionKind::kNaive) {
    GPT2::Options flash = o;
    flash.attention = AttentionKind::kFlash;
    if (auto f = estimate_training_memory(flash, ops); f.ok() && f->total() + headroom_bytes <= free_bytes)
      hints.push_back(fmt::format("--attention flash (needs {:.2f} GiB)", f->total() / kGiB));
  }
  // The largest batch that fits: activations are linear in B, the rest does not depend on it.
  for (int b = o.batch - 1; b >= 1; b = b > 8 ? b * 3 / 4 : b - 1) {
    GPT2::Options smaller = o;
    smaller.batch = b;
    auto s = estimate_training_memory(smaller, ops);
    if (s.ok() && s->total() + headroom_bytes <= free_bytes) {
      hints.push_back(fmt::format("--batch {} (needs {:.2f} GiB; keep the global batch with --grad-accum)", b,
                                  s->total() / kGiB));
      break;
    }
  }
  if (o.recompute != Recompute::kGeluAndLayerNorm) {
    GPT2::Options recompute = o;
    recompute.recompute = Recompute::kGeluAndLayerNorm;
    if (auto r = estimate_training_memory(recompute, ops); r.ok())
      hints.push_back(fmt::format("--recompute 2 (needs {:.2f} GiB)", r->total() / kGiB));
  }
  std::string hint_text;
  for (size_t i = 0; i < hints.size(); i++) hint_text += (i == 0 ? "" : ", or ") + hints[i];
  if (hint_text.empty()) hint_text = "a smaller --model, --tp > 1 to split the weights, or a device with more memory";
  return rankscope::out_of_memory(fmt::format("this run needs {:.2f} GiB on {} but {:.2f} GiB is free (with {:.2f} GiB kept for the "
                      "allocator and communication): needs {} (hint: {})",
                      need / kGiB, device, free_bytes / kGiB, headroom_bytes / kGiB, estimate.describe(o.attention),
                      hint_text));
}

}  // namespace gpt2
