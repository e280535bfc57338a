// log_run.cpp — NCCL's COLL lines and PyTorch's watchdog lines as communicators of a RunDirectory.
#include "log_run.h"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "rankscope/format/saturating.h"

namespace rankscope::logs {
namespace {

format::CollectiveOp torch_op(std::string_view t) {
  if (t == "ALLREDUCE" || t == "ALLREDUCE_COALESCED") return format::CollectiveOp::kAllReduce;
  if (t == "ALLGATHER" || t == "_ALLGATHER_BASE" || t == "ALLGATHER_COALESCED" || t == "ALLGATHER_INTO_TENSOR_COALESCED")
    return format::CollectiveOp::kAllGather;
  if (t == "REDUCE_SCATTER" || t == "_REDUCE_SCATTER_BASE" || t == "REDUCE_SCATTER_TENSOR_COALESCED")
    return format::CollectiveOp::kReduceScatter;
  if (t == "BROADCAST") return format::CollectiveOp::kBroadcast;
  if (t == "REDUCE") return format::CollectiveOp::kReduce;
  if (t == "ALLTOALL" || t == "ALLTOALL_BASE") return format::CollectiveOp::kAllToAllV;
  if (t == "BARRIER") return format::CollectiveOp::kBarrier;
  if (t == "SEND") return format::CollectiveOp::kSend;
  if (t == "RECV" || t == "RECVANYSOURCE") return format::CollectiveOp::kRecv;
  if (t == "GATHER") return format::CollectiveOp::kGather;
  if (t == "SCATTER") return format::CollectiveOp::kScatter;
  return format::CollectiveOp::kUnknown;
}

format::CollectiveSnapshot record(uint64_t seq, const NcclCall& c, bool completed, int peer) {
  format::CollectiveSnapshot r;
  r.seq = seq;
  r.op = c.op;
  r.dtype = c.dtype;
  r.count = c.count;
  r.bytes = c.count * format::dtype_size(c.dtype);
  r.state = completed ? format::CollectiveState::kCompleted : format::CollectiveState::kEnqueued;
  r.peer = peer;
  r.host_returned = true;  // NCCL calls return once enqueued on a stream
  return r;
}

struct Comm {
  std::string name;
  int nranks = 0;
  std::map<int, const CommMember*> by_rank;  // rank in comm -> member
};

// The log's communicators and process groups as a run directory, in the phases build_run runs in
// order; each reads what the ones before it left in these members.
struct LogRunBuild {
  const LogJob& job;
  const RankMap& ranks;
  LogImport& out;
  int world = 0;
  std::vector<format::FlightRecorderSnapshot> snaps;
  std::vector<bool> has;
  format::RunMetadata meta;
  std::map<std::string, Comm> comms;
  std::map<std::pair<int, std::string>, TorchPgLog> torch;
  std::map<std::string, std::map<int, const TorchPgLog*>> pgs;
  int64_t ran_ms = 0;

