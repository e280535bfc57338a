// nccl_evidence.cpp — what the NCCL profiler plugin's recorders add to a diagnosis.
//
// Is: sentences from evidence only recorders written by librankscope-nccl.so carry (their CommSlots
// have an NCCL section): NCCL's kernel-channel events tell "launched, no kernel channel started"
// (the GPU stream is blocked before NCCL) from "every member's kernel started, none finished"
// (stuck in the transport), and the API events tell that a host thread is inside an NCCL call, and
// for how long. Is not: a verdict; the classifier decides (the same rules as for the probe's own
// recorders: started = a kernel channel started, host_returned = NCCL enqueued it).
#include <algorithm>

#include <fmt/format.h>

#include "analysis_parts.h"
#include "wording.h"

namespace rankscope::hang {
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

}  // namespace

std::string nccl_call_note(const RankView& v, int64_t reference_ns) {
  if (!from_plugin(v)) return "";
  for (const auto& c : v.snap->comms) {
    if (!c.nccl || c.nccl->api_begin_ns == 0) continue;
    const int64_t inside = reference_ns - v.aligned(c.nccl->api_begin_ns);
    if (inside < kLongNcclCallNs) continue;
    return fmt::format("thread {} inside {} on {} for {}", c.nccl->api_tid, call_name(c.nccl->api_call, c.nccl->api_op),
                       c.name, human_seconds(double(inside) / 1e9));
  }
  return "";
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
  }
  return out;
}

}  // namespace rankscope::hang
