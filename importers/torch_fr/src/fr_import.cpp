// fr_import.cpp — finds a job's Flight Recorder dumps and maps them into a RunDirectory.
#include "rankscope/torch_fr/fr_import.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <thread>

#include "fr_discovery.h"
#include "fr_dump_time.h"
#include "fr_entry_groups.h"
#include "fr_entry_state.h"
#include "fr_groups.h"
#include "fr_p2p.h"
#include "fr_pg_status.h"
#include "fr_rank_reduce.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/format/saturating.h"
#include "rankscope/format/side_by_side.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {
namespace {

namespace fs = std::filesystem;

// The file's bytes, read into `buffer` (grown, never shrunk: a worker reads ~500 dumps of about one
// size without allocating or zeroing memory for each); empty when it cannot be read, which the dump
// parser reports as an empty file.
std::span<const uint8_t> read_whole_file(const fs::path& file, std::vector<uint8_t>& buffer) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0 && size_t(st.st_size) + 1 > buffer.size())
    buffer.resize(size_t(st.st_size) + 1);  // + 1: reading to the end takes one read() that returns 0
  size_t length = 0;
  while (true) {
    if (length == buffer.size()) buffer.resize(std::max<size_t>(buffer.size() * 2, 1 << 16));  // it grew meanwhile
    const ssize_t n = ::read(fd, buffer.data() + length, buffer.size() - length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    length += size_t(n);
  }
  ::close(fd);
  return std::span<const uint8_t>(buffer.data(), length);
}

// "1 rank (0)", "4 ranks (0-3)", "no rank".
std::string ranks_phrase(const std::vector<int>& ranks) {
  if (ranks.empty()) return "no rank";
  return fmt::format("{} {} ({})", ranks.size(), ranks.size() == 1 ? "rank" : "ranks", compact_ranks(ranks));
}

template <typename Map>
const typename Map::mapped_type* find_or_null(const Map& m, const typename Map::key_type& k) {
  auto it = m.find(k);
  return it == m.end() ? nullptr : &it->second;
}

// An all_to_all's totals as the run model's peer counts: what this rank sends in all (its input)
// and receives in all (its output). Per-peer splits are not in a dump, so only the sums over the
// members can be checked (analyzers/hang a2a_counts.cpp: they must be equal), and no detail is kept.
format::PeerCountsSnapshot a2a_totals(const AllToAllTotals& a, const FrGroup& g, int rank_in_group) {
  format::PeerCountsSnapshot p;
  p.seq = a.seq;
  p.n_peers = uint32_t(g.ranks.size());
  p.rank_in_comm = rank_in_group;
  p.send_total = a.send;
  p.recv_total = a.recv;
  return p;
}

// The communicator of one process group on one rank: its collectives (send/recv go to pair
// communicators, fr_rank_reduce.h made the records), issued and completed from the entries and, where
// its row counts collectives, pg_status (fr_pg_status.h), which sees past the window.
// `members_known`: pg_config lists the group (Gloo's dumps lose it): only then can sums over the
// members be checked.
format::CommSnapshot collective_comm(GroupRecords&& records, const std::string& comm_name, const FrGroup& g,
                                     int rank_in_group, const GroupProgress* progress, bool members_known) {
  format::CommSnapshot c;
  c.name = comm_name;
  c.size = int(g.ranks.size());
  c.rank_in_comm = rank_in_group;
  c.ring = std::move(records.ring);
  if (members_known) {
    c.peer_counts.reserve(records.all_to_all.size());
    for (const AllToAllTotals& a : records.all_to_all) c.peer_counts.push_back(a2a_totals(a, g, rank_in_group));
  }
  int64_t max_seq = records.max_seq, max_completed = records.max_completed;
  // Never lowers what the entries show (an on-demand dump can precede the watchdog's pass).
  if (progress && progress->numbering != SeqNumbering::kP2P) {
    max_seq = std::max(max_seq, progress->status.last_enqueued);
    max_completed = std::max(max_completed, progress->status.last_completed);
  }
  // Sequence numbers stay PyTorch's (1-based), so the verdict quotes the number a user sees in
  // the dump: "issued" counts a phantom seq 0, i.e. issued = last enqueued + 1.
  // (pg_status is read from the file: a corrupt row may hold INT64_MAX.)
  c.next_seq = uint64_t(format::add_saturating(std::max<int64_t>(0, max_seq), 1));
  c.completed_count = uint64_t(format::add_saturating(std::max<int64_t>(0, max_completed), 1));
  return c;
}

