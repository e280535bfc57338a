// fr_import.cpp — finds a job's Flight Recorder dumps and maps them into a RunDirectory.
#include "rankscope/torch_fr/fr_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "fr_dump_time.h"
#include "fr_entry_state.h"
#include "fr_groups.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;

struct Candidate {
  int rank;
  fs::path file;
};

// Splits "comm_lib_trace_rank_12" into ("comm_lib_trace_rank_", 12); false without a trailing number.
bool split_rank(const std::string& name, std::string* prefix, int* rank) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  if (i == name.size() || name.size() - i > 8) return false;
  *prefix = name.substr(0, i);
  *rank = std::stoi(name.substr(i));
  return true;
}

bool starts_like_a_dump(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char c = 0;
  return in.get(c) && (uint8_t(c) == 0x80 || c == '{');
}

// The dumps under `path`: a directory (the most common prefix among dump-looking files) or a prefix.
std::vector<Candidate> discover(const fs::path& path, std::string* prefix_out) {
  std::error_code ec;
  fs::path dir = path;
  std::string want_prefix;
  if (!fs::is_directory(path, ec)) {
    dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    want_prefix = path.filename().string();
  }
  std::map<std::string, std::vector<Candidate>> by_prefix;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    std::string prefix;
    int rank = 0;
    if (!split_rank(e.path().filename().string(), &prefix, &rank)) continue;
    if (!want_prefix.empty() && prefix != want_prefix) continue;
    if (want_prefix.empty() && !starts_like_a_dump(e.path())) continue;
    by_prefix[prefix].push_back({rank, e.path()});
  }
  std::vector<Candidate> best;
  for (auto& [prefix, c] : by_prefix) {
    if (c.size() > best.size()) {
      best = std::move(c);
      *prefix_out = prefix;
    }
  }
  std::sort(best.begin(), best.end(), [](const Candidate& a, const Candidate& b) { return a.rank < b.rank; });
  return best;
}

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// "1 rank (0)", "4 ranks (0-3)", "no rank".
std::string ranks_phrase(const std::vector<int>& ranks) {
  if (ranks.empty()) return "no rank";
  return fmt::format("{} {} ({})", ranks.size(), ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
}

// The backend's rule decided completed and started (fr_entry_state.h).
format::CollectiveState state_of(const FrEntry& e) {
  if (e.completed) return format::CollectiveState::kCompleted;
  if (e.started) return format::CollectiveState::kStarted;
  return format::CollectiveState::kEnqueued;
}

format::CollectiveSnapshot record_of(const FrEntry& e, uint64_t seq, int peer_global) {
  format::CollectiveSnapshot c;
  c.seq = seq;
  c.op = e.op;
  c.dtype = e.dtype;
  c.state = state_of(e);
  c.peer = peer_global;
  c.count = e.numel;
  c.bytes = e.numel * format::dtype_size(e.dtype);
  c.enqueue_ns = e.time_created_ns;
  c.start_ns = e.time_started_ns;
  c.end_ns = c.state == format::CollectiveState::kCompleted ? std::max(e.time_completed_ns, e.time_created_ns) : 0;
  c.range = format::intern_name(e.call_site);  // a view: the snapshot outlives the dump
  // NCCL-like work is launched on a stream and the call returns: what is open waits on the device.
  // Gloo's caller waits for a worker thread: its host is in the call.
  c.host_returned = e.signal == CompletionSignal::kState;
  return c;
}

}  // namespace

bool looks_like_fr_dumps(const fs::path& path) {
  std::string prefix;
  return !discover(path, &prefix).empty();
}

