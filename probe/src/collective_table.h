// collective_table.h — the probe's in-memory ring of recent collectives, shared by three threads.
//
// Is: one slot per collective call (slot = event index % kCapacity), written by the calling thread
// at enqueue, completed by the caller or by the watchdog thread (asynchronous GPU completion), read
// by the main thread at step end (the step's CollectiveEvents) and by the watchdog (what is open
// too long). Every field is an atomic and the `ticket` (event index + 1) is published last and
// re-checked by readers, so no lock is taken and a slot recycled under a reader is detected.
// Is not: the flight recorder's per-communicator ring (format/), which is what outlives the process.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::probe {

struct CollectiveView {
  uint64_t event_index = 0;
  int comm = -1;
  uint64_t seq = 0;
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  format::DataType dtype = format::DataType::kUnknown;
  format::CollectiveState state = format::CollectiveState::kEmpty;
  uint32_t range_id = 0;  // event-stream name id of the innermost range at enqueue, 0 none
  uint32_t site = 0xffffffffu;  // the same range as a NameTable index (the call site), kNone none
  uint64_t bytes = 0;
  int64_t enqueue_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool reported = false;  // the watchdog already reported it
};

class CollectiveTable {
 public:
  static constexpr uint64_t kCapacity = 4096;

  uint64_t next_index() const { return next_.load(std::memory_order_acquire); }

  // Records a new collective; returns its event index.
  uint64_t add(int comm, uint64_t seq, format::CollectiveOp op, format::DataType dtype,
               uint32_t range_id, uint32_t site, uint64_t bytes, int64_t enqueue_ns) {
    uint64_t index = next_.fetch_add(1, std::memory_order_relaxed);
    Slot& s = slots_[index % kCapacity];
    s.ticket.store(0, std::memory_order_relaxed);  // invalid while being rewritten
    std::atomic_thread_fence(std::memory_order_release);
    s.comm.store(comm, std::memory_order_relaxed);
    s.seq.store(seq, std::memory_order_relaxed);
    s.op.store(static_cast<uint8_t>(op), std::memory_order_relaxed);
    s.dtype.store(static_cast<uint8_t>(dtype), std::memory_order_relaxed);
    s.state.store(static_cast<uint8_t>(format::CollectiveState::kEnqueued), std::memory_order_relaxed);
    s.range_id.store(range_id, std::memory_order_relaxed);
    s.site.store(site, std::memory_order_relaxed);
    s.bytes.store(bytes, std::memory_order_relaxed);
    s.enqueue_ns.store(enqueue_ns, std::memory_order_relaxed);
    s.start_ns.store(0, std::memory_order_relaxed);
    s.end_ns.store(0, std::memory_order_relaxed);
    s.reported.store(false, std::memory_order_relaxed);
    s.ticket.store(index + 1, std::memory_order_release);
    return index;
  }

  // Marks started / completed when the slot still holds (comm, seq) of that event index.
  // Returns false when it was recycled (more than kCapacity collectives later).
  bool mark_started(uint64_t index, int comm, uint64_t seq, int64_t now_ns) {
    Slot* s = owned(index, comm, seq);
    if (s == nullptr) return false;
    s->start_ns.store(now_ns, std::memory_order_relaxed);
    uint8_t enqueued = static_cast<uint8_t>(format::CollectiveState::kEnqueued);
    s->state.compare_exchange_strong(enqueued, static_cast<uint8_t>(format::CollectiveState::kStarted),
                                     std::memory_order_release);
    return true;
  }
  // Returns the view before completion (so the caller knows whether it had been reported).
  std::optional<CollectiveView> mark_completed(uint64_t index, int comm, uint64_t seq,
                                               int64_t now_ns, bool failed) {
    Slot* s = owned(index, comm, seq);
    if (s == nullptr) return std::nullopt;
    std::optional<CollectiveView> before = view(index);
    s->end_ns.store(now_ns, std::memory_order_relaxed);
    s->state.store(static_cast<uint8_t>(failed ? format::CollectiveState::kFailed
                                               : format::CollectiveState::kCompleted),
                   std::memory_order_release);
    return before;
  }
  void mark_reported(uint64_t index) {
    Slot& s = slots_[index % kCapacity];
    if (s.ticket.load(std::memory_order_acquire) == index + 1) s.reported.store(true, std::memory_order_relaxed);
  }

  // A consistent copy of event `index`, or nullopt when that slot now holds another event.
  std::optional<CollectiveView> view(uint64_t index) const {
    const Slot& s = slots_[index % kCapacity];
    if (s.ticket.load(std::memory_order_acquire) != index + 1) return std::nullopt;
    CollectiveView v;
    v.event_index = index;
    v.comm = s.comm.load(std::memory_order_relaxed);
    v.seq = s.seq.load(std::memory_order_relaxed);
    v.op = static_cast<format::CollectiveOp>(s.op.load(std::memory_order_relaxed));
    v.dtype = static_cast<format::DataType>(s.dtype.load(std::memory_order_relaxed));
    v.state = static_cast<format::CollectiveState>(s.state.load(std::memory_order_acquire));
    v.range_id = s.range_id.load(std::memory_order_relaxed);
    v.site = s.site.load(std::memory_order_relaxed);
    v.bytes = s.bytes.load(std::memory_order_relaxed);
    v.enqueue_ns = s.enqueue_ns.load(std::memory_order_relaxed);
    v.start_ns = s.start_ns.load(std::memory_order_relaxed);
    v.end_ns = s.end_ns.load(std::memory_order_relaxed);
    v.reported = s.reported.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.ticket.load(std::memory_order_relaxed) != index + 1) return std::nullopt;
    return v;
  }

 private:
  struct Slot {
    std::atomic<uint64_t> ticket{0};
    std::atomic<int> comm{-1};
    std::atomic<uint64_t> seq{0};
    std::atomic<uint8_t> op{0};
    std::atomic<uint8_t> dtype{0};
    std::atomic<uint8_t> state{0};
    std::atomic<bool> reported{false};
    std::atomic<uint32_t> range_id{0};
    std::atomic<uint32_t> site{0xffffffffu};
    std::atomic<uint64_t> bytes{0};
    std::atomic<int64_t> enqueue_ns{0};
    std::atomic<int64_t> start_ns{0};
    std::atomic<int64_t> end_ns{0};
  };

  Slot* owned(uint64_t index, int comm, uint64_t seq) {
    Slot& s = slots_[index % kCapacity];
    if (s.ticket.load(std::memory_order_acquire) != index + 1) return nullptr;
    if (s.comm.load(std::memory_order_relaxed) != comm || s.seq.load(std::memory_order_relaxed) != seq) return nullptr;
    return &s;
  }

  std::atomic<uint64_t> next_{0};
  std::array<Slot, kCapacity> slots_{};
};

}  // namespace rankscope::probe
