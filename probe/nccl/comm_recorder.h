// comm_recorder.h — one NCCL communicator's recorder inside the profiler plugin.
//
// Is: what the plugin keeps per `init` (per communicator): the memory-mapped flight recorder
// (format/, one CommSlot = this communicator, plus the NcclCommInfo section), a fixed pool of
// in-flight slots that are the Coll/P2p handles NCCL holds, and the API handles. Event methods
// are lock-free and allocation-free (atomics on pre-allocated memory, no syscalls but the clock);
// they are called from NCCL's application, host-callback and proxy threads at once.
// Is not: ABI decoding (plugin_exports.cpp normalises v3/v4/v5 into NcclEvent) or process-wide
// state (plugin_process.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/format/nccl_section_writer.h"

namespace rankscope::nccl_plugin {

// What every handle returned to NCCL points at first: stopEvent and recordEventState get only the
// handle, so the kind travels with it.
enum class HandleKind : uint32_t { kIgnored = 0x52530000, kColl, kP2p, kKernelCh, kGroupApi, kCollApi, kP2pApi };
struct Handle {
  HandleKind kind;
};

// One ABI-independent event, filled from a v3, v4 or v5 descriptor.
struct NcclEvent {
  uint64_t type = 0;        // abi::EventType bit
  void* parent = nullptr;
  int rank = -1;            // originating comm rank
  const char* func = nullptr;
  const char* datatype = nullptr;
  size_t count = 0;
  int root = -1;
  int peer = -1;
  bool has_seq = false;
  uint64_t seq_number = 0;  // NCCL's per-function counter (Coll)
  uint32_t n_channels = 0;  // 0: unknown (v3 P2P)
  uint64_t comm_hash = 0;   // v3 only
};

class CommContext;

struct ApiHandle {
  Handle h;
  CommContext* owner;
};

// An in-flight collective or P2P operation: the Coll/P2p handle, and its KernelCh handle (the same
// one for every channel). Released when the host stopped it and every channel stopped.
struct InflightSlot {
  Handle self{HandleKind::kColl};
  Handle channel{HandleKind::kKernelCh};
  CommContext* owner = nullptr;
  std::atomic<uint32_t> busy{0};
  std::atomic<uint32_t> pending{0};        // host stop + completion still to come (2 -> 0 frees it)
  std::atomic<uint32_t> ch_started{0};
  std::atomic<uint32_t> ch_stopped{0};
  uint32_t n_channels = 0;
  bool in_ring = false;                    // a collective in the recorder's ring at `ring_seq`
  uint64_t ring_seq = 0;
  int peer = -1;                           // P2P
  bool send = false;
  bool to_self = false;                    // P2P with this rank: NCCL never reports its GPU progress
};

struct RecorderSettings {
  std::string run_dir;          // RANKSCOPE_RUN_DIR; files go to <run_dir>/nccl/
  uint32_t ring_entries = 256;  // RANKSCOPE_NCCL_RING
  uint32_t slots = 256;         // RANKSCOPE_NCCL_SLOTS: in-flight Coll/P2p per communicator
  uint32_t mask = 0;            // activation mask we ask NCCL for
  int launcher_rank = -1, launcher_world = 0, launcher_local = 0;
  std::string host, run_id;
};

class CommContext {
 public:
  // Creates the recorder file; on failure returns null and says why in `error`.
  static std::unique_ptr<CommContext> create(const RecorderSettings& s, int abi, uint64_t hash, const char* comm_name,
                                             int n_nodes, int nranks, int rank, std::string& error);
  ~CommContext();

  void* start(const NcclEvent& e);        // returns the handle for NCCL (may be null: dropped)
  static void stop(void* handle);
  static void record_state(void* handle, int state, bool has_ptimer);
  void heartbeat(int64_t now_ns) { writer_->heartbeat(now_ns); }
  void finalize();
  const std::string& file() const { return file_; }

 private:
  CommContext() = default;
  void ensure_registered(const NcclEvent& e);  // v3: the communicator is known at its first event
  void* start_coll(const NcclEvent& e, bool p2p);
  void* start_kernel_channel(const NcclEvent& e);
  InflightSlot* claim_slot();
  InflightSlot* own_slot(void* parent);        // null for a foreign (PXN) or unknown parent
  void host_stopped(InflightSlot* s);
  void channel_stopped(InflightSlot* s);
  void complete(InflightSlot* s, int64_t now_ns);
  void release(InflightSlot* s);
  void api_start(HandleKind kind, const NcclEvent& e);
  void api_stop() { nccl_->api_leave(); }
  void api_state(int state);

  std::unique_ptr<format::FlightRecorderWriter> writer_;
  format::NcclSectionWriter* nccl_ = nullptr;
  std::unique_ptr<format::NcclSectionWriter> nccl_storage_;
  std::string file_;
  int comm_ = -1;                              // CommSlot index once registered
  std::once_flag registered_;
  std::unique_ptr<InflightSlot[]> slots_;
  uint32_t n_slots_ = 0;
  std::atomic<uint32_t> next_slot_{0};
  bool kernel_progress_ = true;                // KernelCh events enabled: completion is known
  ApiHandle group_api_{{HandleKind::kGroupApi}, this}, coll_api_{{HandleKind::kCollApi}, this},
      p2p_api_{{HandleKind::kP2pApi}, this};
};

}  // namespace rankscope::nccl_plugin
