// snapshot_process_table.h — process states of a gathered run, as each node saw them.
//
// Is: a ProcessTable that answers from the per-node snapshot manifests of a gathered run directory
// (DIR/processes.tsv, else the manifests themselves; docs/FORMAT.md "Gathered run directory"): each
// node read /proc for its own ranks when it was asked, so "frozen" (every thread stopped or in D state) and "dead" (no such pid) are exact
// for ranks on other hosts, as they are for local ranks. Answers describe the moment of the gather,
// not now. Is not: a live probe (it never looks at this machine's /proc), nor the gathering.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers::hang {

class SnapshotProcessTable final : public ProcessTable {
 public:
  // Reads every node's processes: DIR/processes.tsv where the gather wrote one, else the manifests
  // (DIR/snapshots.json, and DIR/hosts/<host>/snapshot.json of a node not among them); a node whose
  // manifest is missing or damaged adds a problem and answers nothing (its ranks read as on another
  // host). Fails only when DIR/hosts is not a directory.
  static Result<SnapshotProcessTable> load(const std::filesystem::path& gathered_dir);
  // One node's manifest (snapshot.json), `node` naming it in problems.
  void add_manifest(const nlohmann::json& manifest, const std::string& node);

  Liveness liveness(const std::string& host, int pid) override;
  std::string local_host() override { return {}; }  // no rank of a gathered run runs here
  ProcessStatus status(const std::string& host, int pid) override;
  bool speaks_for_boot(const std::string& host, const std::string& boot_id) override;  // any host: the nodes' boots

  size_t processes() const { return states_.size(); }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::map<std::pair<std::string, int>, ProcessStatus> states_;  // (recorder's host, pid)
  std::set<std::string> boot_ids_;                                 // of the nodes that answered
  std::vector<std::string> problems_;
};

// The names snapshot.json uses for the states ("alive", "gone", "unknown"; os_run_state_name's).
Liveness liveness_from_name(std::string_view name);
OsRunState os_run_state_from_name(std::string_view name);

}  // namespace rankscope::analyzers::hang
