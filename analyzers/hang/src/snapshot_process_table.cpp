// snapshot_process_table.cpp — answers "alive? frozen?" from the nodes' snapshot manifests.
#include "rankscope/analyzers/hang/snapshot_process_table.h"

#include <charconv>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/gathered_run.h"
#include "rankscope/format/snapshot_stream.h"

namespace rankscope::analyzers::hang {

Liveness liveness_from_name(std::string_view name) {
  if (name == "alive") return Liveness::kAlive;
  if (name == "gone") return Liveness::kGone;
  return Liveness::kUnknown;
}

OsRunState os_run_state_from_name(std::string_view name) {
  for (OsRunState s : {OsRunState::kRunnable, OsRunState::kStopped, OsRunState::kTraced, OsRunState::kUninterruptible,
                       OsRunState::kZombie})
    if (os_run_state_name(s) == name) return s;
  return OsRunState::kUnknown;
}

void SnapshotProcessTable::add_manifest(const nlohmann::json& j, const std::string& node) {
  if (!j.is_object() || !j.contains("processes") || !j["processes"].is_array()) {
    problems_.push_back(fmt::format("{}: {} is damaged", node, format::kSnapshotManifest));
    return;
  }
  if (j.contains("boot_id") && j["boot_id"].is_string()) boot_ids_.insert(j["boot_id"].get<std::string>());
  for (const auto& p : j["processes"]) {
    if (!p.is_object()) continue;
    const auto host = p.value("host", std::string());
    const int pid = p.value("pid", 0);
    if (pid <= 0) continue;
    ProcessStatus s;
    s.alive = liveness_from_name(p.value("alive", std::string()));
    s.state = os_run_state_from_name(p.value("state", std::string()));
    s.wchan = p.value("wchan", std::string());
    s.threads = p.value("threads", 0);
    states_[{host, pid}] = std::move(s);
  }
}

Result<SnapshotProcessTable> SnapshotProcessTable::load(const std::filesystem::path& gathered_dir) {
  const auto hosts = gathered_dir / format::kGatheredHostsDir;
  std::error_code ec;
  if (!std::filesystem::is_directory(hosts, ec))
    return not_found(fmt::format("{}: not a gathered run (no {}/ folder)", gathered_dir.string(), format::kGatheredHostsDir));
  SnapshotProcessTable table;
  // Every node's processes, as the gather wrote them out of the manifests (read as text: 131,072
  // ranks' worth of JSON manifests take seconds to parse) ...
  if (std::ifstream tsv(gathered_dir / format::kGatheredProcesses); tsv) {
    std::string line;
    std::vector<std::string_view> f;
    for (int n = 1; std::getline(tsv, line); ++n) {
      if (line.empty() || line[0] == '#') continue;
      f.clear();
      for (size_t at = 0;;) {
        const size_t tab = line.find('\t', at);
        f.emplace_back(std::string_view(line).substr(at, tab == std::string::npos ? std::string::npos : tab - at));
        if (tab == std::string::npos) break;
        at = tab + 1;
      }
      const auto dash = [](std::string_view v) { return v == "-" ? std::string() : std::string(v); };
      int pid = 0, threads = 0;
      if (f.size() != 8 || std::from_chars(f[3].data(), f[3].data() + f[3].size(), pid).ec != std::errc() || pid <= 0) {
        table.problems_.push_back(fmt::format("{} line {} is damaged", format::kGatheredProcesses, n));
        continue;
      }
      std::from_chars(f[7].data(), f[7].data() + f[7].size(), threads);
      if (f[1] != "-") table.boot_ids_.insert(std::string(f[1]));
      ProcessStatus s;
      s.alive = liveness_from_name(f[4]);
      s.state = os_run_state_from_name(f[5]);
      s.wchan = dash(f[6]);
      s.threads = threads;
      table.states_[{dash(f[2]), pid}] = std::move(s);
    }
    return table;
  }
  // ... else every node's manifest, merged into one file by the gather ...
  std::set<std::string> nodes;
  if (std::ifstream in(gathered_dir / format::kGatheredManifests); in) {
    const auto all = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!all.is_array()) table.problems_.push_back(fmt::format("{} is damaged", format::kGatheredManifests));
    for (const auto& j : all.is_array() ? all : nlohmann::json::array()) {
      if (!j.is_object() || !j.contains("node") || !j["node"].is_string() || !j.contains("snapshot")) {
        table.problems_.push_back(fmt::format("{}: an entry is damaged", format::kGatheredManifests));
        continue;
      }
      const std::string node = j["node"].get<std::string>();
      nodes.insert(node);
      table.add_manifest(j["snapshot"], node);
    }
  }
  // ... and any left in the nodes' folders (gathers written before that).
  for (const auto& node : std::filesystem::directory_iterator(hosts, ec)) {
    const std::string name = node.path().filename().string();
    if (nodes.count(name)) continue;
    const auto file = node.path() / format::kSnapshotManifest;
    std::ifstream in(file);
    if (!in) {
      table.problems_.push_back(fmt::format("{}: no {} (the node sent none)", name, format::kSnapshotManifest));
      continue;
    }
    const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    table.add_manifest(j.is_discarded() ? nlohmann::json() : j, name);
  }
  return table;
}

Liveness SnapshotProcessTable::liveness(const std::string& host, int pid) { return status(host, pid).alive; }

ProcessStatus SnapshotProcessTable::status(const std::string& host, int pid) {
  const auto it = states_.find({host, pid});
  return it == states_.end() ? ProcessStatus{} : it->second;
}

bool SnapshotProcessTable::speaks_for_boot(const std::string& /*host*/, const std::string& boot_id) {
  return boot_id.empty() || boot_ids_.count(boot_id) > 0;
}

}  // namespace rankscope::analyzers::hang
