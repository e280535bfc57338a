// classifier.cpp — the verdict: finished, healthy, desync, crash or hang, and whom to blame.
// The steps and their order are described in classifier.h.
#include "rankscope/analyzers/hang/classifier.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis_parts.h"
#include "rankscope/analyzers/hang/rank_list.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/side_by_side.h"
#include "wording.h"

namespace rankscope::analyzers::hang {
namespace {

constexpr int64_t kQuickFrozenCheckNs = 2'000'000'000;  // 20 missed heartbeats

double seconds(int64_t ns) { return double(ns) / kNsPerSecond; }

// Seconds from `from` to `to`, 0 (unknown) where the difference saturates.
double span_s(int64_t from, int64_t to) {
  const int64_t d = format::sub_saturating(to, from);
  return d == INT64_MAX || d == INT64_MIN ? 0 : seconds(d);
}

// Host-side work outside the model and the collectives: a stall here is not a collective problem.
bool is_host_range(const std::string& name) {
  for (std::string_view p : {"data", "checkpoint", "eval", "io", "log"})
    if (name == p || name.rfind(std::string(p) + "/", 0) == 0) return true;
  return false;
}

bool in_backward_compute(const RankView& v) {
  return std::any_of(v.stack.begin(), v.stack.end(), [](const std::string& r) { return r.rfind("backward/", 0) == 0; });
}

std::vector<MissingGradient> missing_gradients_of(const RankView& v) {
  std::vector<MissingGradient> out;
  if (!v.readable()) return out;
  const auto& g = v.snap->grad;
  if (g.backward_step < 0 || g.backward_step != v.snap->live.step) return out;  // not this step's pass
  for (const auto* p : v.snap->missing_gradients()) out.push_back({v.rank, std::string(p->name), p->bucket});
  return out;
}

class Classifier {
 public:
  Classifier(const format::RunDirectory& run, ProcessTable& processes, const ClassifyOptions& o)
      : run_(run), processes_(processes), o_(o), views_(build_rank_views(run, processes)), groups_(build_groups(run, views_)) {
    for (int r : o.unreachable_ranks)
      if (r >= 0 && size_t(r) < views_.size() && !views_[size_t(r)].readable()) views_[size_t(r)].unreachable = true;
  }

  Diagnosis run();

 private:
  void timeline();
  std::vector<int> find_dead();
  bool try_mismatch(bool with_call_site);
  bool try_count_mismatch();
  const std::optional<MismatchFinding>& mismatch_scan(bool with_call_site);
  const std::optional<CountMismatchFinding>& count_scan();
  void scan_side_by_side(bool with_call_site_too);
  void blame_silent(Verdict verdict, Kind kind, const std::vector<int>& silent);
  void blame_stuck();
  void blame_terminal(const WaitGraph& g);
  void blame_least_progress();
  void classify_live_culprits(const std::vector<int>& culprits, const WaitGraph* g);
  std::optional<CollectiveRef> completed_by_a_peer(const RankView& v) const;
  std::optional<WaitEdge> innermost_edge(const WaitGraph& g, const std::vector<int>& culprits) const;
  std::vector<int> waiters_at(const std::string& comm, uint64_t seq) const;
  bool none_started(const std::string& comm, uint64_t seq) const;
  void set_collective(const std::string& comm, uint64_t seq);
  void fill_ranks();
  void find_nodes();
  std::string progress_on(const std::string& comm) const;
  std::optional<Mismatch> issued_mismatch(const std::string& comm) const;
  std::vector<int> out_of_step(const WaitGraph& g) const;
  void say_where_ahead(int culprit);
  // Seconds from `ns` to the reference time. Both are read from the files: a span that does not fit
  // in 64 bits is no time at all, and reads as unknown (0), never as a wrapped or 292-year wait.
  double since(int64_t ns) const { return span_s(ns, d_.reference_ns); }

