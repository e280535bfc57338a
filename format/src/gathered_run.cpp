// gathered_run.cpp — gather.json, the record of a gather (docs/FORMAT.md "Gathered run directory").
#include "rankscope/format/gathered_run.h"

#include <fstream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/json_text.h"

namespace rankscope::format {

int GatherRecord::answered() const {
  int n = 0;
  for (const auto& node : nodes) n += node.answered ? 1 : 0;
  return n;
}

bool is_gathered_run(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / kGatherRecordFile, ec) &&
         std::filesystem::is_directory(dir / kGatheredHostsDir, ec);
}

Status write_gather_record(const std::filesystem::path& dir, const GatherRecord& r) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : r.nodes)
    nodes.push_back({{"host", n.host}, {"answered", n.answered}, {"reason", n.reason}, {"seconds", n.seconds},
                     {"stream_bytes", n.stream_bytes}, {"bytes", n.bytes}, {"files", n.files},
                     {"snapshot_host", n.snapshot_host}, {"ranks", n.ranks}, {"missing_ranks", n.missing_ranks}});
  const nlohmann::json j = {{"format", "rankscope-gather"}, {"version", r.version}, {"launcher", r.launcher},
                            {"job_id", r.job_id}, {"run_dir", r.run_dir}, {"seconds", r.seconds},
                            {"deadline_s", r.deadline_s}, {"stream_bytes", r.stream_bytes},
                            {"nodes_asked", r.nodes.size()}, {"nodes_answered", r.answered()},
                            {"world_size", r.world_size}, {"ranks_missing", r.ranks_missing},
                            {"nodes", nodes}, {"problems", r.problems}};
  const auto file = dir / kGatherRecordFile;
  std::ofstream out(file);
  out << json_text(j, 2) << "\n";
  if (!out) return io_error(fmt::format("cannot write {}", file.string()));
  return {};
}

Result<GatherRecord> read_gather_record(const std::filesystem::path& dir) {
  const auto file = dir / kGatherRecordFile;
  std::ifstream in(file, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: missing", file.string()));
  // Parsed from memory: a stream adapter reads byte by byte (16,384 nodes' record is megabytes).
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt(fmt::format("{}: not JSON", file.string()));
  if (j.value("format", "") != "rankscope-gather") return corrupt(fmt::format("{}: not a gather record", file.string()));
  GatherRecord r;
  r.version = j.value("version", 0);
  if (r.version < 1 || r.version > kGatherRecordVersion)
    return unsupported(fmt::format("{}: version {} (this reader knows 1..{})", file.string(), r.version, kGatherRecordVersion));
  // Types are checked field by field: a hand-edited record must not throw.
  auto get = [](const nlohmann::json& o, const char* key, auto fallback) {
    const auto it = o.find(key);
    if (it == o.end()) return fallback;
    try {
      return it->template get<decltype(fallback)>();
    } catch (const nlohmann::json::exception&) {
      return fallback;
    }
  };
  r.launcher = get(j, "launcher", std::string());
  r.job_id = get(j, "job_id", std::string());
  r.run_dir = get(j, "run_dir", std::string());
  r.seconds = get(j, "seconds", 0.0);
  r.deadline_s = get(j, "deadline_s", 0.0);
  r.stream_bytes = get(j, "stream_bytes", uint64_t(0));
  r.world_size = get(j, "world_size", 0);
  r.ranks_missing = get(j, "ranks_missing", std::vector<int>());
  r.problems = get(j, "problems", std::vector<std::string>());
  if (const auto it = j.find("nodes"); it != j.end() && it->is_array()) {
    for (const auto& o : *it) {
      if (!o.is_object()) continue;
      GatheredNode n;
      n.host = get(o, "host", std::string());
      n.answered = get(o, "answered", false);
      n.reason = get(o, "reason", std::string());
      n.seconds = get(o, "seconds", 0.0);
      n.stream_bytes = get(o, "stream_bytes", uint64_t(0));
      n.bytes = get(o, "bytes", uint64_t(0));
      n.files = get(o, "files", 0);
      n.snapshot_host = get(o, "snapshot_host", std::string());
      n.ranks = get(o, "ranks", std::vector<int>());
      n.missing_ranks = get(o, "missing_ranks", std::vector<int>());
      r.nodes.push_back(std::move(n));
    }
  }
  return r;
}

}  // namespace rankscope::format
