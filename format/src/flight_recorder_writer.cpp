// flight_recorder_writer.cpp — creates, maps and updates a flight recorder file.
#include "rankscope/format/flight_recorder_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "peer_counts_section.h"
#include "rankscope/format/peer_counts.h"
#include "seqlock.h"

namespace rankscope::format {
namespace {

template <size_t N>
void copy_name(char (&dst)[N], std::string_view src) {
  const size_t n = std::min(src.size(), N - 1);
  if (n > 0) std::memcpy(dst, src.data(), n);  // an empty string_view may carry a null data()
  std::memset(dst + n, 0, N - n);
}

uint64_t thread_slot_bytes(const FlightLayoutParams& p) {
  return sizeof(ThreadSlotHeader) + uint64_t(p.max_range_depth) * sizeof(OpenRange);
}
uint64_t comm_slot_bytes(const FlightLayoutParams& p) {
  return sizeof(CommSlotHeader) + uint64_t(p.ring_entries) * sizeof(CollectiveRecord);
}

// Claims a slot whose first word is a `claimed` flag: 0 free, 2 being filled, 1 ready.
bool try_claim(uint32_t& claimed) {
  uint32_t expected = 0;
  return std::atomic_ref<uint32_t>(claimed).compare_exchange_strong(expected, 2, std::memory_order_acq_rel);
}
void publish(uint32_t& claimed) { std::atomic_ref<uint32_t>(claimed).store(1, std::memory_order_release); }

}  // namespace

uint64_t flight_file_bytes(const FlightLayoutParams& p) {
  return sizeof(FlightHeader) + p.max_threads * thread_slot_bytes(p) + p.max_comms * comm_slot_bytes(p) +
         uint64_t(p.max_params) * sizeof(ParamSlot) + uint64_t(kDefaultMaxBounds) * sizeof(BoundSlot) +
         peer_counts_section_bytes(p);
}

Result<std::unique_ptr<FlightRecorderWriter>> FlightRecorderWriter::create(
    const std::filesystem::path& file, const FlightIdentity& id, const FlightLayoutParams& params) {
  if (params.max_threads == 0 || params.max_comms == 0 || params.ring_entries == 0 || params.max_range_depth == 0)
    return invalid_argument("flight recorder layout needs at least one thread, comm, ring entry and range level");
  const uint64_t bytes = flight_file_bytes(params);
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot create {}: {}", file.string(), std::strerror(errno)));
  if (::ftruncate(fd, off_t(bytes)) != 0) {
    const int e = errno;
    ::close(fd);
    return io_error(fmt::format("cannot size {} to {} bytes: {}", file.string(), bytes, std::strerror(e)));
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    return io_error(fmt::format("cannot map {}: {}", file.string(), std::strerror(e)));
  }
  std::unique_ptr<FlightRecorderWriter> w(new FlightRecorderWriter());
  w->base_ = static_cast<uint8_t*>(base);
  w->size_ = bytes;
  // The mapping keeps the file; the descriptor is not needed after mmap. Closing it lets a
  // process hold thousands of recorders (rankscope synth --ranks 16384) within its fd limit.
  ::close(fd);
  w->init(id, params);
  return w;
}

Result<std::unique_ptr<FlightRecorderWriter>> FlightRecorderWriter::create_in_memory(
    std::span<uint8_t> memory, const std::filesystem::path& file, const FlightIdentity& id, const FlightLayoutParams& params) {
  if (params.max_threads == 0 || params.max_comms == 0 || params.ring_entries == 0 || params.max_range_depth == 0)
    return invalid_argument("flight recorder layout needs at least one thread, comm, ring entry and range level");
  const uint64_t bytes = flight_file_bytes(params);
  if (memory.size() < bytes || reinterpret_cast<uintptr_t>(memory.data()) % alignof(FlightHeader) != 0)
    return invalid_argument(fmt::format("{}: {} bytes of memory for a recorder of {}, or misaligned", file.string(),
                                        memory.size(), bytes));
  // Created now, so that a folder that cannot take it is said at once, not at close().
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot create {}: {}", file.string(), std::strerror(errno)));
  ::close(fd);
  std::unique_ptr<FlightRecorderWriter> w(new FlightRecorderWriter());
  w->base_ = memory.data();
  w->size_ = bytes;
  w->save_to_ = file;
  w->init(id, params);
  return w;
}

void FlightRecorderWriter::init(const FlightIdentity& id, const FlightLayoutParams& params) {
  params_ = params;

  // The bytes are zero (a fresh file, or memory zeroed), so only non-zero fields need writing.
  FlightHeader* h = header();
  h->schema_version = kFlightSchemaVersion;
  h->header_bytes = sizeof(FlightHeader);
  h->file_bytes = size_;
  h->layout = params;
  h->thread_slot_bytes = uint32_t(thread_slot_bytes(params));
  h->comm_slot_bytes = uint32_t(comm_slot_bytes(params));
  h->collective_record_bytes = sizeof(CollectiveRecord);
  h->param_slot_bytes = sizeof(ParamSlot);
  h->threads_offset = sizeof(FlightHeader);
  h->comms_offset = h->threads_offset + params.max_threads * thread_slot_bytes(params);
  h->params_offset = h->comms_offset + params.max_comms * comm_slot_bytes(params);
  h->bounds.bounds_offset = h->params_offset + uint64_t(params.max_params) * sizeof(ParamSlot);
  h->bounds.max_bounds = kDefaultMaxBounds;
  h->bounds.bound_slot_bytes = sizeof(BoundSlot);
  init_peer_counts_directory(base_, h->bounds.bounds_offset + uint64_t(kDefaultMaxBounds) * sizeof(BoundSlot), params);
  h->rank = id.rank;
  h->world_size = id.world_size;
  h->local_rank = id.local_rank;
  h->pid = id.pid;
  h->start_ns = id.start_ns;
  copy_name(h->host, id.host);
  copy_name(h->run_id, id.run_id);
  h->live.step = -1;
  h->live.clock_uncertainty_ns = -1;
  h->live.heartbeat_ns = id.start_ns;
  h->watchdog.comm_index = -1;
  h->grad.backward_step = -1;
  for (uint32_t i = 0; i < params.max_params; ++i) param_slot(int(i))->arrived_step = -1;
  // Magic last: a reader never sees a magic with half-written layout fields.
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(h->magic, kFlightMagic, sizeof(kFlightMagic));
  std::atomic_ref<uint32_t>(h->ready).store(1, std::memory_order_release);
}

Status FlightRecorderWriter::close() {
  if (!base_) return {};
  Status status;
  if (save_to_.empty()) {
    ::msync(base_, size_, MS_ASYNC);
    ::munmap(base_, size_);
  } else {
    // The file gets the bytes; blocks of zeros stay holes, as in a mapped recorder never touched there.
    const int fd = ::open(save_to_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && ::ftruncate(fd, off_t(size_)) == 0;
    constexpr size_t kBlock = 4096;
    static const uint8_t kZeros[kBlock] = {};
    for (size_t at = 0; ok && at < size_; at += kBlock) {
      const size_t n = std::min(kBlock, size_ - at);
      if (std::memcmp(base_ + at, kZeros, n) == 0) continue;
      ok = ::pwrite(fd, base_ + at, n, off_t(at)) == ssize_t(n);
    }
    if (!ok) status = io_error(fmt::format("cannot write {}: {}", save_to_.string(), std::strerror(errno)));
    if (fd >= 0) ::close(fd);
  }
  base_ = nullptr;
  return status;
}

FlightRecorderWriter::~FlightRecorderWriter() { (void)close(); }

uint8_t* FlightRecorderWriter::thread_slot(int slot) {
  return base_ + header()->threads_offset + uint64_t(slot) * header()->thread_slot_bytes;
}
uint8_t* FlightRecorderWriter::comm_slot(int comm) {
  return base_ + header()->comms_offset + uint64_t(comm) * header()->comm_slot_bytes;
}
CollectiveRecord* FlightRecorderWriter::ring_record(int comm, uint64_t seq) {
  auto* first = reinterpret_cast<CollectiveRecord*>(comm_slot(comm) + sizeof(CommSlotHeader));
  return first + (seq % params_.ring_entries);
}
ParamSlot* FlightRecorderWriter::param_slot(int param) {
  return reinterpret_cast<ParamSlot*>(base_ + header()->params_offset) + param;
}

void FlightRecorderWriter::heartbeat(int64_t now_ns) {
  std::atomic_ref<int64_t>(header()->live.heartbeat_ns).store(now_ns, std::memory_order_relaxed);
}

void FlightRecorderWriter::set_step(int64_t step, int64_t step_begin_ns) {
  LiveState& l = header()->live;
  seqlock::begin(l.seq);
  l.step = step;
  l.step_begin_ns = step_begin_ns;
  seqlock::end(l.seq);
}

void FlightRecorderWriter::set_phase(std::string_view phase) {
  LiveState& l = header()->live;
  seqlock::begin(l.seq);
  copy_name(l.phase, phase);
  seqlock::end(l.seq);
}

// One atomic store, outside the seqlock: the watchdog thread (abort) and the main thread both set
// it, and live.seq has one writer, the main thread (set_phase on every outermost range). Two plain
// begin()s racing lose an increment and leave the word even while the phase is half written.
void FlightRecorderWriter::set_process_state(ProcessState state) {
  std::atomic_ref<uint32_t>(header()->live.process_state).store(uint32_t(state), std::memory_order_relaxed);
}

void FlightRecorderWriter::set_clock(int64_t offset_ns, int64_t uncertainty_ns) {
  LiveState& l = header()->live;
  seqlock::begin(l.seq);
  l.clock_offset_ns = offset_ns;
  l.clock_uncertainty_ns = uncertainty_ns;
  seqlock::end(l.seq);
}

int FlightRecorderWriter::claim_thread_slot(int tid, std::string_view thread_name) {
  for (uint32_t i = 0; i < params_.max_threads; ++i) {
    auto* h = reinterpret_cast<ThreadSlotHeader*>(thread_slot(int(i)));
    if (!try_claim(h->claimed)) continue;
    h->tid = tid;
    copy_name(h->name, thread_name);
    publish(h->claimed);
    return int(i);
  }
  return -1;
}

void FlightRecorderWriter::push_range(int slot, std::string_view name, int64_t begin_ns) {
  if (slot < 0) return;
  auto* h = reinterpret_cast<ThreadSlotHeader*>(thread_slot(slot));
  auto* stack = reinterpret_cast<OpenRange*>(h + 1);
  seqlock::begin(h->seq);
  const uint32_t depth = h->depth;
  if (depth < params_.max_range_depth) {
    copy_name(stack[depth].name, name);
    stack[depth].begin_ns = begin_ns;
  }
  h->depth = depth + 1;
  seqlock::end(h->seq);
}

void FlightRecorderWriter::pop_range(int slot) {
  if (slot < 0) return;
  auto* h = reinterpret_cast<ThreadSlotHeader*>(thread_slot(slot));
  seqlock::begin(h->seq);
  if (h->depth > 0) --h->depth;
  seqlock::end(h->seq);
}

int FlightRecorderWriter::register_comm(std::string_view name, int size, int rank_in_comm) {
  for (uint32_t i = 0; i < params_.max_comms; ++i) {
    auto* c = reinterpret_cast<CommSlotHeader*>(comm_slot(int(i)));
    if (!try_claim(c->claimed)) continue;
    c->size = size;
    c->rank_in_comm = rank_in_comm;
    copy_name(c->name, name);
    publish(c->claimed);
    return int(i);
  }
  return -1;
}

void FlightRecorderWriter::begin_record(CollectiveRecord* r) {
  if (concurrent_) seqlock::begin_exclusive(r->guard);
  else seqlock::begin(r->guard);
}

uint64_t FlightRecorderWriter::collective_enqueue(int comm, const CollectiveDesc& desc, int64_t step,
                                                  std::string_view range, int64_t now_ns) {
  if (comm < 0) return 0;
  auto* c = reinterpret_cast<CommSlotHeader*>(comm_slot(comm));
  const uint64_t seq = std::atomic_ref<uint64_t>(c->next_seq).fetch_add(1, std::memory_order_acq_rel);
  CollectiveRecord* r = ring_record(comm, seq);
  begin_record(r);
  std::atomic_ref<uint64_t>(r->seq).store(seq, std::memory_order_relaxed);
  r->op = uint8_t(desc.op);
  r->dtype = uint8_t(desc.dtype);
  r->state = uint8_t(CollectiveState::kEnqueued);
  r->flags = 0;
  r->peer = desc.peer;
  r->count = desc.count;
  r->bytes = desc.bytes;
  r->enqueue_ns = now_ns;
  r->start_ns = 0;
  r->end_ns = 0;
  r->step = step;
  copy_name(r->range, range);
  seqlock::end(r->guard);
  if (!desc.send_counts.empty() || !desc.recv_counts.empty())
    write_peer_counts(base_, comm, seq, c->rank_in_comm, desc.send_counts, desc.recv_counts);
  std::atomic_ref<uint64_t>(header()->live.collectives_issued).fetch_add(1, std::memory_order_relaxed);
  return seq;
}

// The record still holds `seq` (the ring has not wrapped past it). Read atomically: with concurrent
// writers a newer enqueue may be rewriting the slot.
static bool holds(CollectiveRecord* r, uint64_t seq) {
  return std::atomic_ref<uint64_t>(r->seq).load(std::memory_order_relaxed) == seq;
}

void FlightRecorderWriter::collective_start(int comm, uint64_t seq, int64_t now_ns) {
  if (comm < 0) return;
  CollectiveRecord* r = ring_record(comm, seq);
  if (!holds(r, seq)) return;  // overwritten by a newer collective: the ring wrapped
  begin_record(r);
  if (holds(r, seq) && r->state == uint8_t(CollectiveState::kEnqueued)) {
    r->start_ns = now_ns;
    r->state = uint8_t(CollectiveState::kStarted);
  }
  seqlock::end(r->guard);
}

void FlightRecorderWriter::collective_host_returned(int comm, uint64_t seq) {
  if (comm < 0) return;
  CollectiveRecord* r = ring_record(comm, seq);
  if (!holds(r, seq)) return;
  begin_record(r);
  if (holds(r, seq)) r->flags = uint8_t(r->flags | kCollectiveHostReturned);
  seqlock::end(r->guard);
}

void FlightRecorderWriter::collective_complete(int comm, uint64_t seq, int64_t now_ns, bool failed) {
  if (comm < 0) return;
  auto* c = reinterpret_cast<CommSlotHeader*>(comm_slot(comm));
  CollectiveRecord* r = ring_record(comm, seq);
  if (holds(r, seq)) {
    begin_record(r);
    if (holds(r, seq)) {
      if (r->start_ns == 0) r->start_ns = r->enqueue_ns;
      r->end_ns = now_ns;
      r->state = uint8_t(failed ? CollectiveState::kFailed : CollectiveState::kCompleted);
    }
    seqlock::end(r->guard);
  }
  std::atomic_ref<uint64_t>(c->completed_count).fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(header()->live.collectives_completed).fetch_add(1, std::memory_order_relaxed);
}

int FlightRecorderWriter::register_param(std::string_view name, int bucket, uint64_t numel) {
  std::atomic_ref<uint32_t> n(header()->grad.n_params);
  uint32_t index = n.load(std::memory_order_relaxed);
  do {
    if (index >= params_.max_params) return -1;
  } while (!n.compare_exchange_weak(index, index + 1, std::memory_order_acq_rel));
  ParamSlot* p = param_slot(int(index));
  copy_name(p->name, name);
  p->bucket = bucket;
  p->numel = numel;
  return int(index);
}

void FlightRecorderWriter::set_param_bucket(int param, int bucket) {
  if (param < 0) return;
  std::atomic_ref<int32_t>(param_slot(param)->bucket).store(bucket, std::memory_order_relaxed);
}

void FlightRecorderWriter::begin_backward(int64_t step, int64_t now_ns) {
  GradState& g = header()->grad;
  seqlock::begin(g.seq);
  g.backward_step = step;
  g.in_backward = 1;
  g.n_arrived = 0;
  g.backward_begin_ns = now_ns;
  seqlock::end(g.seq);
}

void FlightRecorderWriter::grad_arrived(int param, int64_t now_ns) {
  if (param < 0) return;
  GradState& g = header()->grad;
  ParamSlot* p = param_slot(param);
  p->order = std::atomic_ref<uint32_t>(g.n_arrived).fetch_add(1, std::memory_order_relaxed);
  p->arrived_ns = now_ns;
  // Written last: a reader that sees the current step here also sees order and time.
  std::atomic_ref<int64_t>(p->arrived_step).store(g.backward_step, std::memory_order_release);
}

void FlightRecorderWriter::end_backward() {
  GradState& g = header()->grad;
  seqlock::begin(g.seq);
  g.in_backward = 0;
  seqlock::end(g.seq);
}

void FlightRecorderWriter::record_watchdog(const WatchdogEventDesc& e) {
  WatchdogRecord& w = header()->watchdog;
  seqlock::begin(w.seq);
  w.time_ns = e.time_ns;
  w.kind = uint32_t(e.kind);
  w.comm_index = e.comm_index;
  w.comm_seq = e.comm_seq;
  w.waited_ns = e.waited_ns;
  w.event_count += 1;
  copy_name(w.range, e.range);
  copy_name(w.message, e.message);
  copy_name(w.stacks_file, e.stacks_file);
  seqlock::end(w.seq);
}

void FlightRecorderWriter::write_bound(int slot, const BoundDesc& b) {
  if (slot < 0 || uint32_t(slot) >= header()->bounds.max_bounds) return;
  auto* out = reinterpret_cast<BoundSlot*>(base_ + header()->bounds.bounds_offset) + slot;
  seqlock::begin(out->seq);
  out->kind = uint32_t(b.kind);
  out->comm_index = b.comm_index;
  out->samples = b.samples;
  out->warmup = b.warmup;
  out->quantile_ns = b.quantile_ns;
  out->bound_ns = b.bound_ns;
  out->updated_ns = b.updated_ns;
  out->quantile_permille = b.quantile_permille;
  out->window = b.window;
  copy_name(out->comm, b.comm);
  copy_name(out->site, b.site);
  seqlock::end(out->seq);
}

void FlightRecorderWriter::sync() {
  if (base_) ::msync(base_, size_, MS_ASYNC);
}

}  // namespace rankscope::format
