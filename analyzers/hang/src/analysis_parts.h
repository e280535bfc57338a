// analysis_parts.h — the pieces of the classifier, each in its own file, shared by classifier.cpp.
//
// Is: communicator membership (who must take part in a collective), the mismatch scan over the
// ring window all members share, and the wait-for graph. Is not: verdicts or wording.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rank_view.h"
#include "rankscope/analyzers/hang/diagnosis.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang {

struct GroupView {
  std::string name;
  std::vector<int> ranks;  // world ranks
};

// The groups, innermost first, with their places by name: at 131,072 ranks there are 16,384 tp
// groups, and the wait graph asks for a group by name once a waiter.
struct GroupList : std::vector<GroupView> {
  std::unordered_map<std::string, size_t> index;  // name -> place; filled by build_groups
};

// Groups from run.json, completed by communicators found only in flight recorders; sorted
// innermost first: tp, then dp, then other communicators by size, then world.
GroupList build_groups(const format::RunDirectory& run, const std::vector<RankView>& views);
const GroupView* find_group(const GroupList& groups, const std::string& name);
int innermost_rank(const GroupList& groups, const std::string& name);  // lower = inner

// The first rank (by how far past) whose open collective or step ran past the bound its probe
// learned, at `reference_ns` (rank 0's clock). A step counts only while the main thread's outermost
// open range is `step`. Empty when none, or when no recorder carries learned bounds.
std::optional<Detection> find_past_learned_bound(const std::vector<RankView>& views, int64_t reference_ns);
// What a published bound rests on, in words: "p95 2.1 ms of 40 steps", "longest 52.0 ms of 1
// step", "first step 310.0 ms (start-up included)".
std::string bound_basis(const format::BoundSnapshot& b);

// peer_wait_bound.cpp. Where the learned bounds have no history yet: a rank that never issued a
// collective every other member waits in (for at least `min_wait_s`), idle for max(floor_s, factor
// x the job's own scale of normal durations) — see the file for the scale. Empty when none.
struct PeerWaitPolicy {
  double floor_s = 3;
  double factor = 3;
  double min_wait_s = 1;
};
// `pending`, when given, is set where the rule applies (every member waits on an idle rank, long
// enough, with a scale) but the idle rank has not yet passed its bound.
std::optional<Detection> find_idle_past_peer_wait(const std::vector<RankView>& views,
                                                  const GroupList& groups, int64_t reference_ns,
                                                  const PeerWaitPolicy& policy, bool* pending = nullptr);

CollectiveRef collective_ref(const std::string& comm, const format::CollectiveSnapshot& rec);

struct MismatchFinding {
  CollectiveRef at;               // as seen by a rank of the majority (or the lowest rank on a tie)
  Mismatch mismatch;
  std::vector<int> culprits;
  bool ambiguous = false;         // a tie that history could not break
  int64_t when_ns = 0;            // first arrival at it, aligned
};

// Earliest disagreement at one (comm, seq) within the window every member's ring still holds.
// `with_call_site`: also compare the range each rank called it from (a skipped collective shifts
// every later seq on the skipping rank; op and size may still agree).
std::optional<MismatchFinding> find_mismatch(const std::vector<RankView>& views, const GroupList& groups,
                                             bool with_call_site);

// a2a_counts.cpp. The earliest all_to_all_v (by first arrival) whose per-peer counts disagree
// between two members: exact vectors where both kept them, else the sketch of every member's
// digest. `row_elements` (0: unknown) is the row width to speak of rows. Empty when all agree.
struct CountMismatchFinding {
  CountMismatch mismatch;
  CollectiveRef at;               // as the sender (else any member) recorded it
  int64_t when_ns = 0;
};
std::optional<CountMismatchFinding> find_count_mismatch(const std::vector<RankView>& views,
                                                        const GroupList& groups, uint64_t row_elements);

struct WaitEdge {
  int waiter = 0;
  int absent = 0;                 // never issued the waiter's seq on that comm
  std::string comm;
  uint64_t seq = 0;
  // The waiter is held here: its oldest open collective, or one its host waits in. A later
  // collective queued on a device is not where the rank is stuck (it may wait on a peer that already
  // finished it and whose completion the stuck device never reported).
  bool blocking = true;
};

struct WaitGraph {
  std::vector<WaitEdge> edges;
  std::vector<WaitEdge> all_entered;      // collectives every member entered (absent = -1)
  std::vector<WaitEdge> behind;           // the waiter's oldest open collective, entered by `absent`, whose
                                          // own oldest open collective is older (its device gets there later)
  std::vector<int> terminal;              // missing ranks in the parts of the graph (both kinds of edges) nothing leaves
};

WaitGraph build_wait_graph(const std::vector<RankView>& views, const GroupList& groups);

// wait_chains.cpp. Per culprit: the collectives it never entered with their waiters, and the ranks
// waiting on those in turn (diagnosis.h WaitChain).
std::vector<WaitChain> wait_chains(const WaitGraph& g, const std::vector<int>& culprits, const std::vector<RankView>& views);

// forming_hang.cpp. Ranks idle for at least `idle_after_s` (on the reference clock) that a peer
// already waits for, though other ranks may still be busy.
std::vector<int> forming_hang_culprits(const std::vector<RankView>& views, const GroupList& groups,
                                       int64_t reference_ns, double idle_after_s);

// device_lag.cpp. The range a trainer opens while its host waits for its own GPU (host staging of
// a collective's input); see trainer/comm/host_staging_communicator.h.
inline constexpr std::string_view kDeviceSyncRange = "device_sync";
bool waits_for_own_device(const RankView& v);
// Members that enqueued (comm, seq) on a device stream and returned, whose device never started it,
// while another member's device (or host) got there, or while no member's did and each of them
// records device starts on that communicator (an earlier collective there has a start time).
std::vector<int> ranks_behind_on_device(const std::vector<RankView>& views, const GroupList& groups,
                                        const std::string& comm, uint64_t seq);

// nccl_evidence.cpp. Recorders of the NCCL profiler plugin: "thread T inside ncclGroupEnd on tp1 for
// 12 s" when a host thread has been inside an NCCL call for over a second ("" otherwise), and the
// sentences the kernel-channel and API evidence add to the verdict's explanation.
std::string nccl_call_note(const RankView& v, int64_t reference_ns);
// "2 send(s), 0 recv(s) on tp1 launched, not completed; 11 send(s), 11 recv(s) to itself on world
// (completion not reported by NCCL)" from the per-peer counters ("" when nothing to say).
std::string nccl_p2p_note(const RankView& v);
std::string nccl_evidence_sentence(const Diagnosis& d, const std::vector<RankView>& views);

// node_findings.cpp. Node problems (diagnosis.h NodeFinding) over a report whose ranks and
// culprits are filled; `waited_for`: ranks some live rank waits for. Empty with one host.
std::vector<NodeFinding> find_node_problems(const Diagnosis& d, const std::vector<int>& waited_for);

}  // namespace rankscope::analyzers::hang
