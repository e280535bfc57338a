// config.cpp — presets and validation of ModelConfig; parsing of --vocab-shard and --recompute.
#include "model/config.h"

#include <cmath>

#include <fmt/format.h>

namespace gpt2 {

int ModelConfig::padded_vocab_size(int tp_size) const {
  const int multiple = 128 * (tp_size > 0 ? tp_size : 1);
  return (vocab_size + multiple - 1) / multiple * multiple;
}

Result<ModelConfig> ModelConfig::preset(std::string_view name) {
  ModelConfig c;
  if (name == "d12") {
    c.num_layers = 12, c.num_heads = 12, c.channels = 768;
  } else if (name == "d6") {
    c.num_layers = 6, c.num_heads = 6, c.channels = 384;
  } else if (name == "tiny") {
    c.num_layers = 2, c.num_heads = 4, c.channels = 128;
  } else {
    return rankscope::invalid_argument(
        fmt::format("unknown model preset '{}' (hint: use d12, d6 or tiny, and --layers/--heads/"
                    "--channels/--vocab-size to change one field)", name));
  }
  return c;
}

Status ModelConfig::validate(int tp_size) const {
  if (tp_size < 1) return rankscope::invalid_argument(fmt::format("tp size {} must be >= 1", tp_size));
  if (num_layers < 1 || num_heads < 1 || channels < 1 || vocab_size < 1 || max_seq_len < 1) {
    return rankscope::invalid_argument(fmt::format(
        "model config {} has a non-positive field (hint: layers, heads, channels, vocab size and "
        "max seq len must all be >= 1)", describe()));
  }
  if (channels % num_heads != 0) {
    return rankscope::invalid_argument(fmt::format(
        "channels {} is not a multiple of heads {} (hint: e.g. --channels {})", channels, num_heads,
        (channels / num_heads + 1) * num_heads));
  }
  if (num_heads % tp_size != 0) {
    return rankscope::invalid_argument(fmt::format(
        "heads {} cannot be split over --tp {} (hint: tensor parallelism splits whole heads; use a "
        "tp size that divides {})", num_heads, tp_size, num_heads));
  }
  if (static_cast<long>(padded_vocab_size(tp_size)) * channels > (1L << 31) - 1) {
    return rankscope::invalid_argument(fmt::format("vocab {} x channels {} is too large", vocab_size, channels));
  }
  return Status::ok_status();
}

std::string ModelConfig::describe() const {
  return fmt::format("L={} NH={} C={} V={} maxT={}", num_layers, num_heads, channels, vocab_size,
                     max_seq_len);
}

Status MoeConfig::validate(int ep_size) const {
  if (experts < 0)
    return rankscope::invalid_argument(fmt::format("--moe-experts {} must be >= 0 (0: dense MLP)", experts));
  if (experts == 0) return Status::ok_status();
  if (top_k != 1 && top_k != 2)
    return rankscope::invalid_argument(fmt::format("--moe-top-k {} must be 1 or 2", top_k));
  if (top_k > experts)
    return rankscope::invalid_argument(fmt::format(
        "--moe-top-k {} exceeds --moe-experts {} (hint: top-2 needs at least 2 experts)", top_k, experts));
  if (every < 1)
    return rankscope::invalid_argument(fmt::format("--moe-every {} must be >= 1 (1: every block)", every));
  if (!(capacity_factor >= 0.0f) || !std::isfinite(capacity_factor))
    return rankscope::invalid_argument(fmt::format(
        "--moe-capacity-factor {} must be a finite number >= 0 (0: dropless)", capacity_factor));
  if (!(aux_loss_coef >= 0.0f) || !std::isfinite(aux_loss_coef))
    return rankscope::invalid_argument(fmt::format(
        "--moe-aux-loss-coef {} must be a finite number >= 0 (typical: 0.01)", aux_loss_coef));
  if (ep_size < 1 || experts % ep_size != 0)
    return rankscope::invalid_argument(fmt::format(
        "--moe-experts {} cannot be sharded over --ep {} (hint: every EP rank holds the same number "
        "of experts; use an expert count that is a multiple of {})", experts, ep_size, ep_size));
  return Status::ok_status();
}

Result<ExpertLoop> parse_expert_loop(std::string_view text) {
  if (text == "grouped") return ExpertLoop::kGrouped;
  if (text == "token") return ExpertLoop::kToken;
  return rankscope::invalid_argument(fmt::format(
      "unknown --moe-expert-loop '{}' (hint: grouped runs one GEMM chain per expert, token one per "
      "row as in the incident)", text));
}

std::string_view expert_loop_name(ExpertLoop loop) {
  return loop == ExpertLoop::kToken ? "token" : "grouped";
}

Result<VocabShard> parse_vocab_shard(std::string_view text) {
  if (text == "contiguous") return VocabShard::kContiguous;
  if (text == "strided") return VocabShard::kStrided;
  return rankscope::invalid_argument(
      fmt::format("unknown --vocab-shard '{}' (hint: contiguous or strided)", text));
}

std::string_view vocab_shard_name(VocabShard shard) {
  return shard == VocabShard::kStrided ? "strided" : "contiguous";
}

Result<Recompute> parse_recompute(std::string_view text) {
  if (text == "0") return Recompute::kNone;
  if (text == "1") return Recompute::kGelu;
  if (text == "2") return Recompute::kGeluAndLayerNorm;
  return rankscope::invalid_argument(fmt::format(
      "unknown --recompute '{}' (hint: 0 keeps all activations, 1 recomputes GELU, 2 also LayerNorm)",
      text));
}

Result<AttentionKind> parse_attention_kind(std::string_view text) {
  if (text == "naive") return AttentionKind::kNaive;
  if (text == "flash") return AttentionKind::kFlash;
  return rankscope::invalid_argument(fmt::format(
      "unknown --attention '{}' (hint: naive keeps the (B,NH,T,T) probabilities, flash a logsumexp per row)",
      text));
}

}  // namespace gpt2