Result<FrImport> import_fr_dumps(const fs::path& path) {
  std::string prefix;
  const std::vector<Candidate> files = discover(path, &prefix);
  if (files.empty()) {
    return not_found(fmt::format("{}: no Flight Recorder dumps (files named <prefix><rank>, e.g. comm_lib_trace_rank_0)",
                                 path.string()));
  }
  FrImport out;
  std::map<int, FrDump> dumps;
  std::map<int, Status> unreadable;
  // Each dump is read and unpickled on its own: spread the files over the cores.
  std::vector<std::optional<Result<FrDump>>> parsed(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      std::ifstream in(files[i].file, std::ios::binary | std::ios::ate);
      std::vector<uint8_t> bytes(in ? size_t(std::max<std::streamoff>(0, in.tellg())) : 0);
      in.seekg(0);
      in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
      bytes.resize(size_t(std::max<std::streamsize>(0, in.gcount())));
      parsed[i] = parse_fr_dump(bytes, files[i].file.filename().string());
    }
  };
  {
    std::vector<std::jthread> pool;
    const size_t n = std::min<size_t>({files.size(), std::max(1u, std::thread::hardware_concurrency()), 16});
    for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
    work();
  }
  for (size_t i = 0; i < files.size(); ++i) {
    auto& d = *parsed[i];
    if (!d.ok()) {
      if (d.status().code() == StatusCode::kUnsupported) return d.status();
      unreadable[files[i].rank] = d.status();
      continue;
    }
    dumps.emplace(files[i].rank, std::move(*d));
  }
  if (dumps.empty()) {
    Status s = unreadable.begin()->second;
    return s.prefix("no Flight Recorder dump is readable");
  }
  // One version for all: entries mean different things across versions (coalescing from 2.7).
  for (const auto& [rank, d] : dumps) {
    const auto& first = *dumps.begin();
    if (d.version != first.second.version) {
      return unsupported(fmt::format("mixed Flight Recorder versions: rank {} wrote {}, rank {} wrote {}; "
                                     "dumps of one incident come from one PyTorch",
                                     first.first, first.second.version, rank, d.version));
    }
  }
  out.version = dumps.begin()->second.version;

  // Groups of the whole job, by name; descs that repeat get ":<name>" so names stay unique.
  int world = 0;
  for (const auto& [rank, d] : dumps) {
    world = std::max(world, rank + 1);
    for (const auto& [name, g] : d.groups)
      if (!g.ranks.empty()) world = std::max(world, g.ranks.back() + 1);
    for (const auto& ranks : d.unnamed_group_ranks)
      if (!ranks.empty()) world = std::max(world, ranks.back() + 1);
  }
  for (const auto& [rank, st] : unreadable) world = std::max(world, rank + 1);
  JobGroups job_groups = resolve_groups(dumps, world);
  const std::map<std::string, FrGroup>& groups = job_groups.by_name;
  reopen_failed_retirements(dumps, groups);
  std::map<std::string, int> desc_count;
  for (const auto& [name, g] : groups) ++desc_count[g.desc];
  std::map<std::string, std::string> comm_name;
  for (const auto& [name, g] : groups) {
    const bool plain = !g.desc.empty() && g.desc != "undefined" && desc_count[g.desc] == 1;
    comm_name[name] = plain ? g.desc : (g.desc.empty() ? "pg" : g.desc) + ":" + name;
  }

  format::RunMetadata meta;
  meta.program = "pytorch (Flight Recorder " + out.version + ")";
  meta.world_size = world;
  for (const auto& [name, g] : groups) meta.groups.push_back({comm_name[name], g.ranks});
  std::set<std::string> p2p_groups;

  const DumpTime when = bound_dump_time(dumps, comm_name);
  out.pending = when.pending;
  out.time_basis = when.basis;
  out.timeout_s = when.timeout_s;

  out.run.dir = path;
  out.run.problems = job_groups.notes;
  out.run.world_size = world;
  out.run.ranks.resize(size_t(world));
  for (int r = 0; r < world; ++r) {
    format::RankFiles& rf = out.run.ranks[size_t(r)];
    rf.rank = r;
    auto it = dumps.find(r);
    if (it == dumps.end()) {
      if (auto u = unreadable.find(r); u != unreadable.end()) {
        rf.flight_status = u->second;
      } else {
        rf.flight_status = not_found(fmt::format("{}{}: no dump (the rank may have died, been stopped, or hung "
                                                 "holding the GIL)", prefix, r));
      }
      out.missing.push_back(r);
      out.run.problems.push_back(rf.flight_status.message());
      continue;
    }
    const FrDump& d = it->second;
    out.found.push_back(r);
    if (d.partial) out.partial.push_back(r);
    out.timing = out.timing || d.timing;
    out.entries += d.entries.size();
    for (const FrEntry& e : d.entries) {
      if (!e.backend.empty() && std::find(out.backends.begin(), out.backends.end(), e.backend) == out.backends.end())
        out.backends.push_back(e.backend);
      out.event_backend = out.event_backend || e.signal == CompletionSignal::kState;
    }
    format::FlightRecorderSnapshot s;
    s.schema_version = format::kFlightSchemaVersion;
    s.rank = r;
    s.world_size = world;
    s.run_id = "pytorch-fr";
    // Every dump is written at the same incident; its time is only bounded from below (fr_dump_time.h).
    s.live.heartbeat_ns = when.now_ns;
    s.start_ns = when.earliest_ns;  // a rank with no entries is idle for at most the dumps' span
    s.live.process_state = format::ProcessState::kRunning;
    s.live.clock_uncertainty_ns = -1;
    std::string last_site;
    for (const auto& [name, g] : groups) {
      auto pos = std::find(g.ranks.begin(), g.ranks.end(), r);
      if (pos == g.ranks.end()) continue;
      format::CommSnapshot c;
      c.index = int(s.comms.size());
      c.name = comm_name[name];
      c.size = int(g.ranks.size());
      c.rank_in_comm = int(pos - g.ranks.begin());
      int64_t max_seq = 0, max_completed = 0;
      bool has_p2p = false;
      std::map<std::pair<int, int>, uint64_t> pair_seq;
      for (const FrEntry& e : d.entries) {
        if (e.group != name) continue;
        if (e.is_p2p) {
          has_p2p = true;
          if (e.peer_in_group < 0 || e.peer_in_group >= int(g.ranks.size())) continue;
          const int peer = g.ranks[size_t(e.peer_in_group)];
          const auto key = std::minmax(r, peer);
          const std::string pname = fmt::format("{}/p2p:{}-{}", c.name, key.first, key.second);
          const uint64_t seq = pair_seq[key]++;
          format::CommSnapshot* pc = nullptr;
          for (auto& x : s.comms)
            if (x.name == pname) pc = &x;
          if (!pc) {
            s.comms.push_back({});
            pc = &s.comms.back();
            pc->index = int(s.comms.size() - 1);
            pc->name = pname;
            pc->size = 2;
            pc->rank_in_comm = r == key.first ? 0 : 1;
            if (p2p_groups.insert(pname).second) meta.groups.push_back({pname, {key.first, key.second}});
          }
          // A matched send/recv must look alike to the mismatch check: a pair's op is named from
          // its lower rank's side ("send" = lower to higher), whichever side recorded it.
          FrEntry as_lower = e;
          if (r != key.first) {
            as_lower.op = e.op == format::CollectiveOp::kSend ? format::CollectiveOp::kRecv : format::CollectiveOp::kSend;
          }
          as_lower.call_site.clear();  // the two sides call from different places by design
          pc->ring.push_back(record_of(as_lower, seq, peer));
          pc->next_seq = seq + 1;
          if (state_of(e) == format::CollectiveState::kCompleted) pc->completed_count = seq + 1;
          if (!e.call_site.empty()) last_site = e.call_site;
          continue;
        }
        if (e.collective_seq < 1) continue;
        const uint64_t seq = uint64_t(e.collective_seq);
        if (!c.ring.empty() && c.ring.back().seq >= seq) continue;  // coalesced ops share one seq: keep the first
        c.ring.push_back(record_of(e, seq, -1));
        max_seq = std::max(max_seq, e.collective_seq);
        if (state_of(e) == format::CollectiveState::kCompleted) max_completed = std::max(max_completed, e.collective_seq);
        if (!e.call_site.empty()) last_site = e.call_site;
      }
      // pg_status sees past ring wraparound; the entries are the fallback. Its counters are the
      // work's seq_, which is the p2p seq for send/recv (initWork: isP2P ? seqP2P_ : seqCollective_),
      // so they count collectives only in a group this rank used for no send or recv.
      if (auto st = d.status.find(name); st != d.status.end() && !has_p2p) {
        max_seq = std::max(max_seq, st->second.last_enqueued);
        max_completed = std::max(max_completed, st->second.last_completed);
      }
      // Sequence numbers stay PyTorch's (1-based), so the verdict quotes the number a user sees in
      // the dump: "issued" counts a phantom seq 0, i.e. issued = last enqueued + 1.
      c.next_seq = uint64_t(std::max<int64_t>(0, max_seq) + 1);
      c.completed_count = uint64_t(std::max<int64_t>(0, max_completed) + 1);
      s.comms.push_back(std::move(c));
    }
    for (auto& c : s.comms) c.index = int(&c - s.comms.data());
    format::ThreadSnapshot main;
    main.name = "main";
    if (!last_site.empty()) {
      main.stack.push_back({format::intern_name(last_site), 0});
      main.depth = 1;
    }
    s.threads.push_back(std::move(main));
    if (d.partial) s.warnings.push_back("the dump ends early (killed while writing?): read as far as it went");
    rf.flight = std::move(s);
  }
  out.run.metadata = std::move(meta);
  std::string backends;
  for (const auto& b : out.backends) backends += (backends.empty() ? "" : "+") + b;
  const std::string timing = !out.event_backend ? "no start or end events (Gloo: 'retired' marks completion)"
                             : out.timing       ? "timing on (a 'scheduled' collective never started on the GPU)"
                                                : "timing off (TORCH_NCCL_ENABLE_TIMING unset: 'running' and 'never started' look the same)";
  out.summary = fmt::format("read PyTorch Flight Recorder dumps {}*: format {}{}, {}, missing {}{}; {}",
                            (fs::is_directory(path) ? path / prefix : path).string(), out.version,
                            backends.empty() ? "" : ", backend " + backends, ranks_phrase(out.found),
                            out.missing.empty() ? "none" : ranks_phrase(out.missing),
                            (out.partial.empty() ? "" : ", ended early " + ranks_phrase(out.partial)) +
                                (out.missing.empty() ? "" : " (what a missing rank did is inferred from its peers' dumps)"),
                            timing);
  return out;
}

}  // namespace rankscope::torch_fr
