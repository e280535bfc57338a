// diagnosis.h — what hangdoctor concludes about a run: the verdict, the culprit, the evidence.
//
// Is: plain result types shared by the classifier, the text and JSON reports and the CLI; the
// stable lower-case names used in JSON (schema in report.h). Is not: the reasoning (classifier.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::analyzers::hang {

enum class Verdict { kHealthy, kFinished, kHang, kDesync, kCrash };
enum class Kind {
  kNone,
  kLaggingRank,         // a rank never entered the collective the others wait in
  kCollectiveMismatch,  // ranks disagree on op, dtype, size or call site at one (comm, seq)
  kRankDead,            // a rank's process is gone (or silent) while the others wait for it
  kMissingGradient,     // a rank never launched a DDP bucket: a gradient never arrived
  kStuckInCollective,   // every member entered, none finished: no rank to blame
  kHostStall,           // the culprit is stuck in host work (data loading), not in a collective
  kGpuBehindHost,       // the culprit's host moved on but its GPU never reached the collective
  kRankFrozen,          // a rank's process exists but no thread of it can run (stopped, traced, D)
  kStuckInCompute,      // no rank is ahead to wait for it: the ranks are stuck in compute ranges
  kA2aCountMismatch,    // an all_to_all_v whose per-peer counts disagree: send_i[j] != recv_j[i]
  // From a job's log:
  kRankError,           // a rank printed a network or CUDA error (NCCL WARN, PyTorch's error)
  kInitIncomplete,      // a communicator's init never completed: ranks that never joined, or stuck in it
};

std::string_view verdict_name(Verdict v);
std::string_view kind_name(Kind k);  // "" for kNone

// State of one rank at the snapshot, as reported in ranks[].state.
enum class RankState {
  kWaiting,    // inside a collective that has not completed
  kRunning,    // in a range (or between ranges), not in a collective
  kDead,       // process gone, or heartbeat stale while others beat
  kFinished,   // shut down cleanly
  kAborted,    // the program marked itself aborted
  kMissing,    // no readable flight recorder
  kFrozen,     // its process exists on this host but no thread can run (os_state says why)
};
std::string_view rank_state_name(RankState s);

struct CollectiveRef {
  std::string comm;
  uint64_t seq = 0;
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  format::DataType dtype = format::DataType::kUnknown;
  uint64_t count = 0;
  uint64_t bytes = 0;
  std::string range;  // call site on the first rank that entered it
};

struct LastCompleted {
  std::string comm;
  uint64_t seq = 0;
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  double ago_s = 0;   // before the reference time
};

struct RankReport {
  int rank = 0;
  std::string host;
  int pid = 0;
  Liveness alive = Liveness::kUnknown;
  OsRunState os_state = OsRunState::kUnknown;  // read only for ranks whose heartbeat stopped
  std::string wchan;                    // kernel function its thread sleeps in, when frozen
  RankState state = RankState::kMissing;
  int64_t step = -1;
  std::string range;                    // innermost open range of the main thread
  std::vector<std::string> range_stack; // outermost first
  std::optional<CollectiveRef> waiting; // the collective it is in (state kWaiting)
  double waited_s = 0;                  // time inside `waiting`
  double idle_s = 0;                    // since its last recorded activity
  double range_s = 0;                   // since the innermost open range began (0 when none)
  double heartbeat_age_s = 0;           // relative to the freshest heartbeat of the run
  std::optional<uint64_t> last_completed_seq;  // on the verdict's communicator (else its own)
  std::vector<LastCompleted> last_completed;   // newest completed collective per communicator
  std::string note;                     // why it is missing, what killed it, ...
  std::string stacks_file;              // evidence, relative to the run directory
  std::string stacks;                   // the stacks text when captured this run
};

struct MissingGradient {
  int rank = 0;
  std::string param;
  int bucket = -1;
};

struct Mismatch {
  std::string field;                         // op | dtype | count | bytes | range | issued
  std::map<int, std::string> values_by_rank;
};

// a2a_count_mismatch: what rank `sender` sends to `receiver` in one all_to_all_v is not what the
// receiver expects from it (flight recorder peer counts, format/peer_counts.h).
struct CountMismatch {
  std::string comm;
  uint64_t seq = 0;
  int sender = -1;                  // world ranks; -1 when the disagreement could not be located
  int receiver = -1;
  std::optional<uint64_t> sent;     // elements; unknown when only the digest was kept
  std::optional<uint64_t> expected;
  int64_t difference = 0;           // sent - expected (elements)
  uint64_t row_elements = 0;        // elements per row (run.json model.channels divides every count); 0 unknown
  // exact | sketch | totals | outlier. outlier (only totals known, as in PyTorch's dumps): the one
  // member whose total sent (sender set) or received (receiver set) differs from the total every
  // other member has; `sent` is its total, `expected` the others'.
  std::string evidence;
  int other_pairs = 0;              // further disagreeing pairs at the same collective (exact evidence)
};

