// run_metadata.h — run.json: the job-level facts written once by rank 0.
//
// Is: the struct and its JSON mapping (schema_version, world/TP/DP layout and groups, model and
// training configuration, command line, hosts, versions). Unknown JSON fields are kept in `extra`
// so a newer writer's additions survive an older reader. Is not: per-rank identity (that lives in
// each rank's flight recorder, so it is there even when rank 0 died first).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/format/status.h"

namespace rankscope::format {

inline constexpr uint32_t kRunSchemaVersion = 1;
inline constexpr uint32_t kRunSchemaMinReadable = 1;
inline constexpr uint32_t kRunSchemaMaxReadable = 1;

struct CommGroup {
  std::string name;        // "world", "tp0", "dp1"
  std::vector<int> ranks;  // world ranks, in communicator-rank order
};

// The largest world a run may declare (run.json's world_size, a recorder's ranks and world): past
// it a number is corrupt, never the size of a rank table to allocate.
inline constexpr int kMaxWorldSize = 1 << 20;

struct RunMetadata {
  uint32_t schema_version = kRunSchemaVersion;
  std::string run_id;
  int64_t created_ns = 0;
  std::string program;                   // "gpt2-train", "rankscope synth", ...
  std::vector<std::string> command_line;
  int world_size = 1;
  int tp = 1;
  int dp = 1;
  std::vector<CommGroup> groups;
  std::vector<std::string> hosts;        // by rank when known
  nlohmann::json model = nlohmann::json::object();     // e.g. {"layers":12,"heads":12,...}
  nlohmann::json training = nlohmann::json::object();  // e.g. {"seq_len":1024,"batch":4,...}
  nlohmann::json versions = nlohmann::json::object();  // {"rankscope":"0.1.0","mpi":...}
  nlohmann::json extra = nlohmann::json::object();     // fields this reader does not know

  const CommGroup* group(std::string_view name) const;
  // The innermost-first list of groups rank `r` belongs to (e.g. tp0, dp0, world).
  std::vector<const CommGroup*> groups_of(int rank) const;
};

nlohmann::json to_json(const RunMetadata& meta);
Result<RunMetadata> run_metadata_from_json(const nlohmann::json& j, std::string_view display_name);
// Writes RUN_DIR/run.json atomically (temporary file, then rename).
Status write_run_metadata(const std::filesystem::path& run_dir, const RunMetadata& meta);
Result<RunMetadata> read_run_metadata(const std::filesystem::path& run_dir);

}  // namespace rankscope::format
