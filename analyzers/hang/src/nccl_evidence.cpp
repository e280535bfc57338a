// nccl_evidence.cpp — what the NCCL profiler plugin's recorders add to a diagnosis.
//
// Is: sentences from evidence only recorders written by librankscope-nccl.so carry (their CommSlots
// have an NCCL section): NCCL's kernel-channel events tell "launched, no kernel channel started"
// (the GPU stream is blocked before NCCL) from "every member's kernel started, none finished"
// (stuck in the transport), and the API events tell that a host thread is inside an NCCL call, and
// for how long; the per-peer counters tell point-to-point operations launched and not completed,
// and send/recv to self, whose GPU progress NCCL never reports. Is not: a verdict; the classifier
// decides (the same rules as for the probe's own recorders: started = a kernel channel started,
// host_returned = NCCL enqueued it).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis_parts.h"
#include "wording.h"

namespace rankscope::analyzers::hang {
namespace {

constexpr int64_t kLongNcclCallNs = 1'000'000'000;  // API calls take microseconds

bool from_plugin(const RankView& v) {
  return v.readable() && std::any_of(v.snap->comms.begin(), v.snap->comms.end(), [](const auto& c) { return c.nccl.has_value(); });
}

std::string_view call_name(format::NcclApiCall c, format::CollectiveOp op) {
  switch (c) {
    case format::NcclApiCall::kGroupStart: return "ncclGroupStart";
    case format::NcclApiCall::kGroupEnd: return "ncclGroupEnd";
    case format::NcclApiCall::kP2p: return op == format::CollectiveOp::kRecv ? "ncclRecv" : "ncclSend";
    case format::NcclApiCall::kCollective: return op == format::CollectiveOp::kUnknown ? "an NCCL collective" : format::short_op_name(op);
    case format::NcclApiCall::kNone: break;
  }
  return "an NCCL call";
}

// What one communicator's point-to-point counters say: operations with other ranks launched and
// not completed, and send/recv to itself, which NCCL runs as a copy inside its kernel with no proxy
// op, hence no kernel-channel event: launched is all that is ever known of them.
struct P2pState {
  uint64_t open_send = 0, open_recv = 0, self_send = 0, self_recv = 0;
  std::vector<int> open_peers;  // comm ranks
};

P2pState p2p_state(const format::CommSnapshot& c) {
  P2pState st;
  for (const auto& p : c.nccl->peers) {
    if (p.peer == c.rank_in_comm) {
      st.self_send += p.send_launched;
      st.self_recv += p.recv_launched;
      continue;
    }
    const uint64_t s = p.send_launched - std::min(p.send_completed, p.send_launched);
    const uint64_t r = p.recv_launched - std::min(p.recv_completed, p.recv_launched);
    st.open_send += s;
    st.open_recv += r;
    if (s + r > 0) st.open_peers.push_back(p.peer);
  }
  return st;
}

std::string p2p_sentences(const RankView& v) {
  std::string out;
  for (const auto& c : v.snap->comms) {
    if (!c.nccl) continue;
    const auto [open_send, open_recv, self_send, self_recv, open_peers] = p2p_state(c);
    if (open_send + open_recv > 0)
      out += fmt::format(" Rank {} has {} send(s) and {} recv(s) on {} launched and not completed (with comm rank(s) {}).",
                         v.rank, open_send, open_recv, c.name, fmt::join(open_peers, ", "));
    if (self_send + self_recv > 0) {
      const bool host_outside = c.nccl->api_begin_ns == 0;
      out += fmt::format(
          " Rank {} sent to and received from itself on {} ({} sends, {} recvs){}; NCCL reports no GPU progress for a "
          "send/recv to self, so whether its GPU ran the last of them is unknown: a kernel queued before them that does "
          "not end would hold them on the stream.",
          v.rank, c.name, self_send, self_recv,
          host_outside ? ", all handed to the GPU (no thread of it is inside an NCCL call)" : "");
    }
  }
  return out;
}

}  // namespace

std::string nccl_call_note(const RankView& v, int64_t reference_ns) {
  if (!from_plugin(v)) return "";
  for (const auto& c : v.snap->comms) {
    if (!c.nccl || c.nccl->api_begin_ns == 0) continue;
    const int64_t inside = format::sub_saturating(reference_ns, v.aligned(c.nccl->api_begin_ns));
    if (inside < kLongNcclCallNs) continue;
    return fmt::format("thread {} inside {} on {} for {}", c.nccl->api_tid, call_name(c.nccl->api_call, c.nccl->api_op),
                       c.name, human_seconds(double(inside) / 1e9));
  }
  return "";
}

std::string nccl_p2p_note(const RankView& v) {
  if (!from_plugin(v)) return "";
  std::vector<std::string> parts;
  for (const auto& c : v.snap->comms) {
    if (!c.nccl) continue;
    const P2pState st = p2p_state(c);
    if (st.open_send + st.open_recv > 0)
      parts.push_back(fmt::format("{} send(s), {} recv(s) on {} launched, not completed", st.open_send, st.open_recv, c.name));
    if (st.self_send + st.self_recv > 0)
      parts.push_back(fmt::format("{} send(s), {} recv(s) to itself on {} (completion not reported by NCCL)", st.self_send,
                                  st.self_recv, c.name));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::string nccl_evidence_sentence(const Diagnosis& d, const std::vector<RankView>& views) {
  if (!std::any_of(views.begin(), views.end(), from_plugin)) return "";
  std::string out;
  if (d.kind == Kind::kGpuBehindHost && d.collective)
    out += fmt::format(" NCCL's kernel-channel events: {} launched it but no kernel channel of it started, so the GPU "
                       "stream is blocked before NCCL.",
                       d.culprit_ranks.size() == 1 ? fmt::format("rank {}", d.culprit_ranks.front()) : "those ranks");
  if (d.kind == Kind::kStuckInCollective && d.collective) {
    bool all_started = true;
    for (const auto& v : views) {
      const auto* c = v.comm(d.collective->comm);
      const auto* rec = c ? c->find(d.collective->seq) : nullptr;
      if (rec && rec->state != format::CollectiveState::kStarted) all_started = false;
    }
    if (all_started)
      out += " NCCL's kernel-channel events show every member's kernel running and none finished: it is stuck in the "
             "transport (network, NVLink, a peer's proxy thread), not waiting for a rank.";
  }
  for (int r : d.culprit_ranks) {
    if (r < 0 || r >= int(views.size())) continue;
    const std::string note = nccl_call_note(views[size_t(r)], d.reference_ns);
    if (!note.empty())
      out += fmt::format(" Rank {}'s {}: it is blocked inside NCCL (connection set-up with a peer, a full launch "
                         "queue), not in its own code.",
                         r, note);
    if (from_plugin(views[size_t(r)])) out += p2p_sentences(views[size_t(r)]);
  }
  return out;
}

}  // namespace rankscope::analyzers::hang
