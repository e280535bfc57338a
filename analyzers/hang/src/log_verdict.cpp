// log_verdict.cpp — a verdict from a log's progress evidence and its findings (log_verdict.h).
#include "rankscope/analyzers/hang/log_verdict.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/hang/rank_list.h"

namespace rankscope::analyzers::hang {
namespace {

using logs::LogFinding;

class NoProcesses final : public ProcessTable {
 public:
  Liveness liveness(const std::string&, int) override { return Liveness::kUnknown; }
  std::string local_host() override { return {}; }
};

std::string_view kind_word(LogFinding::Kind k) {
  switch (k) {
    case LogFinding::Kind::kNetworkError: return "network_error";
    case LogFinding::Kind::kCudaError: return "cuda_error";
    case LogFinding::Kind::kNcclError: return "nccl_error";
    case LogFinding::Kind::kInitIncomplete: return "init_incomplete";
    case LogFinding::Kind::kWatchdogTimeout: return "watchdog_timeout";
    case LogFinding::Kind::kPeerLost: return "peer_lost";
    case LogFinding::Kind::kRankKilled: return "rank_killed";
    case LogFinding::Kind::kRankException: return "rank_exception";
    case LogFinding::Kind::kCallMismatch: return "call_mismatch";
    case LogFinding::Kind::kSilentRank: return "silent_rank";
    case LogFinding::Kind::kBehind: return "behind";
    case LogFinding::Kind::kSetting: return "setting";
    case LogFinding::Kind::kTopology: return "topology";
    case LogFinding::Kind::kVersion: return "version";
  }
  return "?";
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", compress_ranks(ranks));
}

// Every rank named carries its host and pid where the log says (the rank map, else the line that
// named it: a failure table's host).
void set_hosts(Diagnosis& d, const logs::LogImport& log) {
  for (auto& r : d.ranks) {
    if (auto h = log.host_of_rank.find(r.rank); h != log.host_of_rank.end() && r.host.empty()) r.host = h->second;
    if (auto p = log.pid_of_rank.find(r.rank); p != log.pid_of_rank.end() && r.pid == 0) r.pid = p->second;
  }
  for (const auto& f : log.findings)
    if (f.hosts.size() == 1 && (f.kind == LogFinding::Kind::kRankKilled || f.kind == LogFinding::Kind::kNetworkError ||
                                f.kind == LogFinding::Kind::kCudaError || f.kind == LogFinding::Kind::kRankException))
      for (int r : f.ranks)
        if (r >= 0 && r < int(d.ranks.size()) && d.ranks[size_t(r)].host.empty()) d.ranks[size_t(r)].host = f.hosts.front();
}

// The verdict from the log's progress evidence (its COLL lines and watchdog timeouts read as a run),
// or, without any, every rank without evidence.
Diagnosis diagnose_progress(const logs::LogImport& log, ClassifyOptions options) {
  Diagnosis d;
  if (log.has_progress) {
    NoProcesses none;
    options.no_progress_observed = log.pending;
    options.time_basis = "a log says when calls were made, not when the job stopped: times are the watchdog's own "
                         "(\"ran for\"), where it printed them";
    options.learned_bounds = false;
    options.missing_evidence = "output (call or watchdog lines) in this log";
    options.missing_evidence_plural = "outputs (call or watchdog lines) in this log";
    options.peer_wait = false;
    return diagnose(log.run, none, options);
  }
  d.world_size = log.world_size;
  d.run_dir = log.run.dir.string();
  d.times_are_lower_bounds = true;
  for (int r = 0; r < log.world_size; ++r) {
    RankReport rr;
    rr.rank = r;
    rr.state = RankState::kMissing;
    rr.note = "no call or watchdog line";
    d.ranks.push_back(std::move(rr));
  }
  return d;
}

// The log's problem findings by what they can convict.
struct FindingsByKind {
  std::vector<const LogFinding*> errors, inits, killed, mismatched, silent;
  std::vector<const LogFinding*> timeouts;  // consequences: a rank gave up waiting, or lost a peer
};

FindingsByKind findings_by_kind(const logs::LogImport& log) {
  FindingsByKind by;
  for (const auto& f : log.findings) {
    if (!f.problem) continue;
    if (f.kind == LogFinding::Kind::kNetworkError || f.kind == LogFinding::Kind::kCudaError ||
        f.kind == LogFinding::Kind::kRankException)
      by.errors.push_back(&f);
    if (f.kind == LogFinding::Kind::kInitIncomplete) by.inits.push_back(&f);
    if (f.kind == LogFinding::Kind::kRankKilled) by.killed.push_back(&f);
    if (f.kind == LogFinding::Kind::kCallMismatch) by.mismatched.push_back(&f);
    if (f.kind == LogFinding::Kind::kSilentRank || f.kind == LogFinding::Kind::kBehind) by.silent.push_back(&f);
  }
  for (const auto& f : log.findings)
    if (f.kind == LogFinding::Kind::kWatchdogTimeout || f.kind == LogFinding::Kind::kPeerLost)
      by.timeouts.push_back(&f);
  return by;
}

std::vector<int> ranks_named(const std::vector<const LogFinding*>& findings) {
  std::vector<int> ranks;
  for (const auto* f : findings) ranks.insert(ranks.end(), f->ranks.begin(), f->ranks.end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

// The verdict the findings make: the ranks they name, headed by the first one's text.
void blame(Diagnosis& d, Verdict verdict, Kind kind, const std::vector<const LogFinding*>& findings,
           std::string_view headline_word) {
  d.verdict = verdict;
  d.kind = kind;
  d.culprit_ranks = ranks_named(findings);
  d.collective.reset();
  d.detection = Detection{};
  d.detection->by = "log";
  d.headline = fmt::format("{}: {}", headline_word, findings.front()->text);
}

// Ranks' own errors (CUDA, network, exceptions): a crash, CUDA errors first (a network error on a
// peer often follows another rank's crash).
void blame_errors(Diagnosis& d, std::vector<const LogFinding*> errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const LogFinding* a, const LogFinding* b) {
    return (a->kind == LogFinding::Kind::kCudaError) > (b->kind == LogFinding::Kind::kCudaError);
  });
  blame(d, Verdict::kCrash, Kind::kRankError, errors, "CRASH");
  const LogFinding& first = *errors.front();
  std::set<std::string> hosts;
  for (const auto* f : errors) hosts.insert(f->hosts.begin(), f->hosts.end());
  std::string host_list;
  for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ", ") + h;
  d.explanation =
      fmt::format("{} error{} printed{}{} (all listed below, first line of each).", errors.size(),
                  errors.size() == 1 ? "" : "s", d.culprit_ranks.empty() ? "" : " by " + ranks_phrase(d.culprit_ranks),
                  host_list.empty() ? "" : " on " + host_list);
  if (hosts.size() > 1 && first.kind == LogFinding::Kind::kNetworkError)
    d.explanation +=
        " The same kind of network error on several hosts points at configuration shared by them "
        "(GPUDirect RDMA with ACS or the IOMMU on, a fabric-wide setting) more than at one link.";
  if (first.kind == LogFinding::Kind::kNetworkError)
    d.explanation +=
        " A network error names the link, not always the faulty end: " +
        (first.peer.empty() ? std::string("check both hosts of the link")
                            : fmt::format("check {} and its peer {}",
                                          first.hosts.empty() ? "this host" : first.hosts.front(), first.peer)) +
        " (cables, HCA ports, the switch), and whether the peer process died first.";
}

void blame_mismatch(Diagnosis& d, const std::vector<const LogFinding*>& mismatched) {
  blame(d, Verdict::kDesync, Kind::kCollectiveMismatch, mismatched, "DESYNC");
  if (d.culprit_ranks.empty())
    d.explanation =
        "Gloo aborts the rank that receives a message of another size than it expects: ranks of one group "
        "called different collectives (a skipped or extra call, often behind a rank-dependent branch) or "
        "the same one with different sizes. Which rank called differently is not in the log; the other "
        "ranks' dumps or stacks can say.";
  else
    d.explanation =
        "Each rank's traceback names the torch.distributed call it failed in. Ranks of one group must make "
        "the same calls in the same order; the ranks in the odd call diverged (a skipped or extra "
        "collective, often behind a rank-dependent branch), and every rank then timed out.";
}

void word_nothing_wrong(Diagnosis& d, const logs::LogImport& log) {
  d.verdict = Verdict::kHealthy;
  d.kind = Kind::kNone;
  int problems = 0;
  for (const auto& f : log.findings) problems += f.problem;
  const bool ras = log.summary.starts_with("read NCCL's RAS");
  d.headline =
      fmt::format("{}: no error, no timeout, no init left incomplete{}",
                  ras ? "NOTHING WRONG IN RAS'S REPORT" : "NOTHING WRONG IN THE LOG",
                  problems ? fmt::format("; {} setting or topology finding{} below", problems, problems == 1 ? "" : "s")
                           : "");
  d.explanation =
      "A log cannot say whether the job still makes progress: with NCCL_DEBUG_SUBSYS=COLL it holds one line "
      "per call, and PyTorch prints its watchdog's timeouts; neither is here.";
}

// Where the progress evidence names no culprit, the findings decide, strongest evidence first: a
// rank killed, a rank's own error, a call mismatch, a silent rank, init left incomplete, a timeout.
void judge_findings(Diagnosis& d, const logs::LogImport& log) {
  // Who the progress evidence blames, if anyone.
  const bool progress_names =
      (d.verdict == Verdict::kHang || d.verdict == Verdict::kDesync) && !d.culprit_ranks.empty();
  const FindingsByKind by = findings_by_kind(log);
  std::string also;
  for (const auto* f : by.errors) also += " " + f->text + " (" + f->evidence + ").";
  if (progress_names) {
    if (!also.empty()) d.explanation += " The log also says:" + also;
  } else if (!by.killed.empty()) {
    blame(d, Verdict::kCrash, Kind::kRankDead, by.killed, "CRASH");
    d.explanation = "The other ranks' errors (timeouts, lost connections, the launcher's SIGTERM) follow from it." + also;
  } else if (!by.errors.empty()) {
    blame_errors(d, by.errors);
  } else if (!by.mismatched.empty()) {
    blame_mismatch(d, by.mismatched);
  } else if (!by.silent.empty()) {
    blame(d, Verdict::kHang, Kind::kLaggingRank, by.silent, "HANG");
    d.explanation = "A rank that raised nothing was not waiting in a collective when the others gave up: it was stuck "
                    "before reaching it (compute, data loading, a deadlock), or exited without an error.";
  } else if (!by.inits.empty() && d.verdict != Verdict::kDesync) {
    blame(d, Verdict::kHang, Kind::kInitIncomplete, by.inits, "HANG at init");
    d.explanation = "NCCL prints Init COMPLETE once every member of a communicator has joined; ranks that started init and "
                    "never completed it wait on the ranks that never started (late, crashed, or another communicator's "
                    "init first in their program order), or on bootstrap connections between hosts (firewall, "
                    "NCCL_SOCKET_IFNAME).";
  } else if (!by.timeouts.empty() && !log.has_progress) {
    blame(d, Verdict::kHang, Kind::kStuckInCollective, by.timeouts, "HANG");
    d.culprit_ranks.clear();  // the ranks that timed out are the ones that waited
    d.explanation = "A rank timed out waiting for its peers, and nothing in the log says which peer held it up "
                    "(Gloo's timeouts name no rank): the ranks missing from the log, or stuck before the "
                    "collective, are the suspects.";
  } else if (!log.has_progress) {
    word_nothing_wrong(d, log);
  }
}

}  // namespace

