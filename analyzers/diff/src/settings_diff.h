// settings_diff.h — what differs between two runs' run.json (model, training, layout, versions),
// and what a changed sequence length predicts for attention and the MLP (flop_model.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/analyzers/diff/run_diff.h"

namespace rankscope::analyzers {

// Every setting that differs, flattened to "training.seq_len" keys; problems for unreadable files.
std::vector<SettingChange> settings_changes(const std::filesystem::path& base, const std::filesystem::path& now,
                                            std::vector<std::string>& problems);

// Expected per-step factors where the sequence length changed (same batch): attention's FLOPs
// grow as T(8C + 2T), the MLP's as T. Empty where the lengths or the model shape are unknown.
struct SeqLenFactors {
  double t_base = 0, t_new = 0;
  double attention = 0, mlp = 0;
};
std::optional<SeqLenFactors> seq_len_factors(const std::filesystem::path& base, const std::filesystem::path& now);

// What a change of attention kind (model.attention, gpt2-train's naive|flash) or of activation
// recompute (model.recompute: 1 GELU, 2 also LayerNorm) does to a step, as a sentence, and the
// ranges whose change it predicts (block-wildcarded, "forward/block*/attn"). Empty where neither
// changed or run.json does not say.
struct SettingEffect {
  std::string text;
  std::vector<std::string> ranges;
};
std::optional<SettingEffect> attention_kind_effect(const std::filesystem::path& base, const std::filesystem::path& now);
std::optional<SettingEffect> recompute_effect(const std::filesystem::path& base, const std::filesystem::path& now);

// Where BASE and NEW were written by different producers (our probe, `rankscope import-kineto`,
// `rankscope import-nsys`: run.json's program), what that does to the comparison: each draws the
// line between a range's compute and the collective inside it elsewhere. Empty for one producer.
std::optional<std::string> producer_effect(const std::filesystem::path& base, const std::filesystem::path& now);

}  // namespace rankscope::analyzers
