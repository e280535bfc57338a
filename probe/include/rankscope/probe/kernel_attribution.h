// kernel_attribution.h — joins GPU kernel records to the range open at their launch, on our clock.
//
// Is: the backend-neutral half of kernel timing (Kineto's split): a lock-free table from launch
// correlation id to the range open on the launching thread, and the conversion of a tracer's
// timestamps to the probe clock (ns since the Unix epoch) from paired clock reads. Fed by any
// KernelTracer; unit-tested with fabricated activity, no GPU needed.
// Is not: CUPTI (rankscope_probe_cupti) or the per-step bookkeeping (the probe core).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

namespace rankscope::probe {

// Maps the tracer's clock to ours: ours = theirs + offset. Calibrated from paired reads, keeping
// the pair whose bracketing reads of our clock were closest (least disturbed by preemption).
class TimestampConverter {
 public:
  TimestampConverter() = default;
  explicit TimestampConverter(int64_t offset_ns) : offset_ns_(offset_ns) {}
  static TimestampConverter calibrate(const std::function<int64_t()>& tracer_now,
                                      const std::function<int64_t()>& our_now, int rounds = 8);
  int64_t to_ours(int64_t tracer_ns) const { return tracer_ns + offset_ns_; }
  int64_t offset_ns() const { return offset_ns_; }

 private:
  int64_t offset_ns_ = 0;
};

// correlation id -> range token (the probe's name index of the innermost range open at launch).
// A ring indexed by correlation id: ids grow monotonically, so a kernel whose launch is more than
// kCapacity launches old is reported unattributed rather than misattributed.
class LaunchTable {
 public:
  static constexpr uint32_t kCapacity = 1u << 16;
  static constexpr uint32_t kNoRange = 0xffffffffu;

  void record(uint32_t correlation_id, uint32_t range_token) {
    Entry& e = entries_[correlation_id & (kCapacity - 1)];
    e.packed.store(pack(correlation_id, range_token), std::memory_order_release);
  }
  // The range token recorded for `correlation_id`, or nullopt if unknown or overwritten.
  std::optional<uint32_t> lookup(uint32_t correlation_id) const {
    uint64_t v = entries_[correlation_id & (kCapacity - 1)].packed.load(std::memory_order_acquire);
    if (v == 0 || static_cast<uint32_t>(v >> 32) != correlation_id) return std::nullopt;
    return static_cast<uint32_t>(v);
  }

 private:
  // Correlation id and token in one word, so a reader never sees one without the other.
  static uint64_t pack(uint32_t corr, uint32_t token) { return (uint64_t{corr} << 32) | token; }
  struct Entry {
    std::atomic<uint64_t> packed{0};
  };
  std::array<Entry, kCapacity> entries_{};
};

}  // namespace rankscope::probe