// One side of a send/recv pair (fr_p2p.h). A matched send and recv must look alike to the mismatch
// check: the op is named from the lower rank's side ("send" = lower to higher), whichever side
// recorded it, and the call site is left out (the two sides call from different places by design).
format::CommSnapshot pair_comm(const PairComm& pair, const PairSide& side, int rank, const std::string& name,
                               std::string_view* last_site) {
  format::CommSnapshot c;
  c.name = name;
  c.size = 2;
  c.rank_in_comm = rank == pair.lo ? 0 : 1;
  const int peer = rank == pair.lo ? pair.hi : pair.lo;
  c.ring.reserve(side.calls.size());
  for (const auto& [e, seq] : side.calls) {
    if (!c.ring.empty() && c.ring.back().seq >= seq) continue;  // a batch's calls share a number: keep the first
    format::CollectiveOp as_lower = e->op;
    if (pair.src >= 0) as_lower = format::CollectiveOp::kSend;  // one direction: named as its sender sees it
    else if (rank != pair.lo)
      as_lower = e->op == format::CollectiveOp::kSend ? format::CollectiveOp::kRecv : format::CollectiveOp::kSend;
    c.ring.push_back(record_of(*e, seq, peer, as_lower, {}));
    if (!e->call_site.empty()) *last_site = e->call_site;
  }
  c.next_seq = side.next_seq;
  c.completed_count = side.completed_count;
  return c;
}

// What each dump's reader thread works out from its entries alone, while they are in the cache
// (2000 entries a rank, 1024 ranks: each pass over all of them on one core was a walk through
// ~380 MB): its entries by group (fr_entry_groups.h), its times (fr_dump_time.h), its backends,
// and, unless its entries may still change, its records, after which it keeps only the entries the
// job-wide passes read (fr_rank_reduce.h).
struct RankSummary {
  std::vector<GroupEntries> groups;
  RankTimes times;
  bool retired_completed = false;       // reopen_failed_retirements has something to look at
  bool event_backend = false;           // an entry completes by its state
  std::vector<std::string_view> backends;  // pooled, in the order the entries first name them
  size_t entries = 0;                      // the dump's, counted before any was let go
  bool reduced = false;                    // `records` and `status_pending` made; the entries reduced
  std::vector<GroupRecords> records;
  bool status_pending = false;
};

// A pg_status row with work enqueued past what completed is pending, unless the rank's own entries
// show that work completed (an on-demand dump can precede the watchdog's pass: last_completed -1 with
// every entry completed).
bool status_pending(const FrDump& d, const std::vector<GroupEntries>& by_group) {
  bool pending = false;
  for (const auto& [id, st] : d.status_by_pg_id) {
    if (st.last_enqueued <= st.last_completed) continue;
    int64_t completed = st.last_completed;
    auto name = d.pg_id_names.find(id);
    auto take = [&](const FrEntry& e) {
      if (e.completed) completed = std::max(completed, e.is_p2p ? e.p2p_seq : e.collective_seq);
    };
    if (name == d.pg_id_names.end()) {
      for (const FrEntry& e : d.entries) take(e);
    } else if (const GroupEntries* mine = find_group(by_group, name->second)) {
      for (const FrEntry* e : mine->entries) take(*e);
    }
    pending = pending || st.last_enqueued > completed;
  }
  return pending;
}

std::vector<GroupRecords> records_by_group(const std::vector<GroupEntries>& by_group) {
  std::vector<GroupRecords> out;
  out.reserve(by_group.size());
  for (const GroupEntries& g : by_group) out.push_back(group_records(g));
  return out;
}

// A rank's place in one group, in the groups' name order (the order its communicators take).
struct Membership {
  const std::string* name;
  const FrGroup* group;
  int rank_in_group;
  const std::string* comm_name;
  bool members_known;
};

