// nccl_section_writer.h — writes the NCCL section of a flight recorder (NcclCommInfo).
//
// Is: the updates the NCCL profiler plugin (probe/nccl) makes to its per-communicator recorder
// besides the collective ring: identity, drop counters, "inside an NCCL call now", per-peer P2P
// counters. Everything after write_identity() is lock-free and allocation-free (atomics on the
// mapped memory; the API state is seqlocked with one writer, the application thread).
// Is not: the plugin's policy (which NCCL event maps to what); see probe/nccl/.
#pragma once

#include <cstdint>
#include <string_view>

#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::format {

struct NcclIdentityDesc {
  uint64_t comm_hash = 0;   // 0 when not known yet (ABI v3 learns it from the first collective)
  uint32_t abi_version = 0;
  uint32_t event_mask = 0;
  int n_nodes = -1;
  std::string_view comm_name;
};

class NcclSectionWriter {
 public:
  explicit NcclSectionWriter(NcclCommInfo* info) : info_(info) {}

  void write_identity(const NcclIdentityDesc& id);  // once, from init; the magic is written last
  void set_comm_hash(uint64_t hash);                 // ABI v3: first non-zero hash seen wins
  uint64_t comm_hash() const;
  void set_finalized();

  void count_dropped();
  void count_foreign();
  void count_ignored();
  void kernel_seen(int64_t now_ns);

  // API events (application thread only): enter/leave nest; the outermost enter sets the begin.
  void api_enter(NcclApiCall call, CollectiveOp op, int tid, int64_t now_ns);
  void api_leave();

  // P2P with `peer` (comm rank), per direction; a full table counts peers_overflow.
  void peer_launched(int peer, bool send);
  void peer_completed(int peer, bool send);

 private:
  NcclPeerCounters* peer_entry(int peer);
  NcclCommInfo* info_;
};

}  // namespace rankscope::format
