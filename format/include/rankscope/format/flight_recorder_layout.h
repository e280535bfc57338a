// flight_recorder_layout.h — the bytes of a rank's flight recorder file (rankNNNNN.flight).
//
// Is: plain structs at fixed offsets of a fixed-size file that the rank keeps memory-mapped and
// updates in place, so that another process can read it at any moment: while the rank is wedged
// in a collective, after it was SIGKILLed. Nothing needs a live thread in the rank to be read.
// Is not: the code that writes it (flight_recorder_writer.h) or reads it (flight_recorder_reader.h).
//
// Consistency without locks: every mutable section begins with a 64-bit sequence word (a seqlock).
// The single writer of that section makes it odd, writes, then makes it even again. A reader takes
// the section from one copy of the file and accepts it only if the word is even and the same in a
// copy taken before and one taken after; a section that stays inconsistent is reported torn (e.g.
// the writer died mid-update).
//
// All integers little-endian; times are int64 nanoseconds since the Unix epoch on the rank's
// CLOCK_REALTIME (clock_offset_ns maps them to rank 0's clock). Strings are NUL-padded UTF-8.
// File layout (offsets in the header, so readers never hard-code them):
//   [FlightHeader 4096 B][ThreadSlot x max_threads][CommSlot x max_comms][ParamSlot x max_params]
//   [BoundSlot x max_bounds] (the last section only where header.bounds says so)
// where each CommSlot is followed immediately by ring_entries CollectiveRecords.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rankscope::format {

inline constexpr char kFlightMagic[8] = {'R', 'S', 'F', 'L', 'I', 'G', 'H', 'T'};
inline constexpr uint32_t kFlightSchemaVersion = 1;
// Readers accept this range; a writer bumps the version only for incompatible changes.
inline constexpr uint32_t kFlightSchemaMinReadable = 1;
inline constexpr uint32_t kFlightSchemaMaxReadable = 1;

inline constexpr size_t kNameBytes = 64;      // range, param and phase names
inline constexpr size_t kShortNameBytes = 32; // communicator and thread names

struct FlightLayoutParams {
  uint32_t max_threads = 16;
  uint32_t max_range_depth = 24;
  uint32_t max_comms = 16;
  uint32_t ring_entries = 256;  // last N collectives per communicator
  uint32_t max_params = 512;    // gradient-arrival slots
};

// Seqlocked liveness and progress of the whole process.
struct LiveState {
  uint64_t seq;
  int64_t heartbeat_ns;        // last watchdog (or step) tick
  int64_t step;                // current optimizer step, -1 before the first
  uint32_t process_state;      // ProcessState
  uint32_t reserved0;
  int64_t step_begin_ns;       // when the current step began
  uint64_t collectives_issued; // over all communicators
  uint64_t collectives_completed;
  int64_t clock_offset_ns;     // add to this rank's times to get rank 0's clock
  int64_t clock_uncertainty_ns;// half the best ping-pong round trip; -1 if never measured
  char phase[kNameBytes];      // top-level range of the main thread ("forward/block3/attn" ...)
};
static_assert(sizeof(LiveState) == 136);

// Seqlocked record of the last watchdog event.
struct WatchdogRecord {
  uint64_t seq;
  int64_t time_ns;
  uint32_t kind;               // WatchdogKind
  int32_t comm_index;          // index of the CommSlot, -1 for a range timeout
  uint64_t comm_seq;           // the stuck collective's per-communicator sequence number
  int64_t waited_ns;           // how long it had been open when detected
  uint32_t event_count;        // watchdog events so far (the record holds the last one)
  uint32_t reserved0;
  char range[kNameBytes];      // the innermost open range of the main thread at detection
  char message[256];
  char stacks_file[128];       // relative to the run directory; empty if no stacks were written
};
static_assert(sizeof(WatchdogRecord) == 496);

// Seqlocked gradient-arrival state of the current backward pass. Per-parameter arrival lives in
// ParamSlot.arrived_step: a parameter has arrived in this pass iff arrived_step == backward_step.
struct GradState {
  uint64_t seq;
  int64_t backward_step;       // step of the backward pass in progress or last finished; -1 none
  uint32_t in_backward;        // 1 between begin_backward and end_backward
  uint32_t n_params;           // registered parameters
  uint32_t n_arrived;          // arrived in this pass
  uint32_t reserved0;
  int64_t backward_begin_ns;
};
static_assert(sizeof(GradState) == 40);

