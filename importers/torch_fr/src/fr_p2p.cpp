// fr_p2p.cpp — send/recv paired across ranks (fr_p2p.h).
#include "fr_p2p.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "fr_entry_groups.h"

#include "rankscope/format/vocabulary.h"

namespace rankscope::torch_fr {
namespace {

// Two sides' numbers are near enough to be one count when their ranges overlap or nearly touch (a
// side may have completed a few calls the other still shows open).
constexpr int64_t kAlignedSlack = 64;

struct Key {
  std::string_view group;  // a view of an entry's group name: the dumps outlive the pairing
  int lo, hi;
  bool operator<(const Key& o) const { return std::tie(group, lo, hi) < std::tie(o.group, o.lo, o.hi); }
};

}  // namespace

std::vector<PairComm> pair_p2p(const std::map<int, FrDump>& dumps, const std::map<std::string, FrGroup>& groups,
                               const std::map<int, std::map<std::string, GroupProgress>>& progress,
                               const GroupedEntries* grouped) {
  std::map<Key, std::map<int, std::vector<const FrEntry*>>> calls;
  std::map<std::pair<int, std::string_view>, std::set<int>> peers_of;  // (rank, group) -> global peers
  // Every entry carries the group's p2p counter as it stood when it was recorded (FlightRecorder's
  // record() gets seqCollective_ and seqP2P_ alike), so a collective after the last send/recv still
  // says how many send/recv the rank had posted on that group.
  std::map<std::pair<int, std::string_view>, int64_t> p2p_counter;
  std::vector<GroupEntries> scratch;
  for (const auto& [rank, d] : dumps) {
    // Group by group (fr_entry_groups.h): the maps are touched per group and per send/recv, not
    // per entry.
    for (const GroupEntries& by_group : entries_by_group(d, rank, grouped, scratch)) {
      int64_t counter = by_group.entries.front()->p2p_seq;
      const auto g = groups.find(std::string(by_group.name));
      int last_peer = -1;
      std::set<int>* peers = nullptr;
      // This rank's call lists on this group, by peer: a rank sends to and receives from a few peers
      // (a pipeline stage: the next and the previous), so the map of all pairs is looked up once a
      // peer, not once a call (a map's values stay where they are).
      std::vector<std::pair<int, std::vector<const FrEntry*>*>> calls_with;
      for (const FrEntry* entry : by_group.entries) {
        const FrEntry& e = *entry;
        counter = std::max(counter, e.p2p_seq);
        if (!e.is_p2p) continue;
        if (g == groups.end() || e.peer_in_group < 0 || e.peer_in_group >= int(g->second.ranks.size())) continue;
        const int peer = g->second.ranks[size_t(e.peer_in_group)];
        std::vector<const FrEntry*>* list = nullptr;
        for (const auto& [known, its] : calls_with)
          if (known == peer) {
            list = its;
            break;
          }
        if (!list) {
          const auto [lo, hi] = std::minmax(rank, peer);
          list = &calls[{by_group.name, lo, hi}][rank];
          if (calls_with.size() < 8) calls_with.emplace_back(peer, list);  // past 8 (an all-to-all): the map
        }
        list->push_back(&e);
        if (!peers) peers = &peers_of[{rank, by_group.name}];
        if (peer != last_peer) peers->insert(last_peer = peer);
      }
      p2p_counter.emplace(std::pair(rank, by_group.name), counter);
    }
  }
  std::vector<PairComm> out;
  for (const auto& [key, by_rank] : calls) {
    PairComm p;
    p.group = std::string(key.group);
    p.lo = key.lo;
    p.hi = key.hi;
    const size_t members = groups.at(p.group).ranks.size();
    // Aligned: every side that shows send/recv on the group shows them only with the other side,
    // and where both show some, their numbers are one count.
    p.aligned = true;
    for (int side : {key.lo, key.hi}) {
      auto it = peers_of.find({side, key.group});
      if (members > 2 && it != peers_of.end() && it->second.size() > 1) p.aligned = false;
    }
    auto lo_calls = by_rank.find(key.lo), hi_calls = by_rank.find(key.hi);
    if (p.aligned && lo_calls != by_rank.end() && hi_calls != by_rank.end()) {
      auto range = [](const std::vector<const FrEntry*>& v) {
        int64_t a = INT64_MAX, b = INT64_MIN;
        for (const FrEntry* e : v) a = std::min(a, e->p2p_seq), b = std::max(b, e->p2p_seq);
        return std::pair(a, b);
      };
      const auto [la, lb] = range(lo_calls->second);
      const auto [ha, hb] = range(hi_calls->second);
      p.aligned = std::max(la, ha) <= std::min(lb, hb) + kAlignedSlack;
    }
    if (p.aligned) {
      for (int side : {key.lo, key.hi}) {
        PairSide& s = p.sides[side];
        auto it = by_rank.find(side);
        int64_t issued = 0, completed = 0;
        if (it != by_rank.end())
          for (const FrEntry* e : it->second) {
            s.calls.emplace_back(e, uint64_t(std::max<int64_t>(0, e->p2p_seq)));
            if (e->completed) completed = std::max(completed, e->p2p_seq);
          }
        if (auto c = p2p_counter.find({side, key.group}); c != p2p_counter.end()) issued = std::max(issued, c->second);
        // The side's pg_status row, when it counts send/recv, sees past the window. A dump with
        // no row (no pg_status, or an id no rule could name) falls back on the entries.
        if (auto r = progress.find(side); r != progress.end()) {
          if (auto g = r->second.find(p.group); g != r->second.end() && g->second.numbering == SeqNumbering::kP2P) {
            issued = std::max(issued, g->second.status.last_enqueued);
            completed = std::max(completed, g->second.status.last_completed);
          }
        }
        s.next_seq = uint64_t(issued) + 1;
        s.completed_count = uint64_t(completed) + 1;
      }
      out.push_back(std::move(p));
      continue;
    }
    // One communicator per direction, its open calls numbered in posting order on each side.
    for (int src : {key.lo, key.hi}) {
      PairComm d = p;
      d.src = src;
      bool any = false;
      for (int side : {key.lo, key.hi}) {
        PairSide& s = d.sides[side];
        const format::CollectiveOp mine = side == src ? format::CollectiveOp::kSend : format::CollectiveOp::kRecv;
        uint64_t n = 0;
        if (auto it = by_rank.find(side); it != by_rank.end())
          for (const FrEntry* e : it->second)
            if (e->op == mine && !e->completed) s.calls.emplace_back(e, ++n);
        s.next_seq = n + 1;
        s.completed_count = 1;
        any = any || n > 0;
      }
      if (any) out.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace rankscope::torch_fr
