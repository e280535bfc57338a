// a2a_counts.cpp — all_to_all_v calls whose per-peer counts disagree between ranks.
//
// Rank i's send_counts[j] must equal rank j's recv_counts[i] at the same (comm, seq). The flight
// recorder keeps both vectors exactly for small communicators and a digest beyond (totals and a
// linear sketch, format/peer_counts.h). Exact pairs are compared directly, among whichever members
// recorded the call (a member that never entered it is a lagging rank, not a count problem). With
// digests the sums over all members must match; one bad pair (i, j) off by d leaves the sketch
// difference d·w(i, j), which locates it by trying every pair.
// Where only totals are known (PyTorch's Flight Recorder keeps each rank's input and output sizes,
// not its splits), the sums must still match; then a member whose total alone differs from a total
// every other member shares (an MoE dispatch sends tokens x top-k rows from every rank; its combine
// receives them back) is named as the outlier, as such, never as a located pair.
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "analysis_parts.h"

namespace rankscope::analyzers::hang {
namespace {

struct Member {
  int world = -1;
  int in_comm = -1;
  const format::CommSnapshot* comm = nullptr;
  const RankView* view = nullptr;
};

struct Pair {
  int sender = -1, receiver = -1;  // ranks in the communicator
  uint64_t sent = 0, expected = 0;
};

std::optional<CountMismatch> check_exact(const std::vector<std::pair<const Member*, const format::PeerCountsSnapshot*>>& recs) {
  std::vector<Pair> bad;
  for (const auto& [si, s] : recs) {
    if (!s->exact) continue;
    for (const auto& [ri, r] : recs) {
      if (!r->exact || si == ri) continue;
      const int i = si->in_comm, j = ri->in_comm;
      const std::vector<uint64_t>& send = s->detail->send;  // exact: the detail is there
      const std::vector<uint64_t>& recv = r->detail->recv;
      if (j < 0 || i < 0 || size_t(j) >= send.size() || size_t(i) >= recv.size()) continue;
      if (send[j] != recv[i]) bad.push_back({si->world, ri->world, send[j], recv[i]});
    }
  }
  if (bad.empty()) return std::nullopt;
  // The pair with the lowest sender, then receiver, is named; the others are counted.
  std::sort(bad.begin(), bad.end(), [](const Pair& a, const Pair& b) { return std::pair(a.sender, a.receiver) < std::pair(b.sender, b.receiver); });
  CountMismatch m;
  m.sender = bad[0].sender;
  m.receiver = bad[0].receiver;
  m.sent = bad[0].sent;
  m.expected = bad[0].expected;
  m.difference = int64_t(bad[0].sent) - int64_t(bad[0].expected);
  m.evidence = "exact";
  m.other_pairs = int(bad.size()) - 1;
  return m;
}

// Every member recorded the call: the digests' sums must agree.
std::optional<CountMismatch> check_digest(const std::vector<std::pair<const Member*, const format::PeerCountsSnapshot*>>& recs) {
  uint64_t send_total = 0, recv_total = 0, send_sketch = 0, recv_sketch = 0;
  for (const auto& [m, p] : recs) {
    send_total += p->send_total;
    recv_total += p->recv_total;
    if (p->detail) {  // a Flight Recorder dump's totals have no sketch: theirs are 0 on both sides
      send_sketch += p->detail->send_sketch;
      recv_sketch += p->detail->recv_sketch;
    }
  }
  if (send_total == recv_total && send_sketch == recv_sketch) return std::nullopt;
  CountMismatch m;
  const uint64_t d = send_total - recv_total;  // mod 2^64
  m.difference = int64_t(d);
  m.evidence = "totals";
  const uint64_t target = send_sketch - recv_sketch;
  if (d != 0) {
    std::vector<std::pair<const Member*, const format::PeerCountsSnapshot*>> by_rank(recs.size());
    for (const auto& x : recs)
      if (x.first->in_comm >= 0 && size_t(x.first->in_comm) < by_rank.size()) by_rank[x.first->in_comm] = x;
    for (uint32_t i = 0; i < by_rank.size() && m.sender < 0; ++i)
      for (uint32_t j = 0; j < by_rank.size(); ++j)
        if (d * format::peer_pair_weight(i, j) == target && by_rank[i].first && by_rank[j].first) {
          m.sender = by_rank[i].first->world;
          m.receiver = by_rank[j].first->world;
          m.evidence = "sketch";
          if (by_rank[i].second->exact) m.sent = by_rank[i].second->detail->send[j];
          if (by_rank[j].second->exact) m.expected = by_rank[j].second->detail->recv[i];
          break;
        }
  }
  if (m.sender < 0 && d != 0 && recs.size() >= 3) {
    // The outlier: a total that every member but one shares.
    auto outlier = [&](auto total) -> const Member* {
      std::map<uint64_t, std::vector<const Member*>> by_total;
      for (const auto& [mem, p] : recs) by_total[total(*p)].push_back(mem);
      if (by_total.size() != 2) return nullptr;
      const auto& a = by_total.begin()->second;
      const auto& b = std::next(by_total.begin())->second;
      if (a.size() == 1 && b.size() > 1) return a.front();
      if (b.size() == 1 && a.size() > 1) return b.front();
      return nullptr;
    };
    const Member* sender = outlier([](const format::PeerCountsSnapshot& p) { return p.send_total; });
    const Member* receiver = outlier([](const format::PeerCountsSnapshot& p) { return p.recv_total; });
    // One of the two, not both: two outliers could be either's fault.
    if ((sender != nullptr) != (receiver != nullptr)) {
      m.evidence = "outlier";
      const Member* odd = sender ? sender : receiver;
      for (const auto& [mem, p] : recs) {
        const uint64_t total = sender ? p->send_total : p->recv_total;
        if (mem == odd) m.sent = total;   // outlier: `sent` is its own total
        else m.expected = total;          // and `expected` the total every other member has
      }
      (sender ? m.sender : m.receiver) = odd->world;
    }
  }
  return m;
}

using Call = std::pair<const Member*, const format::PeerCountsSnapshot*>;

// Every member's untorn calls by seq, in member order within a seq (one array, not a map of vectors:
// a 16,384-rank MoE job's dumps hold 9 million all_to_alls). Each member's calls are in ascending
// seq (CommSnapshot::peer_counts), so the lists are walked side by side; a list out of order (a
// damaged file) is sorted with the others instead, to the same order.
void calls_in_seq_order(const std::vector<Member>& members, std::vector<Call>& calls, std::vector<size_t>& at) {
  calls.clear();
  bool in_order = true;
  for (const auto& m : members) {
    const auto& list = m.comm->peer_counts;
    for (size_t i = 1; i < list.size() && in_order; ++i) in_order = list[i - 1].seq <= list[i].seq;
  }
  if (!in_order) {
    for (const auto& m : members)
      for (const auto& p : m.comm->peer_counts)
        if (!p.torn) calls.emplace_back(&m, &p);
    std::stable_sort(calls.begin(), calls.end(),
                     [](const Call& a, const Call& b) { return a.second->seq < b.second->seq; });
    return;
  }
  at.assign(members.size(), 0);
  while (true) {
    std::optional<uint64_t> seq;  // the lowest seq not yet taken
    for (size_t k = 0; k < members.size(); ++k) {
      const auto& list = members[k].comm->peer_counts;
      if (at[k] < list.size() && (!seq || list[at[k]].seq < *seq)) seq = list[at[k]].seq;
    }
    if (!seq) return;
    for (size_t k = 0; k < members.size(); ++k) {
      const auto& list = members[k].comm->peer_counts;
      for (; at[k] < list.size() && list[at[k]].seq == *seq; ++at[k])
        if (!list[at[k]].torn) calls.emplace_back(&members[k], &list[at[k]]);
    }
  }
}

}  // namespace

std::optional<CountMismatchFinding> find_count_mismatch(const std::vector<RankView>& views,
                                                        const GroupList& groups, uint64_t row_elements) {
  std::optional<CountMismatchFinding> best;
  std::vector<Member> members;
  std::vector<Call> calls, recs;
  std::vector<size_t> at;
  for (const auto& g : groups) {
    members.clear();
    bool any_counts = false;
    for (int r : g.ranks) {
      if (r < 0 || r >= int(views.size()) || !views[r].readable()) continue;
      const auto* c = views[r].comm(g.name);
      if (!c) continue;
      members.push_back({r, c->rank_in_comm, c, &views[r]});
      any_counts |= !c->peer_counts.empty();
    }
    if (members.size() < 2 || !any_counts) continue;
    calls_in_seq_order(members, calls, at);
    for (size_t first = 0, end = 0; first < calls.size(); first = end) {
      const uint64_t seq = calls[first].second->seq;
      for (end = first + 1; end < calls.size() && calls[end].second->seq == seq;) ++end;
      if (end - first < 2) continue;
      recs.assign(calls.begin() + ptrdiff_t(first), calls.begin() + ptrdiff_t(end));
      std::optional<CountMismatch> found = check_exact(recs);
      const bool all_exact = std::all_of(recs.begin(), recs.end(), [](const auto& x) { return x.second->exact; });
      const bool everyone = recs.size() == members.size() && recs.front().second->n_peers == members.size();
      if (!found && !all_exact && everyone) found = check_digest(recs);
      if (!found) continue;
      CountMismatchFinding f;
      f.mismatch = std::move(*found);
      f.mismatch.comm = g.name;
      f.mismatch.seq = seq;
      if (row_elements > 0) {
        bool divides = true;
        for (const auto& [m, p] : recs)
          if (p->detail)
            for (const auto* v : {&p->detail->send, &p->detail->recv})
              for (uint64_t c : *v) divides = divides && c % row_elements == 0;
        if (f.mismatch.sent) divides = divides && *f.mismatch.sent % row_elements == 0;
        if (f.mismatch.expected) divides = divides && *f.mismatch.expected % row_elements == 0;
        if (divides && f.mismatch.difference % int64_t(row_elements) == 0) f.mismatch.row_elements = row_elements;
      }
      f.when_ns = INT64_MAX;
      const format::CollectiveSnapshot* named = nullptr;
      for (const auto& [m, p] : recs) {
        const auto* rec = m->comm->find(seq);
        if (!rec) continue;
        f.when_ns = std::min(f.when_ns, m->view->aligned(rec->enqueue_ns));
        if (!named || m->world == f.mismatch.sender) named = rec;
      }
      if (named) f.at = collective_ref(g.name, *named);
      else {
        f.at.comm = g.name;
        f.at.seq = seq;
        f.at.op = format::CollectiveOp::kAllToAllV;
      }
      if (!best || f.when_ns < best->when_ns) best = std::move(f);
      break;  // the earliest disagreement of this communicator; later calls follow from it
    }
  }
  return best;
}

}  // namespace rankscope::analyzers::hang
