// node_snapshot.cpp — builds a node's snapshot: which files, which process states, in which order.
//
// The manifest comes first so a reader learns the node and its processes before any recorder; it
// can be written first because every recorder's header (its identity: host, pid, rank) is read
// before the stream starts. Recorders are copied once with pread: the reader downstream checks each
// seqlocked section, so a copy taken mid-update is marked torn there, not here.
#include "rankscope/gather/node_snapshot.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "process_liveness.h"
#include "rankscope/format/flight_identity.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/json_text.h"
#include "rankscope/format/nccl_plugin_run.h"
#include "rankscope/format/rank_summary.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/snapshot_stream.h"

namespace rankscope::gather {
namespace {

namespace fs = std::filesystem;

struct FileToShip {
  std::string name;  // relative to the run directory, as in the stream
  fs::path path;
  std::optional<int> rank;  // probe recorders
};

Result<std::vector<uint8_t>> read_whole(const fs::path& p, uint64_t limit) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open", p.string()));
  std::vector<uint8_t> bytes;
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return io_error(fmt::format("{}: {}", p.string(), ec.message()));
  if (size > limit) return invalid_argument(fmt::format("{}: {} bytes, over {}", p.string(), size, limit));
  bytes.resize(size_t(size));
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  bytes.resize(size_t(in.gcount()));
  return bytes;
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_plugin_file(const fs::path& p) {
  const auto n = p.filename().string();
  return n.ends_with(".flight") || n.ends_with(".process.json");
}

// The NCCL plugin names its files <host>.<pid>.…: the host is everything before the pid.
bool plugin_file_of_host(const std::string& name, const std::string& host) {
  return name.size() > host.size() + 1 && name.compare(0, host.size(), host) == 0 && name[host.size()] == '.' &&
         std::isdigit(static_cast<unsigned char>(name[host.size() + 1]));
}

// Evidence files, newest first, as many as the options allow.
std::vector<FileToShip> recent_evidence(const fs::path& run_dir, const NodeSnapshotOptions& o,
                                        std::vector<std::string>& skipped) {
  std::vector<std::pair<fs::file_time_type, FileToShip>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir / format::kEvidenceDir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const auto name = std::string(format::kEvidenceDir) + "/" + e.path().filename().string();
    if (!format::check_snapshot_entry_name(name).ok()) continue;
    if (e.file_size(ec) > o.max_evidence_file_bytes) {
      skipped.push_back(fmt::format("{}: larger than {} bytes", name, o.max_evidence_file_bytes));
      continue;
    }
    found.push_back({e.last_write_time(ec), {name, e.path(), std::nullopt}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<FileToShip> out;
  for (auto& f : found) {
    if (int(out.size()) >= o.max_evidence_files) {
      skipped.push_back(
          fmt::format("{}: older than the {} newest evidence files", f.second.name, o.max_evidence_files));
      continue;
    }
    out.push_back(std::move(f.second));
  }
  return out;
}

// One node's snapshot, phase by phase in the order write_node_snapshot runs them: which files, who
// wrote each recorder, the processes' states (and stacks), the rank summaries, the stream.
struct NodeSnapshot {
  NodeSnapshot(const fs::path& dir, const NodeSnapshotOptions& options) : run_dir(dir), o(options) {}
  const fs::path& run_dir;
  const NodeSnapshotOptions& o;
  const std::string host = analyzers::this_host_name();
  NodeSnapshotSummary summary;
  struct Process {
    std::string host;
    int pid = 0;
    std::vector<int> ranks;
  };
  std::map<std::pair<std::string, int>, Process> procs;
  std::vector<FileToShip> shipped;
  nlohmann::json proc_json = nlohmann::json::array();
  std::vector<std::pair<std::string, std::string>> stack_files;  // (entry name, text)
  format::RankSummaryWriter summaries;
  std::vector<int> summarized;

  std::vector<FileToShip> list_files();
  void identify_recorders(std::vector<FileToShip> files);
  void read_process_states(analyzers::hang::ProcessTable& processes, analyzers::hang::StackCollector& stacks);
  void summarize_recorders();
  Status write_stream(std::FILE* out);
};

// run.json, this node's recorders and the NCCL plugin's files of this host, by name.
std::vector<FileToShip> NodeSnapshot::list_files() {
  std::error_code ec;
  std::vector<FileToShip> files;
  if (fs::is_regular_file(run_dir / format::kRunMetadataFile, ec))
    files.push_back({std::string(format::kRunMetadataFile), run_dir / format::kRunMetadataFile, std::nullopt});
  for (const auto& e : fs::directory_iterator(run_dir, ec))
    if (auto r = format::rank_of_file(e.path(), ".flight"); r && e.is_regular_file(ec))
      files.push_back({e.path().filename().string(), e.path(), r});
  for (const auto& e : fs::directory_iterator(run_dir / format::kNcclPluginDir, ec)) {
    const auto name = std::string(format::kNcclPluginDir) + "/" + e.path().filename().string();
    if (!e.is_regular_file(ec) || !is_plugin_file(e.path())) continue;
    if (!o.all_hosts && !plugin_file_of_host(e.path().filename().string(), host)) {
      summary.skipped.push_back(fmt::format("{}: written on another host", name));
      continue;
    }
    files.push_back({name, e.path(), std::nullopt});
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return files;
}

// The files to ship, and the process behind each recorder of this host: its header alone says who
// wrote it (one 4 KiB read); the whole file is read once, to ship it.
void NodeSnapshot::identify_recorders(std::vector<FileToShip> files) {
  for (auto& f : files) {
    if (!f.name.ends_with(".flight")) {
      shipped.push_back(std::move(f));
      continue;
    }
    if (!format::check_snapshot_entry_name(f.name).ok()) {
      summary.skipped.push_back(fmt::format("{}: a name the stream cannot carry", f.name));
      continue;
    }
    auto id = format::read_flight_identity(f.path);
    if (id.ok()) {
      if (!o.all_hosts && id->host != host) {
        summary.skipped.push_back(fmt::format("{}: written on host {}", f.name, id->host));
        continue;
      }
      auto& p = procs[{id->host, id->pid}];
      p.host = id->host;
      p.pid = id->pid;
      if (id->rank >= 0 && std::find(p.ranks.begin(), p.ranks.end(), id->rank) == p.ranks.end())
        p.ranks.push_back(id->rank);
    }
    // An unreadable recorder still travels: the reader downstream says what is wrong with it.
    ++summary.recorders;
    shipped.push_back(std::move(f));
  }
  for (auto& f : recent_evidence(run_dir, o, summary.skipped)) shipped.push_back(std::move(f));
}

// Each process's state, and with --stacks the stacks of the live ones (as many as allowed).
void NodeSnapshot::read_process_states(analyzers::hang::ProcessTable& processes,
                                       analyzers::hang::StackCollector& stacks) {
  for (const auto& [key, p] : procs) {
    const analyzers::hang::ProcessStatus s = processes.status(p.host, p.pid);
    proc_json.push_back({{"host", p.host},
                         {"pid", p.pid},
                         {"ranks", p.ranks},
                         {"alive", analyzers::liveness_name(s.alive)},
                         {"state", analyzers::hang::os_run_state_name(s.state)},
                         {"wchan", s.wchan},
                         {"threads", s.threads}});
    if (!o.stacks || s.alive != analyzers::Liveness::kAlive || summary.stacks >= o.max_stacks) continue;
    auto text = stacks.collect(p.pid);
    const int rank = p.ranks.empty() ? -1 : p.ranks.front();
    const auto name =
        fmt::format("{}/{}-snapshot-{}.stacks.txt", format::kEvidenceDir,
                    rank >= 0 ? fmt::format("rank{:05d}", rank) : fmt::format("pid{}", p.pid), unix_ms_now());
    if (text.ok()) {
      stack_files.push_back(
          {name, fmt::format("# rankscope snapshot --stacks: rank {} pid {} on {}\n", rank, p.pid, p.host) + *text});
      ++summary.stacks;
    } else {
      summary.skipped.push_back(fmt::format("stacks of pid {}: {}", p.pid, text.status().message()));
    }
  }
  summary.processes = int(procs.size());
}

// What the verdict needs of each rank, read after the process states as the whole files would be; a
// recorder the reader refuses, or one holding evidence a summary does not carry, travels whole.
void NodeSnapshot::summarize_recorders() {
  if (!o.full) {
    std::vector<FileToShip> whole;
    for (auto& f : shipped) {
      if (f.rank) {
        auto snap = format::read_flight_recorder(f.path);
        const std::string why = snap.ok() ? format::why_not_summarized(*snap) : snap.status().message();
        if (snap.ok() && why.empty()) {
          summaries.add(*snap);
          summarized.push_back(snap->rank);
          continue;
        }
        summary.skipped.push_back(fmt::format("{}: sent whole, not summarized: {}", f.name, why));
      }
      whole.push_back(std::move(f));
    }
    shipped = std::move(whole);
  }
  summary.summarized = int(summarized.size());
}

// The manifest, the summaries, the files and the stacks, as one stream.
Status NodeSnapshot::write_stream(std::FILE* out) {
  nlohmann::json names = nlohmann::json::array();
  if (!summarized.empty()) names.push_back(format::kRankSummaryEntry);
  for (const auto& f : shipped) names.push_back(f.name);
  for (const auto& s : stack_files) names.push_back(s.first);
  const nlohmann::json manifest = {{"format", "rankscope-snapshot"},
                                   {"version", format::kSnapshotVersion},
                                   {"host", host},
                                   {"boot_id", analyzers::this_boot_id()},
                                   {"taken_unix_ms", unix_ms_now()},
                                   {"run_dir", run_dir.string()},
                                   {"rankscope_version", RANKSCOPE_VERSION},
                                   {"processes", proc_json},
                                   {"files", names},
                                   {"summarized", summarized},
                                   {"skipped", summary.skipped}};

  format::SnapshotWriter writer(out);
  RS_RETURN_IF_ERROR(writer.add(format::kSnapshotManifest, format::json_text(manifest, 1)));
  if (!summarized.empty()) RS_RETURN_IF_ERROR(writer.add(format::kRankSummaryEntry, summaries.finish()));
  // Files are read after the states, one at a time (memory stays at one recorder): a recorder
  // copied after its process's state is at least as new as that state. One that vanished since it
  // was listed is left out (the manifest lists what was meant to come; the entries are what came).
  for (const auto& f : shipped) {
    auto bytes = read_whole(f.path, format::SnapshotLimits{}.max_entry_bytes);
    if (!bytes.ok()) continue;
    RS_RETURN_IF_ERROR(writer.add(f.name, *bytes));
  }
  for (const auto& [name, text] : stack_files) RS_RETURN_IF_ERROR(writer.add(name, text));
  RS_RETURN_IF_ERROR(writer.finish());
  summary.bytes_in = writer.bytes_in();
  summary.bytes_out = writer.bytes_out();
  return Status::ok_status();
}

}  // namespace

Result<NodeSnapshotSummary> write_node_snapshot(const fs::path& run_dir, std::FILE* out,
                                                analyzers::hang::ProcessTable& processes,
                                                analyzers::hang::StackCollector& stacks, const NodeSnapshotOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec))
    return not_found(fmt::format("{}: no such directory on {}", run_dir.string(), analyzers::this_host_name()));
  NodeSnapshot node(run_dir, o);
  node.identify_recorders(node.list_files());
  node.read_process_states(processes, stacks);
  node.summarize_recorders();
  if (Status s = node.write_stream(out); !s.ok()) return s;
  return node.summary;
}

}  // namespace rankscope::gather
