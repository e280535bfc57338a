// probe_impl.h — the state behind Probe: who writes what, from which thread.
//
// Is: the private struct shared by probe.cpp (the API and step bookkeeping) and probe_watchdog.cpp
// (the watchdog's tick). Ownership by thread:
//   - ThreadState[i]: written only by the thread that claimed it (ranges); the watchdog reads the
//     main thread's innermost frame through atomics.
//   - step aggregates, counters, gradient list, StepRecord: main thread only.
//   - CollectiveTable: lock-free, any thread (collective_table.h).
//   - the EventStreamWriter: behind stream_mutex (main thread at step end, first sight of a name on
//     any thread, the watchdog's flush); never on the per-range path once names are warm.
//   - pending completions: behind pending_mutex (main enqueues, watchdog polls).
// Is not: public; nothing here is reachable from probe.h.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collective_table.h"
#include "learned_bounds.h"
#include "name_table.h"
#include "periodic_thread.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_writer.h"
#include "rankscope/probe/kernel_attribution.h"
#include "rankscope/probe/kernel_tracer.h"
#include "rankscope/probe/log.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe {

inline constexpr uint32_t kMaxTimedDepth = 64;  // frames deeper than this are counted, not timed
inline constexpr int kMaxThreads = 16;          // = the flight recorder's thread slots

struct ThreadState {
  std::atomic<int> tid{0};      // 0 = unclaimed
  int flight_slot = -1;         // the flight recorder's slot, -1 when all were taken
  bool is_main = false;
  uint32_t depth = 0;           // owner thread only
  std::atomic<uint32_t> published_depth{0};  // depth as the watchdog sees it
  struct Frame {
    std::atomic<uint32_t> name{NameTable::kNone};  // NameTable index
    std::atomic<int64_t> begin_ns{0};
  };
  std::array<Frame, kMaxTimedDepth> frames{};
  // Capture-window detail of this thread; locked only inside the window.
  std::mutex trace_mutex;
  std::vector<format::TraceRange> trace;
};

// Main thread: per-name totals of the step in progress.
struct StepAggregates {
  std::array<uint32_t, NameTable::kCapacity> count{};
  std::array<int64_t, NameTable::kCapacity> total_ns{};
  std::vector<uint32_t> touched;  // name indices with count > 0, reserved to kCapacity

  void add(uint32_t name, int64_t ns) {
    if (name >= NameTable::kCapacity) return;
    if (count[name]++ == 0) touched.push_back(name);
    total_ns[name] += ns;
  }
  void clear() {
    for (uint32_t n : touched) {
      count[n] = 0;
      total_ns[n] = 0;
    }
    touched.clear();
  }
};

struct StepCounters {
  std::array<double, NameTable::kCapacity> value{};
  std::array<bool, NameTable::kCapacity> set{};
  std::vector<uint32_t> touched;

  double& slot(uint32_t name) {
    if (!set[name]) {
      set[name] = true;
      value[name] = 0;
      touched.push_back(name);
    }
    return value[name];
  }
  void clear() {
    for (uint32_t n : touched) set[n] = false;
    touched.clear();
  }
};

struct ParamInfo {
  uint32_t stream_id = 0;
  int bucket = -1;
  int flight_slot = -1;
};

struct PendingCompletion {
  CollectiveHandle handle;
  std::unique_ptr<CompletionSource> source;
  bool marks_start = false;  // the source says the collective started on the device, not finished
};

struct Probe::Impl final : KernelSink {
  Options options;
  Logger logger;
  std::string host;
  pid_t pid = 0;
  int64_t created_ns = 0;  // also tells this instance from an earlier one at the same address
  bool shut_down = false;
  std::atomic<bool> aborted{false};
  std::atomic<bool> name_table_full_reported{false};

  std::unique_ptr<format::FlightRecorderWriter> flight;
  std::mutex stream_mutex;
  std::unique_ptr<format::EventStreamWriter> stream;
  bool stream_error_reported = false;

  NameTable names;
  std::array<ThreadState, kMaxThreads> threads;
  std::mutex claim_mutex;

  // --- step state (main thread) ---
  std::atomic<int64_t> step{-1};
  int64_t step_begin_ns = 0;
  bool in_step = false;
  std::atomic<bool> capturing{false};
  uint64_t step_first_collective = 0;  // first collective-table index not yet in a StepRecord
  StepAggregates aggregates;
  StepCounters counters;
  format::StepRecord record;  // reused every step: no allocation once warm
  std::vector<format::TraceRange> trace_scratch;
  std::vector<format::GradArrival> grad_arrivals;

