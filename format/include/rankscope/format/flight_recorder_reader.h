// flight_recorder_reader.h — reads a flight recorder file into plain values, safely.
//
// Is: the consumer side of flight_recorder_layout.h. It copies the file with pread, several times,
// and accepts each seqlocked section of one copy only if its sequence word is even and the same in
// the copies taken before and after (FORMAT.md "Consistency"); a section that stays inconsistent is
// kept and marked `torn` (a writer died mid-write), never trusted silently. Every offset and size is
// validated against the file length before use, so truncated, zero-filled or random files give a
// Status naming the file, not a crash. Is not: analysis of what the values mean.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/name_pool.h"
#include "rankscope/format/peer_counts.h"
#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::format {

// 80 bytes, no hole: a 16,384-rank job's Flight Recorder dumps make 31 million of these, most of
// what hangdoctor holds there (the two flags are bits of the byte beside `state`).
struct CollectiveSnapshot {
  uint64_t seq = 0;
  CollectiveOp op = CollectiveOp::kUnknown;
  DataType dtype = DataType::kUnknown;
  CollectiveState state = CollectiveState::kEmpty;
  bool host_returned : 1 = false;  // kCollectiveHostReturned: pending on a device stream, host moved on
  bool torn : 1 = false;
  int32_t peer = -1;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int64_t enqueue_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t step = -1;
  std::string_view range;  // the call site, pooled (name_pool.h): valid for the process's life
};
static_assert(sizeof(CollectiveSnapshot) <= 80, "a record per collective: keep it small");

// The NCCL profiler plugin's section (NcclCommInfo); present only in recorders the plugin wrote.
struct NcclPeerSnapshot {
  int peer = -1;  // comm rank
  uint64_t send_launched = 0, send_completed = 0, recv_launched = 0, recv_completed = 0;
};
struct NcclCommSnapshot {
  uint64_t comm_hash = 0;
  uint32_t abi_version = 0;
  uint32_t event_mask = 0;
  int n_nodes = -1;
  bool finalized = false;
  uint64_t dropped_events = 0, foreign_events = 0, ignored_events = 0;
  int64_t last_kernel_ns = 0;
  std::string comm_name;
  // A host thread inside an NCCL call on this communicator (api_begin_ns 0: none).
  int64_t api_begin_ns = 0;
  int api_tid = 0;
  NcclApiCall api_call = NcclApiCall::kNone;
  CollectiveOp api_op = CollectiveOp::kUnknown;
  uint32_t api_depth = 0;
  bool api_torn = false;
  uint32_t peers_overflow = 0;
  std::vector<NcclPeerSnapshot> peers;
};

struct CommSnapshot {
  int index = 0;  // slot index; matches WatchdogSnapshot::comm_index
  std::string name;
  int size = 0;
  int rank_in_comm = 0;
  uint64_t next_seq = 0;         // collectives issued on this communicator
  uint64_t completed_count = 0;
  std::vector<CollectiveSnapshot> ring;  // valid records, ascending seq (at most ring_entries)
  // Per-peer counts of its last all_to_all_v calls (peer_counts.h), ascending seq; empty for files
  // written before the section existed and for communicators without all_to_all_v.
  std::vector<PeerCountsSnapshot> peer_counts;
  std::optional<NcclCommSnapshot> nccl;  // recorders written by the NCCL profiler plugin only
  // The newest record, or nullptr.
  const CollectiveSnapshot* last() const { return ring.empty() ? nullptr : &ring.back(); }
  const CollectiveSnapshot* find(uint64_t seq) const;
  const PeerCountsSnapshot* find_counts(uint64_t seq) const;
};

struct OpenRangeSnapshot {
  std::string_view name;  // pooled (name_pool.h)
  int64_t begin_ns = 0;
};

struct ThreadSnapshot {
  int slot = 0;
  int tid = 0;
  std::string name;
  uint32_t depth = 0;                      // may exceed stack.size() when deeper than stored
  std::vector<OpenRangeSnapshot> stack;    // outermost first
  bool torn = false;
};

