// kernels_report.h — what `rankscope kernels` finds on each rank's device timeline: the result
// structs of the five analyses Holistic Trace Analysis (HTA) made popular, computed from the run
// directory's capture-window records (TRACE_KERNELS, TRACE_LAUNCHES), and the options that tune them.
//
// Is: plain data (times in ns unless a name says ms). Is not: the computation (kernels_analyzer.h),
// JSON (kernels_json.h) or text (kernels_text.h). docs/KINETO.md ("HTA's analyses, ours beside
// theirs") defines each figure and says where we differ from HTA.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/format/kernel_class.h"

namespace rankscope::analyzers {

struct KernelsOptions {
  // Extra communication-kernel patterns (regexes, `--comm-kernel`), on top of the built-in rules
  // of format::KernelClassifier.
  std::vector<std::string> comm_kernel_patterns;
  std::optional<int> rank;  // analyse this rank only
  // HTA's defaults. A gap between two ops of a stream shorter than this, where the second op was
  // launched before the gap began, is kernel wait (HTA: consecutive_kernel_delay = 30 trace units,
  // which are microseconds in a Kineto trace).
  int64_t kernel_wait_threshold_ns = 30'000;
  int64_t runtime_outlier_ns = 50'000;        // a launch call longer than this (HTA: runtime_cutoff 50 µs)
  int64_t launch_delay_outlier_ns = 100'000;  // op started this long after its call returned (HTA: 100 µs)
  size_t top_kernels = 10;                    // per kind and rank (HTA: num_kernels = 10)
  size_t outliers_named = 5;                  // per outlier kind and rank
  double low_overlap = 0.5;                   // overlap ratio under which a rank gets a finding
  double host_bound_share = 0.1;              // host wait >= this share of the GPU span: host-bound
  int cuda_queue_limit = 1024;                // CUDA's launch queue depth per stream (HTA's max_queue_length)
  size_t queue_series_points = 256;           // at most this many points per stream's queue series
};

// Values across ranks: the smallest, the median and the largest, with the ranks of the extremes.
struct RankSpread {
  double min = 0, median = 0, max = 0;
  int min_rank = -1, max_rank = -1;
};

// 1. Compute/communication overlap (HTA's get_comm_comp_overlap): of the time some communication
// kernel runs (the union of their intervals), the share during which a compute kernel runs too.
struct OverlapResult {
  int64_t communication_ns = 0;    // union of communication kernels
  int64_t compute_ns = 0;          // union of compute kernels
  int64_t overlap_ns = 0;          // their intersection
  std::optional<double> ratio;     // overlap / communication; absent when there is no communication kernel
  double exposed_ms_per_step = 0;  // communication time with no compute beside it, per traced step
};

struct IdleByCause {
  int64_t host_wait_ns = 0;    // the op after the gap was launched after the gap began: the CPU was late
  int64_t kernel_wait_ns = 0;  // a short gap between back-to-back ops (launch overhead)
  int64_t other_ns = 0;        // anything else (waiting on an event, another stream, an op without a launch record)
  int64_t gaps = 0;
  int64_t total_ns() const { return host_wait_ns + kernel_wait_ns + other_ns; }
};

struct StreamIdle {
  uint32_t device = 0, stream = 0;
  IdleByCause idle;
};

// 2. Idle time by cause (HTA's get_idle_time_breakdown): gaps between consecutive ops of a stream,
// per stream as HTA computes it, and for the device as a whole (gaps where no stream runs anything).
struct IdleResult {
  std::vector<StreamIdle> streams;
  IdleByCause device;       // gaps in the union of every stream's ops
  int64_t span_ns = 0;      // first op's begin to last op's end, summed over traced windows
  bool host_bound = false;  // host wait >= host_bound_share of the span and the largest cause
  double host_wait_ms_per_step = 0;
};

struct KernelStat {
  std::string name;
  std::string rule;  // the classifier's rule for this name
  int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
};

// 3. Kernel breakdown (HTA's get_gpu_kernel_breakdown): time by kind and the top kernels per kind.
struct KindBreakdown {
  format::KernelClass kind = format::KernelClass::kCompute;
  int64_t count = 0;
  int64_t total_ns = 0;         // summed durations (HTA's per-kernel "sum")
  int64_t busy_ns = 0;          // union of the kind's intervals (concurrent kernels counted once)
  std::vector<KernelStat> top;  // by total, at most options.top_kernels
  int64_t others_ns = 0;        // the rest of the kind's total
};

struct Distribution {
  int64_t min_ns = 0, median_ns = 0, p95_ns = 0, max_ns = 0;
};

struct LaunchOutlier {
  std::string api;  // the runtime/driver call ("" when the producer did not name it)
  std::string kernel;
  int64_t step = 0;
  int64_t cpu_ns = 0, gpu_ns = 0, delay_ns = 0;
  double at_ms = 0;  // the call's begin, ms after the rank's first traced op
};

// 4. CUDA launch statistics (HTA's get_cuda_kernel_launch_stats), per launched op: the call's host
// duration, the op's device duration, and the launch delay = op begin - call end, clipped at 0.
struct LaunchStats {
  int64_t launches = 0;            // ops with a launch record
  int64_t ops_without_launch = 0;  // traced ops whose launch was not seen (HTA drops them)
  Distribution cpu, gpu, delay;
  int64_t short_kernels = 0;                  // gpu < cpu and cpu <= runtime_outlier_ns (HTA's "short GPU kernels")
  int64_t runtime_outliers = 0;               // cpu > runtime_outlier_ns
  int64_t delay_outliers = 0;                 // delay > launch_delay_outlier_ns
  std::vector<LaunchOutlier> longest_calls;   // the longest runtime outliers, longest first
  std::vector<LaunchOutlier> longest_delays;  // the longest delay outliers, longest first
  std::vector<std::pair<std::string, int64_t>> apis;  // launches per call name, most first
};

// 5. Queue length per stream (HTA's get_queue_length_*): ops launched and not yet started on the
// device, +1 at the call's begin, -1 at the op's begin.
struct StreamQueue {
  uint32_t device = 0, stream = 0;
  int64_t launches = 0;
  int max_length = 0;
  int64_t time_at_max_ns = 0;
  int64_t time_at_limit_ns = 0;  // at or above options.cuda_queue_limit (the CPU blocks there)
  double mean_length = 0;        // time-weighted, over the stream's first to last change
  std::vector<std::pair<double, int>>
      series;  // (ms after the rank's first traced op, length); at most queue_series_points, peaks kept
};

struct RankKernels {
  int rank = 0;
  std::string problem;  // why this rank has nothing (no event stream, no traced kernels); "" when analysed
  int traced_steps = 0;
  double step_ms = 0;  // mean wall time of the traced steps (0 when unknown)
  int64_t ops = 0;     // traced GPU ops
  OverlapResult overlap;
  IdleResult idle;
  std::vector<KindBreakdown> kinds;  // compute, communication, memory
  LaunchStats launches;
  std::vector<StreamQueue> queues;
};

struct KindSpread {
  format::KernelClass kind = format::KernelClass::kCompute;
  RankSpread ms_per_step;
};

struct KernelSpread {
  std::string name;
  format::KernelClass kind = format::KernelClass::kCompute;
  RankSpread ms_per_step;  // over the analysed ranks, 0 where a rank did not run it
};

struct KernelsFinding {
  std::string kind;  // "low_overlap" | "host_bound" | "launch_outliers" | "kernel_spread"
  std::vector<int> ranks;
  double cost_ms_per_step = 0;  // what it costs each step, where that can be said
  std::string text;
};

struct KernelsReport {
  std::string run_dir;
  int world_size = 0;
  KernelsOptions options;
  std::vector<std::string> comm_patterns;  // the user's, as given
  std::vector<RankKernels> ranks;
  std::vector<KindSpread> kind_spread;
  std::vector<KernelSpread> kernel_spread;  // each kernel that is in some rank's top list
  std::vector<KernelsFinding> findings;     // by cost, largest first
  std::vector<std::string> problems;
};

}  // namespace rankscope::analyzers
