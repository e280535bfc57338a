// kernel_attribution.h — joins GPU kernel records to the range open at their launch, on our clock.
//
// Is: the backend-neutral half of kernel timing (Kineto's split): a lock-free table from launch
// correlation id to the range open on the launching thread, the verdict on where a completed
// kernel's time goes (a range, outside every range, or no launch seen), and the conversion of a
// tracer's timestamps to the probe clock (ns since the Unix epoch) from paired clock reads. Fed by
// any KernelTracer; unit-tested with fabricated activity, no GPU needed.
// Whoever launched the kernel (runtime API, driver API as cuBLASLt and cuDNN do, a CUDA graph
// launch whose kernels all share its correlation id) is the tracer's business: it only has to
// report every launch's correlation id on the launching thread.
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

// Where a completed kernel's GPU time is booked.
struct KernelAttribution {
  enum class Kind : uint8_t {
    kRange,          // launched while `range_token` was the innermost open range of the thread
    kOutsideRanges,  // launched while no range was open on the launching thread
    kNoLaunchSeen,   // no launch recorded for its correlation id: an API the tracer does not
                     // watch, or a launch more than LaunchTable::kCapacity launches old
  };
  Kind kind = Kind::kNoLaunchSeen;
  uint32_t range_token = 0;  // meaningful for kRange only
};

// correlation id -> range token (the probe's name index of the innermost range open at launch).
// A ring indexed by correlation id: ids grow monotonically, so a kernel whose launch is more than
// kCapacity launches old is reported unattributed rather than misattributed. Lookups do not
// consume the entry: every kernel of one graph launch carries that launch's correlation id.
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
  KernelAttribution attribute(uint32_t correlation_id) const {
    std::optional<uint32_t> token = lookup(correlation_id);
    if (!token) return {KernelAttribution::Kind::kNoLaunchSeen, 0};
    if (*token == kNoRange) return {KernelAttribution::Kind::kOutsideRanges, 0};
    return {KernelAttribution::Kind::kRange, *token};
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
