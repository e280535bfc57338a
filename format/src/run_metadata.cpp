// run_metadata.cpp — run.json to and from RunMetadata.
#include "rankscope/format/run_metadata.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "rankscope/format/json_text.h"
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

namespace {

// `v` as a T when it is an integer T holds (a float with an integral value counts: 4.0); nullopt for
// anything else. nlohmann's get<int>() converts 1.8e27 or 2^40 without a check: undefined behaviour
// for a float, a silently wrong number for an integer.
template <class T>
std::optional<T> integer_of(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto x = v.get<uint64_t>();
    return std::in_range<T>(x) ? std::optional<T>(T(x)) : std::nullopt;
  }
  if (v.is_number_integer()) {
    const auto x = v.get<int64_t>();
    return std::in_range<T>(x) ? std::optional<T>(T(x)) : std::nullopt;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // T's range as doubles: -2^digits (signed) or 0, up to 2^digits exclusive; both exact.
    const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);
    const double lower = std::numeric_limits<T>::is_signed ? -upper : 0.0;
    if (std::isfinite(d) && d == std::floor(d) && d >= lower && d < upper) return T(d);
  }
  return std::nullopt;
}

// The integer field `key` of `j` into `out`; absent leaves `out` as it is unless `required`.
template <class T>
Status read_integer(const nlohmann::json& j, const char* key, bool required, T& out, const std::string& name) {
  const auto it = j.find(key);
  if (it == j.end())
    return required ? corrupt(fmt::format("{}: no {}", name, key)) : Status::ok_status();
  const std::optional<T> v = integer_of<T>(*it);
  if (!v)
    return corrupt(fmt::format("{}: {} is {} where an integer from {} to {} is expected", name, key,
                               json_text(*it),
                               std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  out = *v;
  return Status::ok_status();
}

}  // namespace

Result<RunMetadata> run_metadata_from_json(const nlohmann::json& j, std::string_view display_name) {
  const std::string name(display_name);
  if (!j.is_object()) return corrupt(name + ": run metadata is not a JSON object");
  RunMetadata m;
  try {
    RS_RETURN_IF_ERROR(read_integer(j, "schema_version", true, m.schema_version, name));
    if (m.schema_version < kRunSchemaMinReadable || m.schema_version > kRunSchemaMaxReadable)
      return unsupported(fmt::format("{}: run metadata schema version {}; this rankscope reads versions {}..{}", name,
                                     m.schema_version, kRunSchemaMinReadable, kRunSchemaMaxReadable));
    RS_RETURN_IF_ERROR(read_integer(j, "world_size", true, m.world_size, name));
    if (m.world_size <= 0 || m.world_size > kMaxWorldSize)
      return corrupt(fmt::format("{}: implausible world_size {}", name, m.world_size));
    m.run_id = j.value("run_id", "");
    RS_RETURN_IF_ERROR(read_integer(j, "created_unix_ns", false, m.created_ns, name));
    m.program = j.value("program", "");
    m.command_line = j.value("command_line", std::vector<std::string>{});
    RS_RETURN_IF_ERROR(read_integer(j, "tp", false, m.tp, name));
    RS_RETURN_IF_ERROR(read_integer(j, "dp", false, m.dp, name));
    for (const auto& g : j.value("groups", nlohmann::json::array())) {
      CommGroup cg{g.at("name").get<std::string>(), {}};
      const auto& ranks = g.at("ranks");
      if (!ranks.is_array()) return corrupt(fmt::format("{}: group {}: ranks is not a list", name, cg.name));
      for (const auto& v : ranks) {
        const std::optional<int> r = integer_of<int>(v);
        if (!r || *r < 0 || *r >= m.world_size)
          return corrupt(fmt::format("{}: group {} names rank {} outside world size {}", name, cg.name,
                                     json_text(v), m.world_size));
        cg.ranks.push_back(*r);
      }
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
    out << json_text(to_json(meta), 2) << "\n";
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