  const format::RunDirectory& run_;
  ProcessTable& processes_;
  ClassifyOptions o_;
  std::vector<RankView> views_;
  GroupList groups_;
  Diagnosis d_;
  WordingFacts facts_;
  bool job_gone_ = false;  // every unfinished rank's process is gone: nothing will progress again
  std::vector<int> frozen_;  // heartbeat stopped while others beat, process here, no thread runs
  struct CompletedCounts {
    bool group = false;  // the communicator is a known group
    uint64_t first = 0, second = 0;
    int first_rank = -1;
    bool has_second = false;
  };
  mutable std::unordered_map<std::string, CompletedCounts> completed_on_;  // by communicator
  // The scans over every member's every record (find_mismatch with and without call sites,
  // find_count_mismatch): pure functions of the views and groups, each made once.
  std::optional<std::optional<MismatchFinding>> mismatch_[2];
  std::optional<std::optional<CountMismatchFinding>> count_;
};

// The activation-recompute setting in words: "off", "1 (GELU)", "2 (GELU and LayerNorm)"; ""
// unknown. gpt2-train writes it as run.json model.recompute; training.recompute and a top-level
// config block are read too (other producers, later layouts).
std::string recompute_words(const format::RunDirectory& run) {
  if (!run.metadata) return "";
  const nlohmann::json* found = nullptr;
  auto look = [&](const nlohmann::json& obj) {
    if (!found && obj.is_object() && obj.contains("recompute")) found = &obj["recompute"];
  };
  look(run.metadata->model);
  look(run.metadata->training);
  if (run.metadata->extra.contains("config")) {
    const auto& c = run.metadata->extra["config"];
    look(c);
    if (c.is_object())
      for (const auto& [k, v] : c.items()) look(v);
  }
  if (!found) return "";
  const auto it = found;
  if (it->is_boolean()) return it->get<bool>() ? "on" : "off";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_number_integer()) return "";
  switch (it->get<int>()) {
    case 0: return "off";
    case 1: return "1 (GELU)";
    case 2: return "2 (GELU and LayerNorm)";
    default: return std::to_string(it->get<int>());
  }
}

Diagnosis Classifier::run() {
  d_.run_dir = run_.dir.string();
  d_.world_size = run_.world_size;
  d_.problems = run_.problems;
  d_.recompute = recompute_words(run_);
  d_.time_basis = o_.time_basis;
  d_.missing_evidence = o_.missing_evidence;
  d_.missing_evidence_plural = o_.missing_evidence_plural;
  d_.times_are_lower_bounds = !o_.time_basis.empty();
  for (const auto& v : views_)
    if (v.readable())
      for (const auto& w : v.snap->warnings) d_.problems.push_back(fmt::format("rank {}: {}", v.rank, w));
  timeline();

  const bool any = std::any_of(views_.begin(), views_.end(), [](const RankView& v) { return v.readable(); });
  const bool all_finished = any && std::all_of(views_.begin(), views_.end(), [](const RankView& v) {
                              return !v.readable() || v.finished;
                            });
  if (all_finished) {
    // Counts that disagreed but completed short (MPI) still corrupted data: worth a desync.
    if (!try_count_mismatch()) d_.verdict = Verdict::kFinished;
  } else {
    const std::vector<int> dead = find_dead();
    std::optional<Detection> past_bound;
    if (o_.learned_bounds) past_bound = find_past_learned_bound(views_, d_.reference_ns);
    // A bound learned from no training step (the start-up step alone, init included) is the
    // weakest evidence there is; where every peer waits on an idle rank, the peers' rule judges
    // (it names the idle rank, with the waiters), and the detection does not hinge on which of
    // the two same-floored rules a poll happened to catch first.
    if (o_.peer_wait && (!past_bound || past_bound->samples == 0)) {
      bool pending = false;
      auto by_peers = find_idle_past_peer_wait(views_, groups_, d_.reference_ns,
                                               {o_.peer_wait_floor_s, o_.peer_wait_factor, o_.peer_wait_min_s}, &pending);
      if (by_peers) past_bound = std::move(by_peers);
      else if (pending && past_bound) past_bound.reset();
    }
    // A hang still forming: others drain their own work, but a peer already waits for an idle rank.
    const std::vector<int> forming = forming_hang_culprits(views_, groups_, d_.reference_ns, o_.stuck_after_s);
    const bool stuck = o_.no_progress_observed || d_.stuck_for_s >= o_.stuck_after_s || !dead.empty() || job_gone_ ||
                       !frozen_.empty() || !forming.empty() || past_bound;
    if (!forming.empty() && d_.stuck_for_s < o_.stuck_after_s) facts_.forming = true;
    auto detected_by = [](std::string by) {
      Detection x;
      x.by = std::move(by);
      return x;
    };
    if (!dead.empty() || !frozen_.empty() || job_gone_) d_.detection = detected_by("dead_or_frozen");
    else if (past_bound) d_.detection = past_bound;
    else if (o_.no_progress_observed) d_.detection = detected_by(d_.times_are_lower_bounds ? "dump" : "watched");
    else if (facts_.forming) d_.detection = detected_by("forming");
    else if (stuck) d_.detection = detected_by("no_progress");
    // The count scan and the plain mismatch scan are always asked for here; the one with call
    // sites when nothing else can name the culprits.
    scan_side_by_side(stuck && dead.empty() && frozen_.empty());
    if (try_count_mismatch()) {
      // an all_to_all_v's per-peer counts disagree: the crash or hang that follows comes from it
    } else if (try_mismatch(false)) {
      // op, dtype or size disagreement: a bug whatever else happened after it
    } else if (!dead.empty()) {
      blame_silent(Verdict::kCrash, Kind::kRankDead, dead);
    } else if (!frozen_.empty()) {
      blame_silent(Verdict::kHang, Kind::kRankFrozen, frozen_);
    } else if (stuck) {
      if (!try_mismatch(true)) blame_stuck();
    } else {
      d_.verdict = Verdict::kHealthy;
      d_.detection.reset();
    }
  }
  fill_ranks();
  find_nodes();
  if ((d_.verdict == Verdict::kHang || d_.verdict == Verdict::kCrash) && !d_.culprit_ranks.empty()) {
    const WaitGraph g = build_wait_graph(views_, groups_);
    d_.waits = wait_chains(g, d_.culprit_ranks, views_);
    for (auto& chain : d_.waits)
      if (auto e = innermost_edge(g, {chain.culprit})) {
        const auto* c = views_[e->waiter].comm(e->comm);
        const auto* rec = c ? c->find(e->seq) : nullptr;
        chain.first = rec ? collective_ref(e->comm, *rec) : CollectiveRef{e->comm, e->seq};
      }
    facts_.culprits_idle = std::all_of(d_.culprit_ranks.begin(), d_.culprit_ranks.end(),
                                       [&](int r) { return views_[r].readable() && !views_[r].waiting(); });
    if (facts_.peers_completed) {
      std::string at;
      for (int r : d_.culprit_ranks)
        if (auto c = completed_by_a_peer(views_[r]))
          at += fmt::format("{}rank {}: {} #{} on {}", at.empty() ? "" : "; ", r, format::short_op_name(c->op), c->seq, c->comm);
      facts_.stopped_at = at;
    }
  }
  if (d_.collective) {
    facts_.waiters = waiters_at(d_.collective->comm, d_.collective->seq);
    facts_.progress = progress_on(d_.collective->comm);
    facts_.none_started = none_started(d_.collective->comm, d_.collective->seq);
  }
  compose_wording(d_, facts_);
  d_.explanation += nccl_evidence_sentence(d_, views_);
  return std::move(d_);
}

void Classifier::timeline() {
  int64_t ref = 0, last = 0;
  for (const auto& v : views_) {
    if (!v.readable()) continue;
    ref = std::max({ref, v.heartbeat_ns, v.last_activity_ns});
    last = std::max(last, v.last_activity_ns);
  }
  d_.reference_ns = ref;
  // No recorded activity at all: no duration, rather than one measured from the epoch.
  d_.stuck_for_s = last > 0 ? span_s(last, ref) : 0;
}

std::vector<int> Classifier::find_dead() {
  int64_t freshest = 0;
  for (const auto& v : views_)
    if (v.readable() && !v.finished) freshest = std::max(freshest, v.heartbeat_ns);
  const int64_t stale = int64_t(o_.stale_heartbeat_s * kNsPerSecond);
  std::vector<int> dead, candidates;
  int unfinished = 0;
  for (auto& v : views_) {
    if (!v.readable() || v.finished) continue;
    ++unfinished;
    const bool stale_beat = format::add_saturating(v.heartbeat_ns, stale) < freshest;
    // The watchdog beats every 100 ms: a couple of seconds of silence is already worth asking the
    // kernel about. A stopped or traced process is frozen whatever the age; uninterruptible sleep
    // can be a slow disk, so it needs the full staleness.
    const bool missed_beats = format::add_saturating(v.heartbeat_ns, kQuickFrozenCheckNs) < freshest;
    if ((stale_beat || missed_beats) && v.liveness == Liveness::kAlive) {
      // The process is here: ask the kernel whether any of its threads can run.
      v.os = processes_.status(v.snap->host, v.snap->pid);
      const bool stopped = v.os.state == OsRunState::kStopped || v.os.state == OsRunState::kTraced;
      if ((stale_beat && is_frozen(v.os.state) && v.os.state != OsRunState::kZombie) || stopped) {
        v.frozen = true;
        frozen_.push_back(v.rank);
      }
    }
    const bool gone = v.liveness == Liveness::kGone || v.aborted || (stale_beat && v.os.state == OsRunState::kZombie);
    const bool silent = v.liveness != Liveness::kAlive && stale_beat;
    if (gone || silent) candidates.push_back(v.rank);
  }
  if (candidates.empty()) return dead;
  if (int(candidates.size()) < unfinished) {
    dead = candidates;
  } else {
    // Everyone is gone (the launcher killed the job, or someone did later): only ranks that fell
    // silent well before the others, or exited on an error of their own, are the first failure.
    // Otherwise the snapshot is simply the state at death.
    for (int r : candidates)
      if (format::add_saturating(views_[r].heartbeat_ns, stale) < freshest) dead.push_back(r);
    if (dead.empty()) {
      // A rank that marked itself aborted exited on an error of its own; the others were killed
      // after it (by the launcher).
      const bool all_aborted = std::all_of(candidates.begin(), candidates.end(), [&](int r) { return views_[r].aborted; });
      for (int r : candidates)
        if (!all_aborted && views_[r].aborted) dead.push_back(r);
    }
    if (dead.empty()) {
      // A live rank's heartbeat keeps ticking (the probe's watchdog thread) until it is killed, so
      // it is never much older than anyone's progress. One that stopped before others still made
      // progress died first; the launcher then killed the rest.
      constexpr int64_t kTickSlack = 200'000'000;
      // The latest progress of the others: the largest last activity, or for the rank that holds
      // it the second largest (linear: at 65,536 gone ranks a pairwise scan is 4 billion steps).
      int64_t first = 0, second = 0;
      int first_rank = -1;
      for (int o : candidates) {
        const int64_t a = views_[o].last_activity_ns;
        if (first_rank < 0 || a > first) second = first_rank < 0 ? 0 : first, first = a, first_rank = o;
        else second = std::max(second, a);
      }
      for (int r : candidates) {
        const int64_t others = std::max<int64_t>(0, r == first_rank ? second : first);
        if (format::add_saturating(views_[r].heartbeat_ns, kTickSlack) < others) dead.push_back(r);
      }
    }
    facts_.all_gone = true;
    job_gone_ = true;
  }
  for (int r : dead) views_[r].dead = true;
  return dead;
}

bool Classifier::try_mismatch(bool with_call_site) {
  auto m = mismatch_scan(with_call_site);
  if (!m) return false;
  if (!with_call_site) {
    // A skipped collective shifts every later call of the skipping rank: op and size may agree for
    // a while and disagree only later. The first call-site disagreement on the same communicator
    // is where the desync began.
    const auto& earlier = mismatch_scan(true);
    if (earlier && earlier->at.comm == m->at.comm && earlier->at.seq < m->at.seq) {
      std::string values;
      for (const auto& [r, v] : m->mismatch.values_by_rank) values += fmt::format("{}rank {}: {}", values.empty() ? "" : ", ", r, v);
      facts_.later = fmt::format(" From there on its calls are shifted: at #{} on {} the {} differs too ({}).", m->at.seq,
                                 m->at.comm, m->mismatch.field, values);
      m = earlier;
    }
  }
  d_.verdict = Verdict::kDesync;
  d_.kind = Kind::kCollectiveMismatch;
  d_.culprit_ranks = m->culprits;
  d_.collective = m->at;
  d_.mismatch = m->mismatch;
  facts_.ambiguous = m->ambiguous;
  return true;
}

// Elements per row of an MoE dispatch: the model width, when run.json states it.
uint64_t row_elements_of(const format::RunDirectory& run) {
  if (!run.metadata) return 0;
  const auto& m = run.metadata->model;
  if (!m.is_object() || !m.contains("channels") || !m["channels"].is_number_integer()) return 0;
  const int64_t c = m["channels"].get<int64_t>();
  return c > 0 ? uint64_t(c) : 0;
}

const std::optional<MismatchFinding>& Classifier::mismatch_scan(bool with_call_site) {
  auto& m = mismatch_[with_call_site];
  if (!m) m = find_mismatch(views_, groups_, with_call_site);
  return *m;
}

const std::optional<CountMismatchFinding>& Classifier::count_scan() {
  if (!count_) count_ = find_count_mismatch(views_, groups_, row_elements_of(run_));
  return *count_;
}

// The scans a verdict will ask for, made side by side (side_by_side.h): the count scan on a second
// thread while this one makes the others (at 16,384 ranks each is half a second or more, over 31
// million records). Each only reads the views and groups and writes its own result.
void Classifier::scan_side_by_side(bool with_call_site_too) {
  std::optional<CountMismatchFinding> counts;
  format::side_by_side([&] { counts = find_count_mismatch(views_, groups_, row_elements_of(run_)); },
                       [&] {
                         mismatch_scan(false);
                         if (with_call_site_too) mismatch_scan(true);
                       });
  count_ = std::move(counts);
}

bool Classifier::try_count_mismatch() {
  const auto& m = count_scan();
  if (!m) return false;
  d_.verdict = Verdict::kDesync;
  d_.kind = Kind::kA2aCountMismatch;
  d_.collective = m->at;
  d_.count_mismatch = m->mismatch;
  for (int r : {m->mismatch.receiver, m->mismatch.sender})
    if (r >= 0) d_.culprit_ranks.push_back(r);
  return true;
}

std::vector<int> Classifier::waiters_at(const std::string& comm, uint64_t seq) const {
  std::vector<int> out;
  for (const auto& v : views_)
    if (!v.dead && v.inside(comm, seq)) out.push_back(v.rank);
  return out;
}

// No member's record of (comm, seq) says it started: whether it runs cannot be told from the records.
bool Classifier::none_started(const std::string& comm, uint64_t seq) const {
  for (const auto& v : views_) {
    const auto* c = v.comm(comm);
    const auto* rec = c ? c->find(seq) : nullptr;
    if (rec && rec->state != format::CollectiveState::kEnqueued) return false;
  }
  return true;
}

void Classifier::set_collective(const std::string& comm, uint64_t seq) {
  for (const auto& v : views_) {
    if (!v.readable()) continue;
    const auto* c = v.comm(comm);
    const auto* rec = c ? c->find(seq) : nullptr;
    if (rec) {
      d_.collective = collective_ref(comm, *rec);
      return;
    }
  }
  CollectiveRef unknown;  // no readable recorder holds it any more: name it by (comm, seq) only
  unknown.comm = comm;
  unknown.seq = seq;
  d_.collective = unknown;
}

std::optional<WaitEdge> Classifier::innermost_edge(const WaitGraph& g, const std::vector<int>& culprits) const {
  // A collective the culprits never entered says more than a send or recv they never posted (the
  // pipeline's sends wait on whatever stopped the stage): send/recv only when nothing else waits.
  auto point_to_point = [&](const WaitEdge& e) {
    const auto* c = views_[e.waiter].comm(e.comm);
    const auto* rec = c ? c->find(e.seq) : nullptr;
    return rec && (rec->op == format::CollectiveOp::kSend || rec->op == format::CollectiveOp::kRecv);
  };
  std::optional<WaitEdge> best;
  bool best_p2p = false;
  for (const auto& e : g.edges) {
    if (std::find(culprits.begin(), culprits.end(), e.absent) == culprits.end()) continue;
    const bool p2p = point_to_point(e);
    if (!best || (best_p2p && !p2p) ||
        (p2p == best_p2p && (innermost_rank(groups_, e.comm) < innermost_rank(groups_, best->comm) ||
                             (e.comm == best->comm && e.seq < best->seq)))) {
      best = e;
      best_p2p = p2p;
    }
  }
  return best;
}

// Ranks that stopped beating (dead or frozen): first silent first, at the collective they block.
void Classifier::blame_silent(Verdict verdict, Kind kind, const std::vector<int>& silent) {
  d_.verdict = verdict;
  d_.kind = kind;
  std::vector<int> order = silent;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return views_[a].heartbeat_ns < views_[b].heartbeat_ns; });
  d_.culprit_ranks = order;
  const WaitGraph g = build_wait_graph(views_, groups_);
  if (auto e = innermost_edge(g, silent)) set_collective(e->comm, e->seq);
}