// Where the learned-bounds section is (added inside schema version 1: files written before it have
// zeros here, meaning "no section"). Lives in the header's padding, at offset 920.
struct BoundsDirectory {
  uint64_t bounds_offset;      // byte offset of BoundSlot 0; 0 = no learned bounds in this file
  uint32_t max_bounds;         // BoundSlots in the section
  uint32_t bound_slot_bytes;   // sizeof(BoundSlot)
};
static_assert(sizeof(BoundsDirectory) == 16);
inline constexpr uint32_t kDefaultMaxBounds = 64;

// What an NCCL profiler plugin recorder (probe/nccl, librankscope-nccl.so) adds: one recorder per
// process and NCCL communicator, whose single CommSlot is that communicator. Added inside schema
// version 1 in the header's padding (offset 936): probe-written files have zeros here (no magic).
inline constexpr char kNcclInfoMagic[8] = {'R', 'S', 'N', 'C', 'C', 'L', '0', '1'};
inline constexpr uint32_t kNcclMaxPeers = 32;

// Which NCCL call a host thread is inside (NcclApiState::call).
enum class NcclApiCall : uint32_t { kNone = 0, kCollective = 1, kP2p = 2, kGroupStart = 3, kGroupEnd = 4 };

// "A host thread is inside an NCCL call on this communicator now", from the API events. Seqlocked;
// written by the application thread only (NCCL forbids concurrent calls on one communicator).
struct NcclApiState {
  uint64_t seq;
  int64_t begin_ns;            // 0: no thread inside an NCCL call now
  int32_t tid;                 // Linux thread id of the caller
  uint32_t call;               // NcclApiCall
  uint32_t op;                 // CollectiveOp of a collective or p2p call
  uint32_t depth;              // nested API events open (a group's calls)
};
static_assert(sizeof(NcclApiState) == 32);

// Point-to-point operations with one peer, per direction; counters updated atomically.
struct NcclPeerCounters {
  int32_t peer;                // comm rank of the peer; -1 free (claimed with a CAS)
  uint32_t reserved0;
  uint64_t send_launched;
  uint64_t send_completed;
  uint64_t recv_launched;
  uint64_t recv_completed;
};
static_assert(sizeof(NcclPeerCounters) == 40);

struct NcclCommInfo {
  char magic[8];               // kNcclInfoMagic; written last by init
  uint64_t comm_hash;          // NCCL's commId / commHash, the same on every member; 0 until known (ABI v3)
  uint32_t abi_version;        // the ncclProfiler_vN NCCL bound: 3, 4 or 5
  uint32_t event_mask;         // activation mask the plugin set
  int32_t n_nodes;             // -1 unknown (v3)
  uint32_t finalized;          // 1 once NCCL finalized the communicator
  uint64_t dropped_events;     // atomic: no free in-flight slot (pool full), event not recorded
  uint64_t foreign_events;     // atomic: events whose parent is not ours (PXN proxies of another process)
  uint64_t ignored_events;     // atomic: event kinds not recorded (proxy, network, v6 copy-engine)
  int64_t last_kernel_ns;      // atomic: newest first-channel start or last-channel stop (CPU clock)
  char comm_name[64];          // ncclConfig_t.commName; empty when NCCL gave none
  NcclApiState api;
  uint32_t peers_used;         // atomic: entries of `peers` claimed
  uint32_t peers_overflow;     // atomic: p2p operations with a peer that found the table full
  NcclPeerCounters peers[kNcclMaxPeers];
};
static_assert(sizeof(NcclCommInfo) == 1448);

struct FlightHeader {
  char magic[8];
  uint32_t schema_version;
  uint32_t header_bytes;       // sizeof(FlightHeader)
  uint64_t file_bytes;
  FlightLayoutParams layout;   // 20 bytes
  uint32_t thread_slot_bytes;
  uint32_t comm_slot_bytes;    // CommSlot plus its ring
  uint32_t collective_record_bytes;
  uint32_t param_slot_bytes;
  uint32_t reserved0;
  uint64_t threads_offset;
  uint64_t comms_offset;
  uint64_t params_offset;
  // Identity: written once before `ready` is set to 1, never changed after.
  int32_t rank;
  int32_t world_size;
  int32_t local_rank;
  int32_t pid;
  int64_t start_ns;
  char host[64];
  char run_id[64];
  uint32_t ready;              // 1 once identity and layout are complete
  uint32_t reserved1;
  LiveState live;
  WatchdogRecord watchdog;
  GradState grad;
  BoundsDirectory bounds;      // offset 920
  NcclCommInfo nccl;           // offset 936; zeros unless written by the NCCL profiler plugin
  uint8_t padding[4096 - 8 - 4 - 4 - 8 - 20 - 5 * 4 - 3 * 8 - 4 * 4 - 8 - 64 - 64 - 8 -
                  sizeof(LiveState) - sizeof(WatchdogRecord) - sizeof(GradState) - sizeof(BoundsDirectory) -
                  sizeof(NcclCommInfo)];
};
static_assert(offsetof(FlightHeader, bounds) == 920);
static_assert(offsetof(FlightHeader, nccl) == 936);
static_assert(sizeof(FlightHeader) == 4096);