// One rank's snapshot, built on its own thread; what is shared is merged after, in rank order.
struct RankOut {
  format::FlightRecorderSnapshot snapshot;
  std::vector<std::pair<std::string, std::pair<int, int>>> pair_groups;  // (name, ranks) of its pair communicators
  bool status_pending = false;
  size_t entries = 0;  // the dump's, counted before they are let go
};

// The job's dumps into one run directory, in the phases import_fr_dumps runs in order; each reads
// what the ones before it left in these members.
struct JobImport {
  const fs::path& path;
  DiscoveredDumps found;
  FrImport out;
  std::map<int, FrDump> dumps;
  std::map<int, Status> unreadable;
  std::vector<RankSummary> summaries;
  std::map<int, RankSummary*> summary_of;
  int world = 0;
  GroupedEntries grouped;
  std::map<int, RankTimes> times;
  JobGroups job_groups;
  std::vector<std::string> late_retirements;
  std::map<std::string, std::string> comm_name, short_name;
  std::map<int, std::map<std::string, GroupProgress>> progress;
  std::vector<PairComm> pairs;
  std::map<int, std::vector<std::pair<const PairComm*, const PairSide*>>> pairs_of;
  format::RunMetadata meta;
  DumpTime when;
  std::vector<std::vector<Membership>> member_of;
  std::vector<std::pair<const int, FrDump>*> in_order;
  std::vector<RankOut> built;

  explicit JobImport(const fs::path& p) : path(p), found(discover_dumps(p)) {}
  Status read_dumps();
  Status bound_world();
  void resolve_job_groups();
  void place_members();
  void build_snapshot(size_t k);
  void build_snapshots();
  void assemble_run();
  void write_summary();
};

