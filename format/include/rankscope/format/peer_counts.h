// peer_counts.h — the per-peer send and receive counts of each all_to_all_v, in the flight recorder.
//
// Is: the bytes of the flight recorder's peer-counts section (added inside schema version 1), the
// snapshot a reader makes of it, and the two pure functions a cross-rank check needs (the pair
// weight of the linear sketch, the vector hash). An all_to_all_v is only correct if, for every pair
// of members, what rank i sends to j is what j expects from i: send_i[j] == recv_j[i]. When one
// side disagrees the job hangs (NCCL), errors with truncation or completes short (MPI), so the
// counts must be readable from outside a wedged rank, like the rest of the recorder.
//
// What is kept per all_to_all_v (the last kPeerCountsEntriesPerComm of each communicator):
//   - always: the number of peers, the totals, min and max of both vectors, a 64-bit hash of each
//     vector, and a linear sketch of each: send_sketch_i = sum_j send_i[j]*w(i,j) and
//     recv_sketch_j = sum_i recv_j[i]*w(i,j) (mod 2^64, w(sender, receiver) an odd 64-bit mix of
//     the two communicator ranks). Over all members, sum(send_sketch) == sum(recv_sketch) and
//     sum(send_total) == sum(recv_total) when the counts agree. A single disagreeing pair (i,j) off
//     by d gives sketch difference d*w(i,j) and total difference d, so a reader finds the pair by
//     trying every (i, j), without the vectors: O(n^2) multiplications, ~1 ms at 1024 peers;
//   - exactly, in addition, when the communicator has at most kPeerCountsExactPeers members and
//     every count fits in 32 bits: both vectors, so a reader names sender, receiver, what was sent
//     and what was expected.
// Counts are in elements, as the caller passed them to the communicator (rows x row width for
// MoE dispatch). Is not: the check itself (hangdoctor's a2a_count_mismatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "rankscope/format/flight_recorder_layout.h"

namespace rankscope::format {

inline constexpr uint32_t kPeerCountsExactPeers = 32;     // vectors kept exactly up to this many peers
inline constexpr uint32_t kPeerCountsEntriesPerComm = 8;  // all_to_all_v calls remembered per communicator

// Where the section is. Lives in the FlightHeader's padding at a fixed offset; files written before
// the section existed have zeros there, meaning "no peer counts".
inline constexpr size_t kPeerCountsDirectoryOffset = 2384;  // the header's padding, after the NCCL plugin's section
struct PeerCountsDirectory {
  uint64_t offset;             // byte offset of the section; 0 = none
  uint32_t entries_per_comm;   // records per communicator slot
  uint32_t record_bytes;       // sizeof(PeerCountsRecord)
  uint32_t exact_peers;        // capacity of the exact vectors in each record
  uint32_t comm_bytes;         // bytes per communicator: 8-byte call counter + entries_per_comm records
};
static_assert(sizeof(PeerCountsDirectory) == 24);
static_assert(offsetof(FlightHeader, padding) <= kPeerCountsDirectoryOffset &&
              kPeerCountsDirectoryOffset + sizeof(PeerCountsDirectory) <= sizeof(FlightHeader));

inline constexpr uint32_t kPeerCountsExact = 1;  // PeerCountsRecord::flags: send[] and recv[] are complete

// One all_to_all_v on one rank. Slot = (the communicator's all_to_all_v call number) mod
// entries_per_comm. `guard` is the seqlock.
struct PeerCountsRecord {
  uint64_t guard;
  uint64_t seq;                 // the collective's per-communicator sequence number
  uint32_t n_peers;             // length of both vectors (the communicator's size)
  uint32_t flags;               // kPeerCountsExact
  int32_t rank_in_comm;         // the writing rank, as the sketch weights used it
  uint32_t reserved0;
  uint64_t send_total, recv_total;
  uint64_t send_min, send_max, recv_min, recv_max;
  uint64_t send_hash, recv_hash;      // peer_counts_hash of each vector
  uint64_t send_sketch, recv_sketch;  // see the file comment
  uint32_t send[kPeerCountsExactPeers];  // valid when flags & kPeerCountsExact (n_peers entries)
  uint32_t recv[kPeerCountsExactPeers];
};
static_assert(sizeof(PeerCountsRecord) == 368);

// The weight of the pair (sender, receiver) in the linear sketch; odd, so never zero.
uint64_t peer_pair_weight(uint32_t sender, uint32_t receiver);
// A 64-bit hash of a count vector (order-sensitive).
uint64_t peer_counts_hash(std::span<const size_t> counts);

// What a recorder's record of one all_to_all_v holds beyond the totals: the per-peer counts (when
// exact) and their digests (see the file comment).
struct PeerCountsDetail {
  std::vector<uint64_t> send, recv;  // n_peers each when exact, else empty
  uint64_t send_min = 0, send_max = 0, recv_min = 0, recv_max = 0;
  uint64_t send_hash = 0, recv_hash = 0;
  uint64_t send_sketch = 0, recv_sketch = 0;
};

// One rank's record of one all_to_all_v, as read.
struct PeerCountsSnapshot {
  uint64_t seq = 0;
  uint32_t n_peers = 0;
  int rank_in_comm = -1;
  uint64_t send_total = 0, recv_total = 0;
  // Our recorders' records have it; a PyTorch Flight Recorder dump has only the totals, and a
  // 16,384-rank MoE job's dumps hold 9.3 million all_to_alls (56 bytes each without it, 160 with).
  std::shared_ptr<const PeerCountsDetail> detail;
  bool exact = false;  // detail's send and recv are whole
  bool torn = false;
};

// Section layout helpers, for the writer and reader (and tests that build files by hand).
uint64_t peer_counts_section_bytes(const FlightLayoutParams& params);
// A record of (send, recv) as a writer would store it; rank_in_comm is the writer's rank.
PeerCountsRecord make_peer_counts_record(uint64_t seq, int rank_in_comm, std::span<const size_t> send,
                                         std::span<const size_t> recv);

}  // namespace rankscope::format
