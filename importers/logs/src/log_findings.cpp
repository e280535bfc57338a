// log_findings.cpp — what only a log says: errors a rank printed (with its host and the peer they
// name), communicators whose init never completed, settings echoed from the environment that cost
// bandwidth or change the topology, a host whose channels fall back to sockets, a topology search
// that found few channels over NVLink, mixed NCCL versions.
#include <algorithm>
#include <cstdint>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "log_run.h"

namespace rankscope::logs {
namespace {

using Kind = LogFinding::Kind;

std::string where(const std::string& file, uint64_t line) {
  return fmt::format("{}:{}", std::filesystem::path(file).filename().string(), line);
}

std::string ranks_words(const std::vector<int>& r) {
  return r.empty() ? std::string("a process") : fmt::format("rank{} {}", r.size() == 1 ? "" : "s", compact(r));
}

// The host behind "10.0.0.2<43134>", where some process bootstrapped from that address.
std::string peer_host(const RankMap& ranks, const std::string& peer) {
  const std::string addr = peer.substr(0, peer.find('<'));
  auto it = ranks.host_of_address.find(addr);
  return it == ranks.host_of_address.end() ? std::string() : it->second;
}

// Settings that take a transport away or replace what NCCL would detect: worth a line whenever seen.
struct SettingRule {
  std::string_view name;
  std::string_view value;  // "" any value
  std::string_view why;
};
constexpr SettingRule kSettings[] = {
    {"NCCL_P2P_DISABLE", "1", "GPU peer-to-peer (NVLink, PCIe P2P) is off: GPUs of one node talk through host memory"},
    {"NCCL_SHM_DISABLE", "1", "shared-memory transport is off"},
    {"NCCL_IB_DISABLE", "1", "InfiniBand/RoCE is off: traffic between nodes goes over TCP sockets"},
    {"NCCL_NVLS_ENABLE", "0", "NVLink SHARP is off"},
    {"NCCL_NET", "Socket", "the network is forced to TCP sockets"},
    {"NCCL_TOPO_FILE", "", "the topology was read from a file, not detected: links the file leaves out are not used"},
    {"NCCL_P2P_LEVEL", "", "peer-to-peer limited by distance"},
    {"NCCL_NET_GDR_LEVEL", "", "GPUDirect RDMA limited by distance"},
    {"NCCL_ALGO", "", "the algorithm is forced"},
    {"NCCL_PROTO", "", "the protocol is forced"},
    {"NCCL_MAX_NCHANNELS", "", "the number of channels is capped"},
    {"NCCL_MIN_NCHANNELS", "", "the number of channels is forced up"},
    {"NCCL_BLOCKING_WAIT", "", ""},
    {"NCCL_CROSS_NIC", "", "rings may cross NICs"},
};

std::string signal_name(int sig) {
  switch (sig) {
    case 6: return "SIGABRT";
    case 7: return "SIGBUS";
    case 9: return "SIGKILL";
    case 11: return "SIGSEGV";
    case 15: return "SIGTERM";
    default: return fmt::format("signal {}", sig);
  }
}

// How the ranks' processes ended (tracebacks, torchrun's failure table): the rank killed by a signal
// the launcher did not send, the rank that raised something other than a timeout or a lost peer, the
// call only some ranks were in, the ranks that raised nothing while the others gave up on them.
struct FailureFindings {
  const LogJob& job;
  const RankMap& ranks;
  LogImport& out;
  std::map<int, RankFailure> failures;
  std::set<std::string> hosts;  // of the processes whose lines the log holds
  bool all_alike = false;       // every rank that exited did so with one code
  std::set<int> size_aborted;   // ranks Gloo aborted on a message of another size
  std::vector<int> killed, raised, waited;
  std::map<std::string, std::vector<int>> by_call;