struct OpenRange {
  char name[kNameBytes];
  int64_t begin_ns;
};

// One per thread that ever opened a range; claimed once with an atomic on `claimed`.
// Seqlocked header followed by the stack of open ranges (depth entries valid).
struct ThreadSlotHeader {
  uint32_t claimed;            // 0 free, 1 in use
  int32_t tid;                 // Linux thread id
  char name[kShortNameBytes];  // thread name ("main", "watchdog", ...)
  uint64_t seq;                // seqlock over depth and stack
  uint32_t depth;              // number of open ranges (may exceed max_range_depth: deeper ones are
                               // counted but not stored)
  uint32_t reserved0;
};
static_assert(sizeof(ThreadSlotHeader) == 56);
// A ThreadSlot is ThreadSlotHeader + OpenRange[max_range_depth] (thread_slot_bytes in the header).

// One per communicator; registered once (name, size, rank_in_comm never change after `claimed`).
struct CommSlotHeader {
  uint32_t claimed;
  int32_t size;                // ranks in this communicator
  int32_t rank_in_comm;
  uint32_t reserved0;
  char name[kShortNameBytes];  // "world", "tp0", "dp1"
  uint64_t next_seq;           // sequence number the next collective will get (= issued count)
  uint64_t completed_count;    // collectives completed on this communicator
};
static_assert(sizeof(CommSlotHeader) == 64);

// One collective in a communicator's ring; slot = seq % ring_entries. `guard` is the seqlock.
// CollectiveRecord::flags. kCollectiveHostReturned: the calling thread came back from the call
// while the collective was still pending on a device stream (NCCL, stream-ordered): the host has
// moved on; only the device still owes it. With state enqueued it means "launched, never started on
// the device" (the stream is behind, e.g. a kernel before it never ends).
inline constexpr uint8_t kCollectiveHostReturned = 1;

struct CollectiveRecord {
  uint64_t guard;
  uint64_t seq;                // per-communicator sequence number, from 0
  uint8_t op;                  // CollectiveOp
  uint8_t dtype;               // DataType
  uint8_t state;               // CollectiveState
  uint8_t flags;               // CollectiveFlags bits (0 in files written before they existed)
  int32_t peer;                // root for broadcast, peer for send/recv, -1 otherwise
  uint64_t count;              // elements
  uint64_t bytes;              // payload bytes of this rank's send buffer
  int64_t enqueue_ns;
  int64_t start_ns;            // 0 until started
  int64_t end_ns;              // 0 until completed
  int64_t step;
  char range[kNameBytes];      // innermost open range of the calling thread at enqueue
};
static_assert(sizeof(CollectiveRecord) == 136);

// One per registered parameter. name and bucket are written once at registration.
struct ParamSlot {
  char name[kNameBytes];
  int32_t bucket;              // DDP bucket index, -1 when not bucketed
  uint32_t order;              // arrival order within the pass (0-based), valid iff arrived
  int64_t arrived_step;        // written last, with release order; -1 never
  int64_t arrived_ns;
  uint64_t numel;
};
static_assert(sizeof(ParamSlot) == 96);

// What the probe learned about how long something normally takes, and the bound past which it is
// suspected stuck. One per (communicator, call site) and one for the step; written by one thread
// (the probe's watchdog) under the seqlock `seq`.
enum class BoundKind : uint32_t { kEmpty = 0, kCollective = 1, kStep = 2 };
struct BoundSlot {
  uint64_t seq;
  uint32_t kind;               // BoundKind
  int32_t comm_index;          // CommSlot of the communicator, -1 for the step
  uint32_t samples;            // durations learned so far
  uint32_t warmup;             // samples needed before the bound is armed
  int64_t quantile_ns;         // robust quantile (see `quantile_permille`) of the recent durations
  int64_t bound_ns;            // suspected stuck past this; 0 while warming up
  int64_t updated_ns;          // last update
  uint32_t quantile_permille;  // which quantile, e.g. 950 for p95
  uint32_t window;             // recent durations the quantile is taken over
  char comm[kShortNameBytes];  // communicator name; empty for the step
  char site[kNameBytes];       // call site: innermost range at enqueue; "step" for the step
};
static_assert(sizeof(BoundSlot) == 152);

}  // namespace rankscope::format
