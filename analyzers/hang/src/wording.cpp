// wording.cpp — the one-line verdict and the explanation, in the sentence style.
#include "wording.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include <set>

#include "rankscope/analyzers/hang/rank_list.h"

namespace rankscope::analyzers::hang {
namespace {

const RankReport* find_rank(const Diagnosis& d, int rank) {
  for (const auto& r : d.ranks)
    if (r.rank == rank) return &r;
  return nullptr;
}

// "it is in forward/embed at step 2, idle 31 s" for one or several culprits.
std::string whereabouts(const Diagnosis& d, const std::vector<int>& culprits) {
  std::map<std::pair<std::string, int64_t>, std::vector<int>> places;
  double idle = 0;
  for (int c : culprits) {
    const RankReport* r = find_rank(d, c);
    if (!r || r->state == RankState::kMissing) continue;
    places[{r->range.empty() ? std::string("no open range") : r->range, r->step}].push_back(c);
    idle = std::max(idle, r->idle_s);
  }
  if (places.empty())
    return culprits.size() == 1 ? "its " + d.missing_evidence + " is missing, so what it does is unknown"
                                : "their " + d.missing_evidence_plural + " are missing, so what they do is unknown";
  // Dumps (PyTorch's) record no ranges: what a rank with nothing open did is what it did not enqueue.
  const bool no_ranges = d.times_are_lower_bounds && places.size() == 1 && places.begin()->first.first == "no open range";
  if (no_ranges) {
    bool open = false;
    for (int c : culprits)
      if (const RankReport* r = find_rank(d, c)) open = open || r->waiting.has_value();
    if (!open)
      return fmt::format("{} nothing open (all {} enqueued completed), idle {}", culprits.size() == 1 ? "it has" : "they have",
                         culprits.size() == 1 ? "it" : "they", how_long(d, idle, ""));
  }
  std::string out;
  for (const auto& [place, ranks] : places) {
    const std::string subject = places.size() == 1 ? (culprits.size() == 1 ? "it is" : "they are")
                                                   : fmt::format("{} {}", who(d, ranks), ranks.size() == 1 ? "is" : "are");
    if (!out.empty()) out += "; ";
    // Jobs recorded by the NCCL profiler plugin have no steps (step -1): no "at step" then.
    const std::string at = place.second >= 0 ? fmt::format(" at step {}", place.second) : "";
    out += place.first == "no open range" ? fmt::format("{} between ranges{}", subject, at)
                                          : fmt::format("{} in {}{}", subject, place.first, at);
  }
  return out + ", idle " + how_long(d, idle, "");
}

double max_waited(const Diagnosis& d, const std::vector<int>& ranks) {
  double w = 0;
  for (int r : ranks)
    if (const RankReport* rr = find_rank(d, r)) w = std::max(w, rr->waited_s);
  return w;
}

std::string waiters_sentence(const Diagnosis& d, const WordingFacts& f) {
  if (f.waiters.empty() || !d.collective) return "";
  const bool one = f.waiters.size() == 1;
  return fmt::format(" {} {} {} in that {} {}.", one ? "Rank" : "Ranks", ranks_on_hosts(d, f.waiters),
                     one ? "waits" : "wait", format::short_op_name(d.collective->op),
                     how_long(d, max_waited(d, f.waiters), "since"));
}

// "Rank 9: ranks 8,10,11 wait in allgather #87761 on tensor group 37 (ranks 8-11) and ... , which it
// never entered; ranks 0-7 wait behind them (through send #13999 on pipeline group 39 p2p 0-8 and 7
// more)." Two collectives and two communicators at most are named per culprit.
std::string chains_text(const Diagnosis& d) {
  auto p2p = [](const CollectiveRef& c) { return c.op == format::CollectiveOp::kSend || c.op == format::CollectiveOp::kRecv; };
  std::string out;
  size_t shown = 0;
  for (const auto& c : d.waits) {
    if (shown++ == 4) {
      out += fmt::format(" {} more culprits are waited on alike.", d.waits.size() - 4);
      break;
    }
    // Collectives it never entered, by name; the send/recv it never posted join the ranks waiting
    // behind (a pipeline's stages wait on each other through them).
    std::string at;
    size_t named = 0, more = 0;
    std::set<int> all, behind(c.behind.begin(), c.behind.end());
    std::set<std::string> via(c.behind_via.begin(), c.behind_via.end());
    for (const auto& a : c.missing_from) {
      all.insert(a.waiters.begin(), a.waiters.end());
      if (p2p(a.collective)) {
        behind.insert(a.waiters.begin(), a.waiters.end());
        via.insert(a.collective.comm);
        continue;
      }
      if (named == 2) {
        ++more;
        continue;
      }
      at += fmt::format("{}{} in {} #{} on {}", named++ == 0 ? "" : " and ", who(d, a.waiters),
                        format::short_op_name(a.collective.op), a.collective.seq, a.collective.comm);
    }
    for (int r : all) behind.erase(r);
    for (const auto& a : c.missing_from)
      if (p2p(a.collective))
        for (int r : a.waiters) behind.insert(r);  // waiting in a send/recv with it: said with the pipeline
    all.insert(behind.begin(), behind.end());
    if (more > 0) at += fmt::format(" (and in {} more {})", more, more == 1 ? "group" : "groups");
    std::string line = fmt::format(" Waiting on {} ({} {}):", who(d, {c.culprit}), all.size(), all.size() == 1 ? "rank" : "ranks");
    if (!at.empty()) line += fmt::format(" {}, which it never entered", at);
    if (!behind.empty()) {
      std::string through;
      size_t i = 0;
      for (const auto& v : via)
        if (i++ < 2) through += (i > 1 ? ", " : "") + v;
      if (via.size() > 2) through += fmt::format(" and {} more", via.size() - 2);
      line += fmt::format("{}{} through send/recv and device queues ({})", at.empty() ? " " : "; ",
                          who(d, std::vector<int>(behind.begin(), behind.end())), through);
    }
    out += line + ".";
  }
  return out;
}

// "rank 9 never entered reduce_scatter #88684 on tensor group 37 (ranks 8-11) and rank 14 never
// entered reduce_scatter #88684 on tensor group 38 (ranks 12-15)", where culprits miss different
// collectives; "" when they all miss the verdict's.
std::string per_culprit_missing(const Diagnosis& d) {
  if (!d.collective || d.waits.size() < 2) return "";
  bool differ = false;
  for (const auto& c : d.waits) differ = differ || (c.first && c.first->comm != d.collective->comm);
  if (!differ) return "";
  std::string out;
  for (size_t i = 0; i < d.waits.size() && i < 3; ++i) {
    const auto& c = d.waits[i];
    if (!c.first) continue;
    out += fmt::format("{}{} never entered {}", out.empty() ? "" : (i + 1 == d.waits.size() ? " and " : ", "), who(d, {c.culprit}),
                       collective_phrase(*c.first));
  }
  if (d.waits.size() > 3) out += fmt::format(", and {} more ranks alike", d.waits.size() - 3);
  return out;
}

// Chains say more than a flat list where several culprits stop different groups, or waits pass
// from group to group (a pipeline behind an expert all_to_all).
bool use_chains(const Diagnosis& d) {
  if (d.waits.empty()) return false;
  if (d.culprit_ranks.size() > 1) return true;
  return std::any_of(d.waits.begin(), d.waits.end(), [](const WaitChain& c) { return !c.behind.empty(); });
}

// Ranks waiting somewhere else than the verdict's collective: downstream of the same cause.
std::string downstream_text(const Diagnosis& d, const WordingFacts& f) {
  if (use_chains(d)) return chains_text(d);
  std::map<std::string, std::vector<int>> at;
  for (const auto& r : d.ranks) {
    if (r.state != RankState::kWaiting || !r.waiting) continue;
    if (std::find(f.waiters.begin(), f.waiters.end(), r.rank) != f.waiters.end()) continue;
    at[fmt::format("{} #{} on {}", format::short_op_name(r.waiting->op), r.waiting->seq, r.waiting->comm)].push_back(r.rank);
  }
  if (at.empty()) return "";
  std::string parts;
  for (const auto& [where, ranks] : at) parts += fmt::format("{}{} in {}", parts.empty() ? "" : "; ", who(d, ranks), where);
  return fmt::format(" Also waiting: {}.", parts);
}

std::string values_text(const Diagnosis& d, const Mismatch& m) {
  std::map<std::string, std::vector<int>> by_value;
  for (const auto& [r, v] : m.values_by_rank) by_value[v].push_back(r);
  std::string out;
  for (const auto& [v, ranks] : by_value) out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", who(d, ranks), v);
  return out;
}

void word_mismatch(Diagnosis& d, const WordingFacts& f) {
  CollectiveRef c;
  if (d.collective) c = *d.collective;
  // A sentence that quotes values needs a culprit's own and a healthy member's own: the classifier
  // claims no mismatch without both (classifier.cpp issued_mismatch, mismatch.cpp).
  const Mismatch* m = d.mismatch ? &*d.mismatch : nullptr;
  std::vector<int> healthy;
  const std::string* value = nullptr;
  if (m)
    for (const auto& [r, v] : m->values_by_rank) {
      if (std::find(d.culprit_ranks.begin(), d.culprit_ranks.end(), r) == d.culprit_ranks.end()) healthy.push_back(r);
      else if (!value) value = &v;
    }
  const std::string culprit = who(d, d.culprit_ranks);
  if (!m || !value || healthy.empty()) {
    // No values to cite: say where each culprit waits, which is what the evidence holds.
    std::string where;
    for (int r : d.culprit_ranks) {
      const RankReport* rr = find_rank(d, r);
      if (!rr || !rr->waiting) continue;
      where += fmt::format("{}rank {} in {} #{} on {}", where.empty() ? "" : ", ", r, format::short_op_name(rr->waiting->op),
                           rr->waiting->seq, rr->waiting->comm);
    }
    d.headline = fmt::format("DESYNC: {} wait in different collectives, each for a peer that is in another one, so none "
                             "can finish{}.",
                             culprit, where.empty() ? "" : ": " + where);
    d.explanation = fmt::format("The innermost of them is {}. Which call came out of order is not in the evidence: "
                                "no rank's own record disagrees with a peer's where both are recorded.",
                                collective_phrase(c));
    d.explanation += f.later;
    return;
  }
  const std::string healthy_value = m->values_by_rank.at(healthy.front());
  if (m->field == "issued") {
    const RankReport* r = d.culprit_ranks.empty() ? nullptr : find_rank(d, d.culprit_ranks.front());
    const std::string doing = !r ? "" : r->state == RankState::kFinished ? " and finished"
                                      : !f.ahead_on.empty() ? " and waits in " + f.ahead_on
                                      : r->waiting ? fmt::format(" and waits in {} #{} on {}", format::short_op_name(r->waiting->op), r->waiting->seq, r->waiting->comm)
                                                   : fmt::format(" and is in {}", r->range);
    const std::string what = f.ahead_on.empty() ? "it left one out"
                                                : "it made one call more on that group than its peers did, so it never reached this one";
    d.headline = fmt::format("DESYNC: {} issued {} collectives on {}{}, while ranks {} wait in {}: {}.",
                             culprit, *value, c.comm, doing, ranks_on_hosts(d, f.waiters), collective_phrase(c), what);
  } else if (m->field == "range") {
    d.headline = fmt::format("DESYNC: {} called {} #{} on {} from {} where ranks {} called it from {}: it skipped or added a "
                             "collective ({}).",
                             culprit, format::short_op_name(c.op), c.seq, c.comm, *value, ranks_on_hosts(d, healthy),
                             healthy_value, collective_phrase(c));
  } else {
    d.headline = fmt::format("DESYNC: {} called {} #{} on {} with {} {} where ranks {} used {}.", culprit,
                             format::short_op_name(c.op), c.seq, c.comm, m->field, *value, ranks_on_hosts(d, healthy),
                             healthy_value);
  }
  d.explanation = fmt::format("Ranks disagree on the {} of collective #{} on {} ({}). The majority is taken as healthy.",
                              m->field, c.seq, c.comm, values_text(d, *m));
  d.explanation += f.later;
  if (f.ambiguous)
    d.explanation += " It is a tie that the ranks' previous steps could not break: either side may be at fault.";
  else if (healthy.size() <= d.culprit_ranks.size())
    d.explanation += " On a tie, the rank whose call differs from its own previous step is blamed.";
}

// "rank 3's process is frozen (stopped): no thread runs".
void word_frozen(Diagnosis& d, const WordingFacts& f) {
  std::string states;
  for (int c : d.culprit_ranks) {
    const RankReport* r = find_rank(d, c);
    if (!r) continue;
    const std::string wchan = r->wchan.empty() ? "" : fmt::format(", in kernel function {}", r->wchan);
    const std::string on = d.hosts >= 2 && !r->host.empty() ? " on " + r->host : "";
    states += fmt::format("{}rank {}'s process{} is frozen ({}{}): no thread runs", states.empty() ? "" : "; ", c, on,
                          os_run_state_name(r->os_state), wchan);
  }
  const RankReport* first = d.culprit_ranks.empty() ? nullptr : find_rank(d, d.culprit_ranks.front());
  const std::string where = !first                                          ? ""
                            : first->range.empty() || first->range == "step" ? fmt::format(" at the start of step {}", first->step)
                                                                             : fmt::format(" in {} at step {}", first->range, first->step);
  const std::string blocked = d.collective ? fmt::format("; it never entered {}", collective_phrase(*d.collective)) : "";
  d.headline = fmt::format("HANG: {}; its heartbeat stopped {} ago{}{}.{}", states,
                           human_seconds(first ? first->heartbeat_age_s : 0), where, blocked, waiters_sentence(d, f));
  std::string why;
  switch (first ? first->os_state : OsRunState::kUnknown) {
    case OsRunState::kStopped:
      why = "The kernel reports every thread stopped by a signal (T): something sent it SIGSTOP or SIGTSTP (job control, "
            "a checkpoint tool, a person). `kill -CONT <pid>` resumes it.";
      break;
    case OsRunState::kTraced:
      why = "A tracer holds every thread (t): a debugger or a stack tool is attached and stopped it. Detach it.";
      break;
    case OsRunState::kUninterruptible:
      why = "No thread can run and one sleeps uninterruptibly (D) in the kernel: waiting on I/O, a file system or a "
            "driver. It cannot be killed until that call returns; look at the device or the mount.";
      break;
    default: break;
  }
  const std::string host = d.hosts >= 2 && first && !first->host.empty() ? first->host : "this host";
  d.explanation = fmt::format("Its process still exists on {} but does not run, so its heartbeat stopped while the "
                              "others kept beating. {}",
                              host, why) +
                  downstream_text(d, f);
}

// The culprit's host went on while its GPU fell behind: it enqueued the collective (or waits for
// its GPU to hand over the input) and its device never got there.
void word_gpu_behind_host(Diagnosis& d, const WordingFacts& f) {
  const CollectiveRef& c = *d.collective;
  if (f.peers_completed) {
    // The culprits' peers completed with them what the culprits still show open, and the culprits
    // never entered what their peers now wait in.
    const bool one = d.culprit_ranks.size() == 1;
    const std::string each = per_culprit_missing(d);
    d.headline = fmt::format("HANG: {} stopped: {}, and {} still {} open work {} peers completed with {} "
                             "({}): {} stopped reporting completions.",
                             who(d, d.culprit_ranks),
                             each.empty() ? fmt::format("{} never entered {}", one ? "it" : "they", collective_phrase(c)) : each,
                             one ? "it" : "they",
                             one ? "shows" : "show", one ? "its" : "their", one ? "it" : "them", f.stopped_at,
                             one ? "its GPU" : "their GPUs");
    d.explanation = fmt::format("A collective completes on all members or on none, so {} the peers saw finish did run "
                                "on {}; {} own record of it never completed. {} host went on enqueueing and then stopped "
                                "(blocked on the device). That is a GPU fault (an Xid or ECC error, a device that fell "
                                "off the bus) or a watchdog that cannot query the device; the dumps cannot tell which: "
                                "look at {} host's kernel log and nvidia-smi.",
                                one ? "the work" : "the work", who(d, d.culprit_ranks), one ? "its" : "their",
                                one ? "Its" : "Their", one ? "its" : "each") +
                    downstream_text(d, f);
    return;
  }
  const RankReport* r = d.culprit_ranks.size() == 1 ? find_rank(d, d.culprit_ranks.front()) : nullptr;
  const bool staging = r && std::find(r->range_stack.begin(), r->range_stack.end(), "device_sync") != r->range_stack.end();
  const std::string culprits = who(d, d.culprit_ranks);
  // The peers whose devices reached it wait for the culprits; a culprit's host returned, it does not.
  WordingFacts peers = f;
  std::erase_if(peers.waiters, [&](int w) {
    return std::find(d.culprit_ranks.begin(), d.culprit_ranks.end(), w) != d.culprit_ranks.end();
  });
  const bool no_peer_reached = !f.waiters.empty() && peers.waiters.empty();
  if (staging) {
    d.headline = fmt::format("HANG: {}'s GPU is behind its host: its host waits for the GPU (device_sync) to hand over "
                             "the input of {} and the GPU never finishes; {}.{}",
                             culprits, collective_phrase(c), whereabouts(d, d.culprit_ranks), waiters_sentence(d, peers));
  } else if (no_peer_reached) {
    // Nobody else is in it to wait: how long is the culprits' own wait, said in the headline.
    d.headline = fmt::format("HANG: {} enqueued {} on the GPU and {} GPU never started it, {}: the GPU is behind the host.",
                             culprits, collective_phrase(c), d.culprit_ranks.size() == 1 ? "its" : "their",
                             how_long(d, max_waited(d, d.culprit_ranks), "for"));
  } else {
    d.headline = fmt::format("HANG: {} enqueued {} on the GPU and {} GPU never started it: the GPU is behind the host.{}",
                             culprits, collective_phrase(c), d.culprit_ranks.size() == 1 ? "its" : "their",
                             waiters_sentence(d, peers));
  }
  d.explanation = std::string("The host went on while a kernel before this collective on the same device has not "
                              "finished (a kernel that does not end, a device fault, or a device shared and starved). ") +
                  (no_peer_reached ? "No member's device started it, and each records device starts, so this is not a "
                                     "network or peer problem. "
                                   : "The peers' devices reached the collective and wait for it. ") +
                  "Look at the GPU (nvidia-smi, compute-sanitizer), not at the network." + downstream_text(d, f);
}

// One process (or every rank equally far) stuck in its own work: nobody to lag behind.
void word_stuck_alone(Diagnosis& d) {
  const bool host = d.kind == Kind::kHostStall;
  const std::string recompute = d.recompute.empty() ? "" : fmt::format(" (activation recompute {})", d.recompute);
  const RankReport* r = d.culprit_ranks.size() == 1 ? find_rank(d, d.culprit_ranks.front()) : nullptr;
  const std::string what = host ? "host work" : "compute";
  if (r && !r->range.empty()) {
    // Producers without step markers (the NCCL plugin's NVTX ranges) leave the step at -1.
    const std::string at_step = r->step >= 0 ? fmt::format(" at step {}", r->step) : "";
    d.headline = fmt::format("HANG: {} is stuck in {} in {}{} {}{}; no collective is open and no rank is "
                             "ahead of it.",
                             who(d, {r->rank}), what, r->range, at_step, how_long(d, r->range_s, "for"), recompute);
  } else {
    d.headline = fmt::format("HANG: {} {} stuck in {}{}; no collective is open; {}.", who(d, d.culprit_ranks),
                             d.culprit_ranks.size() == 1 ? "is" : "are", what, recompute, whereabouts(d, d.culprit_ranks));
  }
  d.explanation = host ? "Nothing waits in a collective and no peer is ahead: the job is stuck in host work (data "
                         "loading, I/O). Look at the input pipeline, the file system or the host."
                       : "Nothing waits in a collective and no peer is ahead, so this is not a communication problem: "
                         "the rank's own computation has not returned. Its native stacks (hangdoctor --stacks) show "
                         "where.";
  if (!host && d.recompute.rfind("off", 0) != 0 && !d.recompute.empty() && r && r->range.rfind("backward/", 0) == 0)
    d.explanation += " Activation recompute is on, so this backward range first re-runs its forward.";
  d.explanation += fmt::format(" Nothing progressed {}.", how_long(d, d.stuck_for_s, "for"));
}

}  // namespace

std::string downstream_sentence(const Diagnosis& d, const WordingFacts& f) { return downstream_text(d, f); }

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", double(b) / 1024.0);
  if (b < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", double(b) / (1024.0 * 1024.0));
  return fmt::format("{:.2f} GiB", double(b) / (1024.0 * 1024.0 * 1024.0));
}

std::string human_seconds(double s) {
  if (s < 1.0) return fmt::format("{:.0f} ms", s * 1000.0);
  if (s < 10.0) return fmt::format("{:.1f} s", s);
  return fmt::format("{:.0f} s", s);
}

std::string how_long(const Diagnosis& d, double s, std::string_view live_word) {
  if (!d.times_are_lower_bounds) return fmt::format("{}{}{}", live_word, live_word.empty() ? "" : " ", human_seconds(s));
  return s >= 0.0005 ? "for at least " + human_seconds(s) : std::string("for an unknown time");
}

std::string collective_phrase(const CollectiveRef& c) {
  // Logs know a call's elements but not always its type: no "0 B unknown".
  if (c.bytes == 0 && c.dtype == format::DataType::kUnknown)
    return c.count ? fmt::format("{} #{} on {} ({} elements)", format::short_op_name(c.op), c.seq, c.comm, c.count)
                   : fmt::format("{} #{} on {}", format::short_op_name(c.op), c.seq, c.comm);
  return fmt::format("{} #{} on {} ({} {})", format::short_op_name(c.op), c.seq, c.comm, human_bytes(c.bytes),
                     format::dtype_name(c.dtype));
}

namespace {

// The ranks with a readable recorder: how many, how many finished, the newest step; and those without.
struct ReadableRanks {
  int count = 0;
  int finished = 0;
  int64_t step = -1;
  std::vector<int> missing;
};

ReadableRanks readable_ranks(const Diagnosis& d) {
  ReadableRanks out;
  for (const auto& r : d.ranks) {
    if (r.state == RankState::kMissing) {
      out.missing.push_back(r.rank);
      continue;
    }
    ++out.count;
    out.finished += r.state == RankState::kFinished;
    out.step = std::max(out.step, r.step);
  }
  return out;
}

void word_healthy(Diagnosis& d, const ReadableRanks& readable, const std::string& missing_note) {
  const int running = readable.count - readable.finished;
  // Jobs without steps (PyTorch dumps, the NCCL plugin's: step -1) say no step.
  const std::string at = readable.step >= 0 ? fmt::format(" at step {}", readable.step) : "";
  d.headline = d.times_are_lower_bounds
                   ? fmt::format("HEALTHY: {} {} running{}; no collective is pending.", running,
                                 running == 1 ? "rank" : "ranks", at)
                   : fmt::format("HEALTHY: {} {} running{}; last progress {} ago.", running,
                                 running == 1 ? "rank" : "ranks", at, human_seconds(d.stuck_for_s));
  d.explanation = std::string("No rank is dead, no collective disagrees between ranks, and ") +
                  (d.times_are_lower_bounds ? "none is pending." : "the job made progress recently.") + missing_note +
                  (d.time_basis.empty() ? "" : " " + d.time_basis);
}

void word_crash(Diagnosis& d, const WordingFacts& f, const std::string& missing_note) {
  const std::string culprits = who(d, d.culprit_ranks);
  const std::string waiters = waiters_sentence(d, f);
  const RankReport* r = d.culprit_ranks.empty() ? nullptr : find_rank(d, d.culprit_ranks.front());
  const std::string how = !r                            ? ""
                          : r->alive == Liveness::kGone ? fmt::format(" (pid {} is gone on {})", r->pid, r->host)
                          : r->state == RankState::kAborted
                              ? " (it marked itself aborted)"
                              : fmt::format(" (no heartbeat for {})", human_seconds(r->heartbeat_age_s));
  const std::string where = !r ? ""
                            : r->range.empty() || r->range == "step"
                                ? fmt::format(" at the start of step {}", r->step)
                                : fmt::format(" in {} at step {}", r->range, r->step);
  const bool inside =
      r && r->waiting && d.collective && r->waiting->comm == d.collective->comm && r->waiting->seq == d.collective->seq;
  const std::string blocked =
      d.collective ? fmt::format("; it never {} {}", inside ? "finished" : "entered", collective_phrase(*d.collective))
                   : "";
  if (r && r->alive == Liveness::kUnknown && r->state == RankState::kDead) {
    // Its process is on another host: we only know the heartbeat stopped, not why.
    d.headline = fmt::format("CRASH: {}'s heartbeat stopped {} ago{}{}.{}", culprits, human_seconds(r->heartbeat_age_s),
                             where, blocked, waiters);
    d.explanation = fmt::format(
                        "{} stopped beating while the others kept their heartbeat. Its process is on {}, not "
                        "this host, so whether it died or froze cannot be checked from here; run hangdoctor on "
                        "that host to tell. Whoever needs it waits forever.",
                        culprits, r->host.empty() ? "an unknown host" : r->host) +
                    downstream_text(d, f) + missing_note;
    return;
  }
  d.headline = fmt::format("CRASH: {} died{}{}, {} ago{}.{}", culprits, how, where,
                           human_seconds(r ? r->heartbeat_age_s : 0), blocked, waiters);
  d.explanation =
      fmt::format("{} stopped while the others kept their heartbeat; whoever needs it waits forever.", culprits) +
      downstream_text(d, f) + missing_note;
}

// Every member is inside the collective and none finished: no rank lags.
void word_stuck_in_collective(Diagnosis& d, const WordingFacts& f) {
  const CollectiveRef& c = *d.collective;
  const std::string members = f.waiters.size() == 1
                                  ? fmt::format("rank {}, the only member of {},", ranks_on_hosts(d, f.waiters), c.comm)
                                  : fmt::format("all {} ranks in {}", f.waiters.size(), c.comm);
  const std::string waited = how_long(d, max_waited(d, f.waiters), "for");
  if (f.none_started) {
    // No record says it started (e.g. PyTorch without TORCH_NCCL_ENABLE_TIMING): a device stuck
    // before it and a collective stuck in the network look the same.
    d.headline = fmt::format(
        "HANG: {} enqueued {} and it never completed, {}; whether it started cannot be told, "
        "so no rank is to blame.",
        members, collective_phrase(c), waited);
    d.explanation =
        "Every member enqueued the collective and none completed it, so no rank lagged. No record says "
        "it started: a kernel before it that never ends (the GPU behind its host) and a collective "
        "stuck in the interconnect or the collective library look the same here." +
        downstream_text(d, f);
  } else {
    d.headline = fmt::format("HANG: {} entered {} and none finished, {}; no rank is to blame.", members,
                             collective_phrase(c), waited);
    d.explanation =
        "Every member called the collective and none completed it, so no rank lagged: suspect the "
        "interconnect, the collective library or a device fault." +
        downstream_text(d, f);
  }
}

void word_missing_gradient(Diagnosis& d, const WordingFacts& f) {
  std::string grads;
  for (const auto& g : d.missing_gradients)
    grads += fmt::format("{}{} (bucket {}{})", grads.empty() ? "" : ", ", g.param, g.bucket,
                         d.culprit_ranks.size() > 1 ? fmt::format(", rank {}", g.rank) : "");
  d.headline =
      fmt::format("HANG: {} never launched {}: the gradient of {} never arrived; {}.{}", who(d, d.culprit_ranks),
                  collective_phrase(*d.collective), grads, whereabouts(d, d.culprit_ranks), waiters_sentence(d, f));
  d.explanation =
      "Its backward pass is over but these gradients were never reported ready, so their DDP bucket "
      "was never reduced there." +
      downstream_text(d, f);
}

// The culprits never entered the collective the others wait in.
void word_never_entered(Diagnosis& d, const WordingFacts& f) {
  const std::string culprits = who(d, d.culprit_ranks);
  const std::string where = whereabouts(d, d.culprit_ranks);
  const std::string waiters = waiters_sentence(d, f);
  const std::string host = d.kind == Kind::kHostStall ? " (host work, not a collective problem)" : "";
  const RankReport* only = d.culprit_ranks.size() == 1 ? find_rank(d, d.culprit_ranks.front()) : nullptr;
  if (only && only->range.rfind("init/", 0) == 0) {
    // Start-up (step 0): say the phase first; that is what the user has to look at.
    d.headline = fmt::format("HANG: {} is stuck in start-up phase {} for {} and never entered {}.{}", culprits,
                             only->range, human_seconds(only->range_s > 0 ? only->range_s : only->idle_s),
                             collective_phrase(*d.collective), waiters);
  } else {
    const std::string each = per_culprit_missing(d);
    d.headline = each.empty() ? fmt::format("HANG: {} never entered {}; {}{}.{}", culprits,
                                            collective_phrase(*d.collective), where, host, waiters)
                              : fmt::format("HANG: {}; {}{}.", each, where, host);
  }
  const bool many = d.culprit_ranks.size() > 1;
  d.explanation = (many ? std::string()
                        : fmt::format("{} has the least progress on {}: the others issued #{} and wait in it "
                                      "(last issued: {}).",
                                      culprits, d.collective->comm, d.collective->seq, f.progress)) +
                  (d.times_are_lower_bounds && f.culprits_idle
                       ? fmt::format("{}Nothing is open in {}: everything {} enqueued completed and {} enqueued "
                                     "nothing after, so {} stopped issuing work (a Python thread holding the GIL, "
                                     "a data loader, host code, or a stopped process); the dumps cannot tell which, "
                                     "the stacks can (py-spy dump --pid).",
                                     many ? "" : " ", many ? "their dumps" : "its dump", many ? "they" : "it",
                                     many ? "they" : "it", many ? "their hosts" : "its host")
                       : std::string()) +
                  (d.kind == Kind::kHostStall ? " It is stuck in host work (data loading, I/O): look at the input "
                                                "pipeline, the file system or the host, not at the network."
                                              : "") +
                  downstream_text(d, f);
}

// Other ranks still run: say they will wait too.
void word_forming(Diagnosis& d) {
  std::vector<int> running;
  for (const auto& r : d.ranks)
    if (r.state == RankState::kRunning &&
        std::find(d.culprit_ranks.begin(), d.culprit_ranks.end(), r.rank) == d.culprit_ranks.end())
      running.push_back(r.rank);
  d.explanation += running.empty()
                       ? " The hang is still forming: other ranks made progress recently, but a peer already waits."
                       : fmt::format(
                             " The hang is still forming: {} still run work that does not need {} yet, and "
                             "will wait too at their next collective with {}.",
                             who(d, running), who(d, d.culprit_ranks), d.culprit_ranks.size() == 1 ? "it" : "them");
}

void word_hang(Diagnosis& d, const WordingFacts& f, const std::string& missing_note) {
  if (d.kind == Kind::kRankFrozen) {
    word_frozen(d, f);
  } else if (d.kind == Kind::kGpuBehindHost && d.collective) {
    word_gpu_behind_host(d, f);
  } else if (d.kind == Kind::kStuckInCollective) {
    word_stuck_in_collective(d, f);
  } else if (!d.collective && (d.kind == Kind::kStuckInCompute || d.kind == Kind::kHostStall)) {
    word_stuck_alone(d);
  } else if (!d.collective) {
    d.headline = fmt::format("HANG: {} made least progress and no rank is inside a collective; {}.",
                             who(d, d.culprit_ranks), whereabouts(d, d.culprit_ranks));
    d.explanation = "Nothing progressed " + how_long(d, d.stuck_for_s, "for") + ".";
  } else if (d.kind == Kind::kMissingGradient) {
    word_missing_gradient(d, f);
  } else {
    word_never_entered(d, f);
  }
  if (f.forming) word_forming(d);
  d.explanation += missing_note;
  if (!d.time_basis.empty()) d.explanation += " " + d.time_basis;
}

}  // namespace

void compose_wording(Diagnosis& d, const WordingFacts& f) {
  const ReadableRanks readable = readable_ranks(d);
  const std::string missing_note = readable.missing.empty()
                                       ? ""
                                       : fmt::format(" {} {} no readable flight recorder.", who(d, readable.missing),
                                                     readable.missing.size() == 1 ? "has" : "have");
  switch (d.verdict) {
    case Verdict::kFinished:
      d.headline = fmt::format("FINISHED: {} of {} ranks finished cleanly (last step {}).", readable.finished,
                               d.world_size, readable.step);
      d.explanation = "Every rank with a flight recorder shut down cleanly." + missing_note;
      return;
    case Verdict::kHealthy: word_healthy(d, readable, missing_note); return;
    case Verdict::kDesync:
      if (d.kind == Kind::kA2aCountMismatch) word_count_mismatch(d, f);
      else word_mismatch(d, f);
      d.explanation += missing_note;
      return;
    case Verdict::kCrash: word_crash(d, f, missing_note); break;
    case Verdict::kHang: word_hang(d, f, missing_note); break;
  }
  if (f.all_gone)
    d.explanation += " Every rank's process is gone (the job was killed or aborted): this is their state when they died.";
  if (d.verdict == Verdict::kHang || d.verdict == Verdict::kCrash) word_node(d, f);
}

}  // namespace rankscope::analyzers::hang
