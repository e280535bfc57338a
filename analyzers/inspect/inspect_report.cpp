// inspect_report.cpp — text and JSON views of every rank's flight recorder.
#include "inspect_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "process_liveness.h"
#include "rankscope/format/clock.h"

namespace rankscope::analyzers {
namespace {

using format::CollectiveSnapshot;
using format::CommSnapshot;
using format::FlightRecorderSnapshot;

int64_t reader_now(const InspectOptions& o) { return o.now_ns ? o.now_ns : now_unix_ns(); }

std::string range_path(const format::ThreadSnapshot& t) {
  std::string out;
  for (const auto& r : t.stack) {
    if (!out.empty()) out += " > ";
    out += r.name;
  }
  if (t.depth > t.stack.size()) out += fmt::format(" > ({} deeper)", t.depth - t.stack.size());
  return out.empty() ? "(none)" : out;
}

std::vector<const CollectiveSnapshot*> last_n(const CommSnapshot& c, int n) {
  std::vector<const CollectiveSnapshot*> out;
  const size_t from = c.ring.size() > size_t(n) ? c.ring.size() - size_t(n) : 0;
  for (size_t i = from; i < c.ring.size(); ++i) out.push_back(&c.ring[i]);
  return out;
}

nlohmann::json collective_json(const CollectiveSnapshot& c) {
  return {{"seq", c.seq},
          {"op", format::op_name(c.op)},
          {"dtype", format::dtype_name(c.dtype)},
          {"count", c.count},
          {"bytes", c.bytes},
          {"peer", c.peer},
          {"state", format::state_name(c.state)},
          {"step", c.step},
          {"range", c.range},
          {"enqueue_unix_ns", c.enqueue_ns},
          {"start_unix_ns", c.start_ns},
          {"end_unix_ns", c.end_ns},
          {"torn", c.torn}};
}

// `nccl`: a recorder of the NCCL profiler plugin, whose `step` is NCCL's per-function seqNumber.
std::string collective_line(const CollectiveSnapshot& c, int64_t now, bool nccl) {
  std::string when;
  if (c.state == format::CollectiveState::kCompleted || c.state == format::CollectiveState::kFailed)
    when = fmt::format("took {}", human_duration_ns(c.end_ns - c.enqueue_ns));
  else
    when = fmt::format("open for {}", human_duration_ns(now - c.enqueue_ns));
  return fmt::format("#{} {} {} {} {} {} ({}, {} {}){}", c.seq, format::op_name(c.op), format::dtype_name(c.dtype),
                     human_bytes(c.bytes), format::state_name(c.state), when, c.range.empty() ? "-" : c.range,
                     nccl ? "nccl seq" : "step", c.step, c.torn ? " [torn]" : "");
}

// Point-to-point operations of an NCCL plugin recorder, per peer (comm rank). A peer equal to the
// rank's own comm rank is a send/recv to itself, whose completion NCCL never reports.
bool to_self(const CommSnapshot& c, const format::NcclPeerSnapshot& p) { return p.peer == c.rank_in_comm; }

nlohmann::json p2p_json(const CommSnapshot& c) {
  auto out = nlohmann::json::array();
  for (const auto& p : c.nccl->peers)
    out.push_back({{"peer", p.peer}, {"to_self", to_self(c, p)}, {"send_issued", p.send_launched},
                   {"send_completed", p.send_completed}, {"recv_issued", p.recv_launched},
                   {"recv_completed", p.recv_completed}, {"completion_observable", !to_self(c, p)}});
  return out;
}

std::string p2p_line(const CommSnapshot& c, const format::NcclPeerSnapshot& p) {
  if (to_self(c, p))
    return fmt::format("send/recv with itself (comm rank {}): {} sends, {} recvs issued; completion not observable "
                       "(NCCL reports no GPU progress for a send/recv to self)",
                       p.peer, p.send_launched, p.recv_launched);
  return fmt::format("send/recv with comm rank {}: {} sends issued, {} completed; {} recvs issued, {} completed", p.peer,
                     p.send_launched, p.send_completed, p.recv_launched, p.recv_completed);
}

std::string_view api_call_name(format::NcclApiCall call) {
  switch (call) {
    case format::NcclApiCall::kGroupStart: return "ncclGroupStart";
    case format::NcclApiCall::kGroupEnd: return "ncclGroupEnd";
    case format::NcclApiCall::kP2p: return "ncclSend/ncclRecv";
    case format::NcclApiCall::kCollective: return "an NCCL collective";
    case format::NcclApiCall::kNone: break;
  }
  return "an NCCL call";
}

}  // namespace

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", double(b) / 1024);
  if (b < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", double(b) / (1024 * 1024));
  return fmt::format("{:.2f} GiB", double(b) / (1024.0 * 1024 * 1024));
}

std::string human_duration_ns(int64_t ns) {
  const double a = double(ns < 0 ? -ns : ns);
  const char* sign = ns < 0 ? "-" : "";
  if (a < 1e3) return fmt::format("{}{} ns", sign, int64_t(a));
  if (a < 1e6) return fmt::format("{}{:.1f} us", sign, a / 1e3);
  if (a < 1e9) return fmt::format("{}{:.1f} ms", sign, a / 1e6);
  if (a < 120e9) return fmt::format("{}{:.1f} s", sign, a / 1e9);
  if (a < 7200e9) return fmt::format("{}{:.1f} min", sign, a / 60e9);
  if (a < 172800e9) return fmt::format("{}{:.1f} h", sign, a / 3600e9);
  return fmt::format("{}{:.1f} days", sign, a / 86400e9);
}

nlohmann::json inspect_json(const format::RunDirectory& run, const InspectOptions& o) {
  const int64_t now = reader_now(o);
  nlohmann::json j;
  j["schema_version"] = kInspectSchemaVersion;
  j["run_dir"] = run.dir.string();
  j["world_size"] = run.world_size;
  if (run.metadata) {
    j["run_id"] = run.metadata->run_id;
    j["tp"] = run.metadata->tp;
    j["dp"] = run.metadata->dp;
    j["program"] = run.metadata->program;
  }
  j["problems"] = run.problems;
  auto ranks = nlohmann::json::array();
  for (const auto& rf : run.ranks) {
    nlohmann::json r;
    r["rank"] = rf.rank;
    if (!rf.flight) {
      r["readable"] = false;
      r["error"] = rf.flight_status.message();
      ranks.push_back(r);
      continue;
    }
    const FlightRecorderSnapshot& f = *rf.flight;
    r["readable"] = true;
    r["host"] = f.host;
    r["pid"] = f.pid;
    r["alive"] = liveness_name(process_liveness(f.host, f.pid, f.boot_id));
    r["process_state"] = format::process_state_name(f.live.process_state);
    r["step"] = f.live.step;
    r["heartbeat_age_s"] = double(now - f.live.heartbeat_ns) / 1e9;
    r["clock_offset_ns"] = f.live.clock_offset_ns;
    r["clock_uncertainty_ns"] = f.live.clock_uncertainty_ns;
    auto threads = nlohmann::json::array();
    for (const auto& t : f.threads) {
      auto stack = nlohmann::json::array();
      for (const auto& s : t.stack) stack.push_back({{"name", s.name}, {"begin_unix_ns", s.begin_ns}});
      threads.push_back({{"tid", t.tid}, {"name", t.name}, {"depth", t.depth}, {"ranges", stack}, {"torn", t.torn}});
    }
    r["threads"] = threads;
    auto comms = nlohmann::json::array();
    for (const auto& c : f.comms) {
      auto last = nlohmann::json::array();
      for (const auto* cs : last_n(c, o.last_collectives)) last.push_back(collective_json(*cs));
      nlohmann::json cj = {{"name", c.name}, {"size", c.size}, {"rank_in_comm", c.rank_in_comm},
                           {"issued", c.next_seq}, {"completed", c.completed_count}, {"last", last}};
      if (c.nccl) {
        cj["p2p"] = p2p_json(c);
        cj["nccl_call"] = c.nccl->api_begin_ns == 0
                              ? nlohmann::json(nullptr)
                              : nlohmann::json{{"call", api_call_name(c.nccl->api_call)}, {"tid", c.nccl->api_tid},
                                               {"begin_unix_ns", c.nccl->api_begin_ns}};
      }
      comms.push_back(std::move(cj));
    }
    r["comms"] = comms;
    if (f.watchdog.event_count > 0)
      r["watchdog"] = {{"kind", format::watchdog_kind_name(f.watchdog.kind)}, {"time_unix_ns", f.watchdog.time_ns},
                       {"message", f.watchdog.message}, {"range", f.watchdog.range},
                       {"stacks_file", f.watchdog.stacks_file}, {"events", f.watchdog.event_count}};
    auto missing = nlohmann::json::array();
    if (f.grad.in_backward)
      for (const auto* p : f.missing_gradients()) missing.push_back({{"param", p->name}, {"bucket", p->bucket}});
    r["missing_gradients"] = missing;
    r["warnings"] = f.warnings;
    ranks.push_back(r);
  }
  j["ranks"] = ranks;
  return j;
}

std::string inspect_text(const format::RunDirectory& run, const InspectOptions& o) {
  const int64_t now = reader_now(o);
  std::string out;
  if (run.metadata)
    out += fmt::format("run {} ({}): {} ranks, tp {} x dp {}\n", run.metadata->run_id,
                       run.metadata->program.empty() ? "?" : run.metadata->program, run.world_size, run.metadata->tp,
                       run.metadata->dp);
  else
    out += fmt::format("run in {}: {} ranks (run.json unreadable)\n", run.dir.string(), run.world_size);
  for (const auto& rf : run.ranks) {
    if (!rf.flight) {
      out += fmt::format("\nrank {}: unreadable: {}\n", rf.rank, rf.flight_status.message());
      continue;
    }
    const auto& f = *rf.flight;
    out += fmt::format("\nrank {}  {} pid {} ({})  {}  step {}  heartbeat {} ago\n", rf.rank, f.host, f.pid,
                       liveness_name(process_liveness(f.host, f.pid, f.boot_id)), format::process_state_name(f.live.process_state),
                       f.live.step, human_duration_ns(now - f.live.heartbeat_ns));
    for (const auto& t : f.threads)
      if (!t.stack.empty() || &t == f.main_thread())
        out += fmt::format("  ranges [{}]: {}\n",
                           !t.name.empty() ? t.name : t.tid > 0 ? std::to_string(t.tid) : "thread unknown", range_path(t));
    for (const auto& c : f.comms) {
      // A plugin recorder's send/recv are listed per peer below: its counts are collectives only.
      out += fmt::format("  {} (rank {} of {}): {}{} issued, {} completed\n", c.name, c.rank_in_comm, c.size, c.next_seq,
                         c.nccl ? " collectives" : "", c.completed_count);
      for (const auto* cs : last_n(c, o.last_collectives))
        out += "    " + collective_line(*cs, now, c.nccl.has_value()) + "\n";
      if (!c.nccl) continue;
      for (const auto& p : c.nccl->peers) out += "    " + p2p_line(c, p) + "\n";
      if (c.nccl->api_begin_ns != 0)
        out += fmt::format("    thread {} inside {} for {}\n", c.nccl->api_tid, api_call_name(c.nccl->api_call),
                           human_duration_ns(now - c.nccl->api_begin_ns));
    }
    if (f.grad.in_backward) {
      const auto missing = f.missing_gradients();
      out += fmt::format("  backward of step {}: {} of {} gradients arrived\n", f.grad.backward_step, f.grad.n_arrived,
                         f.grad.n_params);
      for (size_t i = 0; i < missing.size() && i < 8; ++i)
        out += fmt::format("    waiting for {} (bucket {})\n", missing[i]->name, missing[i]->bucket);
      if (missing.size() > 8) out += fmt::format("    ... and {} more\n", missing.size() - 8);
    }
    if (f.watchdog.event_count > 0)
      out += fmt::format("  watchdog: {} ({})\n", f.watchdog.message,
                         f.watchdog.stacks_file.empty() ? "no stacks" : "stacks: " + f.watchdog.stacks_file);
    for (const auto& w : f.warnings) out += "  warning: " + w + "\n";
  }
  if (!run.problems.empty()) {
    out += "\nproblems:\n";
    for (const auto& p : run.problems) out += "  " + p + "\n";
  }
  return out;
}

}  // namespace rankscope::analyzers
