// settings_diff.cpp — run.json side by side (settings_diff.h).
#include "settings_diff.h"

#include <map>
#include <optional>

#include <fmt/format.h>

#include "rankscope/analyzers/scaling/flop_model.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers {
namespace {

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else if (!j.is_null()) {
    out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
  }
}

std::map<std::string, std::string> settings_of(const format::RunMetadata& m) {
  std::map<std::string, std::string> out;
  out["program"] = m.program;
  out["world_size"] = std::to_string(m.world_size);
  out["tp"] = std::to_string(m.tp);
  out["dp"] = std::to_string(m.dp);
  flatten(m.model, "model", out);
  flatten(m.training, "training", out);
  flatten(m.versions, "versions", out);
  return out;
}

double number_at(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0;
}

}  // namespace

std::vector<SettingChange> settings_changes(const std::filesystem::path& base, const std::filesystem::path& now,
                                            std::vector<std::string>& problems) {
  auto a = format::read_run_metadata(base);
  auto b = format::read_run_metadata(now);
  if (!a.ok()) problems.push_back(fmt::format("base run.json: {}", a.status().message()));
  if (!b.ok()) problems.push_back(fmt::format("new run.json: {}", b.status().message()));
  if (!a.ok() || !b.ok()) return {};
  const auto sa = settings_of(*a), sb = settings_of(*b);
  std::vector<SettingChange> out;
  for (const auto& [k, v] : sa) {
    auto it = sb.find(k);
    if (it == sb.end()) out.push_back({k, v, ""});
    else if (it->second != v) out.push_back({k, v, it->second});
  }
  for (const auto& [k, v] : sb)
    if (!sa.count(k)) out.push_back({k, "", v});
  return out;
}

std::optional<SeqLenFactors> seq_len_factors(const std::filesystem::path& base, const std::filesystem::path& now) {
  auto a = format::read_run_metadata(base);
  auto b = format::read_run_metadata(now);
  if (!a.ok() || !b.ok()) return std::nullopt;
  SeqLenFactors f;
  f.t_base = number_at(a->training, "seq_len");
  f.t_new = number_at(b->training, "seq_len");
  const auto shape = gpt_shape_from_json(a->model);
  if (f.t_base <= 0 || f.t_new <= 0 || f.t_base == f.t_new || !shape || shape->channels <= 0) return std::nullopt;
  const double c = shape->channels;
  f.attention = (f.t_new * (8 * c + 2 * f.t_new)) / (f.t_base * (8 * c + 2 * f.t_base));
  f.mlp = f.t_new / f.t_base;
  return f;
}

std::optional<SettingEffect> attention_kind_effect(const std::filesystem::path& base, const std::filesystem::path& now) {
  auto a = format::read_run_metadata(base);
  auto b = format::read_run_metadata(now);
  if (!a.ok() || !b.ok()) return std::nullopt;
  const std::string ka = a->model.value("attention", ""), kb = b->model.value("attention", "");
  if (ka.empty() || kb.empty() || ka == kb) return std::nullopt;
  // The (B, NH, T, T) matrices naive attention writes and reads (scores and probabilities forward,
  // their gradients backward), per layer, at NEW's shape; flash tiles them in fast memory.
  const double batch = number_at(b->training, "batch"), t = number_at(b->training, "seq_len"), heads = number_at(b->model, "heads");
  const double bytes = b->model.value("activations", "fp32") == "bf16" ? 2 : 4;
  std::string size;
  if (batch > 0 && t > 0 && heads > 0)
    size = fmt::format(" (B {:g} x NH {:g} x T {:g} x T: {:.1f} MiB a layer at {})", batch, heads, t,
                       batch * heads * t * t * bytes / (1 << 20), bytes == 2 ? "bf16" : "fp32");
  SettingEffect e;
  e.text = fmt::format("attention went from {} to {}: the same matmul FLOPs, but naive writes and reads the whole score "
                       "matrix{} forward and its gradient backward, where flash keeps tiles of it in fast memory and "
                       "recomputes them in backward: the change shows in attention's ranges, the rest of the block stays",
                       ka, kb, size);
  e.ranges = {"forward/block*/attn", "backward/block*/attn"};
  return e;
}

std::optional<SettingEffect> recompute_effect(const std::filesystem::path& base, const std::filesystem::path& now) {
  auto a = format::read_run_metadata(base);
  auto b = format::read_run_metadata(now);
  if (!a.ok() || !b.ok()) return std::nullopt;
  auto level = [](const format::RunMetadata& m) {
    auto it = m.model.find("recompute");
    return it != m.model.end() && it->is_number_integer() ? it->get<int>() : -1;
  };
  const int la = level(*a), lb = level(*b);
  if (la < 0 || lb < 0 || la == lb) return std::nullopt;
  auto what = [](int l) { return l == 0 ? "nothing" : l == 1 ? "each block's GELU" : "each block's GELU and LayerNorms"; };
  SettingEffect e;
  e.text = fmt::format("activation recompute went from {} to {}: backward re-runs the forward of {} instead of {} ({} "
                       "activations kept), so backward's MLP{} should {} by about that forward work and forward stay as it was",
                       la, lb, what(lb), what(la), lb > la ? "fewer" : "more", std::max(la, lb) >= 2 ? " and LayerNorms" : "",
                       lb > la ? "grow" : "shrink");
  e.ranges = {"backward/block*/mlp", "forward/block*/mlp"};
  return e;
}

}  // namespace rankscope::analyzers

namespace rankscope::analyzers {
namespace {

// Who wrote a run: the importers name themselves in run.json's program; anything else ran our probe.
std::string producer_of(const format::RunMetadata& m) {
  if (m.program == "rankscope import-kineto") return "Kineto";
  if (m.program == "rankscope import-nsys") return "nsys";
  return "probe";
}

// How each producer times a host collective, for the sentence below.
const char* collective_timing(const std::string& producer) {
  if (producer == "Kineto") return "Kineto from the backend's own annotation (gloo:/nccl: ...) or its kernel";
  if (producer == "nsys") return "nsys from the NCCL kernel or the NVTX range around the call";
  return "the probe from the call to its return, as the program reported it";
}

}  // namespace

std::optional<std::string> producer_effect(const std::filesystem::path& base, const std::filesystem::path& now) {
  auto a = format::read_run_metadata(base);
  auto b = format::read_run_metadata(now);
  if (!a.ok() || !b.ok()) return std::nullopt;
  const std::string pa = producer_of(*a), pb = producer_of(*b);
  if (pa == pb) return std::nullopt;
  return fmt::format("BASE was written by {} and NEW by {}: a collective is timed by {}, and by {}; time between the "
                     "call and that mark counts as compute in the range around it. Compare a range's compute with the "
                     "collective parts together (they add up the same); the step times are comparable as they are",
                     pa == "probe" ? "the probe" : "a " + pa + " import", pb == "probe" ? "the probe" : "a " + pb + " import",
                     collective_timing(pa), collective_timing(pb));
}

}  // namespace rankscope::analyzers