  // --- collectives, communicators, parameters ---
  CollectiveTable collectives;
  std::vector<uint32_t> comm_stream_ids;  // by flight recorder comm index
  std::vector<std::string> comm_names;
  std::mutex comm_mutex;                  // registration only
  std::vector<ParamInfo> params;          // main thread

  // --- plug-ins ---
  std::vector<std::unique_ptr<RangeSink>> sinks;
  std::unique_ptr<KernelTracer> tracer;
  TimestampConverter kernel_clock;
  LaunchTable launches;
  std::array<std::atomic<int64_t>, NameTable::kCapacity> kernel_ns{};  // per range name, this step
  std::atomic<int64_t> kernel_ns_outside_ranges{0};  // this step: launched with no range open
  std::atomic<int64_t> kernel_ns_no_launch_seen{0};  // this step: no launch recorded for it
  uint32_t outside_ranges_counter = NameTable::kNone;  // NameTable indices of the two counters
  uint32_t no_launch_seen_counter = NameTable::kNone;
  std::mutex kernel_trace_mutex;
  std::vector<format::TraceKernel> kernel_trace;

  // --- watchdog ---
  std::mutex pending_mutex;
  std::vector<PendingCompletion> pending;
  PeriodicThread watchdog;
  uint64_t watchdog_scan_from = 0;        // watchdog thread only
  int64_t reported_range_begin_ns = 0;    // watchdog thread only: the range already reported
  uint32_t reported_range_name = NameTable::kNone;

  // --- learned bounds (watchdog thread only, except the three atomics the main thread writes) ---
  struct LearnedSite {
    int comm = -1;
    uint32_t name = NameTable::kNone;  // call site
    int slot = -1;                     // flight recorder BoundSlot, -1 when they ran out
    DurationBound bound;
    bool dirty = false;
  };
  std::vector<LearnedSite> learned_sites;   // tens per job: a linear search is fine
  std::optional<DurationBound> step_bound;  // created on the first tick
  bool step_bound_dirty = false;
  int step_bound_slot = -1;
  int next_bound_slot = 0;
  uint64_t learn_cursor = 0;                // first collective-table index not yet learned
  uint64_t steps_seen = 0;                  // steps_ended already consumed
  std::vector<uint64_t> suspected_events;   // open collectives already reported as suspected
  int64_t suspected_step_begin_ns = 0;      // the step already reported as suspected
  std::atomic<int64_t> open_step_begin_ns{0};  // main thread: begin of the step in progress, 0 between
  // main thread: durations of finished steps, step k in [k % size]; steps_ended publishes them.
  std::array<std::atomic<int64_t>, 64> step_durations_ns{};
  std::atomic<uint64_t> steps_ended{0};

  // Returns this thread's state, claiming one on first use; nullptr when all are taken.
  ThreadState* thread_state();
  // This thread's state if it has one, never claiming: for callbacks on any thread.
  ThreadState* thread_state_if_claimed();
  ThreadState* claim_thread_state(int tid, std::string_view thread_name, bool is_main);
  const NameTable::Entry* intern(format::NameKind kind, std::string_view name);
  std::string_view name_of(uint32_t index) const;
  uint32_t stream_id_of(uint32_t index) const;
  // Innermost open range of `ts` (NameTable index), kNone when none.
  uint32_t innermost(const ThreadState* ts) const;
  void complete(const CollectiveHandle& h, bool failed, int64_t now_ns);
  void flush_stream_locked();

  // probe_watchdog.cpp
  void watchdog_tick();
  void poll_pending_completions(int64_t now_ns);
  void detect_stuck(int64_t now_ns);
  // `limit` says what was exceeded ("the 300.000 s watchdog timeout", "its learned bound ...").
  void report_stuck(format::WatchdogKind kind, int comm_index, uint64_t comm_seq, int64_t since_ns,
                    int64_t now_ns, const std::string& what, const std::string& limit, double limit_s);
  // learned_bounds.cpp
  void learn_bounds(int64_t now_ns);
  void detect_past_bounds(int64_t now_ns);
  LearnedSite* learned_site(int comm, uint32_t name);
  void publish_bounds(int64_t now_ns);

  // KernelSink
  void on_launch(uint32_t correlation_id) override;
  void on_kernels(std::span<const KernelActivity> kernels) override;
};

}  // namespace rankscope::probe
