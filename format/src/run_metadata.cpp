// run_metadata.cpp — run.json to and from RunMetadata.
#include "rankscope/format/run_metadata.h"

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "rankscope/format/run_directory_layout.h"

namespace rankscope::format {

const CommGroup* RunMetadata::group(std::string_view name) const {
  for (const auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

std::vector<const CommGroup*> RunMetadata::groups_of(int rank) const {
  std::vector<const CommGroup*> out;
  for (const auto& g : groups)
    for (int r : g.ranks)
      if (r == rank) {
        out.push_back(&g);
        break;
      }
  // Innermost first: a smaller group is nested inside a larger one.
  std::stable_sort(out.begin(), out.end(),
                   [](const CommGroup* a, const CommGroup* b) { return a->ranks.size() < b->ranks.size(); });
  return out;
}

nlohmann::json to_json(const RunMetadata& m) {
  nlohmann::json j = m.extra.is_object() ? m.extra : nlohmann::json::object();
  j["schema_version"] = m.schema_version;
  j["run_id"] = m.run_id;
  j["created_unix_ns"] = m.created_ns;
  j["program"] = m.program;
  j["command_line"] = m.command_line;
  j["world_size"] = m.world_size;
  j["tp"] = m.tp;
  j["dp"] = m.dp;
  auto groups = nlohmann::json::array();
  for (const auto& g : m.groups) groups.push_back({{"name", g.name}, {"ranks", g.ranks}});
  j["groups"] = groups;
  j["hosts"] = m.hosts;
  j["model"] = m.model;
  j["training"] = m.training;
  j["versions"] = m.versions;
  return j;
}

Result<RunMetadata> run_metadata_from_json(const nlohmann::json& j, std::string_view display_name) {
  const std::string name(display_name);
  if (!j.is_object()) return corrupt(name + ": run metadata is not a JSON object");
  RunMetadata m;
  try {
    m.schema_version = j.at("schema_version").get<uint32_t>();
    if (m.schema_version < kRunSchemaMinReadable || m.schema_version > kRunSchemaMaxReadable)
      return unsupported(fmt::format("{}: run metadata schema version {}; this rankscope reads versions {}..{}", name,
                                     m.schema_version, kRunSchemaMinReadable, kRunSchemaMaxReadable));
    m.world_size = j.at("world_size").get<int>();
    if (m.world_size <= 0 || m.world_size > (1 << 20))
      return corrupt(fmt::format("{}: implausible world_size {}", name, m.world_size));
    m.run_id = j.value("run_id", "");
    m.created_ns = j.value("created_unix_ns", int64_t(0));
    m.program = j.value("program", "");
    m.command_line = j.value("command_line", std::vector<std::string>{});
    m.tp = j.value("tp", 1);
    m.dp = j.value("dp", 1);
    for (const auto& g : j.value("groups", nlohmann::json::array())) {
      CommGroup cg{g.at("name").get<std::string>(), g.at("ranks").get<std::vector<int>>()};
      for (int r : cg.ranks)
        if (r < 0 || r >= m.world_size)
          return corrupt(fmt::format("{}: group {} names rank {} outside world size {}", name, cg.name, r, m.world_size));
      m.groups.push_back(std::move(cg));
    }
    m.hosts = j.value("hosts", std::vector<std::string>{});
    m.model = j.value("model", nlohmann::json::object());
    m.training = j.value("training", nlohmann::json::object());
    m.versions = j.value("versions", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    return corrupt(fmt::format("{}: {}", name, e.what()));
  }
  static const std::set<std::string> kKnown = {"schema_version", "run_id", "created_unix_ns", "program",
                                               "command_line",   "world_size", "tp", "dp", "groups",
                                               "hosts", "model", "training", "versions"};
  for (const auto& [k, v] : j.items())
    if (!kKnown.count(k)) m.extra[k] = v;
  return m;
}

Status write_run_metadata(const std::filesystem::path& run_dir, const RunMetadata& meta) {
  const auto final_path = run_dir / kRunMetadataFile;
  const auto tmp_path = run_dir / (std::string(kRunMetadataFile) + ".tmp");
  {
    std::ofstream out(tmp_path, std::ios::trunc);
    if (!out) return io_error(fmt::format("cannot write {}", tmp_path.string()));
    out << to_json(meta).dump(2) << "\n";
    if (!out) return io_error(fmt::format("write failed: {}", tmp_path.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_path, final_path, ec);
  if (ec) return io_error(fmt::format("cannot rename {} to {}: {}", tmp_path.string(), final_path.string(), ec.message()));
  return {};
}

Result<RunMetadata> read_run_metadata(const std::filesystem::path& run_dir) {
  const auto path = run_dir / kRunMetadataFile;
  std::ifstream in(path);
  if (!in) return not_found(fmt::format("{}: no such file", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(fmt::format("{}: not valid JSON", path.string()));
  return run_metadata_from_json(j, path.string());
}

}  // namespace rankscope::format
