// probe.h — the public API of the rankscope probe, linked into a training program.
//
// Is: init/shutdown, scoped ranges, step markers, collective begin/end, gradient-ready, counters
// and clock alignment; all recorded into a run directory (docs/FORMAT.md): the memory-mapped flight
// recorder (readable while the rank is wedged or after it died), the per-step event stream, NVTX
// ranges (domain "rankscope") and, where a GPU is, CUPTI kernel timings. A watchdog thread keeps the
// heartbeat and reports collectives or ranges open past a timeout, with native stacks.
// Is not: a communicator. The program does its own collectives and tells the probe about them.
// No CUDA, CUPTI, NVTX, NCCL or MPI header is included here (design rule 3); GPU pieces plug in
// through the small interfaces at the bottom.
//
// Threading: ranges may be opened from any thread (each thread gets its own stack slot); steps,
// counters and gradient marks are called from the training (main) thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"
#include "rankscope/format/flight_recorder_writer.h"  // CollectiveDesc
#include "rankscope/probe/log.h"

// Declared, not included: run_metadata.h brings nlohmann/json.hpp, whose parsing cost every
// translation unit that instruments itself (most of the trainer) several seconds.
namespace rankscope::format {
struct RunMetadata;
}

namespace rankscope::probe {

struct Options {
  std::filesystem::path run_dir;  // RANKSCOPE_RUN_DIR
  std::string run_id;             // RANKSCOPE_RUN_ID; generated from time and host when empty
  int rank = 0;                   // RANK / OMPI_COMM_WORLD_RANK / PMI_RANK when read from env
  int world_size = 1;
  int local_rank = 0;
  bool enabled = true;            // RANKSCOPE_DISABLE=1 turns every call into a no-op
  double watchdog_timeout_s = 300;    // RANKSCOPE_WATCHDOG_TIMEOUT; <= 0 keeps only the heartbeat
  double watchdog_poll_s = 0.1;       // RANKSCOPE_WATCHDOG_POLL
  bool watchdog_abort = false;        // RANKSCOPE_WATCHDOG_ABORT=1: SIGABRT self after evidence
  bool watchdog_stacks = true;        // RANKSCOPE_WATCHDOG_STACKS=0 disables stack capture
  // Learned bounds (the fast hang detector; the timeout above stays the ceiling): each collective
  // call site's and the step's typical duration is learned; one running past max(floor, factor x
  // it) is a suspected hang: a flight-recorder event and native stacks, once per item. "It" is the
  // p95 of the last 64 from `hang_warmup` samples on, the longest sample from `hang_early` samples
  // on, and until a step after the first ended the first step's duration (start-up included).
  bool learned_bounds = true;         // RANKSCOPE_HANG_BOUNDS=0 turns it off
  double hang_floor_s = 3.0;          // RANKSCOPE_HANG_FLOOR
  double hang_factor = 10.0;          // RANKSCOPE_HANG_FACTOR
  int64_t hang_warmup = 10;           // RANKSCOPE_HANG_WARMUP (samples; the step skips its first)
  int64_t hang_early = 1;             // RANKSCOPE_HANG_EARLY (samples, the start-up one too, before the early bound; > warmup: none)
  int64_t trace_step_begin = -1;      // capture window (inclusive), RANKSCOPE_TRACE_STEPS=A-B
  int64_t trace_step_end = -1;
  bool nvtx = true;                   // RANKSCOPE_NVTX=0
  bool cupti = true;                  // RANKSCOPE_CUPTI=0
  uint32_t ring_entries = 256;        // collectives remembered per communicator
  // Probe::create applies the environment (the operator's last word, as NCCL_* variables are)
  // unless this is false; tests and programs that pass everything explicitly turn it off.
  bool read_environment = true;

