// device_timeline.h — one rank's GPU time from its kernel records (internal to the skew analyzer).
//
// Why: on a GPU the host returns from a range at launch, so host wall time books the GPU's backlog
// on whatever call first waits for it (the first collective), and GPU compute reads as transfer.
// When a step carries kernel records (the capture window, or an nsys or Kineto import) its breakdown
// comes from the device instead: compute = time some compute kernel runs, memcpy = time only
// memcpys and memsets run beside no compute kernel, transfer = time only NCCL kernels run (waiting
// for peers included: an NCCL kernel runs from when its rank reaches it until the collective ends),
// idle = the gaps on the device timeline, measured (on a Gloo job they include the host collectives'
// wait, which the caller attributes from the collectives table). Every figure is a union of kernel
// intervals, never a sum (concurrent kernels count once): the classes add up to the step's window
// on the device, and a range's GPU time is the time some kernel of it runs.
//
// The step window on the device: from the step's first kernel start to the next traced
// step's first kernel start; the last traced step before a gap (or the end) gets its host step's
// length from its first kernel, or runs to its last kernel's end if that is later. Windows follow
// the kernels, not the host: a producer may deliver a step's kernels a step late (our CUPTI probe
// does: the record of step 5 holds step 4's kernels), and a GPU may lag the host by most of a step;
// either way consecutive windows tile the device's timeline and each holds a step's worth of work.
// The part of a kernel that runs past its window (the next step's kernels have begun on another
// stream) is the next window's. A gap before a step's first kernel (the GPU waiting for the host to
// launch) is idle of the window before it.
// The host-bound share of a window is the idle time that the host, not the device, set: the host's
// step minus the GPU's busy time, when positive, at most the idle time.
//
// Is: a sweep over one window's kernel intervals (measure_device_step, pure) and a per-rank
// accumulator fed one TRACE_KERNELS record at a time; a record's kernels are kept only until the
// next record arrives (its window's end depends on it). Is not: the host-time breakdown
// (rank_scan.cpp) or cross-rank analysis.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analyzers/skew/skew_report.h"
#include "rankscope/format/event_stream.h"

namespace rankscope::analyzers {

// One kernel on the device timeline, in ns on any one clock.
struct KernelSpan {
  int64_t begin_ns = 0, end_ns = 0;
  format::KernelClass kind = format::KernelClass::kCompute;  // format::classify_kernel of its name
};

struct DeviceStepTime {
  int64_t busy_ns = 0;      // union of all kernels
  int64_t compute_ns = 0;   // some compute kernel running
  int64_t memcpy_ns = 0;    // memcpys/memsets running and no compute kernel
  int64_t transfer_ns = 0;  // NCCL kernels running and nothing else
};

// Sweeps the kernels' begin and end points in time order. `kernels` is reordered. Kernels with
// end <= begin take no time.
DeviceStepTime measure_device_step(std::span<KernelSpan> kernels);


// Accumulates one rank's traced steps. Ranges are keyed by block-wildcarded name
// ("backward/block*/attn/sdpa") so the report stays small at any depth of model.
class DeviceTimeline {
 public:
  static constexpr uint32_t kNoRange = 0xffffffffu;
  // The key of a range name (wildcarded here); the same name always gets the same key.
  uint32_t range_key(std::string_view range_name);
  // The host's begin and end of a step: its length ends the last traced window and sets the
  // host-bound share. Every STEP record, in stream order, also those outside the analysed window.
  void host_step(int64_t step, int64_t begin_ns, int64_t end_ns);
  // `range_keys[i]`: key of the range kernel i was launched under, kNoRange for none.
  void add_step(int64_t step, std::span<KernelSpan> kernels, std::span<const uint32_t> range_keys);

  bool empty() const { return steps_.empty(); }
  // Mean per traced step whose wall time `step_ms` knows (steps outside the analysed window, or
  // start-up, are left out); nullopt when none is left. Call once, after the last record.
  std::optional<DeviceBreakdown> finish(const std::map<int64_t, double>& step_ms);

 private:
  struct Step {
    int64_t step;
    DeviceStepTime time;          // over the window
    int64_t window_ns = 0;        // the step's window on the device
    int64_t host_bound_ns = 0;
    int64_t kernel_ns = 0;        // summed, concurrent kernels each count
    int64_t outside_ns = 0;       // union of the kernels launched outside every range
    std::vector<std::pair<uint32_t, int64_t>> range_ns;  // (range key, union of its kernels), keys unique
  };
  // Measures the pending record over its window, which ends at `window_end` (the next record's
  // first kernel), or with none after the host's step length or its last kernel, into steps_.back().
  void close_pending(std::optional<int64_t> window_end);

  std::vector<Step> steps_;
  std::vector<std::string> range_names_;  // by key
  std::map<std::string, uint32_t, std::less<>> range_keys_;
  std::map<int64_t, int64_t> host_ns_;  // step -> the host's step length
  // The last record's kernels, until the next record says where its window ends.
  std::vector<KernelSpan> pending_;
  int64_t pending_first_ = 0;  // its first kernel's start: where its window begins
  bool has_pending_ = false;
};

// Puts a rank's device figures in its breakdown (keeping the host figures in host_breakdown).
void apply_device_breakdown(RankSkew& rank);

// The job-level summary: means over the ranks that have kernel records.
std::optional<DeviceSummary> summarize_device(const std::vector<RankSkew>& ranks);

}  // namespace rankscope::analyzers