LogVerdict diagnose_log(const logs::LogImport& log, ClassifyOptions options) {
  LogVerdict out;
  out.report.summary = log.summary;
  out.report.cannot_tell = log.cannot_tell;
  for (const auto& f : log.findings)
    out.report.findings.push_back(
        {std::string(kind_word(f.kind)), f.problem, f.ranks, f.hosts, f.peer, f.text, f.evidence});
  Diagnosis& d = out.diagnosis;
  d = diagnose_progress(log, std::move(options));
  set_hosts(d, log);
  judge_findings(d, log);
  // Every rank named carries its host where the log says it.
  std::set<std::string> hosts;
  for (const auto& r : d.ranks)
    if (!r.host.empty()) hosts.insert(r.host);
  d.hosts = int(hosts.size());
  return out;
}

std::string render_log_findings(const LogReport& r) {
  std::string out;
  if (r.findings.empty() && r.cannot_tell.empty()) return out;
  out += "\nFrom the log:\n";
  for (const auto& f : r.findings)
    out += fmt::format("  {} {}{}\n", f.problem ? "!" : "-", f.text, f.evidence.empty() ? "" : " [" + f.evidence + "]");
  for (const auto& c : r.cannot_tell) out += "  ? " + c + "\n";
  return out;
}

}  // namespace rankscope::analyzers::hang
