// config_findings.cpp — harmful settings and settings that differ across ranks (see the header).
#include "rankscope/analyzers/startup/config_findings.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rankscope/format/json_text.h"

namespace rankscope::analyzers {
namespace {

std::string ranks_text(const std::vector<int>& ranks, int world_size) {
  if (ranks.empty() || int(ranks.size()) == world_size) return "every rank";
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += fmt::format("{}{}", i ? "," : "", ranks[i]);
  return out;
}

std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "unset";
  return format::json_text(v);
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  return s;
}

// One setting's value on every rank: common, else per rank (missing = unset).
struct SettingValues {
  std::map<int, std::string> by_rank;  // only where set
  bool differs = false;
};

std::map<std::string, SettingValues> collect(const nlohmann::json& config, int world_size) {
  std::map<std::string, SettingValues> out;
  if (config.contains("settings") && config["settings"].is_object())
    for (const auto& [k, v] : config["settings"].items())
      for (int r = 0; r < world_size; ++r) out[k].by_rank[r] = value_text(v);
  if (config.contains("settings_by_rank") && config["settings_by_rank"].is_object())
    for (const auto& [rank, kv] : config["settings_by_rank"].items()) {
      if (!kv.is_object()) continue;
      int r = -1;
      try {
        r = std::stoi(rank);
      } catch (...) {
        continue;
      }
      for (const auto& [k, v] : kv.items()) {
        out[k].differs = true;
        if (!v.is_null()) out[k].by_rank[r] = value_text(v);
      }
    }
  return out;
}

}  // namespace

std::vector<ConfigFinding> config_findings(const nlohmann::json& config, int world_size, int ranks_per_host) {
  std::vector<ConfigFinding> out;
  if (!config.is_object() || world_size <= 0) return out;
  const auto settings = collect(config, world_size);
  auto where = [&](const std::string& key, auto&& pred) {
    std::vector<int> ranks;
    auto it = settings.find(key);
    if (it == settings.end()) return ranks;
    for (const auto& [r, v] : it->second.by_rank)
      if (pred(v)) ranks.push_back(r);
    return ranks;
  };
  auto add = [&](std::string setting, std::string value, std::vector<int> ranks, std::string effect) {
    ConfigFinding f{setting, value, ranks, effect, ""};
    f.text = fmt::format("{}={} on {}: {}", setting, value, ranks_text(ranks, world_size), effect);
    out.push_back(std::move(f));
  };

  if (auto r = where("CUDA_LAUNCH_BLOCKING", [](const std::string& v) { return v == "1"; }); !r.empty())
    add("CUDA_LAUNCH_BLOCKING", "1", r,
        "every kernel launch waits until the GPU has finished it, so the host and the device never overlap "
        "(a debugging setting; it serialises the whole step)");

  // Busy-waiting OpenMP threads only hurt when they compete for cores with other ranks' threads.
  int threads = 0, cores = 0;
  if (auto it = settings.find("threads.openmp"); it != settings.end() && !it->second.by_rank.empty())
    threads = std::atoi(it->second.by_rank.begin()->second.c_str());
  if (auto it = settings.find("threads.cores_online"); it != settings.end() && !it->second.by_rank.empty())
    cores = std::atoi(it->second.by_rank.begin()->second.c_str());
  const bool oversubscribed = cores > 0 && threads > 0 && ranks_per_host > 0 && threads * ranks_per_host > cores;
  if (auto r = where("OMP_WAIT_POLICY", [](const std::string& v) { return upper(v) == "ACTIVE"; }); !r.empty())
    add("OMP_WAIT_POLICY", "ACTIVE", r,
        oversubscribed ? fmt::format("OpenMP threads busy-wait between parallel regions while {} ranks x {} threads "
                                     "share {} cores, so they steal cycles from the ranks that have work",
                                     ranks_per_host, threads, cores)
                       : "OpenMP threads busy-wait between parallel regions; harmless only while every thread has "
                         "a core of its own");

  for (const char* key : {"NCCL_DEBUG"})
    if (auto r = where(key, [](const std::string& v) { return upper(v) == "INFO" || upper(v) == "TRACE"; }); !r.empty())
      add(key, settings.at(key).by_rank.at(r.front()), r,
          "NCCL debug logging is on: every collective and connection writes log lines (a debugging setting left on)");
  for (const char* key : {"NCCL_DEBUG_SUBSYS", "TORCH_NCCL_DESYNC_DEBUG", "TORCH_DISTRIBUTED_DEBUG", "RANKSCOPE_DEBUG"})
    if (auto r = where(key, [](const std::string& v) { return !v.empty() && v != "0" && upper(v) != "OFF" && upper(v) != "WARN"; });
        !r.empty())
      add(key, settings.at(key).by_rank.at(r.front()), r, "a debug level is left on; it slows the job and floods its logs");

  // Settings that differ across ranks: ranks that should behave alike do not.
  for (const auto& [key, values] : settings) {
    if (!values.differs || key.rfind("threads.", 0) == 0 || key == "CUDA_VISIBLE_DEVICES") continue;
    std::map<std::string, std::vector<int>> by_value;
    for (int r = 0; r < world_size; ++r) {
      auto it = values.by_rank.find(r);
      by_value[it == values.by_rank.end() ? "unset" : it->second].push_back(r);
    }
    if (by_value.size() < 2) continue;
    std::string parts;
    for (const auto& [v, ranks] : by_value) parts += fmt::format("{}{} on {}", parts.empty() ? "" : ", ", v, ranks_text(ranks, world_size));
    ConfigFinding f{key, "differs", {}, "ranks that should behave alike are configured differently", ""};
    f.text = fmt::format("{} differs across ranks ({}): ranks that should behave alike are configured differently",
                         key, parts);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace rankscope::analyzers