void Classifier::blame_stuck() {
  d_.verdict = Verdict::kHang;
  WaitGraph g = build_wait_graph(views_, groups_);
  // A rank whose device stopped reporting completions is a culprit wherever it sits in the graph:
  // its peers completed with it what it still shows open (a collective completes on all members or
  // on none). Another rank's hang can hold the others up first and hide it from the waits.
  for (const auto& v : views_)
    if (v.waiting() && v.pending->host_returned && completed_by_a_peer(v) &&
        std::find(g.terminal.begin(), g.terminal.end(), v.rank) == g.terminal.end())
      g.terminal.push_back(v.rank);
  std::sort(g.terminal.begin(), g.terminal.end());
  if (!g.terminal.empty()) {
    blame_terminal(g);
  } else if (!g.all_entered.empty()) {
    // Every member is inside and none finished: the collective itself (or the fabric) is stuck.
    d_.kind = Kind::kStuckInCollective;
    const WaitEdge* inner = &g.all_entered.front();
    for (const auto& e : g.all_entered)
      if (innermost_rank(groups_, e.comm) < innermost_rank(groups_, inner->comm)) inner = &e;
    set_collective(inner->comm, inner->seq);
    // Entered on the host is not reached on the device: a member whose GPU never started it is
    // to blame after all.
    if (auto behind = ranks_behind_on_device(views_, groups_, inner->comm, inner->seq); !behind.empty()) {
      d_.kind = Kind::kGpuBehindHost;
      d_.culprit_ranks = behind;
    }
  } else if (!g.edges.empty()) {
    // Everyone waits for someone who waits: ranks are in different collectives (a desync).
    d_.verdict = Verdict::kDesync;
    d_.kind = Kind::kCollectiveMismatch;
    std::vector<int> absent;
    for (const auto& e : g.edges) absent.push_back(e.absent);
    std::sort(absent.begin(), absent.end());
    absent.erase(std::unique(absent.begin(), absent.end()), absent.end());
    d_.culprit_ranks = absent;
    // One rank out of step with every group it shares with the others (one call more on a
    // subgroup, so it waits there while they wait for it on the next group) is the one to blame:
    // its peers agree with each other everywhere.
    if (auto odd = out_of_step(g); !odd.empty()) d_.culprit_ranks = odd;
    const auto e = innermost_edge(g, d_.culprit_ranks);
    set_collective(e->comm, e->seq);
    d_.mismatch = issued_mismatch(e->comm);
    if (d_.culprit_ranks.size() == 1 && d_.mismatch) say_where_ahead(d_.culprit_ranks.front());
  } else {
    blame_least_progress();
  }
}

