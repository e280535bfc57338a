// probe.cpp — Probe's public API: creation, ranges, steps, collectives, gradients, counters.
//
// The per-range and per-collective paths take no lock and allocate nothing once the names they use
// have been seen (NameTable) and the thread has its slot (a thread_local cache keyed by the probe
// instance). The watchdog's side lives in probe_watchdog.cpp; the state and its thread ownership
// are described in probe_impl.h.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include <system_error>

#include <fmt/format.h>

#include "probe_impl.h"
#include "symbolizer.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/kernel_counters.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/probe/clock_alignment.h"

namespace rankscope::probe {
namespace {

// Main-thread ranges up to this depth (e.g. "step" > "forward/block3/attn") set the flight
// recorder's phase when they open; finer ranges do not, to keep the per-range cost flat.
constexpr uint32_t kPhaseDepth = 3;

// An empty name with a non-null data pointer: the flight recorder memcpy()s names, and memcpy from
// a null pointer is undefined even for zero bytes (UBSan says so).
constexpr std::string_view kNoName{""};

// The only mutable thread_local of the probe: which ThreadState this thread uses in which probe.
// `owner_created_ns` tells a new probe at a recycled address from the old one.
struct ThreadCache {
  const Probe::Impl* owner = nullptr;
  int64_t owner_created_ns = 0;
  ThreadState* state = nullptr;
};
thread_local ThreadCache t_cache;

int current_tid() { return static_cast<int>(::syscall(SYS_gettid)); }

std::string current_thread_name() {
  char name[32] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "thread";
  return name;
}

std::string generated_run_id(const std::string& host) {
  // Ranks of one job should agree without talking: use the launcher's job id when there is one.
  for (const char* var : {"SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"}) {
    if (const char* v = std::getenv(var); v && *v) return fmt::format("job-{}", v);
  }
  int64_t now_s = now_unix_ns() / 1'000'000'000;
  return fmt::format("{}-{}-{}", host, now_s, ::getpid());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Impl helpers

ThreadState* Probe::Impl::thread_state() {
  ThreadCache& c = t_cache;
  if (c.owner == this && c.owner_created_ns == created_ns) return c.state;
  ThreadState* ts = claim_thread_state(current_tid(), current_thread_name(), /*is_main=*/false);
  c.owner = this;
  c.owner_created_ns = created_ns;
  c.state = ts;  // nullptr when full: cached too, so a full table costs nothing per call
  return ts;
}

ThreadState* Probe::Impl::thread_state_if_claimed() {
  ThreadCache& c = t_cache;
  if (c.owner == this && c.owner_created_ns == created_ns) return c.state;
  // Not cached: the main thread (claimed in create) or a thread that never opened a range, e.g. a
  // library's own thread launching kernels. Find it without claiming; a miss is not cached, so the
  // thread still claims a slot through thread_state() when it opens its first range.
  const int tid = current_tid();
  for (ThreadState& ts : threads) {
    if (ts.tid.load(std::memory_order_acquire) != tid) continue;
    c.owner = this;
    c.owner_created_ns = created_ns;
    c.state = &ts;
    return &ts;
  }
  return nullptr;
}

ThreadState* Probe::Impl::claim_thread_state(int tid, std::string_view thread_name, bool is_main) {
  std::lock_guard<std::mutex> lock(claim_mutex);
  for (ThreadState& ts : threads) {
    if (ts.tid.load(std::memory_order_relaxed) == tid) return &ts;
  }
  for (ThreadState& ts : threads) {
    if (ts.tid.load(std::memory_order_relaxed) != 0) continue;
    ts.flight_slot = flight->claim_thread_slot(tid, thread_name);
    ts.is_main = is_main;
    ts.trace.reserve(1024);
    ts.tid.store(tid, std::memory_order_release);
    logger.info(LogSubsys::kRange, "thread {} ('{}') got range slot {}", tid, thread_name, ts.flight_slot);
    return &ts;
  }
  logger.warn(LogSubsys::kRange, "more than {} threads opened ranges; thread {} ('{}') is not recorded",
              kMaxThreads, tid, thread_name);
  return nullptr;
}

const NameTable::Entry* Probe::Impl::intern(format::NameKind kind, std::string_view name) {
  const NameTable::Entry* e = names.find_or_insert(kind, name, [this](format::NameKind k, std::string_view n) {
    // Kernel names arrive mangled; demangle once per distinct kernel, here, off the hot path.
    std::string readable = k == format::NameKind::kKernel ? demangle_symbol(std::string(n).c_str()) : std::string(n);
    std::lock_guard<std::mutex> lock(stream_mutex);
    return stream->intern(k, readable);
  });
  if (e == nullptr && !name_table_full_reported.exchange(true)) {
    logger.warn(LogSubsys::kRange, "more than {} distinct names; '{}' and later new names are not aggregated",
                NameTable::kCapacity, name);
  }
  return e;
}

std::string_view Probe::Impl::name_of(uint32_t index) const {
  const NameTable::Entry* e = names.entry(index);
  return e ? std::string_view(e->name) : kNoName;
}

uint32_t Probe::Impl::stream_id_of(uint32_t index) const {
  const NameTable::Entry* e = names.entry(index);
  return e ? e->stream_id : NameTable::kNoStreamId;
}

uint32_t Probe::Impl::innermost(const ThreadState* ts) const {
  if (ts == nullptr) return NameTable::kNone;
  uint32_t depth = ts->published_depth.load(std::memory_order_acquire);
  if (depth == 0) return NameTable::kNone;
  uint32_t d = std::min(depth, kMaxTimedDepth) - 1;
  return ts->frames[d].name.load(std::memory_order_relaxed);
}

void Probe::Impl::complete(const CollectiveHandle& h, bool failed, int64_t now_ns) {
  flight->collective_complete(h.comm, h.seq, now_ns, failed);
  auto before = collectives.mark_completed(h.event_index, h.comm, h.seq, now_ns, failed);
  if (before && before->reported) {
    logger.warn(LogSubsys::kWatchdog, "{} #{} on {} completed after {:.3f} s (reported as stuck earlier)",
                format::op_name(before->op), h.seq, comm_names[static_cast<size_t>(h.comm)],
                static_cast<double>(now_ns - before->enqueue_ns) * 1e-9);
  }
}

void Probe::Impl::flush_stream_locked() {
  Status s = stream->flush();
  if (!s.ok() && !stream_error_reported) {
    stream_error_reported = true;
    logger.warn(LogSubsys::kStream, "event stream flush failed: {} (later failures are not repeated)", s.to_string());
  }
}

void Probe::Impl::on_launch(uint32_t correlation_id) {
  // Launch callbacks come from any thread that launches (cuBLASLt, NCCL, ...): a thread that never
  // opened a range has none open now, and must not take one of the recorder's thread slots.
  uint32_t range = innermost(thread_state_if_claimed());
  launches.record(correlation_id, range == NameTable::kNone ? LaunchTable::kNoRange : range);
}

void Probe::Impl::on_kernels(std::span<const KernelActivity> kernels) {
  bool detail = capturing.load(std::memory_order_relaxed);
  for (const KernelActivity& k : kernels) {
    const KernelAttribution where = launches.attribute(k.correlation_id);
    const bool in_range = where.kind == KernelAttribution::Kind::kRange && where.range_token < NameTable::kCapacity;
    int64_t duration = k.end_ns - k.begin_ns;
    if (duration > 0) {
      std::atomic<int64_t>& booked = in_range ? kernel_ns[where.range_token]
                                     : where.kind == KernelAttribution::Kind::kOutsideRanges ? kernel_ns_outside_ranges
                                                                                             : kernel_ns_no_launch_seen;
      booked.fetch_add(duration, std::memory_order_relaxed);
    }
    if (!detail) continue;
    const NameTable::Entry* kname = intern(format::NameKind::kKernel, k.name);
    format::TraceKernel t{};
    t.name_id = kname ? kname->stream_id : NameTable::kNoStreamId;
    t.range_id = in_range ? stream_id_of(where.range_token) : NameTable::kNoStreamId;
    t.stream = k.stream;
    t.device = k.device;
    t.begin_ns = kernel_clock.to_ours(k.begin_ns);
    t.end_ns = kernel_clock.to_ours(k.end_ns);
    std::lock_guard<std::mutex> lock(kernel_trace_mutex);
    kernel_trace.push_back(t);
  }
}

// ---------------------------------------------------------------------------------------------
// Creation and shutdown

Probe::Probe(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Probe::~Probe() { shutdown(); }

std::unique_ptr<Probe> Probe::disabled() { return std::unique_ptr<Probe>(new Probe(nullptr)); }

Result<std::unique_ptr<Probe>> Probe::create(const Options& given) {
  Options options = given;
  if (options.read_environment) RS_RETURN_IF_ERROR(options.apply_environment());
  if (!options.enabled) return disabled();
  if (options.world_size <= 0 || options.rank < 0 || options.rank >= options.world_size) {
    return invalid_argument(fmt::format("rank {} is not inside a world of {}", options.rank, options.world_size));
  }

  auto impl = std::make_unique<Impl>();
  impl->logger = Logger::from_environment(options.rank);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  impl->host = host;
  impl->pid = ::getpid();
  impl->created_ns = now_unix_ns();
  if (options.run_id.empty()) options.run_id = generated_run_id(impl->host);
  if (options.run_dir.empty()) options.run_dir = std::filesystem::path("rankscope-runs") / options.run_id;
  std::error_code ec;
  std::filesystem::create_directories(options.run_dir, ec);
  if (ec) return io_error(fmt::format("cannot create run directory {}: {}", options.run_dir.string(), ec.message()));

  format::FlightIdentity identity;
  identity.rank = options.rank;
  identity.world_size = options.world_size;
  identity.local_rank = options.local_rank;
  identity.pid = impl->pid;
  identity.host = impl->host;
  identity.run_id = options.run_id;
  identity.start_ns = impl->created_ns;
  format::FlightLayoutParams layout;
  layout.max_threads = kMaxThreads;
  layout.ring_entries = options.ring_entries;
  RS_ASSIGN_OR_RETURN(impl->flight, format::FlightRecorderWriter::create(
                                        format::flight_recorder_path(options.run_dir, options.rank), identity, layout));
  // A collective's record has two writers: the calling thread (enqueue, host returned) and the
  // watchdog thread, which marks device-side start and completion of stream-ordered collectives.
  impl->flight->set_concurrent_collective_writers(true);
  format::EventStreamHeader header;
  header.rank = options.rank;
  header.world_size = options.world_size;
  header.created_ns = impl->created_ns;
  header.run_id = options.run_id;
  RS_ASSIGN_OR_RETURN(impl->stream, format::EventStreamWriter::create(
                                        format::event_stream_path(options.run_dir, options.rank), header));
  impl->options = options;

  // Everything the hot paths append to is sized now, so steady state never allocates.
  impl->aggregates.touched.reserve(NameTable::kCapacity);
  impl->counters.touched.reserve(NameTable::kCapacity);
  impl->record.ranges.reserve(NameTable::kCapacity);
  impl->record.collectives.reserve(CollectiveTable::kCapacity);
  impl->record.counters.reserve(NameTable::kCapacity);
  impl->comm_stream_ids.assign(layout.max_comms, NameTable::kNoStreamId);
  impl->comm_names.assign(layout.max_comms, std::string{});
  impl->params.reserve(layout.max_params);
  impl->grad_arrivals.reserve(layout.max_params);

  impl->claim_thread_state(current_tid(), "main", /*is_main=*/true);
  impl->flight->set_process_state(format::ProcessState::kRunning);
  impl->flight->heartbeat(now_unix_ns());

  Impl* raw = impl.get();
  raw->watchdog.start("rs-watchdog", options.watchdog_poll_s, [raw] { raw->watchdog_tick(); });
  raw->logger.info(LogSubsys::kInit, "rank {}/{} pid {} on {}: run {} in {} (watchdog {:.1f} s, poll {:.2f} s)",
                   options.rank, options.world_size, raw->pid, raw->host, options.run_id,
                   options.run_dir.string(), options.watchdog_timeout_s, options.watchdog_poll_s);
  return std::unique_ptr<Probe>(new Probe(std::move(impl)));
}

void Probe::shutdown() {
  if (!impl_ || impl_->shut_down) return;
  Impl& p = *impl_;
  if (p.in_step) end_step();  // keep the partial step rather than lose it
  p.watchdog.stop();
  if (p.tracer) {
    p.tracer->flush();
    p.tracer->stop();
  }
  int64_t now = now_unix_ns();
  if (!p.aborted) p.flight->set_process_state(format::ProcessState::kFinished);
  p.flight->heartbeat(now);
  p.flight->sync();
  {
    std::lock_guard<std::mutex> lock(p.stream_mutex);
    p.stream->write_end(now);
    p.flush_stream_locked();
  }
  p.shut_down = true;
}

void Probe::mark_aborted() {
  if (!impl_) return;
  Impl& p = *impl_;
  p.aborted = true;
  p.flight->set_process_state(format::ProcessState::kAborted);
  p.flight->heartbeat(now_unix_ns());
  p.flight->sync();
  std::lock_guard<std::mutex> lock(p.stream_mutex);
  p.flush_stream_locked();
}

bool Probe::enabled() const { return impl_ != nullptr; }
int Probe::rank() const { return impl_ ? impl_->options.rank : 0; }
int Probe::world_size() const { return impl_ ? impl_->options.world_size : 1; }
int64_t Probe::current_step() const { return impl_ ? impl_->step.load(std::memory_order_relaxed) : -1; }

const Options& Probe::options() const {
  static const Options kDisabledOptions = [] {
    Options o;
    o.enabled = false;
    return o;
  }();
  return impl_ ? impl_->options : kDisabledOptions;
}
const std::filesystem::path& Probe::run_dir() const { return options().run_dir; }
const std::string& Probe::run_id() const { return options().run_id; }
const Logger& Probe::logger() const {
  static const Logger kQuiet;
  return impl_ ? impl_->logger : kQuiet;
}

Status Probe::write_run_metadata(const format::RunMetadata& meta) {
  if (!impl_ || impl_->options.rank != 0) return {};
  format::RunMetadata m = meta;
  if (m.run_id.empty()) m.run_id = impl_->options.run_id;
  if (m.created_ns == 0) m.created_ns = impl_->created_ns;
  RS_RETURN_IF_ERROR(format::write_run_metadata(impl_->options.run_dir, m));
  return {};
}

Status Probe::align_clocks(ClockExchange& exchange, int samples) {
  if (!impl_) return {};
  Impl& p = *impl_;
  RS_ASSIGN_OR_RETURN(ClockEstimate est, measure_clock_offset(exchange, p.options.rank, p.options.world_size,
                                                              samples, [] { return now_unix_ns(); }));
  p.flight->set_clock(est.offset_ns, est.uncertainty_ns);
  format::ClockRecord record{};
  record.offset_ns = est.offset_ns;
  record.uncertainty_ns = est.uncertainty_ns;
  record.measured_at_ns = now_unix_ns();
  record.samples = est.samples;
  {
    std::lock_guard<std::mutex> lock(p.stream_mutex);
    p.stream->write_clock(record);
    p.flush_stream_locked();
  }
  p.logger.info(LogSubsys::kClock, "offset to rank 0: {} ns +- {} ns (best round trip {} ns of {} samples)",
                est.offset_ns, est.uncertainty_ns, est.round_trip_ns, est.samples);
  return {};
}

// ---------------------------------------------------------------------------------------------
// Steps and ranges

void Probe::begin_step(int64_t step) {
  if (!impl_) return;
  Impl& p = *impl_;
  if (p.in_step) end_step();  // a forgotten end_step: close the previous step first
  int64_t now = now_unix_ns();
  p.step.store(step, std::memory_order_relaxed);
  p.step_begin_ns = now;
  p.in_step = true;
  p.capturing.store(p.options.trace_step_begin >= 0 && step >= p.options.trace_step_begin &&
                        step <= p.options.trace_step_end,
                    std::memory_order_relaxed);
  // step_first_collective is where the last end_step stopped, so collectives issued between two
  // steps (a communication thread finishing a bucket) land in the next step rather than nowhere.
  p.aggregates.clear();
  p.counters.clear();
  p.grad_arrivals.clear();
  p.flight->set_step(step, now);
  p.flight->heartbeat(now);
  p.open_step_begin_ns.store(now, std::memory_order_release);
}

void Probe::end_step() {
  if (!impl_ || !impl_->in_step) return;
  Impl& p = *impl_;
  if (p.tracer) p.tracer->flush();  // delivers kernels before we read kernel_ns (outside stream_mutex)
  int64_t now = now_unix_ns();
  bool detail = p.capturing.load(std::memory_order_relaxed);
  format::StepRecord& rec = p.record;
  rec.step = p.step.load(std::memory_order_relaxed);
  rec.begin_ns = p.step_begin_ns;
  rec.end_ns = now;
  // For the watchdog's learned step bound: the duration, then the count that publishes it.
  p.open_step_begin_ns.store(0, std::memory_order_relaxed);
  const uint64_t ended = p.steps_ended.load(std::memory_order_relaxed);
  p.step_durations_ns[ended % p.step_durations_ns.size()].store(now - p.step_begin_ns, std::memory_order_relaxed);
  p.steps_ended.store(ended + 1, std::memory_order_release);
  rec.ranges.clear();
  rec.collectives.clear();
  rec.counters.clear();

  for (uint32_t n : p.aggregates.touched) {
    rec.ranges.push_back({p.stream_id_of(n), p.aggregates.count[n], p.aggregates.total_ns[n],
                          p.kernel_ns[n].exchange(0, std::memory_order_relaxed)});
  }
  if (p.tracer) {  // kernel time under ranges that did not close in this step (or other threads')
    uint32_t n_names = p.names.size();
    for (uint32_t n = 0; n < n_names; ++n) {
      if (p.aggregates.count[n] != 0) continue;
      int64_t k = p.kernel_ns[n].exchange(0, std::memory_order_relaxed);
      if (k != 0) rec.ranges.push_back({p.stream_id_of(n), 0, 0, k});
    }
  }

  uint64_t last = p.collectives.next_index();
  uint64_t first = std::max(p.step_first_collective,
                            last > CollectiveTable::kCapacity ? last - CollectiveTable::kCapacity : 0);
  for (uint64_t i = first; i < last; ++i) {
    std::optional<CollectiveView> v = p.collectives.view(i);
    if (!v) continue;
    format::CollectiveEvent e{};
    e.comm_id = p.comm_stream_ids[static_cast<size_t>(v->comm)];
    e.op = static_cast<uint8_t>(v->op);
    e.dtype = static_cast<uint8_t>(v->dtype);
    e.state = static_cast<uint8_t>(v->state);
    e.range_id = v->range_id;
    e.seq = v->seq;
    e.bytes = v->bytes;
    e.enqueue_ns = v->enqueue_ns;
    // A blocking CPU collective is never "started" separately: it moves data from its call.
    e.start_ns = v->start_ns != 0 ? v->start_ns : (v->end_ns != 0 ? v->enqueue_ns : 0);
    e.end_ns = v->end_ns;
    rec.collectives.push_back(e);
  }
  if (p.tracer) {  // GPU time no range can claim, so "how much ran outside any range" is always-on
    p.counters.slot(p.outside_ranges_counter) =
        static_cast<double>(p.kernel_ns_outside_ranges.exchange(0, std::memory_order_relaxed));
    p.counters.slot(p.no_launch_seen_counter) =
        static_cast<double>(p.kernel_ns_no_launch_seen.exchange(0, std::memory_order_relaxed));
  }
  for (uint32_t n : p.counters.touched) rec.counters.push_back({p.stream_id_of(n), 0, p.counters.value[n]});

  if (detail) {
    p.trace_scratch.clear();
    for (ThreadState& ts : p.threads) {
      if (ts.tid.load(std::memory_order_acquire) == 0) continue;
      std::lock_guard<std::mutex> lock(ts.trace_mutex);
      p.trace_scratch.insert(p.trace_scratch.end(), ts.trace.begin(), ts.trace.end());
      ts.trace.clear();
    }
  }
  std::vector<format::TraceKernel> kernels;
  if (detail) {
    std::lock_guard<std::mutex> lock(p.kernel_trace_mutex);
    kernels.swap(p.kernel_trace);
  }
  {
    std::lock_guard<std::mutex> lock(p.stream_mutex);
    p.stream->write_step(rec);
    if (detail) {
      p.stream->write_trace_ranges(rec.step, p.trace_scratch);
      if (!kernels.empty()) p.stream->write_trace_kernels(rec.step, kernels);
      if (!p.grad_arrivals.empty()) p.stream->write_grad_arrivals(rec.step, p.grad_arrivals);
    }
    p.flush_stream_locked();  // one write(2) per step: a crash loses at most the step in progress
  }
  p.flight->heartbeat(now);
  p.step_first_collective = last;
  p.in_step = false;
  p.capturing.store(false, std::memory_order_relaxed);
}

void Probe::record_range(std::string_view name, int64_t begin_ns, int64_t end_ns) {
  if (!impl_ || end_ns < begin_ns) return;
  Impl& p = *impl_;
  const NameTable::Entry* e = p.intern(format::NameKind::kRange, name);
  if (e == nullptr) return;
  ThreadState* ts = p.thread_state();
  if (ts == nullptr || !ts->is_main) return;
  if (p.in_step) p.aggregates.add(e->index, end_ns - begin_ns);
  if (p.capturing.load(std::memory_order_relaxed)) {
    format::TraceRange t{};
    t.name_id = p.stream_id_of(e->index);
    t.tid = static_cast<uint32_t>(ts->tid.load(std::memory_order_relaxed));
    t.begin_ns = begin_ns;
    t.end_ns = end_ns;
    t.depth = ts->depth;
    std::lock_guard<std::mutex> lock(ts->trace_mutex);
    ts->trace.push_back(t);
  }
}

void Probe::push_range(std::string_view name) {
  if (!impl_) return;
  Impl& p = *impl_;
  const NameTable::Entry* e = p.intern(format::NameKind::kRange, name);
  int64_t now = now_unix_ns();
  ThreadState* ts = p.thread_state();
  if (ts != nullptr) {
    if (ts->flight_slot >= 0) p.flight->push_range(ts->flight_slot, name, now);
    uint32_t d = ts->depth++;
    if (d < kMaxTimedDepth) {
      ts->frames[d].name.store(e ? e->index : NameTable::kNone, std::memory_order_relaxed);
      ts->frames[d].begin_ns.store(now, std::memory_order_relaxed);
    }
    ts->published_depth.store(d + 1, std::memory_order_release);
    if (ts->is_main && d < kPhaseDepth) p.flight->set_phase(name);
  }
  // Sinks run once the range is open: a sink that sleeps or blocks (the trainer's fault
  // injection) does so inside the range, as the recorder's stack and the step aggregates show.
  for (auto& sink : p.sinks) sink->push(name);
}

void Probe::pop_range() {
  if (!impl_) return;
  Impl& p = *impl_;
  int64_t now = now_unix_ns();
  for (auto& sink : p.sinks) sink->pop();
  ThreadState* ts = p.thread_state();
  if (ts == nullptr || ts->depth == 0) return;  // unbalanced pop: nothing to close
  uint32_t d = --ts->depth;
  ts->published_depth.store(d, std::memory_order_release);
  if (ts->flight_slot >= 0) p.flight->pop_range(ts->flight_slot);
  if (d >= kMaxTimedDepth) return;
  uint32_t name = ts->frames[d].name.load(std::memory_order_relaxed);
  int64_t begin = ts->frames[d].begin_ns.load(std::memory_order_relaxed);
  if (ts->is_main) {
    if (p.in_step) p.aggregates.add(name, now - begin);
    // The phase is updated on push only (half the cost); it is cleared when the main thread
    // leaves its outermost range, so an idle rank does not claim to be in its last phase.
    if (d == 0) p.flight->set_phase(kNoName);
  }
  if (name != NameTable::kNone && p.capturing.load(std::memory_order_relaxed)) {
    format::TraceRange t{};
    t.name_id = p.stream_id_of(name);
    t.tid = static_cast<uint32_t>(ts->tid.load(std::memory_order_relaxed));
    t.begin_ns = begin;
    t.end_ns = now;
    t.depth = d;
    std::lock_guard<std::mutex> lock(ts->trace_mutex);
    ts->trace.push_back(t);
  }
}

// ---------------------------------------------------------------------------------------------
// Collectives

CommHandle Probe::register_comm(std::string_view name, int size, int rank_in_comm) {
  if (!impl_) return {};
  Impl& p = *impl_;
  std::lock_guard<std::mutex> lock(p.comm_mutex);
  int index = p.flight->register_comm(name, size, rank_in_comm);
  if (index < 0 || static_cast<size_t>(index) >= p.comm_stream_ids.size()) {
    p.logger.warn(LogSubsys::kColl, "communicator '{}' not recorded: all {} communicator slots are taken",
                  name, p.comm_stream_ids.size());
    return {};
  }
  const NameTable::Entry* e = p.intern(format::NameKind::kComm, name);
  p.comm_stream_ids[static_cast<size_t>(index)] = e ? e->stream_id : NameTable::kNoStreamId;
  p.comm_names[static_cast<size_t>(index)] = std::string(name);
  p.logger.info(LogSubsys::kColl, "communicator '{}' (size {}, rank {}) is slot {}", name, size, rank_in_comm, index);
  return CommHandle{index};
}

CollectiveHandle Probe::collective_enqueue(CommHandle comm, const format::CollectiveDesc& desc) {
  if (!impl_ || !comm.valid()) return {};
  Impl& p = *impl_;
  int64_t now = now_unix_ns();
  uint32_t inner = p.innermost(p.thread_state());
  std::string_view range = p.name_of(inner);
  int64_t step = p.step.load(std::memory_order_relaxed);
  uint64_t seq = p.flight->collective_enqueue(comm.index, desc, step, range, now);
  uint64_t index = p.collectives.add(comm.index, seq, desc.op, desc.dtype,
                                     p.stream_id_of(inner), inner,
                                     desc.bytes, now);
  return CollectiveHandle{comm.index, seq, index};
}

void Probe::collective_start(const CollectiveHandle& h) {
  if (!impl_ || !h.valid()) return;
  int64_t now = now_unix_ns();
  impl_->flight->collective_start(h.comm, h.seq, now);
  impl_->collectives.mark_started(h.event_index, h.comm, h.seq, now);
}

void Probe::collective_complete(const CollectiveHandle& h, bool failed) {
  if (!impl_ || !h.valid()) return;
  impl_->complete(h, failed, now_unix_ns());
}

void Probe::collective_complete_when(const CollectiveHandle& h, std::unique_ptr<CompletionSource> source) {
  if (!impl_ || !h.valid()) return;
  if (!source) {
    collective_complete(h);
    return;
  }
  Impl& p = *impl_;
  p.flight->collective_host_returned(h.comm, h.seq);
  {
    std::lock_guard<std::mutex> lock(p.pending_mutex);
    p.pending.push_back(PendingCompletion{h, std::move(source), false});
  }
  p.watchdog.set_fast(true);
}

void Probe::collective_start_when(const CollectiveHandle& h, std::unique_ptr<CompletionSource> source) {
  if (!impl_ || !h.valid()) return;
  if (!source) {
    collective_start(h);
    return;
  }
  Impl& p = *impl_;
  {
    std::lock_guard<std::mutex> lock(p.pending_mutex);
    p.pending.push_back(PendingCompletion{h, std::move(source), true});
  }
  p.watchdog.set_fast(true);
}

// ---------------------------------------------------------------------------------------------
// Gradients and counters

ParamHandle Probe::register_param(std::string_view name, uint64_t numel, int bucket) {
  if (!impl_) return {};
  Impl& p = *impl_;
  int slot = p.flight->register_param(name, bucket, numel);
  if (slot < 0 || p.params.size() == p.params.capacity()) {
    p.logger.warn(LogSubsys::kInit, "parameter '{}' not recorded: all gradient slots are taken", name);
    return {};
  }
  const NameTable::Entry* e = p.intern(format::NameKind::kParam, name);
  p.params.push_back(ParamInfo{e ? e->stream_id : NameTable::kNoStreamId, bucket, slot});
  return ParamHandle{static_cast<int>(p.params.size() - 1)};
}

void Probe::set_param_bucket(ParamHandle param, int bucket) {
  if (!impl_ || param.index < 0 || static_cast<size_t>(param.index) >= impl_->params.size()) return;
  ParamInfo& info = impl_->params[static_cast<size_t>(param.index)];
  info.bucket = bucket;
  impl_->flight->set_param_bucket(info.flight_slot, bucket);
}

void Probe::begin_backward() {
  if (!impl_) return;
  impl_->flight->begin_backward(impl_->step.load(std::memory_order_relaxed), now_unix_ns());
}

void Probe::grad_ready(ParamHandle param) {
  if (!impl_ || param.index < 0 || static_cast<size_t>(param.index) >= impl_->params.size()) return;
  Impl& p = *impl_;
  const ParamInfo& info = p.params[static_cast<size_t>(param.index)];
  int64_t now = now_unix_ns();
  p.flight->grad_arrived(info.flight_slot, now);
  if (p.capturing.load(std::memory_order_relaxed) && p.grad_arrivals.size() < p.grad_arrivals.capacity()) {
    p.grad_arrivals.push_back(format::GradArrival{info.stream_id, info.bucket, now});
  }
}

void Probe::end_backward() {
  if (!impl_) return;
  impl_->flight->end_backward();
}

void Probe::counter(std::string_view name, double value) {
  if (!impl_) return;
  const NameTable::Entry* e = impl_->intern(format::NameKind::kCounter, name);
  if (e) impl_->counters.slot(e->index) = value;
}

void Probe::counter_add(std::string_view name, double delta) {
  if (!impl_) return;
  const NameTable::Entry* e = impl_->intern(format::NameKind::kCounter, name);
  if (e) impl_->counters.slot(e->index) += delta;
}

// ---------------------------------------------------------------------------------------------
// Plug-ins

void Probe::add_range_sink(std::unique_ptr<RangeSink> sink) {
  if (!impl_ || !sink) return;
  impl_->sinks.push_back(std::move(sink));
}

Status Probe::set_kernel_tracer(std::unique_ptr<KernelTracer> tracer) {
  if (!impl_ || !tracer) return {};
  Impl& p = *impl_;
  // The counters of kernel time no range claims are interned first: nothing to undo if they fail.
  const NameTable::Entry* outside = p.intern(format::NameKind::kCounter, format::kKernelNsOutsideRangesCounter);
  const NameTable::Entry* unseen = p.intern(format::NameKind::kCounter, format::kKernelNsNoLaunchSeenCounter);
  Status started = outside && unseen ? tracer->start(p)
                                     : internal_error("the probe's name table has no room for the GPU kernel counters");
  if (!started.ok()) {
    p.logger.notice(fmt::format("GPU kernel timing unavailable ({})", started.message()));
    return started;
  }
  p.outside_ranges_counter = outside->index;
  p.no_launch_seen_counter = unseen->index;
  KernelTracer* t = tracer.get();
  p.kernel_clock = TimestampConverter::calibrate([t] { return t->timestamp_ns(); }, [] { return now_unix_ns(); });
  p.logger.info(LogSubsys::kCupti, "{} kernel timing on; tracer clock + {} ns = probe clock", t->name(),
                p.kernel_clock.offset_ns());
  p.tracer = std::move(tracer);
  return {};
}

}  // namespace rankscope::probe
