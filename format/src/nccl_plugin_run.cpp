// nccl_plugin_run.cpp — folds the NCCL plugin's per-(process, communicator) recorders into ranks.
#include "rankscope/format/nccl_plugin_run.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nccl_plugin_events.h"

namespace rankscope::format {
namespace {

struct ProcessFiles {
  std::string host;
  int pid = 0;
  std::vector<FlightRecorderSnapshot> comms;   // plugin recorders, one communicator each
  std::optional<FlightRecorderSnapshot> nvtx;  // the process's NVTX ranges
  nlohmann::json process_json;                 // process.json, null when missing
  int launcher_rank = -1;
  int launcher_world = 0;
  int rank = -1;                               // assigned global rank
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string process_key(const std::string& host, int pid) { return fmt::format("{}.{}", host, pid); }

// process.json's `key` when it is a string, else empty: the file may be anything.
std::string json_string(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// process.json's `key` when it is an integer an int holds, else nullopt (a float, a string, 1e300).
std::optional<int> json_int(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    return v <= uint64_t(std::numeric_limits<int>::max()) ? std::optional<int>(int(v)) : std::nullopt;
  }
  if (it->is_number_integer()) {
    const auto v = it->get<int64_t>();
    return v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max() ? std::optional<int>(int(v))
                                                                                          : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool has_nccl_plugin_files(const std::filesystem::path& run_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run_dir / kNcclPluginDir, ec))
    if (ends_with(e.path().filename().string(), ".flight")) return true;
  return false;
}

std::string nccl_comm_display_name(uint64_t hash, std::string_view comm_name, bool name_shared) {
  if (comm_name.empty()) return fmt::format("nccl-{:016x}", hash);
  if (!name_shared) return std::string(comm_name);
  return fmt::format("{}@{:08x}", comm_name, uint32_t(hash >> 32));
}

namespace {

// One plugin run directory read: the phases open_nccl_plugin_run runs in order, each reading what
// the ones before it left in these members.
struct PluginRun {
  std::filesystem::path sub;
  RunDirectory run;
  std::map<std::string, ProcessFiles> processes;  // by "<host>.<pid>"
  std::vector<ProcessFiles*> procs;               // those with a communicator, in key order
  std::map<uint64_t, std::string> name_of_hash;
  std::map<uint64_t, bool> live_hash;
  std::map<std::string, std::pair<int, int>> uses;  // name -> (communicators, live communicators)
  int world = 0;
  RunMetadata meta;
  std::map<uint64_t, std::map<int, int>> membership;  // hash -> comm rank -> global rank
  std::map<uint64_t, int> comm_size;

