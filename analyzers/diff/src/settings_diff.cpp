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

}  // namespace rankscope::analyzers
