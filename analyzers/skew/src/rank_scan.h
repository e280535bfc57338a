// rank_scan.h — streams one rank's event stream into its per-rank figures (internal).
//
// Is: an EventStreamVisitor that aggregates step by step (step time, compute / collective / idle
// split, time per range with collectives taken out, counters) and hands every collective arrival,
// on the aligned clock, to an ArrivalSink for the cross-rank join. Kernel records (capture window)
// go to a DeviceTimeline, one record at a time. Per-step samples are kept for
// one rank at a time and reduced to medians in finish(), so memory does not grow with ranks x steps
// beyond one float per step. Is not: cross-rank analysis (skew_analyzer.cpp, arrival_table.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device_timeline.h"
#include "interval_union.h"
#include "expert_load.h"
#include "name_table.h"
#include "rankscope/analyzers/skew/skew_report.h"
#include "rankscope/format/event_stream.h"

namespace rankscope::analyzers {

struct ArrivalObservation {
  uint32_t comm = kNoName;   // global name id
  uint32_t range = kNoName;  // global name id of the innermost range open at enqueue
  uint8_t op = 0;
  uint32_t ordinal = 0;      // index among this communicator's collectives in the step
  uint64_t seq = 0;
  int64_t step = 0;
  int64_t arrival_ns = 0;    // aligned clock
  int64_t duration_ns = -1;  // enqueue to completion; -1 when not completed
  uint64_t bytes = 0;        // as the recorder has it (0 unknown)
};

class ArrivalSink {
 public:
  virtual ~ArrivalSink() = default;
  virtual void add(int rank, const ArrivalObservation& arrival) = 0;
};

struct RankScanResult {
  RankSkew summary;              // all but the wait/transfer split and the straggler scores
  double collective_ms_mean = 0; // time inside collectives per step (wait + transfer)
  std::vector<int64_t> step_numbers;
  std::vector<float> step_ms;
  std::vector<float> noncomm_ms;  // each step's time without communication, as step_ms
  std::vector<std::string> warnings;
};

class RankScan : public format::EventStreamVisitor {
 public:
  RankScan(int rank, NameTable& names, ArrivalSink& sink, int64_t first_step, int64_t last_step);

  void on_name(uint32_t id, format::NameKind kind, std::string_view name) override;
  void on_clock(const format::ClockRecord& clock) override;
  void on_step(const format::StepRecord& step) override;
  // Capture-window kernels: the device-timeline breakdown (device_timeline.h).
  void on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) override;

  RankScanResult finish();
  // Kernel records of steps after `last` are left out (a partial rank's cut; -1: all of them).
  void limit_device_steps(int64_t last) { last_device_step_ = last; }
  // Also add this rank's moe.expert{e}.routed counters of each step to `series` (MoE runs).
  void collect_expert_load(ExpertSeries* series) { experts_ = series; }
  // Classify kernels with `classifier` (built-in rules plus the user's) instead of the built-in
  // rules alone; it must outlive the scan. Call before the first name arrives.
  void classify_kernels_with(const format::KernelClassifier* classifier) { classifier_ = classifier; }

 private:
  bool is_range(uint32_t local) const;
  const std::vector<uint32_t>& ancestors_or_self(uint32_t local);
  // on_step's phases, in order.
  bool is_startup(const format::StepRecord& step) const;
  void size_per_range_arrays();
  std::vector<uint32_t> ranges_present(const format::StepRecord& step);
  bool subtract_op_leaf_waits(const std::vector<uint32_t>& touched);
  bool present(uint32_t local) const { return local < stamp_.size() && stamp_[local] == step_counter_; }
  struct CollectiveTime {
    int64_t total_ns = 0;   // the union of every collective's span in the step
    int64_t inside_ns = 0;  // the union of those inside a range other than the step
  };
  CollectiveTime scan_collectives(const format::StepRecord& step, const std::vector<uint32_t>& touched);
  int64_t range_compute_ns(uint32_t local) const;
  struct BusyTime {
    int64_t total_ns = 0, compute_ns = 0;  // the outermost present ranges' time, and its compute
  };
  BusyTime add_range_samples(const std::vector<uint32_t>& touched);
  void add_host_classes(const format::StepRecord& step, bool ops_read, BusyTime busy, CollectiveTime coll);
  void add_counters(const format::StepRecord& step);

  int rank_;
  NameTable& names_;
  ArrivalSink& sink_;
  int64_t first_step_, last_step_;
  int64_t last_device_step_ = INT64_MAX;
  int64_t offset_ns_ = 0;
  bool saw_step_ = false;

  // Per local name id of this file.
  std::vector<std::string> local_names_;
  std::vector<format::NameKind> local_kinds_;
  std::vector<uint32_t> local_to_global_;
  std::vector<std::vector<uint32_t>> ancestors_;  // computed on first use
  std::vector<bool> ancestors_ready_;
  std::vector<uint32_t> top_level_global_;  // by local range id: global id of its first component
  uint32_t step_range_ = kNoName;  // local id of a range named "step", if any

  // Per-step scratch, indexed by local id; `stamp_` marks what the current step touched.
  std::vector<int64_t> stamp_;
  std::vector<int64_t> total_ns_, coll_in_ns_;
  std::vector<int64_t> wait_ns_;     // by local range id: its wait leaves' time this step
  std::vector<int64_t> has_leaves_;  // by local range id: the step counter when leaves were under it
  std::vector<bool> op_leaf_;        // by local name id: a leaf ("forward/[matmul]", ".../[waiting on collectives]")
  std::vector<bool> wait_leaf_;      // by local name id: the wait leaf
  std::vector<std::vector<Interval>> coll_intervals_;  // by local range id: its collectives' spans
  std::vector<Interval> all_coll_scratch_, inside_coll_scratch_;
  int64_t step_counter_ = 0;

  // Samples of this rank, reduced in finish().
  std::vector<std::vector<double>> range_compute_samples_, range_total_samples_;  // by local id
  std::vector<std::vector<double>> range_kernel_samples_;  // GPU kernel time, steps that had any
  std::vector<double> counter_sum_, counter_max_;
  std::vector<int64_t> counter_steps_;
  std::vector<double> top_level_sum_;  // by global id of the top-level component
  std::vector<double> step_ms_, noncomm_ms_;
  double compute_ms_sum_ = 0, idle_ms_sum_ = 0, collective_ms_sum_ = 0, overlap_ms_sum_ = 0;
  RankScanResult result_;
  ExpertSeries* experts_ = nullptr;
  std::vector<int> expert_of_local_;  // by local counter id: the expert of moe.expert{e}.routed, -1 other

  DeviceTimeline device_;
  const format::KernelClassifier* classifier_ = nullptr;
  std::vector<format::KernelClass> kernel_class_;  // by local kernel name id
  std::vector<uint32_t> device_range_key_;  // by local range id; kUnkeyed until first use
  static constexpr uint32_t kUnkeyed = 0xfffffffeu;
  std::vector<KernelSpan> kernel_scratch_;
  std::vector<uint32_t> kernel_keys_scratch_;
};

}  // namespace rankscope::analyzers
