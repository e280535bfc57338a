// flight_recorder_writer.h — creates a rank's flight recorder file and updates it in place.
//
// Is: the only code that writes flight_recorder_layout.h's bytes; used by the probe runtime on a
// live rank and by `rankscope synth` to fabricate runs. Lock-free: each section has one writer
// thread (see the layout's seqlock notes), counters shared between threads use atomics on the
// mapped memory. Is not: policy (when to write what); that is the probe's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::format {

struct FlightIdentity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int pid = 0;
  std::string host;
  std::string run_id;
  int64_t start_ns = 0;
};

struct CollectiveDesc {
  CollectiveOp op = CollectiveOp::kUnknown;
  DataType dtype = DataType::kUnknown;
  uint64_t count = 0;
  uint64_t bytes = 0;
  int32_t peer = -1;
  // all_to_all_v only: elements sent to / expected from each member, by rank in the communicator.
  // Kept in the recorder's peer-counts section (peer_counts.h); empty for every other op.
  std::span<const size_t> send_counts = {};
  std::span<const size_t> recv_counts = {};
};

struct WatchdogEventDesc {
  WatchdogKind kind = WatchdogKind::kNone;
  int64_t time_ns = 0;
  int comm_index = -1;
  uint64_t comm_seq = 0;
  int64_t waited_ns = 0;
  std::string range;
  std::string message;
  std::string stacks_file;  // relative to the run directory
};

// One learned bound (flight_recorder_layout.h, BoundSlot).
struct BoundDesc {
  BoundKind kind = BoundKind::kEmpty;
  int comm_index = -1;
  std::string comm;
  std::string site;
  uint32_t samples = 0;
  uint32_t warmup = 0;
  int64_t quantile_ns = 0;
  int64_t bound_ns = 0;  // 0 while warming up
  int64_t updated_ns = 0;
  uint32_t quantile_permille = 0;
  uint32_t window = 0;
};

class FlightRecorderWriter {
 public:
  // Creates (or truncates) `file`, sizes it for `params`, maps it and writes identity and layout.
  static Result<std::unique_ptr<FlightRecorderWriter>> create(const std::filesystem::path& file,
                                                              const FlightIdentity& identity,
                                                              const FlightLayoutParams& params = {});
  // The same recorder kept in `memory` (at least flight_file_bytes(params), aligned to 8, all zero:
  // fresh anonymous memory, whose untouched pages then cost nothing) and written to `file` by close(): for a program holding many recorders at once that no one
  // reads while they are written (rankscope synth: 65,536 ranks would be 65,536 mappings, past
  // Linux's vm.max_map_count). `file` is created empty now.
  static Result<std::unique_ptr<FlightRecorderWriter>> create_in_memory(std::span<uint8_t> memory,
                                                                        const std::filesystem::path& file,
                                                                        const FlightIdentity& identity,
                                                                        const FlightLayoutParams& params = {});
  // Unmaps the file, or writes the memory to it (zero blocks as holes); later calls do nothing.
  // The destructor closes too, without saying what went wrong.
  Status close();
  ~FlightRecorderWriter();
  FlightRecorderWriter(const FlightRecorderWriter&) = delete;
  FlightRecorderWriter& operator=(const FlightRecorderWriter&) = delete;

  // --- process liveness (heartbeat and process state are single atomic stores: any thread) ---
  void heartbeat(int64_t now_ns);
  void set_process_state(ProcessState state);
  // The fields below are seqlocked; call them from one thread (the main thread).
  void set_step(int64_t step, int64_t step_begin_ns);
  void set_phase(std::string_view phase);
  void set_clock(int64_t offset_ns, int64_t uncertainty_ns);

  // --- per-thread open-range stacks; each slot is written only by its own thread ---
  int claim_thread_slot(int tid, std::string_view thread_name);  // -1 when all slots are taken
  void push_range(int slot, std::string_view name, int64_t begin_ns);
  void pop_range(int slot);

  // --- collectives ---
  int register_comm(std::string_view name, int size, int rank_in_comm);  // -1 when full
  // Returns the collective's per-communicator sequence number.
  uint64_t collective_enqueue(int comm, const CollectiveDesc& desc, int64_t step,
                              std::string_view range, int64_t now_ns);
  void collective_start(int comm, uint64_t seq, int64_t now_ns);
  // The caller returned while the collective is still pending on a device stream.
  void collective_host_returned(int comm, uint64_t seq);
  void collective_complete(int comm, uint64_t seq, int64_t now_ns, bool failed = false);

  // --- gradient arrival ---
  int register_param(std::string_view name, int bucket, uint64_t numel);  // -1 when full
  void set_param_bucket(int param, int bucket);
  void begin_backward(int64_t step, int64_t now_ns);
  void grad_arrived(int param, int64_t now_ns);
  void end_backward();

  // --- watchdog ---
  void record_watchdog(const WatchdogEventDesc& event);
  // Learned bounds: slot in [0, max_bounds()); one writer thread for all slots (the watchdog).
  uint32_t max_bounds() const { return kDefaultMaxBounds; }
  void write_bound(int slot, const BoundDesc& bound);

  // Collective records written by more than one thread (the NCCL profiler plugin: launched on the
  // application thread, started and completed on NCCL's proxy thread): each record update then
  // takes its sequence word with a CAS instead of assuming one writer. Set before the first use.
  void set_concurrent_collective_writers(bool on) { concurrent_ = on; }

  // The NCCL plugin section of the header (flight_recorder_layout.h NcclCommInfo); written through
  // nccl_section_writer.h.
  NcclCommInfo* nccl_section() { return &header()->nccl; }

  // Asks the kernel to write dirty pages back (MS_ASYNC). Not needed for readability by other
  // processes on this host (they share the page cache); it narrows the window on a machine crash.
  void sync();

  const FlightLayoutParams& layout() const { return params_; }
  uint8_t* mapped_bytes() { return base_; }  // for tests that fabricate torn records
  size_t mapped_size() const { return size_; }

 private:
  FlightRecorderWriter() = default;
  FlightHeader* header() { return reinterpret_cast<FlightHeader*>(base_); }
  uint8_t* thread_slot(int slot);
  uint8_t* comm_slot(int comm);
  CollectiveRecord* ring_record(int comm, uint64_t seq);
  ParamSlot* param_slot(int param);

  void begin_record(CollectiveRecord* r);

  void init(const FlightIdentity& identity, const FlightLayoutParams& params);
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::filesystem::path save_to_;  // in memory: where close() writes it
  FlightLayoutParams params_;
  bool concurrent_ = false;
};

// Bytes a flight recorder file with these parameters occupies.
uint64_t flight_file_bytes(const FlightLayoutParams& params);

}  // namespace rankscope::format
