// sweep.cpp — see sweep.h.
#include "rankscope/analyzers/scaling/sweep.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/json_text.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;

Result<Sweep> read_index(const fs::path& dir) {
  const fs::path file = dir / kSweepFile;
  std::ifstream in(file);
  if (!in) return io_error(fmt::format("{}: cannot open", file.string()));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(fmt::format("{}: not a JSON object", file.string()));
  const int version = j.value("schema_version", 0);
  if (version < 1 || version > kSweepSchemaVersion) {
    return unsupported(fmt::format("{}: schema_version {} is not readable (this reader knows 1..{})", file.string(),
                                   version, kSweepSchemaVersion));
  }
  if (!j.contains("points") || !j["points"].is_array()) {
    return corrupt(fmt::format("{}: no \"points\" array", file.string()));
  }
  Sweep sweep{dir, true, {}};
  for (const auto& p : j["points"]) {
    if (!p.is_object() || !p.contains("seq_len") || !p["seq_len"].is_number_integer() || !p.contains("run_dir") ||
        !p["run_dir"].is_string()) {
      return corrupt(fmt::format("{}: a point needs an integer \"seq_len\" and a string \"run_dir\": {}", file.string(),
                                 format::json_text(p)));
    }
    fs::path run = p["run_dir"].get<std::string>();
    sweep.points.push_back({p["seq_len"].get<int64_t>(), run.is_absolute() ? run : dir / run});
  }
  return sweep;
}

Result<Sweep> discover(const fs::path& dir) {
  Sweep sweep{dir, false, {}};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory()) continue;
    auto meta = format::read_run_metadata(entry.path());
    if (!meta.ok()) continue;
    const auto& t = meta->training;
    if (!t.is_object() || !t.contains("seq_len") || !t["seq_len"].is_number_integer()) continue;
    sweep.points.push_back({t["seq_len"].get<int64_t>(), entry.path()});
  }
  if (ec) return io_error(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  return sweep;
}

}  // namespace

std::string sweep_point_dir_name(int64_t seq_len) { return fmt::format("seq_len_{:05d}", seq_len); }

Result<Sweep> read_sweep(const fs::path& dir) {
  if (!fs::is_directory(dir)) {
    return not_found(fmt::format("{}: not a directory; hint: pass the sweep directory that "
                                 "gpt2-train --sweep-seq-len wrote", dir.string()));
  }
  Result<Sweep> sweep = fs::exists(dir / kSweepFile) ? read_index(dir) : discover(dir);
  if (!sweep.ok()) return sweep;
  auto& points = sweep->points;
  std::sort(points.begin(), points.end(), [](const SweepPoint& a, const SweepPoint& b) { return a.seq_len < b.seq_len; });
  std::set<int64_t> seen;
  for (const auto& p : points) {
    if (p.seq_len <= 0) return corrupt(fmt::format("{}: seq_len {} is not positive", dir.string(), p.seq_len));
    if (!seen.insert(p.seq_len).second) {
      return corrupt(fmt::format("{}: seq_len {} appears twice; one run per point", dir.string(), p.seq_len));
    }
  }
  if (points.empty()) {
    return not_found(fmt::format("{}: no sweep points (no sweep.json and no subdirectory with a run.json "
                                 "naming training.seq_len)", dir.string()));
  }
  return sweep;
}

Status write_sweep_index(const fs::path& dir, const std::vector<SweepPoint>& points) {
  nlohmann::json j = {{"schema_version", kSweepSchemaVersion}, {"kind", "rankscope.seq_len_sweep"},
                      {"parameter", "seq_len"}, {"points", nlohmann::json::array()}};
  for (const auto& p : points) {
    const fs::path rel = p.run_dir.is_absolute() ? p.run_dir.lexically_relative(dir) : p.run_dir;
    j["points"].push_back({{"seq_len", p.seq_len}, {"run_dir", rel.empty() ? p.run_dir.string() : rel.string()}});
  }
  const fs::path tmp = dir / (std::string(kSweepFile) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return io_error(fmt::format("{}: cannot write", tmp.string()));
    out << format::json_text(j, 2) << "\n";
    if (!out) return io_error(fmt::format("{}: write failed", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, dir / kSweepFile, ec);
  if (ec) return io_error(fmt::format("{}: cannot rename into place: {}", tmp.string(), ec.message()));
  return {};
}

}  // namespace rankscope::analyzers
