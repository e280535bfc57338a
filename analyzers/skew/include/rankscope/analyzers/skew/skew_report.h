// skew_report.h — what `rankscope skew` finds out about a run: the data model of the skew report.
//
// Is: plain structs, filled by analyze_skew() (skew_analyzer.h) and turned into JSON by
// skew_json.h (schema: reports/schemas/skew_report.schema.json). Times are milliseconds on the
// aligned clock (rank 0's). Is not: analysis or rendering.
//
// Vocabulary. A collective *site* is one call site of a collective, the same in every step:
// (communicator, op, its ordinal among that communicator's collectives in the step, the range open
// at enqueue). A collective *instance* is one (communicator, sequence number) — a site in one step.
// At an instance, a rank's *arrival* is when it called the collective; the *last arriver* is the
// rank everyone waited for; a rank's *wait* is last arrival minus its own arrival.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rankscope::analyzers {

// 2: breakdown_ms comes from the device timeline where kernel records exist.
// 3: time classes are unions, never sums (host collectives on several threads, a range's
//   kernels); the device breakdown adds up to the step's window on the device, idle is measured as
//   gaps on it and device.host_bound_ms is its own figure; partial_ranks and findings[].caveats.
inline constexpr int kSkewReportSchemaVersion = 3;

// A rank's GPU time from its kernel records (device_timeline.h), mean per traced step.
// compute + memcpy + transfer + idle = step_ms, the step's window on the device.
struct DeviceBreakdown {
  int64_t traced_steps = 0, first_traced_step = -1, last_traced_step = -1;
  double step_ms = 0;            // the step's window on the device: its first kernel's start to the next step's
  double busy_ms = 0;            // some kernel running
  double compute_ms = 0;         // some compute kernel (neither NCCL nor memcpy/memset) running
  double transfer_ms = 0;        // only NCCL kernels running (waiting for peers included)
  double memcpy_ms = 0;          // memcpys/memsets running and no compute kernel (format::is_memory_operation)
  double idle_ms = 0;            // no kernel running: gaps on the device timeline, measured
  double host_bound_ms = 0;      // of idle: the host's step minus busy, when positive (the host set the length)
  double kernel_ms = 0;          // kernel durations summed (concurrent kernels each count): work, not a class
  double outside_ranges_ms = 0;  // time some kernel launched outside every range runs (union)
  std::map<std::string, double> range_ms;  // by block-wildcarded range name: time some kernel of it runs
};

// The job's GPU time: means over the ranks with kernel records (the mean's range_ms is empty;
// ranges_ms holds it in order). traced_steps is the most any rank had; the traced steps span all.
struct DeviceSummary {
  int ranks = 0;
  DeviceBreakdown mean;
  std::vector<std::pair<std::string, double>> ranges_ms;  // largest first
};

// Host wall-time breakdown (what `breakdown` holds on a CPU run), mean per step.
struct HostBreakdown {
  double compute_ms = 0, collective_wait_ms = 0, collective_transfer_ms = 0, idle_ms = 0;
};

struct RankSkew {
  int rank = 0;
  bool present = false;          // false when the rank's event stream is missing or unreadable
  int64_t steps = 0;             // steps of this rank inside the window
  double step_ms_median = 0, step_ms_p90 = 0, step_ms_max = 0;
  // Median absolute deviation of the step times from their median: a spread that a few steps far
  // off (start-up, a stall, a burst of load) do not widen, as they widen p90 on a short run.
  double step_ms_mad = 0;
  // Mean per step; compute + collective_wait + collective_transfer + memcpy + idle = mean step time
  // (host) or the mean step window on the device (device). Each a union of intervals, never a sum:
  // collectives that run at once on several threads count once.
  // From host wall time (source "host"), or, when the rank has kernel records, from the device
  // timeline of its traced steps (source "device": transfer = NCCL kernels, wait 0, idle = GPU idle).
  std::string breakdown_source = "host";
  double compute_ms = 0;             // inside ranges, outside collectives
  double collective_wait_ms = 0;     // inside collectives, waiting for the last arriver
  double collective_transfer_ms = 0; // inside collectives, after everyone arrived
  double memcpy_ms = 0;              // device breakdown only: memcpys/memsets, no compute kernel beside
  // Device breakdown of a rank with no NCCL kernel time (Gloo, MPI): the part of idle during which
  // its host waited in collectives for the last arriver (min of idle and the host wait): the GPU
  // idles because the collective waits, not because the host is slow.
  double idle_collective_wait_ms = 0;
  double idle_ms = 0;                // in the step but in no range and no collective
  // Not a part of the step: collective time another thread spent while the main thread ran ops
  // (traces whose framework ops were read: format/op_family.h); hidden behind compute, not lost.
  double collective_overlap_ms = 0;
  HostBreakdown host_breakdown;      // the host figures, also when the breakdown is the device's
  std::optional<DeviceBreakdown> device;
  double noncomm_ms_median = 0;      // step time minus time in collectives, median over steps
  // How much its step without communication varies from step to step against the other ranks'
  // at the same step (MAD over steps of its difference from the median rank): what slows every
  // rank alike (the machine, a long batch) does not count. The run's noise (skew_findings.cpp).
  double noncomm_paired_mad_ms = 0;
  double relative_score = 0;         // fastest rank's noncomm / this rank's, in (0, 1]
  double individual_score = 0;       // this rank's best noncomm / its median, in (0, 1]
  double clock_offset_ms = 0, clock_uncertainty_ms = 0;
  std::map<std::string, double> top_level_ms;        // mean per step of each top-level range
  std::map<std::string, double> range_compute_ms;    // every range: median per step, collectives excluded
  std::map<std::string, double> range_ms;            // every range: median per step, inclusive
  std::map<std::string, double> range_kernel_ms;     // GPU kernel time under each range (CUPTI)
  // The fastest step's figures: what a range costs when nothing else gets in its way (scaling
  // sweeps use them; on a shared machine noise only ever adds time).
  double step_ms_min = 0;
  std::map<std::string, double> range_ms_min;
  std::map<std::string, double> range_kernel_ms_min;
  std::map<std::string, double> counters;            // mean per step
  std::map<std::string, double> counters_max;        // largest value of any step
};