  Status read_files();
  void read_recorder(const std::filesystem::path& path);
  void read_process_jsons(const std::vector<std::filesystem::path>& jsons);
  void name_communicators();
  std::string display(uint64_t hash);
  void assign_ranks();
  void merge_process(ProcessFiles* p);
  void finish();
};

// Every recorder and process.json in the plugin's folder, in name order.
Status PluginRun::read_files() {
  std::vector<std::filesystem::path> jsons;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(sub, ec)) files.push_back(e.path());
  if (ec) return io_error(fmt::format("{}: cannot list: {}", sub.string(), ec.message()));
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    if (ends_with(path.filename().string(), ".process.json"))
      jsons.push_back(path);
    else
      read_recorder(path);
  }
  read_process_jsons(jsons);
  // Only processes with a communicator take part; an NVTX-only process has no rank to diagnose.
  for (auto& [key, p] : processes)
    if (!p.comms.empty()) procs.push_back(&p);
  if (procs.empty())
    return invalid_argument(
        fmt::format("{}: no readable NCCL profiler plugin recorder (hint: was the job run with "
                    "NCCL_PROFILER_PLUGIN=librankscope-nccl.so and RANKSCOPE_RUN_DIR?)",
                    sub.string()));
  return {};
}

// One .flight file: a communicator's recorder (the plugin's) or the process's NVTX ranges.
void PluginRun::read_recorder(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  if (!ends_with(name, ".flight")) return;
  auto snap = read_flight_recorder(path);
  if (!snap.ok()) {
    run.problems.push_back(snap.status().message());
    return;
  }
  ProcessFiles& p = processes[process_key(snap->host, snap->pid)];
  p.host = snap->host;
  p.pid = snap->pid;
  for (const auto& w : snap->warnings) run.problems.push_back(fmt::format("{}: {}", name, w));
  if (snap->nccl_plugin && snap->comms.empty()) return;  // ABI v3: no collective identified its communicator
  if (snap->nccl_plugin) {
    // The rank table is as large as the largest rank or world a recorder claims: a corrupt header's
    // claim past any run's size is reported and dropped, never allocated.
    if (snap->world_size > kMaxWorldSize) {
      run.problems.push_back(
          fmt::format("{}: claims a world of {} ranks, past the {} a run can have (corrupt "
                      "header): ignored",
                      name, snap->world_size, kMaxWorldSize));
      snap->world_size = 0;
    }
    if (snap->rank >= kMaxWorldSize) {
      run.problems.push_back(
          fmt::format("{}: claims launcher rank {}, past the {} ranks a run can have (corrupt "
                      "header): ignored",
                      name, snap->rank, kMaxWorldSize));
      snap->rank = -1;
    }
    if (snap->rank >= 0) p.launcher_rank = snap->rank;
    p.launcher_world = std::max(p.launcher_world, snap->world_size);
    p.comms.push_back(std::move(snap).value());
  } else {
    p.nvtx = std::move(snap).value();
  }
}

// Each process.json matched to its recorders by host and pid.
void PluginRun::read_process_jsons(const std::vector<std::filesystem::path>& jsons) {
  for (const auto& path : jsons) {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      run.problems.push_back(fmt::format("{}: not valid JSON", path.filename().string()));
      continue;
    }
    const std::string host = json_string(j, "host");
    const std::optional<int> pid = json_int(j, "pid");
    if (host.empty() || !pid) {
      run.problems.push_back(fmt::format("{}: no host (a string) and pid (an integer): not matched to a recorder",
                                         path.filename().string()));
      continue;
    }
    auto it = processes.find(process_key(host, *pid));
    if (it != processes.end()) it->second.process_json = std::move(j);
  }
}

// Display names: the job's commName where it names one communicator only. A communicator every
// member finalized gives its name up to a live one of the same name (a job that destroyed and
// recreated its groups); otherwise communicators sharing a name all carry their hash.
void PluginRun::name_communicators() {
  for (auto* p : procs)
    for (const auto& s : p->comms) {
      const auto& n = *s.comms.front().nccl;
      if (n.comm_hash == 0) continue;
      auto& stored = name_of_hash[n.comm_hash];
      if (stored.empty()) stored = n.comm_name;
      live_hash[n.comm_hash] = live_hash[n.comm_hash] || !n.finalized;
    }
  for (const auto& [h, n] : name_of_hash) {
    uses[n].first++;
    if (live_hash[h]) uses[n].second++;
  }
}

std::string PluginRun::display(uint64_t hash) {
  const std::string& n = name_of_hash[hash];
  const auto [all, live] = uses[n];
  const bool plain = all == 1 || (live == 1 && live_hash[hash]);
  return nccl_comm_display_name(hash, n, !plain);
}

// Global ranks: the launcher's (RANK, OMPI_COMM_WORLD_RANK, ...) where every process has one,
// else the comm rank in a communicator spanning every process, else the order of (host, pid).
void PluginRun::assign_ranks() {
  const bool launcher_ranks = std::all_of(procs.begin(), procs.end(), [](auto* p) { return p->launcher_rank >= 0; });
  std::set<int> seen;
  bool unique = launcher_ranks;
  if (launcher_ranks)
    for (auto* p : procs) unique = unique && seen.insert(p->launcher_rank).second;
  if (unique) {
    for (auto* p : procs) p->rank = p->launcher_rank;
  } else {
    if (launcher_ranks) run.problems.push_back("two processes claim the same launcher rank: ranks taken from NCCL instead");
    std::optional<uint64_t> spanning;
    std::map<uint64_t, int> members;
    for (auto* p : procs)
      for (const auto& s : p->comms)
        if (s.comms.front().size == int(procs.size())) members[s.comms.front().nccl->comm_hash]++;
    for (const auto& [h, n] : members)
      if (n == int(procs.size()) && h != 0) spanning = h;
    int next = 0;
    for (auto* p : procs) {
      p->rank = next++;
      // The spanning communicator has one member per process: its ranks lie below their count.
      if (spanning)
        for (const auto& s : p->comms)
          if (s.comms.front().nccl->comm_hash == *spanning && s.comms.front().rank_in_comm >= 0 &&
              s.comms.front().rank_in_comm < int(procs.size()))
            p->rank = s.comms.front().rank_in_comm;
    }
    // A lone process needs no launcher to be rank 0 of 1 (python train.py): nothing to report then.
    if (procs.size() > 1 || !spanning)
      run.problems.push_back(spanning ? fmt::format("no launcher rank (RANK) in the recorders: ranks are the processes' "
                                                    "ranks in communicator {}", display(*spanning))
                                      : "no launcher rank (RANK) in the recorders: ranks numbered by host and pid");
  }
  // Every rank and world here is below kMaxWorldSize (checked as the recorders were read): no sum overflows.
  world = int(procs.size());
  for (auto* p : procs) world = std::max({world, p->rank + 1, p->launcher_world});
  run.world_size = world;
  run.ranks.resize(size_t(world));
  for (int r = 0; r < world; ++r) run.ranks[size_t(r)].rank = r;
}

// One process's recorders merged into its rank's snapshot, with an event stream rebuilt from the rings.
void PluginRun::merge_process(ProcessFiles* p) {
  if (p->rank < 0 || p->rank >= world) return;
  RankFiles& rf = run.ranks[size_t(p->rank)];
  if (rf.flight) {
    run.problems.push_back(fmt::format("rank {}: two processes ({} and {}) claim it", p->rank, rf.flight->pid, p->pid));
    return;
  }
  meta.hosts[size_t(p->rank)] = p->host;
  // The newest communicators first would reorder nothing the analyzers rely on; keep init order.
  std::sort(p->comms.begin(), p->comms.end(), [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  FlightRecorderSnapshot merged = p->comms.front();
  merged.rank = p->rank;
  merged.world_size = world;
  merged.comms.clear();
  merged.warnings.clear();
  merged.live = {};
  merged.live.process_state = ProcessState::kFinished;
  merged.live.clock_uncertainty_ns = -1;
  if (p->process_json.is_object() && !json_string(p->process_json, "boot_id").empty())
    merged.boot_id = json_string(p->process_json, "boot_id");
  for (auto& s : p->comms) {
    CommSnapshot c = std::move(s.comms.front());
    const uint64_t hash = c.nccl ? c.nccl->comm_hash : 0;
    c.index = int(merged.comms.size());
    c.name = hash != 0 ? display(hash) : fmt::format("nccl-unidentified-{}-{}", p->pid, c.index);
    if (hash != 0) {
      membership[hash][c.rank_in_comm] = p->rank;
      comm_size[hash] = std::max(comm_size[hash], c.size);
    }
    merged.live.heartbeat_ns = std::max(merged.live.heartbeat_ns, s.live.heartbeat_ns);
    merged.live.collectives_issued += s.live.collectives_issued;
    merged.live.collectives_completed += s.live.collectives_completed;
    merged.start_ns = std::min(merged.start_ns, s.start_ns);
    if (s.live.process_state != ProcessState::kFinished) merged.live.process_state = s.live.process_state;
    merged.comms.push_back(std::move(c));
  }
  if (p->nvtx) {
    merged.threads = p->nvtx->threads;
    merged.live.heartbeat_ns = std::max(merged.live.heartbeat_ns, p->nvtx->live.heartbeat_ns);
    if (const auto* main = p->nvtx->main_thread(); main && !main->stack.empty())
      merged.live.phase = main->stack.front().name;
  }
  if (merged.live.process_state == ProcessState::kStarting) merged.live.process_state = ProcessState::kRunning;
  // Skew, export and startup read event streams; the plugin writes none, so one is rebuilt from
  // the collective rings (nccl_plugin_events.h says what a step is then).
  RebuiltEvents events = rebuild_events_from_rings(merged, world);
  if (events.steps == 0)
    run.problems.push_back(fmt::format("rank {}: no step could be rebuilt from its collective records ({} on {}{})",
                                       p->rank, events.anchor.empty() ? "none" : "no repeating pattern",
                                       events.anchor.empty() ? "any communicator" : events.anchor,
                                       events.anchor.empty() ? "" : "; a job needs two whole iterations in the ring"));
  rf.rebuilt_events = std::make_shared<const std::vector<uint8_t>>(std::move(events.bytes));
  meta.created_ns = meta.created_ns == 0 ? merged.start_ns : std::min(meta.created_ns, merged.start_ns);
  rf.flight = std::move(merged);
  if (!p->process_json.is_null() && meta.command_line.empty() && p->process_json.contains("command_line") &&
      p->process_json["command_line"].is_array()) {
    for (const auto& a : p->process_json["command_line"])
      if (a.is_string()) meta.command_line.push_back(a.get<std::string>());
    if (!meta.command_line.empty()) meta.program = std::filesystem::path(meta.command_line.front()).filename().string();
  }
}

// The communicators as run.json's groups, and every rank without a recorder said.
void PluginRun::finish() {
  for (const auto& [hash, by_comm_rank] : membership) {
    CommGroup g;
    g.name = display(hash);
    for (const auto& [cr, global] : by_comm_rank) g.ranks.push_back(global);
    if (int(by_comm_rank.size()) < comm_size[hash])
      run.problems.push_back(fmt::format("communicator {}: {} of {} members left a recorder", g.name, by_comm_rank.size(),
                                         comm_size[hash]));
    meta.groups.push_back(std::move(g));
  }
  meta.extra["nccl_plugin"] = true;
  for (auto& rf : run.ranks)
    if (!rf.flight) {
      rf.flight_status = not_found(fmt::format("rank {}: no NCCL plugin recorder (the process never initialised a "
                                               "communicator, or its files are elsewhere)", rf.rank));
      run.problems.push_back(rf.flight_status.message());
    }
}

}  // namespace

Result<RunDirectory> open_nccl_plugin_run(const std::filesystem::path& dir, const OpenOptions& options) {
  (void)options;  // the recorders are the whole run: they are always read
  PluginRun job;
  job.sub = dir / kNcclPluginDir;
  job.run.dir = dir;
  RS_RETURN_IF_ERROR(job.read_files());
  job.name_communicators();
  job.assign_ranks();
  job.meta.program = "NCCL job (rankscope profiler plugin)";
  job.meta.world_size = job.world;
  job.meta.tp = 1;
  job.meta.dp = job.world;
  job.meta.hosts.assign(size_t(job.world), "");
  for (auto* p : job.procs) job.merge_process(p);
  job.finish();
  job.run.metadata = std::move(job.meta);
  return std::move(job.run);
}

}  // namespace rankscope::format