// What made hangdoctor call the job stuck: a rank's collective or step past the bound its own probe
// learned, or a rank idle past a bound from its waiting peers and the job's own durations (the fast
// paths, no flags needed), or no progress anywhere for --stuck-after / --wait.
struct Detection {
  std::string by;          // learned_bound | peer_wait | no_progress | forming | watched | dead_or_frozen | dump
  int rank = -1;           // learned_bound: the rank whose item ran past its bound; peer_wait: the idle rank
  std::string what;        // "allreduce #247 on tp0 from forward/embed", "step 20"
  double open_s = 0;       // how long it has been open (peer_wait: idle) at the snapshot
  double bound_s = 0;      // the bound it passed
  double quantile_s = 0;   // the typical duration the bound is a multiple of
  uint32_t samples = 0;
  std::string basis;       // what the bound rests on, in words: "longest 52.0 ms of 1 step x10, floor 3 s"
};

// A node problem: most or all ranks of one host in the same bad state at once (frozen
// alike, dead alike, or all lagging), while ranks of other hosts wait on them. Said once for the
// node rather than once per rank. Only where the run spans more than one host.
struct NodeFinding {
  std::string host;
  std::vector<int> ranks;       // the node's ranks in the shared state (culprits)
  std::vector<int> host_ranks;  // every rank the run places on this host
  RankState state = RankState::kRunning;
  OsRunState os_state = OsRunState::kUnknown;  // kFrozen: what the kernel says; else kUnknown
  Liveness alive = Liveness::kUnknown;         // kDead: gone, or unknown (heartbeat only)
  std::string cause;            // the shared cause in words: "stopped (SIGSTOP or SIGTSTP)", ...
};

// Who waits on one culprit, and through what: the collectives it never entered with the
// ranks inside them, then the ranks that wait on those in turn (behind them in a device queue, or a
// send/recv whose peer waits).
struct WaitChain {
  struct At {
    CollectiveRef collective;
    std::vector<int> waiters;
  };
  int culprit = -1;
  std::optional<CollectiveRef> first;   // the innermost collective it never entered (the verdict's, per culprit)
  std::vector<At> missing_from;         // most waiters first
  std::vector<int> behind;              // further ranks that wait on those waiters, directly or not
  std::vector<std::string> behind_via;  // the communicators of those waits
};

struct Diagnosis {
  Verdict verdict = Verdict::kHealthy;
  Kind kind = Kind::kNone;
  std::vector<int> culprit_ranks;
  std::optional<CollectiveRef> collective;
  std::vector<RankReport> ranks;             // every rank of the world, present or not
  std::vector<MissingGradient> missing_gradients;
  std::optional<Mismatch> mismatch;
  std::optional<CountMismatch> count_mismatch;  // kind a2a_count_mismatch
  std::string headline;                      // the one-line verdict
  std::string explanation;                   // why, in a few sentences
  std::vector<std::string> problems;         // files missing or corrupt, torn sections
  std::string run_dir;
  int world_size = 0;
  int64_t reference_ns = 0;                  // "now" of the snapshot (freshest heartbeat, rank 0 clock)
  double stuck_for_s = 0;                    // since the last progress anywhere
  bool times_are_lower_bounds = false;       // "now" is only bounded from below (dumps): durations are "at least"
  std::string time_basis;                    // what that bound rests on, one sentence ("" for live recorders)
  std::string recompute;                     // run.json training.recompute, as words ("" unknown)
  std::optional<Detection> detection;        // why stuck (absent when healthy or finished)
  int hosts = 0;                             // distinct hosts among the ranks (0: none known)
  std::vector<NodeFinding> nodes;            // node problems; empty with one host
  std::vector<WaitChain> waits;              // per culprit, who waits on it (hang verdicts with a wait graph)
  // What a rank without evidence lacks ("flight recorder"; "lines in the log" for logs).
  std::string missing_evidence = "flight recorder";
  std::string missing_evidence_plural = "flight recorders";
};

// The host of `rank` as the report knows it ("" unknown).
const std::string& host_of(const Diagnosis& d, int rank);

// 0 healthy or finished, 1 a problem was found.
int exit_code(const Diagnosis& d);

}  // namespace rankscope::analyzers::hang