// How many collectives each member of `comm` issued there, as a disagreement between the culprits
// and the others. A culprit need not be a member (the ranks missing from other groups' collectives
// are culprits too): a mismatch needs both sides' own values, so without a culprit and a healthy
// member that both have a count none is claimed, and the wording names the ranks without values.
std::optional<Mismatch> Classifier::issued_mismatch(const std::string& comm) const {
  Mismatch m{"issued", {}};
  if (const GroupView* grp = find_group(groups_, comm))
    for (int r : grp->ranks)
      if (r >= 0 && r < int(views_.size()) && views_[r].readable()) m.values_by_rank[r] = std::to_string(views_[r].issued(comm));
  const auto is_culprit = [&](int r) {
    return std::find(d_.culprit_ranks.begin(), d_.culprit_ranks.end(), r) != d_.culprit_ranks.end();
  };
  bool culprit = false, healthy = false;
  for (const auto& [r, v] : m.values_by_rank) (is_culprit(r) ? culprit : healthy) = true;
  if (!culprit || !healthy) return std::nullopt;
  return m;
}

// In a desync where every rank waits for another, the ranks whose issued count on some group of
// the waits differs from that group's strict majority; empty unless they are fewer than the ranks
// waited for and every wait has one of them on a side (each wait follows from them).
std::vector<int> Classifier::out_of_step(const WaitGraph& g) const {
  std::set<std::string> comms;
  std::set<int> absent;
  for (const auto& e : g.edges) comms.insert(e.comm), absent.insert(e.absent);
  std::set<int> odd;
  for (const auto& comm : comms) {
    const GroupView* grp = find_group(groups_, comm);
    if (!grp) return {};
    std::map<int64_t, std::vector<int>> by_count;
    size_t readable = 0;
    for (int r : grp->ranks)
      if (r >= 0 && r < int(views_.size()) && views_[r].readable()) by_count[views_[r].issued(comm)].push_back(r), ++readable;
    const auto majority = std::max_element(by_count.begin(), by_count.end(),
                                           [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (majority == by_count.end() || 2 * majority->second.size() <= readable) return {};  // no strict majority
    for (const auto& [count, ranks] : by_count)
      if (count != majority->first) odd.insert(ranks.begin(), ranks.end());
  }
  if (odd.empty() || odd.size() >= absent.size()) return {};
  for (const auto& e : g.edges)
    if (!odd.count(e.waiter) && !odd.count(e.absent)) return {};
  return {odd.begin(), odd.end()};
}

// The out-of-step rank waits in a collective of a group none of whose other members issued it.
void Classifier::say_where_ahead(int culprit) {
  const RankView& v = views_[culprit];
  if (!v.readable() || !v.waiting() || v.pending_comm->name == d_.collective->comm) return;
  const std::string& comm = v.pending_comm->name;
  const GroupView* grp = find_group(groups_, comm);
  if (!grp) return;
  std::vector<int> peers;
  int64_t most = -1;
  for (int r : grp->ranks) {
    if (r == culprit || r < 0 || r >= int(views_.size()) || !views_[r].readable()) continue;
    if (views_[r].issued(comm) > int64_t(v.pending->seq)) return;  // a peer called it too (issued counts it)
    peers.push_back(r);
    most = std::max(most, views_[r].issued(comm));
  }
  if (peers.empty()) return;
  facts_.ahead_on = fmt::format("{} #{} on {}, which none of ranks {} called (they issued {} there)",
                                format::short_op_name(v.pending->op), v.pending->seq, comm,
                                compress_ranks(peers), most);
}

void Classifier::blame_terminal(const WaitGraph& g) {
  // Every rank the others wait for that waits for no missing rank itself is where the hang starts
  // (two GPUs that failed in two tensor-parallel groups are two culprits). The collective named is
  // the innermost one they are missing from.
  std::vector<int> culprits = g.terminal;
  const auto e = innermost_edge(g, culprits);
  if (e) set_collective(e->comm, e->seq);
  else set_collective(views_[culprits.front()].pending_comm->name, views_[culprits.front()].pending->seq);
  d_.culprit_ranks = culprits;

  const bool finished = std::all_of(culprits.begin(), culprits.end(), [&](int r) { return views_[r].readable() && views_[r].finished; });
  if (finished) {
    // It left the job while others still wait for it: it issued fewer collectives (a skip).
    d_.verdict = Verdict::kDesync;
    d_.kind = Kind::kCollectiveMismatch;
    d_.mismatch = issued_mismatch(d_.collective->comm);
    return;
  }
  classify_live_culprits(culprits, &g);
  // A culprit inside a collective its peers completed with it: its own device (or the thread that
  // watches it) stopped reporting completions, and its host went on until it blocked.
  const bool device_stopped = !culprits.empty() && std::all_of(culprits.begin(), culprits.end(), [&](int r) {
    return completed_by_a_peer(views_[r]).has_value();
  });
  if (device_stopped && d_.kind == Kind::kLaggingRank) {
    d_.kind = Kind::kGpuBehindHost;
    facts_.peers_completed = true;
  }
}

// The culprit's oldest open collective, when another member completed it.
std::optional<CollectiveRef> Classifier::completed_by_a_peer(const RankView& v) const {
  if (!v.readable() || !v.waiting() || v.dead) return std::nullopt;
  const std::string& name = v.pending_comm->name;
  // The members' completed counts on the communicator, worked out once for all its waiters (at
  // 16,384 ranks in one group a scan per waiter is quadratic): the largest, whose rank, and the
  // second largest, for the member that holds the largest.
  auto [it, fresh] = completed_on_.try_emplace(name);
  CompletedCounts& counts = it->second;
  if (fresh) {
    if (const GroupView* group = find_group(groups_, name)) {
      counts.group = true;
      for (int m : group->ranks) {
        if (m < 0 || m >= int(views_.size()) || !views_[m].readable()) continue;
        const auto* c = views_[m].comm(name);
        if (!c) continue;
        if (counts.first_rank < 0 || c->completed_count > counts.first) {
          counts.second = counts.first_rank < 0 ? counts.second : std::max(counts.second, counts.first);
          counts.has_second = counts.first_rank >= 0 || counts.has_second;
          counts.first = c->completed_count;
          counts.first_rank = m;
        } else {
          counts.second = counts.has_second ? std::max(counts.second, c->completed_count) : c->completed_count;
          counts.has_second = true;
        }
      }
    }
  }
  if (!counts.group) return std::nullopt;
  // The most any other member completed there.
  const bool other = v.rank == counts.first_rank ? counts.has_second : counts.first_rank >= 0;
  const uint64_t most = v.rank == counts.first_rank ? counts.second : counts.first;
  if (other && most > v.pending->seq) return collective_ref(name, *v.pending);
  return std::nullopt;
}

void Classifier::classify_live_culprits(const std::vector<int>& culprits, const WaitGraph* g) {
  d_.kind = Kind::kLaggingRank;
  for (int r : culprits) {
    const RankView& v = views_[r];
    if (!v.readable()) continue;
    auto missing = missing_gradients_of(v);
    if (!missing.empty() && !in_backward_compute(v)) {
      d_.kind = Kind::kMissingGradient;
      d_.missing_gradients.insert(d_.missing_gradients.end(), missing.begin(), missing.end());
    }
  }
  if (d_.kind == Kind::kMissingGradient) {
    // The collective that never came is the bucket's reduction over dp, not whatever TP
    // collective a neighbour reached later.
    if (g)
      for (const auto& e : g->edges)
        if (e.comm.rfind("dp", 0) == 0 && std::find(culprits.begin(), culprits.end(), e.absent) != culprits.end()) {
          set_collective(e.comm, e.seq);
          break;
        }
    return;
  }
  const bool host = !culprits.empty() && std::all_of(culprits.begin(), culprits.end(), [&](int r) {
    const RankView& v = views_[r];
    return v.readable() && std::any_of(v.stack.begin(), v.stack.end(), is_host_range);
  });
  if (host) d_.kind = Kind::kHostStall;
  const bool device = !culprits.empty() && std::all_of(culprits.begin(), culprits.end(), [&](int r) {
    return views_[r].readable() && waits_for_own_device(views_[r]);
  });
  if (device) d_.kind = Kind::kGpuBehindHost;
}

void Classifier::blame_least_progress() {
  // Nobody is inside a collective, and some rank left no recorder at all (a PyTorch job's rank that
  // died or held the GIL writes no dump; its peers' failed Gloo collectives read as retired): that
  // rank is what is known to be wrong.
  std::vector<int> missing;
  for (const auto& v : views_)
    if (!v.readable()) missing.push_back(v.rank);
  if (!missing.empty() && d_.times_are_lower_bounds) {
    d_.culprit_ranks = missing;
    d_.kind = Kind::kLaggingRank;
    return;
  }
  // Name the ranks that got least far (step, then collectives).
  auto progress = [&](const RankView& v) { return std::pair(v.snap->live.step, v.snap->live.collectives_completed); };
  std::optional<std::pair<int64_t, uint64_t>> least;
  for (const auto& v : views_)
    if (v.readable() && !v.finished && (!least || progress(v) < *least)) least = progress(v);
  int unfinished = 0;
  for (const auto& v : views_) {
    if (!v.readable() || v.finished) continue;
    ++unfinished;
    if (progress(v) == *least) d_.culprit_ranks.push_back(v.rank);
  }
  classify_live_culprits(d_.culprit_ranks, nullptr);
  if (d_.kind == Kind::kLaggingRank && int(d_.culprit_ranks.size()) == unfinished) {
    // No rank is ahead to lag behind (one process, or all equally far): they are stuck in their
    // own computation, not waiting for anyone.
    d_.kind = Kind::kStuckInCompute;
  }
}

// Several ranks of one host in trouble together: one node finding, and every one of them a culprit
// (the classifier may have named only the first of them missing from the innermost collective).
void Classifier::find_nodes() {
  d_.hosts = count_hosts(d_.ranks);
  if (d_.hosts < 2 || (d_.verdict != Verdict::kHang && d_.verdict != Verdict::kCrash)) return;
  const WaitGraph g = build_wait_graph(views_, groups_);
  std::vector<int> waited_for;
  for (const auto& e : g.edges) waited_for.push_back(e.absent);
  d_.nodes = find_node_problems(d_, waited_for);
  if (d_.nodes.size() != 1) return;
  const NodeFinding& n = d_.nodes.front();
  for (int r : n.ranks)
    if (std::find(d_.culprit_ranks.begin(), d_.culprit_ranks.end(), r) == d_.culprit_ranks.end()) d_.culprit_ranks.push_back(r);
  // The collective to name is one that ranks of other hosts wait in for the node, not one the
  // node's own ranks wait in for each other.
  std::optional<WaitEdge> best;
  for (const auto& e : g.edges) {
    if (std::find(n.ranks.begin(), n.ranks.end(), e.absent) == n.ranks.end() || host_of(d_, e.waiter) == n.host) continue;
    if (!best || innermost_rank(groups_, e.comm) < innermost_rank(groups_, best->comm) ||
        (e.comm == best->comm && e.seq < best->seq))
      best = e;
  }
  if (best && d_.kind != Kind::kMissingGradient) set_collective(best->comm, best->seq);
}

// "ranks 0,2-7: #57; rank 1: #56": the last collective each member issued on `comm` (next seq - 1,
// whichever base the producer counts from), least first.
std::string Classifier::progress_on(const std::string& comm) const {
  const GroupView* g = find_group(groups_, comm);
  if (!g) return "";
  std::map<int64_t, std::vector<int>> by_issued;
  for (int r : g->ranks)
    if (r >= 0 && r < int(views_.size()) && views_[r].readable()) by_issued[views_[r].issued(comm)].push_back(r);
  std::string out;
  for (const auto& [n, ranks] : by_issued)
    out += fmt::format("{}{} {}: {}", out.empty() ? "" : "; ", ranks.size() == 1 ? "rank" : "ranks", compress_ranks(ranks),
                       n > 0 ? fmt::format("#{}", n - 1) : std::string("none"));
  return out;
}

void Classifier::fill_ranks() {
  const std::string verdict_comm = d_.collective ? d_.collective->comm : std::string();
  for (const auto& v : views_) {
    RankReport r;
    r.rank = v.rank;
    if (!v.readable()) {
      r.state = RankState::kMissing;
      r.note = v.missing_reason;
      if (run_.metadata && v.rank < int(run_.metadata->hosts.size())) r.host = run_.metadata->hosts[v.rank];
      d_.ranks.push_back(std::move(r));
      continue;
    }
    const auto& s = *v.snap;
    r.host = s.host;
    r.pid = s.pid;
    r.alive = v.liveness;
    r.os_state = v.os.state;
    r.wchan = v.os.wchan;
    r.step = s.live.step;
    r.range_stack = v.stack;
    r.range = v.innermost();
    r.idle_s = v.last_activity_ns > 0 ? since(v.last_activity_ns) : 0;
    if (v.innermost_begin_ns > 0) r.range_s = std::max(0.0, since(v.innermost_begin_ns));
    r.heartbeat_age_s = since(v.heartbeat_ns);
    if (v.finished) r.state = RankState::kFinished;
    else if (v.dead) r.state = v.aborted ? RankState::kAborted : RankState::kDead;
    else if (v.frozen) r.state = RankState::kFrozen;
    else if (v.aborted) r.state = RankState::kAborted;
    else if (v.waiting()) r.state = RankState::kWaiting;
    else r.state = RankState::kRunning;
    if (v.waiting()) {
      r.waiting = collective_ref(v.pending_comm->name, *v.pending);
      r.waited_s = since(v.aligned(v.pending->enqueue_ns));
    }
    r.last_completed.reserve(s.comms.size());
    for (const auto& c : s.comms) {
      for (auto it = c.ring.rbegin(); it != c.ring.rend(); ++it) {
        if (it->state != format::CollectiveState::kCompleted) continue;
        r.last_completed.push_back({c.name, it->seq, it->op, since(v.aligned(it->end_ns))});
        break;
      }
    }
    const std::string& own_comm = !verdict_comm.empty() && v.comm(verdict_comm) ? verdict_comm
                                  : v.waiting()                                ? v.pending_comm->name
                                                                               : std::string();
    for (const auto& lc : r.last_completed)
      if (lc.comm == own_comm) r.last_completed_seq = lc.seq;
    if (v.dead && v.liveness == Liveness::kGone) r.note = fmt::format("pid {} is gone", s.pid);
    else if (v.dead && v.os.state == OsRunState::kZombie) r.note = fmt::format("pid {} exited and was not reaped (zombie)", s.pid);
    else if (v.frozen)
      r.note = fmt::format("process frozen ({}): no thread runs{}", os_run_state_name(v.os.state),
                           v.os.wchan.empty() ? "" : fmt::format("; waits in kernel function {}", v.os.wchan));
    else if (v.dead && v.aborted) r.note = "the program marked itself aborted";
    else if (v.dead) r.note = fmt::format("no heartbeat for {:.0f} s", r.heartbeat_age_s);
    if (const std::string call = nccl_call_note(v, d_.reference_ns); !call.empty())
      r.note = r.note.empty() ? call : r.note + "; " + call;
    if (const std::string p2p = nccl_p2p_note(v); !p2p.empty()) r.note = r.note.empty() ? p2p : r.note + "; " + p2p;
    if (s.watchdog.kind != format::WatchdogKind::kNone) {
      r.stacks_file = s.watchdog.stacks_file;
      if (r.note.empty()) r.note = fmt::format("watchdog: {}", s.watchdog.message);
    }
    d_.ranks.push_back(std::move(r));
  }
}

}  // namespace

Diagnosis diagnose(const format::RunDirectory& run, ProcessTable& processes, const ClassifyOptions& options) {
  return Classifier(run, processes, options).run();
}

}  // namespace rankscope::analyzers::hang