  FailureFindings(const LogJob& j, const RankMap& r, LogImport& o) : job(j), ranks(r), out(o) {}
  void read_exits();
  void every_rank_killed_alike();
  void size_mismatch();
  void sort_ranks();
  std::string host_of(int r) const;
  void killed_and_raised();
  void call_mismatch();
  void silent_ranks();
};

// The failure table's ranks, and the agent's own exit lines where one node's table is absent.
void FailureFindings::read_exits() {
  failures = job.failures;
  // The agent's own line names a local rank: the rank itself on one node, where its table is absent.
  for (const auto& [p, log] : job.processes) hosts.insert(p.first);
  if (hosts.size() <= 1)
    for (const auto& [local, exit] : job.local_exits) {
      RankFailure& f = failures[local];
      if (f.exited) continue;
      f.exited = true;
      f.exitcode = exit.first;
      f.line = exit.second;
      f.file = job.files.empty() ? std::string("-") : job.files.back();
    }
}

// Every rank killed alike (SIGABRT from each rank's own NCCL watchdog): the signal names no one.
void FailureFindings::every_rank_killed_alike() {
  int exited = 0;
  std::set<int> codes;
  for (const auto& [r, f] : failures)
    if (f.exited) {
      ++exited;
      codes.insert(f.exitcode);
    }
  all_alike = exited > 1 && codes.size() == 1;
  if (all_alike && *codes.begin() < 0 && *codes.begin() != -15) {
    // Every rank killed by the same signal: a crash, but the table singles no one out.
    std::vector<int> all;
    for (const auto& [r, f] : failures)
      if (f.exited) all.push_back(r);
    LogFinding x;
    x.kind = Kind::kRankKilled;
    x.text = fmt::format("{} were all killed by {}{}: the launcher's table singles no rank out; the lines before it "
                         "(a watchdog timeout, an NCCL error) say why",
                         ranks_words(all), signal_name(-*codes.begin()),
                         *codes.begin() == -6 ? " (each rank's own watchdog aborting it after a timeout or an error)" : "");
    x.evidence = "torchrun's failure table";
    out.findings.push_back(std::move(x));
  }
}

// A rank Gloo aborted because a peer sent it another size than it expected is where the mismatch
// was seen, not who made it: not a culprit by its signal.
void FailureFindings::size_mismatch() {
  for (const ErrorLine& e : job.other_errors) {
    if (e.what != ErrorLine::What::kMismatch || e.text.find("Received data size") == std::string::npos) continue;
    const int r = e.rank >= 0 ? e.rank : hosts.size() <= 1 ? e.local_rank : -1;
    if (r >= 0) size_aborted.insert(r);
  }
  if (!size_aborted.empty()) {
    LogFinding x;
    x.kind = Kind::kCallMismatch;
    x.text = fmt::format("{} aborted on a message of another size than {} expected (Gloo's size check: \"Received "
                         "data size doesn't match expected size\"): the ranks called different collectives, or the "
                         "same one with different sizes; which rank called differently cannot be told from the log "
                         "(the rank that aborted received it)",
                         ranks_words(std::vector<int>(size_aborted.begin(), size_aborted.end())),
                         size_aborted.size() == 1 ? "it" : "they");
    x.evidence = "gloo::EnforceNotMet in pair.cc";
    out.findings.push_back(std::move(x));
  }
}

// Each rank with a failure: killed by a signal it did not share, raised a cause, or raised what
// waiting on another gives (a timeout, a lost peer, a size mismatch); and the call it failed in.
void FailureFindings::sort_ranks() {
  for (const auto& [r, f] : failures) {
    if (f.exited && f.exitcode < 0 && f.exitcode != -15 && !all_alike && !size_aborted.count(r)) killed.push_back(r);
    const bool consequence = f.what == ErrorLine::What::kTimeout || f.what == ErrorLine::What::kNetwork ||
                             f.what == ErrorLine::What::kMismatch;
    if (!f.error.empty() && !consequence) raised.push_back(r);
    if (!f.error.empty() && consequence) waited.push_back(r);
    if (!f.call.empty()) by_call[f.call].push_back(r);
  }
}

std::string FailureFindings::host_of(int r) const {
  auto f = failures.find(r);
  if (f != failures.end() && !f->second.host.empty()) return f->second.host;
  auto h = ranks.host_of_rank.find(r);
  return h == ranks.host_of_rank.end() ? std::string() : h->second;
}

void FailureFindings::killed_and_raised() {
  for (int r : killed) {
    const RankFailure& f = failures.at(r);
    LogFinding x;
    x.kind = Kind::kRankKilled;
    x.ranks = {r};
    if (!host_of(r).empty()) x.hosts = {host_of(r)};
    x.text = fmt::format("rank {}{} was killed by {}{}{}", r, x.hosts.empty() ? "" : " on " + x.hosts.front(),
                         signal_name(-f.exitcode),
                         f.exitcode == -9 ? " (the kernel's OOM killer, or a scheduler)" : f.exitcode == -11 ? " (a crash in native code)" : "",
                         f.root_cause ? ", torchrun's first observed failure" : "");
    x.evidence = where(f.file, f.line);
    out.findings.push_back(std::move(x));
  }
  for (int r : raised) {
    const RankFailure& f = failures.at(r);
    LogFinding x;
    x.kind = f.what == ErrorLine::What::kCuda ? Kind::kCudaError : Kind::kRankException;
    x.ranks = {r};
    if (!host_of(r).empty()) x.hosts = {host_of(r)};
    x.text = fmt::format("rank {} raised {}{}", r, f.call.empty() ? "" : "in " + f.call + ": ", f.error);
    x.evidence = where(f.file, f.line);
    out.findings.push_back(std::move(x));
  }
}

// The rank that called another collective: named by the others (TORCH_DISTRIBUTED_DEBUG=DETAIL), or
// the ranks whose traceback is in another call than most ranks'.
void FailureFindings::call_mismatch() {
  if (!job.named_odd.empty()) {
    // The wrapper compared fingerprints: the rank the others name is the odd one.
    LogFinding x;
    x.kind = Kind::kCallMismatch;
    std::vector<int> namers;
    // Each rank's message names another; the odd one is named by the most.
    size_t most = 0;
    for (const auto& [odd, by] : job.named_odd) most = std::max(most, by.size());
    for (const auto& [odd, by] : job.named_odd)
      if (by.size() == most) {
        x.ranks.push_back(odd);
        namers.insert(namers.end(), by.begin(), by.end());
      }
    x.text = fmt::format("{} named {} as running a different collective at the same sequence number "
                         "(TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint check)",
                         ranks_words(namers), ranks_words(x.ranks));
    x.evidence = "\"Detected mismatch between collectives on ranks\" lines";
    out.findings.push_back(std::move(x));
  } else if (by_call.size() > 1) {
    // The call most ranks were in is the job's; the others called something else in its place.
    auto most = std::max_element(by_call.begin(), by_call.end(),
                                 [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    if (std::count_if(by_call.begin(), by_call.end(), [&](const auto& c) { return c.second.size() == most->second.size(); }) == 1) {
      LogFinding x;
      x.kind = Kind::kCallMismatch;
      std::string others;
      for (const auto& [call, rs] : by_call) {
        if (call == most->first) continue;
        x.ranks.insert(x.ranks.end(), rs.begin(), rs.end());
        others += fmt::format("{}{} in {}", others.empty() ? "" : "; ", ranks_words(rs), call);
      }
      x.text = fmt::format("{} failed in {}, but {}: they called a different collective at the same point (one "
                           "skipped or added a call)",
                           ranks_words(most->second), most->first, others);
      x.evidence = "the torch.distributed frame of each rank's traceback";
      out.findings.push_back(std::move(x));
    }
  }
}

// The ranks that did not arrive: named by monitored_barrier, or the ranks that raised nothing while
// the others timed out waiting.
void FailureFindings::silent_ranks() {
  if (!job.barrier_absent.empty()) {
    // monitored_barrier names the members that did not arrive, by their rank in its group. The
    // log does not print a group's members, so they are global ranks only where the group is the
    // whole job: the printer is global rank 0 and every rank named is one the log saw. Otherwise
    // the finding says which group ranks, and that their global ranks cannot be told.
    for (const auto& [printer, group_ranks] : job.barrier_absent) {
      LogFinding x;
      x.kind = Kind::kSilentRank;
      const std::vector<int> named(group_ranks.begin(), group_ranks.end());
      const bool whole_job =
          printer == 0 && std::all_of(named.begin(), named.end(), [&](int r) { return ranks.seen.count(r) > 0; });
      const std::string group_words = fmt::format("group rank{} {}", named.size() == 1 ? "" : "s", fmt::join(named, ", "));
      if (whole_job) {
        x.ranks = named;
        x.text = fmt::format("{} did not pass monitored_barrier, which rank 0 ran (its {}; global ranks where the "
                             "barrier's group is the default group)",
                             ranks_words(named), group_words);
      } else {
        x.text = fmt::format("{} of the group whose rank 0 is global rank {} did not pass monitored_barrier; the log does "
                             "not list that group's members, so which global rank{} that is cannot be told from it (the "
                             "group's members, from the code or the dumps' pg_config, map it)",
                             group_words, printer, named.size() == 1 ? "" : "s");
      }
      x.evidence = fmt::format("rank {}'s \"failed to pass monitoredBarrier\" line", printer);
      out.findings.push_back(std::move(x));
    }
  } else if (!waited.empty()) {
    std::vector<int> silent;
    for (int r : ranks.seen)
      if (auto f = failures.find(r); f == failures.end() || f->second.error.empty()) silent.push_back(r);
    if (!silent.empty()) {
      LogFinding x;
      x.kind = Kind::kSilentRank;
      x.ranks = silent;
      x.text = fmt::format("{} raised no error while {} timed out or lost a peer waiting for them: they never reached "
                           "the collective the others waited in (stuck before it, or gone)",
                           ranks_words(silent), ranks_words(waited));
      x.evidence = "every rank's traceback";
      out.findings.push_back(std::move(x));
    }
  }
}

void add_failure_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  FailureFindings findings(job, ranks, out);
  findings.read_exits();
  if (findings.failures.empty()) return;
  findings.every_rank_killed_alike();
  findings.size_mismatch();
  findings.sort_ranks();
  findings.killed_and_raised();
  findings.call_mismatch();
  findings.silent_ranks();
}

// Errors NCCL printed, one finding per process and kind.
void nccl_error_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  for (const auto& [key, p] : job.processes) {
    std::map<ErrorLine::What, std::pair<const ErrorLine*, int>> by_what;
    for (const ErrorLine& e : p.errors) {
      auto& slot = by_what[e.what];
      if (!slot.first) slot.first = &e;
      ++slot.second;
    }
    std::vector<int> who;
    if (auto it = ranks.ranks_of_process.find(key); it != ranks.ranks_of_process.end()) who = it->second;
    if (who.empty() && p.tagged_rank >= 0) who.push_back(p.tagged_rank);
    for (const auto& [what, first] : by_what) {
      const ErrorLine& e = *first.first;
      LogFinding f;
      if (what == ErrorLine::What::kOther) {
        LogFinding info;
        info.kind = Kind::kNcclError;
        info.ranks = who;
        info.hosts = {p.host};
        info.problem = false;
        info.text = fmt::format("{} on {}: NCCL's RAS could not listen (another NCCL process of the host holds its port; "
                             "harmless): {}", ranks_words(who), p.host, first.first->text);
        info.evidence = where(first.first->file, first.first->line);
        out.findings.push_back(std::move(info));
        continue;
      }
      f.kind = what == ErrorLine::What::kNetwork ? Kind::kNetworkError
               : what == ErrorLine::What::kCuda  ? Kind::kCudaError
                                                 : Kind::kNcclError;
      f.ranks = who;
      f.hosts = {p.host};
      f.peer = e.peer;
      const std::string ph = e.peer.empty() ? std::string() : peer_host(ranks, e.peer);
      if (!ph.empty()) f.peer = fmt::format("{} ({})", ph, e.peer);
      f.text = fmt::format("{} on {} (pid {}) printed {} {}{}{}: {}", ranks_words(who), p.host, p.pid,
                           what == ErrorLine::What::kNetwork ? "a network error"
                           : what == ErrorLine::What::kCuda  ? "a CUDA error"
                                                             : "an NCCL warning",
                           first.second > 1 ? fmt::format("({} lines) ", first.second) : "",
                           f.peer.empty() ? "" : "naming peer " + f.peer, f.peer.empty() ? "" : "", e.text);
      f.evidence = where(e.file, e.line);
      f.problem = what != ErrorLine::What::kNccl || e.text.find("Error") != std::string::npos ||
                  e.text.find("error") != std::string::npos || e.text.find("fail") != std::string::npos;
      out.findings.push_back(std::move(f));
    }
  }
}

// Errors PyTorch printed (a traceback, an NCCL error it raised).
void torch_error_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  std::map<std::pair<ErrorLine::What, int>, const ErrorLine*> first;
  for (const ErrorLine& e : job.other_errors) first.try_emplace({e.what, e.rank}, &e);
  for (const auto& [k, e] : first) {
    LogFinding f;
    // Raised by PyTorch: a lost peer or a timeout is what the ranks waiting on the culprit see.
    f.kind = k.first == ErrorLine::What::kNetwork   ? Kind::kPeerLost
             : k.first == ErrorLine::What::kCuda    ? Kind::kCudaError
             : k.first == ErrorLine::What::kTimeout ? Kind::kWatchdogTimeout
                                                    : Kind::kNcclError;
    f.problem = k.first == ErrorLine::What::kCuda;
    if (e->rank >= 0) f.ranks = {e->rank};
    if (e->rank >= 0)
      if (auto h = ranks.host_of_rank.find(e->rank); h != ranks.host_of_rank.end()) f.hosts = {h->second};
    f.text = fmt::format("{} printed: {}", e->rank >= 0 ? fmt::format("rank {}", e->rank) : "a process", e->text);
    f.evidence = where(e->file, e->line);
    out.findings.push_back(std::move(f));
  }
}

// The heartbeat monitor's count of works not completed, per group: lockstep collectives complete
// together, so a rank with fewer outstanding issued fewer: it is behind.
void outstanding_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  std::map<std::string, std::map<int, int64_t>> outstanding;
  for (const auto& [k, g] : job.torch)
    if (g.outstanding >= 0) outstanding[g.pg][k.first] = g.outstanding;
  for (const auto& [pg, by_rank] : outstanding) {
    if (by_rank.size() < 2) continue;
    int64_t lo = INT64_MAX, hi = -1;
    for (const auto& [r, n] : by_rank) {
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    if (lo == hi) continue;
    LogFinding x;
    x.kind = Kind::kBehind;
    std::vector<int> ahead;
    for (const auto& [r, n] : by_rank) (n == lo ? x.ranks : ahead).push_back(r);
    x.text = fmt::format("{} had {} collectives outstanding on pg {} where {} had up to {}: {} issued {} fewer, so it "
                         "stopped issuing earlier (behind) while the watchdogs hung",
                         ranks_words(x.ranks), lo, pg.empty() ? "?" : pg, ranks_words(ahead), hi,
                         x.ranks.size() == 1 ? "it" : "they", hi - lo);
    x.evidence = "\"Heartbeat monitor timed out ... workMetaList_.size()\" lines";
    out.findings.push_back(std::move(x));
  }
}

// Init: communicators some member started and never completed, or that some members never joined.
void init_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  std::map<std::string, std::vector<const CommMember*>> comms;
  for (const auto& [key, m] : job.members)
    if (m.rank >= 0 && m.nranks > 0 && (m.init_started || m.init_completed)) comms[comm_key(m)].push_back(&m);
  for (const auto& [name, members] : comms) {
    std::vector<int> stuck, done;
    std::set<int> present;
    int nranks = 0;
    for (const CommMember* m : members) {
      nranks = m->nranks;
      present.insert(m->rank);
      auto g = ranks.rank_of_device.find({m->host, m->pid, m->device});
      const int global = g == ranks.rank_of_device.end() ? m->rank : g->second;
      (m->init_completed ? done : stuck).push_back(global);
    }
    std::vector<int> absent;  // ranks in the communicator that printed no init line
    for (int r = 0; r < nranks; ++r)
      if (!present.count(r)) absent.push_back(r);
    if (stuck.empty() && (absent.empty() || !done.empty())) continue;
    // A communicator every member completed is fine even where others' lines are cut out.
    LogFinding f;
    f.kind = Kind::kInitIncomplete;
    // Who holds it up: the members that never printed an init line, where the communicator's ranks
    // are the job's (world-sized); else the ranks that started and never completed.
    f.ranks = !absent.empty() && nranks == ranks.nccl_world ? absent : stuck;
    std::set<std::string> hosts;
    for (const CommMember* m : members)
      if (!m->init_completed) hosts.insert(m->host);
    f.hosts.assign(hosts.begin(), hosts.end());
    f.text = fmt::format("{} ({} ranks): init never completed on {}{}{}", name, nranks, ranks_words(stuck),
                         done.empty() ? "" : fmt::format(" ({} completed it)", ranks_words(done)),
                         absent.empty() ? "" : fmt::format("; its rank{} {} printed no init line: never reached "
                                                           "it, or their output is not in this log",
                                                           absent.size() == 1 ? "" : "s", compact(absent)));
    f.evidence = fmt::format("{} Init START without Init COMPLETE", stuck.size());
    out.findings.push_back(std::move(f));
  }
}

