// collective_bandwidth.cpp — each collective's and each group's rate (skew_parts.h).
//
// A collective's rate is its bytes over its transfer: the time after the last rank arrived, which
// is what the links had (the wait before it is a late peer, not the network); a group's, its bytes
// a step over the time some call of it was transferring (calls in flight together count once). algbw is a rank's
// bytes over that time; busbw scales it by how much of the message each rank must send over its
// links for the op (the convention of nccl-tests' PERFORMANCE.md), so different ops and group
// sizes compare against one link speed.
#include <algorithm>
#include <map>

#include "rankscope/format/vocabulary.h"
#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

// Bytes on a rank's links per byte of its input, for a group of n ranks; 0 where the recorders'
// bytes do not say it (an all-gather's bytes are its shard in some recorders and the gathered
// whole in others; a barrier moves none).
double bus_factor(std::string_view op, int n) {
  if (n < 2) return 0;
  const double ring = double(n - 1) / n;
  switch (format::parse_op(op).value_or(format::CollectiveOp::kUnknown)) {
    case format::CollectiveOp::kAllReduce:
    case format::CollectiveOp::kAllReduceSum:
    case format::CollectiveOp::kAllReduceMax: return 2 * ring;
    case format::CollectiveOp::kReduceScatter:
    case format::CollectiveOp::kAllToAll:
    case format::CollectiveOp::kAllToAllV: return ring;
    case format::CollectiveOp::kBroadcast:
    case format::CollectiveOp::kReduce:
    case format::CollectiveOp::kSend:
    case format::CollectiveOp::kRecv: return 1;
    default: return 0;
  }
}

double gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0.0; }

}  // namespace

void measure_collective_bandwidth(SkewReport& report) {
  struct Sum {
    int ranks = 0;
    double calls = 0, bytes = 0, bus_bytes = 0;
    bool every_factor = true;
  };
  std::map<std::string, Sum> by_group;
  for (CollectiveSite& s : report.collectives) {
    const double factor = bus_factor(s.op, int(s.ranks.size()));
    s.algbw_gbps = s.ranks.size() >= 2 ? gbps(s.bytes, s.transfer_ms) : 0.0;
    s.busbw_gbps = s.algbw_gbps * factor;
    Sum& g = by_group[s.comm];
    g.ranks = std::max(g.ranks, int(s.ranks.size()));
    g.calls += double(s.instances);
    if (s.bytes <= 0) continue;
    g.bytes += s.bytes * double(s.instances);
    g.bus_bytes += s.bytes * factor * double(s.instances);
    g.every_factor = g.every_factor && factor > 0;
  }
  // The groups' transfer times are the arrival table's (unions over a rank's calls).
  const double steps = double(std::max<int64_t>(1, report.steps));
  for (GroupBandwidth& b : report.groups) {
    const auto it = by_group.find(b.comm);
    if (it == by_group.end()) continue;
    const Sum& g = it->second;
    b.ranks = g.ranks;
    b.calls_per_step = g.calls / steps;
    b.bytes_per_step = g.bytes / steps;
    if (g.ranks < 2) continue;  // one rank moves nothing between ranks: no rate
    b.algbw_gbps = gbps(b.bytes_per_step, b.transfer_ms_per_step);
    b.busbw_gbps = g.every_factor ? gbps(g.bus_bytes / steps, b.transfer_ms_per_step) : 0.0;
  }
}

}  // namespace rankscope::analyzers