struct SiteRank {
  int rank = 0;
  double arrival_rel_last_ms = 0;  // median over steps; <= 0, 0 for the last arriver
  double wait_ms = 0;              // median over steps
  double last_fraction = 0;        // share of the steps in which this rank arrived last
  double late_margin_ms = 0;       // median over those steps of (its arrival - the next latest)
  double cost_ms_per_step = 0;     // mean over all steps of that margin (0 when not last)
};

struct CollectiveSite {
  std::string comm, op, range;
  int ordinal = 0;
  int64_t instances = 0;
  double bytes = 0;  // mean per instance (0 where the recorder does not say)
  // Its transfer: a call's time after the last rank arrived and after the rank's previous call on
  // the group ended (a queued asynchronous call is not moving data yet), median over the ranks'
  // calls; 0 where the recorder gives no durations. The rates are bytes over it, 0 where
  // either is unknown (collective_bandwidth.cpp).
  double transfer_ms = 0;
  double algbw_gbps = 0;  // a rank's bytes over the transfer
  double busbw_gbps = 0;  // algbw times the op's traffic factor (2(n-1)/n for an all-reduce); 0 where the op has none
  std::vector<SiteRank> ranks;
};

// A process group's collectives together, a step: what it moved and at what rate.
struct GroupBandwidth {
  std::string comm;
  int ranks = 0;                 // the most ranks seen at any of its sites
  double calls_per_step = 0;
  double bytes_per_step = 0;     // a rank's, summed over its calls
  double transfer_ms_per_step = 0;
  double algbw_gbps = 0, busbw_gbps = 0;  // busbw 0 unless every site with bytes has a factor
};

struct InstanceRank {
  int rank = 0;
  double arrival_rel_last_ms = 0;
  double wait_ms = 0;
};

struct CollectiveInstance {
  std::string comm, op, range;
  uint64_t seq = 0;
  std::vector<InstanceRank> ranks;
};

struct StepDetail {
  int64_t step = -1;
  std::vector<CollectiveInstance> collectives;
};

struct CounterGroupImbalance {
  std::string group;
  double imbalance = 0;  // max / mean over the group's ranks
  int max_rank = -1, min_rank = -1;
  double max = 0, min = 0;
  int size = 0;  // ranks in the group
};

struct CounterSkew {
  std::string name;
  double mean = 0, max = 0, min = 0, imbalance = 0;  // over all ranks that report it
  int max_rank = -1, min_rank = -1;
  std::optional<CounterGroupImbalance> worst_group;  // the smallest group about as uneven as the worst
  int groups_of_kind = 0;         // groups of worst_group's kind (tp0, tp1, ...: "tp")
  int groups_over_threshold = 0;  // ...of which this many are past the imbalance threshold
};

// late_arrival: a rank that waits for the late one at its collective (from the site's per-rank
// median wait), and where: the collective's op and the range open when it was called.
struct Waiter {
  int rank = 0;
  double wait_ms = 0;  // median over steps
  std::string op, range;
  bool gpu_idle = false;  // its device breakdown has no NCCL kernel time: the wait is GPU idle (Gloo)
};