  // Overrides fields from the environment variables named above; rank/world size from the
  // launcher's (OpenMPI, Slurm, torchrun) unless already set by the program. Returns a Status for
  // a malformed value (e.g. RANKSCOPE_TRACE_STEPS=x).
  Status apply_environment();
};

// Parses "A-B" or "A" into an inclusive step window.
Result<std::pair<int64_t, int64_t>> parse_step_window(std::string_view text);

// Opaque handle of a registered communicator and of one collective in flight.
struct CommHandle {
  int index = -1;
  bool valid() const { return index >= 0; }
};
struct CollectiveHandle {
  int comm = -1;
  uint64_t seq = 0;
  uint64_t event_index = 0;  // internal: index in the probe's collective table
  bool valid() const { return comm >= 0; }
};
struct ParamHandle {
  int index = -1;
};

// Something that can tell whether an asynchronous operation (a CUDA event) has finished; the
// watchdog thread polls it. Implemented in the CUDA leaf; the probe never sees cuda*.h.
class CompletionSource {
 public:
  virtual ~CompletionSource() = default;
  virtual bool poll_done() = 0;   // true once complete; called from the watchdog thread
  // After poll_done() returned true: whether the operation failed (a CUDA error).
  virtual bool failed() const { return false; }
};

// Transport for clock alignment: exchanges one timestamp with rank 0. Implemented by the program's
// communicator (MPI, NCCL bootstrap). On rank 0, `serve(peer)` answers one ping from `peer`.
class ClockExchange {
 public:
  virtual ~ClockExchange() = default;
  // Non-root: sends t1 to rank 0, returns rank 0's reply time t2.
  virtual int64_t ping_root(int64_t t1_ns) = 0;
  // Root: receives one ping from `peer` and replies with its own clock.
  virtual void serve(int peer) = 0;
  virtual void barrier() = 0;
};

// A sink that mirrors ranges elsewhere (NVTX). Implemented in a leaf target. push() is called
// after the range is open in the recorder, pop() before it closes.
class RangeSink {
 public:
  virtual ~RangeSink() = default;
  virtual void push(std::string_view name) = 0;
  virtual void pop() = 0;
};

// GPU kernel activity source (CUPTI). Implemented in a leaf target; see kernel_tracer.h.
class KernelTracer;

class Probe {
 public:
  // Opens the run directory (creating it), the flight recorder and event stream of this rank,
  // and starts the watchdog. Prints one line per degraded capability (no NVTX, no GPU timing).
  static Result<std::unique_ptr<Probe>> create(const Options& options);
  // A probe that records nothing: every call returns at once. For probe-off measurements.
  static std::unique_ptr<Probe> disabled();
  ~Probe();  // shutdown(): marks the rank finished, flushes, stops the watchdog

  void shutdown();
  void mark_aborted();  // before the program exits on an error

  bool enabled() const;
  int rank() const;
  int world_size() const;
  const Options& options() const;  // after apply_environment and defaults (run id, run dir)
  const Logger& logger() const;
  int64_t current_step() const;    // -1 before the first begin_step
  const std::filesystem::path& run_dir() const;
  const std::string& run_id() const;

  // Rank 0 writes run.json (world size, layout, model, ...). Others may call it; it is ignored.
  Status write_run_metadata(const format::RunMetadata& meta);

  // Clock alignment over the program's communicator: every rank calls it together.
  Status align_clocks(ClockExchange& exchange, int samples = 16);

  // --- steps and ranges ---
  // A main-thread range counts in the step in which it closes; counters set outside a step are
  // dropped; collectives issued between two steps land in the next one. Other threads' ranges go
  // to the flight recorder and, inside the capture window, to the trace — not to the aggregates.
  void begin_step(int64_t step);
  void end_step();  // writes the step's record and flushes the event stream (one write(2))
  void push_range(std::string_view name);
  // A main-thread range that is already over, timed by the caller on this clock (now_unix_ns):
  // phases that ran before the probe existed (init/launch from the process's start, the MPI
  // start in init/comm). Counted in the current step and the capture window like a closed range;
  // range sinks (NVTX, fault injection) are not told: it is history.
  void record_range(std::string_view name, int64_t begin_ns, int64_t end_ns);
  void pop_range();

  // --- collectives ---
  CommHandle register_comm(std::string_view name, int size, int rank_in_comm);
  CollectiveHandle collective_enqueue(CommHandle comm, const format::CollectiveDesc& desc);
  void collective_start(const CollectiveHandle& h);
  void collective_complete(const CollectiveHandle& h, bool failed = false);
  // Completion known later (a CUDA event): the watchdog polls `source` and completes `h`. The
  // caller has returned from the call: the recorder marks the collective host_returned.
  void collective_complete_when(const CollectiveHandle& h, std::unique_ptr<CompletionSource> source);
  // Start known later (a CUDA event recorded on the stream just before the collective's kernel):
  // the watchdog marks `h` started when `source` completes. Call it before collective_complete_when.
  void collective_start_when(const CollectiveHandle& h, std::unique_ptr<CompletionSource> source);

  // --- gradients ---
  ParamHandle register_param(std::string_view name, uint64_t numel, int bucket = -1);
  void set_param_bucket(ParamHandle p, int bucket);
  void begin_backward();
  void grad_ready(ParamHandle p);
  void end_backward();

  // --- counters: a named value for the current step (last write wins) ---
  void counter(std::string_view name, double value);
  void counter_add(std::string_view name, double delta);

  // --- optional plug-ins: attach before the first range (see plugins.h) ---
  void add_range_sink(std::unique_ptr<RangeSink> sink);
  // Starts `tracer`; when it cannot start, prints one line ("GPU kernel timing unavailable (...)"),
  // drops it and returns the reason. Everything else keeps working.
  Status set_kernel_tracer(std::unique_ptr<KernelTracer> tracer);

  struct Impl;

 private:
  explicit Probe(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// RAII range: ScopedRange r(probe, "forward/embed"); probe may be null.
class ScopedRange {
 public:
  ScopedRange(Probe* probe, std::string_view name) : probe_(probe) {
    if (probe_) probe_->push_range(name);
  }
  ~ScopedRange() {
    if (probe_) probe_->pop_range();
  }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

 private:
  Probe* probe_;
};

}  // namespace rankscope::probe