  LogRunBuild(const LogJob& j, const RankMap& r, LogImport& o) : job(j), ranks(r), out(o), world(r.world) {}
  format::FlightRecorderSnapshot& snap(int r) {
    has[size_t(r)] = true;
    return snaps[size_t(r)];
  }
  int global(const CommMember& m) const {
    auto it = ranks.rank_of_device.find({m.host, m.pid, m.device});
    return it == ranks.rank_of_device.end() ? -1 : it->second;
  }
  void run();
  void collect_nccl_comms();
  void nccl_comm_snapshots(const Comm& c);
  void pair_snapshots(const Comm& c, int r, const CommMember& m, const std::vector<int>& members);
  void name_torch_groups();
  std::vector<int> torch_group_members(const std::string& pg, const std::map<int, const TorchPgLog*>& by_rank,
                                       const std::string& name);
  void torch_group_snapshots(const std::string& pg, const std::map<int, const TorchPgLog*>& by_rank);
  void finish_ranks();
};

void LogRunBuild::run() {
  out.world_size = world;
  snaps.resize(size_t(std::max(world, 0)));
  has.assign(snaps.size(), false);
  meta.program = "log";
  meta.world_size = world;
  collect_nccl_comms();
  for (const auto& [k, c] : comms) nccl_comm_snapshots(c);
  name_torch_groups();
  for (const auto& [pg, by_rank] : pgs) torch_group_snapshots(pg, by_rank);
  finish_ranks();
}

// NCCL communicators with COLL lines.
void LogRunBuild::collect_nccl_comms() {
  int unplaced = 0;
  for (const auto& [key, m] : job.members) {
    if (m.rank < 0 && (m.calls > 0 || !m.p2p.empty())) ++unplaced;
    if (m.rank < 0 || m.nranks <= 0 || (m.calls == 0 && m.p2p.empty())) continue;
    Comm& c = comms[comm_key(m)];
    c.nranks = m.nranks;
    c.by_rank[m.rank] = &m;
  }
  if (unplaced > 0)
    out.cannot_tell.push_back(fmt::format("{} process{} printed NCCL calls on communicators whose init lines are not in the "
                                          "log: which rank made them is unknown, so they are left out",
                                          unplaced, unplaced == 1 ? "" : "es"));
  // One world-sized communicator without a commId is just "world".
  int world_sized = 0;
  for (const auto& [k, c] : comms) world_sized += c.nranks == ranks.nccl_world;
  for (auto& [k, c] : comms) c.name = (world_sized == 1 && c.nranks == ranks.nccl_world && k.find("#1") != std::string::npos) ? "world" : k;
}

void LogRunBuild::nccl_comm_snapshots(const Comm& c) {
  std::vector<int> members(size_t(c.nranks), -1);
  uint64_t completed = std::numeric_limits<uint64_t>::max();
  for (const auto& [r, m] : c.by_rank) {
    if (r < c.nranks) members[size_t(r)] = global(*m);
    completed = std::min(completed, m->calls);
  }
  if (int(c.by_rank.size()) < c.nranks) {
    out.cannot_tell.push_back(fmt::format("{}: {} of its {} ranks printed calls; what the others called is unknown, "
                                          "and none of its calls can be taken as completed",
                                          c.name, c.by_rank.size(), c.nranks));
    completed = 0;
  }
  std::vector<int> known;
  for (int g : members)
    if (g >= 0) known.push_back(g);
  meta.groups.push_back({c.name, known});
  for (const auto& [r, m] : c.by_rank) {
    const int g = global(*m);
    if (g < 0 || g >= world) continue;
    format::CommSnapshot s;
    s.name = c.name;
    s.size = c.nranks;
    s.rank_in_comm = r;
    const uint64_t first = m->calls > CommMember::kKeep ? m->calls - CommMember::kKeep : 0;
    s.ring.reserve(size_t(m->calls - first));
    for (uint64_t i = first; i < m->calls; ++i) {
      const NcclCall& call = m->last[i % CommMember::kKeep];
      s.ring.push_back(record(i + 1, call, i + 1 <= completed, -1));
      if (i + 1 > completed) out.pending = true;
    }
    s.next_seq = m->calls + 1;
    s.completed_count = std::min(completed, m->calls) + 1;
    if (m->calls > 0) snap(g).comms.push_back(std::move(s));
    // Send/recv: one pair communicator per peer, calls in the order each side made them.
    pair_snapshots(c, r, *m, members);
  }
}

void LogRunBuild::pair_snapshots(const Comm& c, int r, const CommMember& m, const std::vector<int>& members) {
  const int g = global(m);
  for (const auto& [peer, p] : m.p2p) {
    if (peer < 0 || peer >= c.nranks) continue;
    const int lo = std::min(r, peer), hi = std::max(r, peer);
    const std::string pname = fmt::format("{} p2p {}-{}", c.name, lo, hi);
    uint64_t other = 0;
    bool other_known = false;
    if (auto o = c.by_rank.find(peer); o != c.by_rank.end())
      if (auto q = o->second->p2p.find(r); q != o->second->p2p.end()) {
        other = q->second.calls;
        other_known = true;
      }
    if (!other_known && c.by_rank.count(peer)) other_known = true;  // the peer printed, but no call to us
    const uint64_t done = other_known ? std::min(other, p.calls) : 0;
    format::CommSnapshot ps;
    ps.name = pname;
    ps.size = 2;
    ps.rank_in_comm = r == lo ? 0 : 1;
    NcclCall last = p.last;
    if (r != lo) last.op = last.op == format::CollectiveOp::kSend ? format::CollectiveOp::kRecv : format::CollectiveOp::kSend;
    const int peer_global = peer < int(members.size()) ? members[size_t(peer)] : -1;
    ps.ring.push_back(record(p.calls, last, p.calls <= done, peer_global));
    if (p.calls > done) out.pending = true;
    ps.next_seq = p.calls + 1;
    ps.completed_count = done + 1;
    snap(g).comms.push_back(std::move(ps));
    if (r == lo) meta.groups.push_back({pname, {members[size_t(lo)], peer_global}});
  }
}

// PyTorch's watchdog: per process group, what each rank enqueued and completed. Lines that name no
// group join a named one where they can, the default group where every rank agrees, or their own.
void LogRunBuild::name_torch_groups() {
  // PyTorch's watchdog: per process group, what each rank enqueued and completed.
  // Lines that name no group ("[Rank N]" before 2.3; 2.4's timeout line beside a "[PG 1 Rank 0]"
  // status line): a timeout joins the named group of the same rank that failed on the same work.
  torch = job.torch;
  for (auto it = torch.begin(); it != torch.end();) {
    TorchPgLog& g = it->second;
    if (!g.pg.empty() || !g.timed_out) {
      ++it;
      continue;
    }
    TorchPgLog* named = nullptr;
    for (auto& [k, other] : torch)
      if (k.first == it->first.first && !other.pg.empty() && (other.failing_seq == g.timed_out->seq || !named))
        if (!named || other.failing_seq == g.timed_out->seq) named = &other;
    if (named && (named->failing_seq == g.timed_out->seq || named->failing_seq < 0)) {
      if (!named->timed_out) named->timed_out = g.timed_out;
      it = torch.erase(it);
    } else {
      ++it;
    }
  }
  // An unnamed timeout on the same work (SeqNum and OpType) as a named group's is that group's.
  std::map<std::pair<int64_t, std::string>, std::string> named_works;
  for (const auto& [k, g] : torch)
    if (!g.pg.empty() && g.timed_out) named_works[{g.timed_out->seq, g.timed_out->op_type}] = g.pg;
  for (auto it = torch.begin(); it != torch.end();) {
    const TorchPgLog& g = it->second;
    auto w = g.pg.empty() && g.timed_out ? named_works.find({g.timed_out->seq, g.timed_out->op_type}) : named_works.end();
    if (w == named_works.end() || torch.count({it->first.first, w->second})) {
      ++it;
      continue;
    }
    TorchPgLog moved = g;
    moved.pg = w->second;
    const int rank = it->first.first;
    it = torch.erase(it);
    torch.emplace(std::make_pair(rank, moved.pg), std::move(moved));
  }
  // What is left unnamed is the default group where every rank that printed agrees on the work it
  // timed out on (one group in the job, the common case); where they disagree, the SeqNums may be
  // different groups' and are not compared.
  std::set<std::pair<int64_t, std::string>> unnamed_works;
  bool any_unnamed = false;
  for (const auto& [k, g] : torch)
    if (g.pg.empty()) {
      any_unnamed = true;
      if (g.timed_out) unnamed_works.insert({g.timed_out->seq, g.timed_out->op_type});
    }
  const bool unnamed_is_default = unnamed_works.size() <= 1 && !torch.count({0, "0"});
  for (auto& [key, g] : torch) {
    if (g.pg.empty() && unnamed_is_default) g.pg = "0";
    if (g.pg.empty()) g.pg = fmt::format("of rank {}", key.first);
    pgs[g.pg][key.first] = &g;
  }
  if (any_unnamed && !unnamed_is_default)
    out.cannot_tell.push_back("ranks timed out on different works in lines that name no process group (PyTorch before "
                              "2.3): each SeqNum counts in its own group, so they are not compared");
}

// The group's members: every rank for the default group, else only the ranks that printed about it.
std::vector<int> LogRunBuild::torch_group_members(const std::string& pg, const std::map<int, const TorchPgLog*>& by_rank,
                                                  const std::string& name) {
  const bool own = pg.starts_with("of rank ");
  // The default group holds every rank; of another group only the ranks that printed are known.
  std::vector<int> members;
  if (pg == "0") {
    for (int r = 0; r < world; ++r) members.push_back(r);
  } else if (own) {
    for (const auto& [r, g] : by_rank) members.push_back(r);
  } else {
    for (const auto& [r, g] : by_rank) members.push_back(r);
    bool tagged = true;
    for (const auto& [r, g] : by_rank) tagged = tagged && g->global_rank >= 0;
    out.cannot_tell.push_back(fmt::format("{}: only the ranks that printed about it are known as its members ({}){}", name,
                                          compact(members),
                                          tagged ? "" : "; no launcher tag gives their global ranks, so these are "
                                                        "their ranks in the group"));
  }
  return members;
}

void LogRunBuild::torch_group_snapshots(const std::string& pg, const std::map<int, const TorchPgLog*>& by_rank) {
  std::string desc;
  for (const auto& [r, g] : by_rank)
    if (!g->pg_desc.empty()) desc = g->pg_desc;
  const bool own = pg.starts_with("of rank ");
  const std::string name = own ? fmt::format("a process group {} (the log names none)", pg)
                           : desc.empty() ? fmt::format("pg {}", pg) : fmt::format("pg {} ({})", pg, desc);
  std::vector<int> members = torch_group_members(pg, by_rank, name);
  meta.groups.push_back({name, members});
  // What every member completed: a collective completes only once all entered it.
  int64_t agreed = -1;
  for (const auto& [r, g] : by_rank) {
    int64_t done = g->last_completed;
    if (done < 0 && g->timed_out && g->timed_out->seq > 0) done = g->timed_out->seq - 1;
    agreed = std::max(agreed, done);
  }
  // A rank that printed nothing about this group is read as having nothing pending there only
  // where most of the group's ranks in the log timed out (a log cut to a few lines says little).
  int timed = 0, quiet = 0;
  for (int r : members) {
    auto it = by_rank.find(r);
    if (it != by_rank.end() && it->second->timed_out) ++timed;
    else if (it == by_rank.end() && ranks.seen.count(r)) ++quiet;
  }
  const bool infer_silent = timed >= quiet;
  std::vector<int> silent;
  for (size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    if (r < 0 || r >= world) continue;
    format::CommSnapshot s;
    s.name = name;
    s.size = int(members.size());
    s.rank_in_comm = int(i);
    auto it = by_rank.find(r);
    if (it == by_rank.end()) {
      // Printed nothing about this group while its peers timed out: it had nothing pending here.
      if (!ranks.seen.count(r) || !infer_silent) continue;  // not in the log (or too little of it): missing
      silent.push_back(r);
      s.next_seq = uint64_t(format::add_saturating(std::max<int64_t>(agreed, 0), 1));
      s.completed_count = s.next_seq;
      snap(r).comms.push_back(std::move(s));
      continue;
    }
    const TorchPgLog& g = *it->second;
    if (g.watchdog_stuck && !g.timed_out && g.last_enqueued < 0) continue;  // its position is unknown
    int64_t enq = g.last_enqueued, done = g.last_completed;
    if (g.timed_out && g.timed_out->seq > 0) {
      enq = std::max(enq, g.timed_out->seq);
      if (done < 0) done = g.timed_out->seq - 1;
      format::CollectiveSnapshot rec;
      rec.seq = uint64_t(g.timed_out->seq);
      rec.op = torch_op(g.timed_out->op_type);
      // A coalesced group's elements differ by rank by design: not a count to compare.
      rec.count = g.timed_out->op_type.find("COALESCED") == std::string::npos ? g.timed_out->numel_in : 0;
      rec.state = format::CollectiveState::kEnqueued;
      rec.host_returned = true;
      rec.enqueue_ns = 0;
      s.ring.push_back(rec);
      ran_ms = std::max(ran_ms, g.timed_out->ran_ms);
      out.pending = true;
    }
    if (enq > done) out.pending = true;
    s.next_seq = uint64_t(format::add_saturating(std::max<int64_t>(enq, 0), 1));
    s.completed_count = uint64_t(format::add_saturating(std::max<int64_t>(done, 0), 1));
    snap(r).comms.push_back(std::move(s));
  }
  if (!silent.empty())
    out.cannot_tell.push_back(fmt::format("{}: rank{} {} printed no watchdog line while others timed out: read as "
                                          "having nothing pending there (completed #{}, never entered the next)",
                                          name, silent.size() == 1 ? "" : "s", compact(silent), agreed));
}

void LogRunBuild::finish_ranks() {
  out.has_progress = false;
  out.run.dir = job.files.empty() ? std::string("-") : job.files.front();
  out.run.world_size = world;
  out.run.ranks.resize(size_t(world));
  // SeqNums and times from the log may be anything up to INT64_MAX: held there, never wrapped.
  const int64_t now_ns = format::mul_saturating(std::max<int64_t>(ran_ms, 0), 1'000'000);
  for (int r = 0; r < world; ++r) {
    format::RankFiles& rf = out.run.ranks[size_t(r)];
    rf.rank = r;
    if (!has[size_t(r)]) {
      // Without the rank's number: every rank a log never heard from says the same, so a report groups
      // them (a log may claim a world of 2^20 ranks and show four).
      rf.flight_status = not_found(ranks.seen.count(r) ? "it printed no call or watchdog line" : "it printed nothing in this log");
      continue;
    }
    out.has_progress = true;
    format::FlightRecorderSnapshot& s = snaps[size_t(r)];
    s.schema_version = format::kFlightSchemaVersion;
    s.rank = r;
    s.world_size = world;
    s.run_id = "log";
    if (auto h = ranks.host_of_rank.find(r); h != ranks.host_of_rank.end()) s.host = h->second;
    s.live.heartbeat_ns = now_ns;
    s.live.process_state = format::ProcessState::kRunning;
    s.live.clock_uncertainty_ns = -1;
    for (auto& c : s.comms) c.index = int(&c - s.comms.data());
    format::ThreadSnapshot main;
    main.name = "main";
    s.threads.push_back(std::move(main));
    rf.flight = std::move(s);
  }
  if (!out.has_progress) out.run.ranks.clear();
  out.run.metadata = std::move(meta);
}

}  // namespace

void build_run(const LogJob& job, const RankMap& ranks, LogImport& out) { LogRunBuild(job, ranks, out).run(); }

}  // namespace rankscope::logs
