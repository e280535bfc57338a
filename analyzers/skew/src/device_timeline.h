// device_timeline.h — one rank's GPU time from its kernel records (internal to the skew analyzer).
//
// Why: on a GPU the host returns from a range at launch, so host wall time books the GPU's backlog
// on whatever call first waits for it (the first collective), and GPU compute reads as transfer.
// When a step carries kernel records (the capture window, or an nsys import) its breakdown comes
// from the device instead: compute = time some compute kernel runs, memcpy = time only memcpys and
// memsets run beside no compute kernel, transfer = time only NCCL kernels run (waiting for peers
// included: an NCCL kernel runs from when its rank reaches it until the collective ends), idle = the
// rest of the step (the GPU waited for the host: on a Gloo job that includes the host collectives'
// wait, which the caller attributes from the collectives table), and kernel time
// per range, with the kernels launched outside every range as their own figure.
//
// Is: a sweep over one step's kernel intervals (measure_device_step, pure) and a per-rank
// accumulator fed one TRACE_KERNELS record at a time; kernels are never kept past their record.
// Is not: the host-time breakdown (rank_scan.cpp) or cross-rank analysis.
//
// The frame is the step's wall time (its STEP record). A producer may deliver a step's kernels a
// step late (CUPTI buffers flushed at the next step end); in steady state a step's worth of kernels
// is what a record holds either way, so busy time is measured per record and set against the wall
// time of the step the record names.
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
  // `range_keys[i]`: key of the range kernel i was launched under, kNoRange for none.
  void add_step(int64_t step, std::span<KernelSpan> kernels, std::span<const uint32_t> range_keys);

  bool empty() const { return steps_.empty(); }
  // Mean per traced step whose wall time `step_ms` knows (steps outside the analysed window, or
  // start-up, are left out); nullopt when none is left.
  std::optional<DeviceBreakdown> finish(const std::map<int64_t, double>& step_ms) const;

 private:
  struct Step {
    int64_t step;
    DeviceStepTime time;
    int64_t kernel_ns, outside_ns;
    std::vector<std::pair<uint32_t, int64_t>> range_ns;  // (range key, kernel time), keys unique
  };
  std::vector<Step> steps_;
  std::vector<std::string> range_names_;  // by key
  std::map<std::string, uint32_t, std::less<>> range_keys_;
};

// Puts a rank's device figures in its breakdown (keeping the host figures in host_breakdown).
void apply_device_breakdown(RankSkew& rank);

// The job-level summary: means over the ranks that have kernel records.
std::optional<DeviceSummary> summarize_device(const std::vector<RankSkew>& ranks);

}  // namespace rankscope::analyzers