// The settings NCCL printed that matter (kSettings), and mixed NCCL versions.
void setting_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  std::map<std::pair<std::string, std::string>, std::vector<int>> settings;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> setting_hosts;
  std::map<std::string, std::vector<int>> versions;
  for (const auto& [key, p] : job.processes) {
    std::vector<int> who;
    if (auto it = ranks.ranks_of_process.find(key); it != ranks.ranks_of_process.end()) who = it->second;
    for (const auto& [name, value] : p.settings) {
      for (const auto& rule : kSettings)
        if (rule.name == name && !rule.why.empty() && (rule.value.empty() || rule.value == value)) {
          auto& v = settings[{name, value}];
          v.insert(v.end(), who.begin(), who.end());
          setting_hosts[{name, value}].insert(p.host);
        }
    }
    if (!p.version.empty()) {
      auto& v = versions[p.version];
      v.insert(v.end(), who.begin(), who.end());
    }
  }
  for (const auto& [nv, who] : settings) {
    LogFinding f;
    f.kind = Kind::kSetting;
    f.ranks = who;
    f.hosts.assign(setting_hosts[nv].begin(), setting_hosts[nv].end());
    std::string why;
    for (const auto& rule : kSettings)
      if (rule.name == nv.first) why = rule.why;
    f.text = fmt::format("{}={} set by the environment ({}): {}", nv.first, nv.second,
                         who.empty() ? fmt::format("on {}", f.hosts.front()) : ranks_words(who), why);
    f.evidence = fmt::format("\"{} set by environment to {}\"", nv.first, nv.second);
    out.findings.push_back(std::move(f));
  }
  for (const auto& [v, who] : versions) out.versions.push_back(v);
  if (versions.size() > 1) {
    LogFinding f;
    f.kind = Kind::kVersion;
    std::string list;
    for (const auto& [v, who] : versions) list += fmt::format("{}{} on {}", list.empty() ? "" : ", ", v, ranks_words(who));
    f.text = "mixed NCCL versions in one job: " + list;
    f.evidence = "\"NCCL version\" lines";
    out.findings.push_back(std::move(f));
  }
}