// A rank whose evidence ends early: the import read its trace in part (run.json
// source.ranks[].warnings), or its event stream ends before the other ranks'. Decided from the data
// (partial_ranks.h): its steps whose collectives, and its traced steps whose kernels, fall short of
// its peers' at the same step are cut, never read as idle.
struct PartialRank {
  int rank = 0;
  std::string reason;                       // the importer's warning, or what the data shows
  int64_t last_step = -1;                   // its last step in the event stream
  int64_t last_complete_step = -1;          // its steps are complete up to here (-1: none)
  int64_t last_complete_device_step = -1;   // its kernel records are complete up to here (-1: none)
  bool device_cut = false;                  // kernel records cut: its GPU figures use steps up to the above
  std::string left_out;                     // what the report leaves out because of it
};

struct Finding {
  std::string kind;  // "late_arrival", "counter_imbalance", "straggler", "expert_load"
  std::vector<int> ranks;
  std::string range;  // the range named as the cause ("" when none)
  double cost_ms_per_step = 0;
  std::string text;
  std::string comm;   // late_arrival: the communicator; counter_imbalance: the group
  std::string counter;
  // late_arrival and straggler: why the rank is slow (straggler_class.cpp): uniform_slowdown,
  // range_specific, communication or outside_ranges; "" for other kinds.
  std::string cls;
  double slowdown_factor = 0;  // uniform_slowdown: its ranges over its peers' (median ratio)
  // counter_imbalance: the busiest rank's share over the lightest's (20 for 20:1), what the finding
  // predicts where the work grows; it ranks the finding when its time cost is not measurable yet.
  double share_ratio = 0;
  std::string share_text;  // the same as text says it: "20:1", "64:0" where the lightest has none
  std::vector<Waiter> waiters;  // late_arrival: longest wait first, at most kMaxWaiters
  int waiters_total = 0;        // late_arrival: every rank that waits, listed or not
  static constexpr size_t kMaxWaiters = 16;
  // Why the finding may be off: it rests on a partial rank (one sentence each).
  std::vector<std::string> caveats;
};

// A delay is a finding only this many times past the run's own noise (skew_findings.cpp).
inline constexpr double kFindingSignificance = 2.0;

struct BelowNoise {
  int rank = -1;
  std::string kind;     // "late_arrival" or "straggler"
  int sites = 0;        // late_arrival: the collectives where it was last
  double delay_ms = 0;  // the largest margin (late_arrival) or excess (straggler)
  double noise_ms = 0;  // the run's noise for this rank
};

struct WhatIf {
  int rank = -1;
  double step_ms = 0;            // median step time now
  double estimated_step_ms = 0;  // if the straggler arrived with the others
  std::string text;
};

struct Heatmap {
  std::vector<std::string> rank_labels;  // "3" or "0-7" when ranks are binned
  std::vector<std::string> step_labels;
  std::vector<std::vector<double>> values_ms;  // [rank bin][step bin], max step time in the bin
};

// Mixture of experts, from the counters moe.tokens_received and moe.expert{e}.routed and
// the ranges .../moe/experts.
struct RankExpertLoad {
  int rank = 0;
  std::string group;            // its expert-parallel communicator (ep{k}); "" when none
  double tokens_received = 0;   // mean per step, summed over the MoE blocks
  double experts_ms = 0;        // median per step of every .../moe/experts range, summed
};

struct ExpertLoad {
  int experts = 0;
  std::vector<std::string> step_labels;        // "12", or "10-19" when steps are binned
  std::vector<std::vector<double>> tokens;     // [expert][step bin]: tokens routed to it, all ranks (bin mean)
  std::vector<double> share;                   // per expert: share of all routed tokens in the window
  double imbalance = 0;                        // max/mean of the experts' loads over the window
  int hottest_expert = -1;
  std::vector<RankExpertLoad> ranks;           // ranks that report moe.tokens_received
  double ms_per_token = 0;                     // expert time per received token (fit over ranks); 0 unknown
  std::optional<WhatIf> balanced;              // if every rank received its group's mean
};

struct SkewReport {
  std::string run_dir, run_id;
  int world_size = 0;
  int64_t first_step = -1, last_step = -1, steps = 0;
  double step_ms_median = 0;  // median over ranks of each rank's median
  std::vector<RankSkew> ranks;
  std::vector<CollectiveSite> collectives;
  std::vector<GroupBandwidth> groups;  // by communicator, as collectives
  StepDetail step_detail;
  std::vector<CounterSkew> counters;
  Heatmap heatmap;
  std::vector<Finding> findings;  // most costly first
  // Delays seen but within the run's own spread (skew_findings.cpp noise_ms): one a rank and kind,
  // the largest of its sites. Said in one line, never a finding.
  std::vector<BelowNoise> below_noise;
  std::optional<WhatIf> what_if;
  std::optional<ExpertLoad> expert_load;  // MoE runs only
  std::optional<DeviceSummary> device;     // runs with kernel records only
  std::vector<PartialRank> partial_ranks;  // ranks imported in part or ending early
  std::vector<std::string> problems;
};

}  // namespace rankscope::analyzers