// The dumps read and unpickled (one version for all), or why none can be.
Status JobImport::read_dumps() {
  const std::vector<DumpFile>& files = found.files;
  if (files.empty()) {
    return not_found(fmt::format("{}: no Flight Recorder dumps (files named <prefix><rank>, e.g. comm_lib_trace_rank_0)",
                                 path.string()));
  }
  // Each dump is read and unpickled on its own: spread the files over the cores, with what the
  // passes below need from each dump alone (RankSummary).
  std::vector<std::optional<Result<FrDump>>> parsed(files.size());
  RankListPool rank_lists;  // every dump lists the same groups: each list parsed and held once
  summaries.resize(files.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::vector<uint8_t> buffer;  // one a thread, its capacity kept from file to file
    for (size_t i = next++; i < files.size(); i = next++) {
      const std::span<const uint8_t> bytes = read_whole_file(files[i].file, buffer);
      parsed[i] = parse_fr_dump(bytes, files[i].file.filename().string(), PickleReader::kFast, &rank_lists);
      if (!parsed[i]->ok()) continue;
      FrDump& d = parsed[i]->value();
      resolve_pg_status(d);  // the dump's own rules (fr_pg_status.h)
      RankSummary& s = summaries[i];
      s.groups = entries_by_group(d);
      s.times = rank_times(d);
      std::string_view last_backend;  // pooled (fr_dump.h): consecutive entries share one
      for (const FrEntry& e : d.entries) {
        s.retired_completed = s.retired_completed || (e.signal == CompletionSignal::kRetired && e.completed);
        s.event_backend = s.event_backend || e.signal == CompletionSignal::kState;
        if (e.backend.empty() || e.backend.data() == last_backend.data()) continue;
        last_backend = e.backend;
        if (std::find(s.backends.begin(), s.backends.end(), e.backend) == s.backends.end()) s.backends.push_back(e.backend);
      }
      s.entries = d.entries.size();
      if (!entries_may_change(d)) {
        s.records = records_by_group(s.groups);
        s.status_pending = status_pending(d, s.groups);
        keep_for_job_passes(d, s.groups, s.times);
        s.reduced = true;
      }
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
    // Moved: the entries stay where the summary points.
    if (dumps.emplace(files[i].rank, std::move(*d)).second) summary_of.emplace(files[i].rank, &summaries[i]);
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
  return {};
}

// Groups of the whole job, by name; descs that repeat get ":<name>" so names stay unique.
// A corrupt dump can name any rank ("ranks": [0, 16777216]): the world it implies is bounded as
// run.json's is, before anything is sized by it.
Status JobImport::bound_world() {
  // Groups of the whole job, by name; descs that repeat get ":<name>" so names stay unique.
  // A corrupt dump can name any rank ("ranks": [0, 16777216]): the world it implies is bounded as
  // run.json's is, before anything is sized by it.
  auto claim = [&](int rank, int largest, const std::string& what) -> Status {
    if (largest < 0 || largest >= format::kMaxWorldSize)
      return corrupt(fmt::format("rank {}'s dump: {} names rank {}, past the {} ranks a job can have (a corrupt dump)",
                                 rank, what, largest, format::kMaxWorldSize));
    world = std::max(world, largest + 1);
    return {};
  };
  for (const auto& [rank, d] : dumps) {
    if (Status s = claim(rank, rank, "its file name"); !s.ok()) return s;
    for (const auto& [name, g] : d.groups)
      if (!g.ranks.empty())
        if (Status s = claim(rank, g.ranks.back(), "group " + name); !s.ok()) return s;
    for (const auto& ranks : d.unnamed_group_ranks)
      if (!ranks.empty())
        if (Status s = claim(rank, ranks.back(), "an unnamed group"); !s.ok()) return s;
  }
  for (const auto& [rank, st] : unreadable) world = std::max(world, rank + 1);
  return {};
}

// The job's groups, the cross-rank entry rules, names, progress, send/recv pairs and the dumps' time.
void JobImport::resolve_job_groups() {
  bool retired_completed = false;
  for (const auto& [rank, s] : summary_of) {
    grouped.emplace_hint(grouped.end(), rank, std::move(s->groups));
    times.emplace_hint(times.end(), rank, s->times);
    retired_completed = retired_completed || s->retired_completed;
  }
  // Each group's progress reads only the dumps' entries: unless Gloo's rules below may change them,
  // it is made beside the groups (side_by_side.h; each a third of a second at 16,384 ranks).
  if (retired_completed) {
    job_groups = resolve_groups(dumps, world, &grouped);
  } else {
    format::side_by_side([&] { progress = group_progress(dumps, &grouped); },
                         [&] { job_groups = resolve_groups(dumps, world, &grouped); });
  }
  const std::map<std::string, FrGroup>& groups = job_groups.by_name;
  // (Only Gloo's entries can be reopened or closed across ranks; that changes what their times say.)
  const bool reopened = retired_completed && reopen_failed_retirements(dumps, groups);
  late_retirements =
      retired_completed ? close_late_retirements(dumps, groups) : std::vector<std::string>{};
  std::map<std::string, int> desc_count;
  for (const auto& [name, g] : groups) ++desc_count[g.desc];
  for (const auto& [name, g] : groups) {
    comm_name[name] = group_comm_name(g, desc_count[g.desc] == 1);
    short_name[name] = group_short_name(g, desc_count[g.desc] == 1);
  }
  if (retired_completed) progress = group_progress(dumps, &grouped);
  // Send/recv pairs, and each rank's pair communicators (fr_p2p.h).
  pairs = pair_p2p(dumps, groups, progress, &grouped);
  for (const PairComm& p : pairs)
    for (const auto& [rank, side] : p.sides) pairs_of[rank].emplace_back(&p, &side);

  meta.program = "pytorch (Flight Recorder " + out.version + ")";
  meta.world_size = world;
  for (const auto& [name, g] : groups) meta.groups.push_back({comm_name[name], g.ranks});

  // The per-rank times of the dumps whose entries those rules may have changed are stale (the others
  // keep only a few entries: their times were made from all of them).
  if (reopened || !late_retirements.empty())
    for (auto& [rank, t] : times)
      if (!summary_of.at(rank)->reduced) t = rank_times(dumps.at(rank));
  when = bound_dump_time(dumps, comm_name, &times);
}

// Each rank's groups with its place in each, in the groups' name order (the order its
// communicators take): one pass over the groups, not a search of every group per rank.
void JobImport::place_members() {
  const std::map<std::string, FrGroup>& groups = job_groups.by_name;
  member_of.resize(static_cast<size_t>(world));
  for (const auto& [name, g] : groups) {
    const std::string* cname = &comm_name[name];
    const bool known = !job_groups.members_guessed.count(name);
    for (size_t i = 0; i < g.ranks.size(); ++i) {
      const int r = g.ranks[i];
      if (r < 0 || r >= world) continue;
      auto& mine = member_of[size_t(r)];
      if (!mine.empty() && mine.back().group == &g) continue;  // listed twice: its first place, as before
      mine.push_back({&name, &g, int(i), cname, known});
    }
  }
}

// One rank's snapshot: its own dump, the job-wide tables read only.
void JobImport::build_snapshot(size_t k) {
  const int r = in_order[k]->first;
  FrDump& d = in_order[k]->second;
  RankOut& o = built[k];
  std::vector<GroupEntries>& by_group = grouped.at(r);  // its own element: no other thread touches it
  RankSummary& summary = *summary_of.at(r);             // likewise
  // A dump whose entries may have changed since it was read has its records made now.
  if (!summary.reduced) {
    summary.records = records_by_group(by_group);
    summary.status_pending = status_pending(d, by_group);
  }
  o.status_pending = summary.status_pending;
  format::FlightRecorderSnapshot& s = o.snapshot;
  s.schema_version = format::kFlightSchemaVersion;
  s.rank = r;
  s.world_size = world;
  s.run_id = "pytorch-fr";
  // Every dump is written at the same incident; its time is only bounded from below (fr_dump_time.h).
  s.live.heartbeat_ns = when.now_ns;
  s.start_ns = when.earliest_ns;  // a rank with no entries is idle for at most the dumps' span
  s.live.process_state = format::ProcessState::kRunning;
  s.live.clock_uncertainty_ns = -1;
  std::string_view last_site;
  const std::map<std::string, GroupProgress>* rank_progress = nullptr;
  if (auto pr = progress.find(r); pr != progress.end()) rank_progress = &pr->second;
  if (size_t(r) < member_of.size()) {
    for (const Membership& m : member_of[size_t(r)]) {
      GroupRecords none;
      auto mine = std::find_if(summary.records.begin(), summary.records.end(),
                               [&](const GroupRecords& g) { return g.group == *m.name; });
      GroupRecords& records = mine == summary.records.end() ? none : *mine;
      if (!records.last_site.empty()) last_site = records.last_site;
      s.comms.push_back(collective_comm(std::move(records), *m.comm_name, *m.group, m.rank_in_group,
                                        rank_progress ? find_or_null(*rank_progress, *m.name) : nullptr,
                                        m.members_known));
    }
  }
  if (auto it = pairs_of.find(r); it != pairs_of.end()) {
    for (const auto& [pair, side] : it->second) {
      const std::string& group_name = short_name.at(pair->group);
      std::string pname =
          pair->src < 0 ? fmt::format("{} p2p {}-{}", group_name, pair->lo, pair->hi)
                        : fmt::format("{} p2p {}->{}", group_name, pair->src, pair->src == pair->lo ? pair->hi : pair->lo);
      s.comms.push_back(pair_comm(*pair, *side, r, pname, &last_site));
      o.pair_groups.push_back({std::move(pname), {pair->lo, pair->hi}});
    }
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
  // The last pass that reads this rank's entries (its pair sides point into its own dump only): their
  // memory goes as the snapshots grow, so the import never holds both whole.
  std::vector<GroupEntries>().swap(by_group);
  std::vector<GroupRecords>().swap(summary.records);
  o.entries = summary.entries;
  std::vector<FrEntry>().swap(d.entries);
}

// Each rank's snapshot is its own work: built over the cores. What is shared (the metadata's pair
// communicators, the counts) is merged after, in rank order, so the result does not depend on the
// threads.
void JobImport::build_snapshots() {
  for (auto& rd : dumps) in_order.push_back(&rd);
  built.resize(in_order.size());
  {
    std::atomic<size_t> next_rank{0};
    auto work = [&] {
      for (size_t k = next_rank++; k < in_order.size(); k = next_rank++) build_snapshot(k);
    };
    std::vector<std::jthread> pool;
    const size_t n = std::min<size_t>({in_order.size(), std::max(1u, std::thread::hardware_concurrency()), 16});
    for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
    work();
  }
}

// The run directory: every rank's snapshot or why it has none, and whether anything is pending.
void JobImport::assemble_run() {
  std::set<std::string> p2p_groups;
  for (size_t k = 0; k < in_order.size(); ++k) {
    out.status_rows += in_order[k]->second.status_by_pg_id.size();
    out.status_pending = out.status_pending || built[k].status_pending;
  }
  // A rank that left no dump is evidence too: every rank dumps on demand or on the watchdog's
  // signal, so a job with a dump missing is not judged healthy.
  out.pending = when.pending || out.status_pending || !unreadable.empty() ||
                int(dumps.size()) < world;
  out.time_basis = when.basis;
  out.timeout_s = when.timeout_s;

  out.run.dir = path;
  out.run.problems = job_groups.notes;
  out.run.problems.insert(out.run.problems.end(), late_retirements.begin(), late_retirements.end());
  out.run.world_size = world;
  out.run.ranks.resize(size_t(world));
  size_t built_at = 0;  // `built` is in rank order, as `dumps`
  for (int r = 0; r < world; ++r) {
    format::RankFiles& rf = out.run.ranks[size_t(r)];
    rf.rank = r;
    auto it = dumps.find(r);
    if (it == dumps.end()) {
      if (auto u = unreadable.find(r); u != unreadable.end()) {
        rf.flight_status = u->second;
      } else {
        rf.flight_status = not_found(fmt::format("no dump for rank {} (the rank may have died, been stopped, or hung "
                                                 "holding the GIL)", r));
      }
      out.missing.push_back(r);
      out.run.problems.push_back(rf.flight_status.message());
      continue;
    }
    const FrDump& d = it->second;
    out.found.push_back(r);
    if (d.partial) out.partial.push_back(r);
    out.timing = out.timing || d.timing;
    out.entries += built[built_at].entries;
    // Each rank's backends in the order its entries name them (RankSummary): in rank order, the
    // order the job's entries name them.
    const RankSummary& summary = *summary_of.at(r);
    out.event_backend = out.event_backend || summary.event_backend;
    for (std::string_view b : summary.backends)
      if (std::find(out.backends.begin(), out.backends.end(), b) == out.backends.end()) out.backends.emplace_back(b);
    RankOut& o = built[built_at++];
    for (auto& [pname, ranks] : o.pair_groups)
      if (p2p_groups.insert(pname).second) meta.groups.push_back({std::move(pname), {ranks.first, ranks.second}});
    rf.flight = std::move(o.snapshot);
  }
  out.run.metadata = std::move(meta);
}

// The one line that says what was read.
void JobImport::write_summary() {
  std::string backends;
  for (const auto& b : out.backends) backends += (backends.empty() ? "" : "+") + b;
  const std::string timing = !out.event_backend ? "no start or end events (Gloo: 'retired' marks completion, a failed "
                                                  "collective's too; send/recv are not recorded, so a rank blocked in "
                                                  "one shows nothing open)"
                             : out.timing       ? "timing on (a 'scheduled' collective never started on the GPU)"
                                                : "timing off (TORCH_NCCL_ENABLE_TIMING unset: 'running' and 'never started' look the same)";
  out.summary = fmt::format("read PyTorch Flight Recorder dumps {}: format {}{}, {}, missing {}{}; {}",
                            found.pattern, out.version,
                            backends.empty() ? "" : ", backend " + backends, ranks_phrase(out.found),
                            out.missing.empty() ? "none" : ranks_phrase(out.missing),
                            (out.partial.empty() ? "" : ", ended early " + ranks_phrase(out.partial)) +
                                (out.missing.empty() ? "" : " (what a missing rank did is inferred from its peers' dumps)"),
                            timing);
}

}  // namespace

bool looks_like_fr_dumps(const fs::path& path) { return has_dumps(path); }

Result<FrImport> import_fr_dumps(const fs::path& path) {
  JobImport job(path);
  RS_RETURN_IF_ERROR(job.read_dumps());
  RS_RETURN_IF_ERROR(job.bound_world());
  job.resolve_job_groups();
  job.place_members();
  job.build_snapshots();
  job.assemble_run();
  job.write_summary();
  return std::move(job.out);
}

}  // namespace rankscope::torch_fr