// Transports: a host whose channels go over sockets where other hosts' use InfiniBand.
void transport_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  std::map<std::string, std::set<std::string>> host_nets;
  for (const auto& [key, p] : job.processes)
    for (const auto& [t, n] : p.transports)
      if (t.starts_with("NET/")) host_nets[p.host].insert(t);
  std::set<std::string> socket_hosts, ib_hosts;
  for (const auto& [h, ts] : host_nets) {
    if (ts.count("NET/Socket") && !ts.count("NET/IB")) socket_hosts.insert(h);
    if (ts.count("NET/IB")) ib_hosts.insert(h);
  }
  if (!socket_hosts.empty() && !ib_hosts.empty()) {
    LogFinding f;
    f.kind = Kind::kTopology;
    f.hosts.assign(socket_hosts.begin(), socket_hosts.end());
    for (const auto& [key, p] : job.processes)
      if (socket_hosts.count(p.host))
        if (auto it = ranks.ranks_of_process.find(key); it != ranks.ranks_of_process.end())
          f.ranks.insert(f.ranks.end(), it->second.begin(), it->second.end());
    std::string hs;
    for (const auto& h : socket_hosts) hs += (hs.empty() ? "" : ", ") + h;
    f.text = fmt::format("host{} {}: channels go over NET/Socket (TCP) where {} other host{} use NET/IB: its InfiniBand "
                         "was not found or not usable (NCCL_IB_DISABLE, a missing driver or HCA, NCCL_IB_HCA)",
                         socket_hosts.size() == 1 ? "" : "s", hs, ib_hosts.size(), ib_hosts.size() == 1 ? "" : "s");
    f.evidence = "\"Channel ... via NET/Socket\" lines";
    out.findings.push_back(std::move(f));
  }
}