struct ParamSnapshot {
  std::string_view name;  // pooled (name_pool.h)
  int bucket = -1;
  uint64_t numel = 0;
  int64_t arrived_step = -1;
  int64_t arrived_ns = 0;
  uint32_t order = 0;
};

struct LiveSnapshot {
  int64_t heartbeat_ns = 0;
  int64_t step = -1;
  ProcessState process_state = ProcessState::kStarting;
  int64_t step_begin_ns = 0;
  uint64_t collectives_issued = 0;
  uint64_t collectives_completed = 0;
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = -1;
  std::string phase;
  bool torn = false;
};

// A learned bound (BoundSlot); only non-empty slots are listed.
struct BoundSnapshot {
  BoundKind kind = BoundKind::kEmpty;
  std::string_view comm;   // "" for the step; pooled (name_pool.h), as is site
  std::string_view site;   // call site (innermost range at enqueue); "step" for the step
  uint32_t samples = 0;
  uint32_t warmup = 0;
  int64_t quantile_ns = 0;
  int64_t bound_ns = 0;    // 0 while warming up: not armed
  int64_t updated_ns = 0;
  uint32_t quantile_permille = 0;
  uint32_t window = 0;
  bool armed() const { return bound_ns > 0; }
};

struct WatchdogSnapshot {
  WatchdogKind kind = WatchdogKind::kNone;
  int64_t time_ns = 0;
  int comm_index = -1;
  uint64_t comm_seq = 0;
  int64_t waited_ns = 0;
  uint32_t event_count = 0;
  std::string range;
  std::string message;
  std::string stacks_file;
  bool torn = false;
};

struct GradSnapshot {
  int64_t backward_step = -1;
  bool in_backward = false;
  uint32_t n_params = 0;
  uint32_t n_arrived = 0;
  int64_t backward_begin_ns = 0;
  bool torn = false;
};

struct FlightRecorderSnapshot {
  uint32_t schema_version = 0;
  int rank = -1;
  int world_size = 0;
  int local_rank = 0;
  int pid = 0;
  std::string host;
  std::string run_id;
  int64_t start_ns = 0;
  uint32_t ring_entries = 0;
  LiveSnapshot live;
  WatchdogSnapshot watchdog;
  GradSnapshot grad;
  std::vector<ThreadSnapshot> threads;  // claimed slots only; slot 0 is the first claimant (main)
  std::vector<CommSnapshot> comms;      // registered communicators only
  std::vector<ParamSnapshot> params;    // registered parameters, in registration order
  std::vector<BoundSnapshot> bounds;    // learned bounds (empty for files written before them)
  std::vector<std::string> warnings;    // torn sections and other oddities worth telling a user
  bool nccl_plugin = false;             // written by the NCCL profiler plugin (NcclCommInfo magic)
  std::string boot_id;                  // the writer's boot id where known (the plugin's process.json), else ""

  const ThreadSnapshot* main_thread() const { return threads.empty() ? nullptr : &threads.front(); }
  const CommSnapshot* comm(std::string_view name) const;
  // The learned bound of a collective call site on `comm`, or of the step (kind kStep); null when none.
  const BoundSnapshot* bound(BoundKind kind, std::string_view comm = {}, std::string_view site = {}) const;
  // Parameters not yet arrived in the current (or last) backward pass.
  std::vector<const ParamSnapshot*> missing_gradients() const;
};

// Reads `file`, which a live rank may be writing (three or more pread copies). Errors name the file.
Result<FlightRecorderSnapshot> read_flight_recorder(const std::filesystem::path& file);
// Parses bytes already in memory, one copy: only a sequence word left odd marks a section torn, so
// bytes copied from a live recorder may hold a section mid-update. `display_name` is for messages.
Result<FlightRecorderSnapshot> parse_flight_recorder(std::span<const uint8_t> bytes,
                                                     std::string_view display_name);

}  // namespace rankscope::format