// The topology search: few channels over NVLink means few links were found.
void topology_search_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  for (const auto& [key, p] : job.processes) {
    if (p.search_channels < 0 || !p.search_type.starts_with("NVL")) continue;
    std::vector<int> who;
    if (auto it = ranks.ranks_of_process.find(key); it != ranks.ranks_of_process.end()) who = it->second;
    int coll = -1;
    for (const auto& [mk, m] : job.members)
      if (m.host == p.host && m.pid == p.pid && m.coll_channels > 0) coll = coll < 0 ? m.coll_channels : std::min(coll, m.coll_channels);
    LogFinding f;
    f.kind = Kind::kTopology;
    f.ranks = who;
    f.hosts = {p.host};
    f.problem = p.search_channels <= 2;
    f.text = fmt::format("{} on {}: NCCL's topology search found {} ring channel{} over {} at {:g} GB/s each ({:g} GB/s "
                         "in all){}{}",
                         ranks_words(who), p.host, p.search_channels, p.search_channels == 1 ? "" : "s", p.search_type,
                         p.search_bw, p.search_bw * p.search_channels,
                         coll > 0 ? fmt::format("; {} collective channels", coll) : "",
                         f.problem ? ": few NVLink links were found between these GPUs (a topology file, a disabled link, "
                                     "or a GPU in another NVLink domain)"
                                   : "");
    f.evidence = "\"Pattern 4, crossNic ..., nChannels ...\" line";
    out.findings.push_back(std::move(f));
  }
}

}  // namespace

void add_findings(const LogJob& job, const RankMap& ranks, LogImport& out) {
  nccl_error_findings(job, ranks, out);
  torch_error_findings(job, ranks, out);
  add_failure_findings(job, ranks, out);
  outstanding_findings(job, ranks, out);
  init_findings(job, ranks, out);
  setting_findings(job, ranks, out);
  transport_findings(job, ranks, out);
  topology_search_findings(job, ranks, out);
}

}  // namespace rankscope::logs
