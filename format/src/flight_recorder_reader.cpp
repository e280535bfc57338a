// flight_recorder_reader.cpp — validates and copies a flight recorder into a snapshot.
//
// Every offset is checked against the real byte count, and for its alignment, before it is
// dereferenced: the input may be truncated, zero-filled or random (tests feed exactly those under ASan+UBSan).
#include "rankscope/format/flight_recorder_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "rankscope/format/flight_recorder_layout.h"
#include "rankscope/format/peer_counts.h"
#include "peer_counts_section.h"
#include "flight_recorder_copies.h"
#include "seqlock.h"

namespace rankscope::format {
namespace {

// Printable ASCII only: names come from a file that may be garbage, and they end up in JSON.
template <size_t N>
std::string read_name(const char (&src)[N]) {
  const size_t n = strnlen(src, N);
  std::string out(src, n);
  for (char& ch : out)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
  return out;
}

// read_name into the name pool, for the fields every collective record repeats.
template <size_t N>
std::string_view read_pooled_name(const char (&src)[N]) {
  char out[N];
  const size_t n = strnlen(src, N);
  for (size_t i = 0; i < n; ++i) {
    const auto ch = static_cast<unsigned char>(src[i]);
    out[i] = ch < 0x20 || ch > 0x7e ? '?' : char(ch);
  }
  return intern_name({out, n});
}

// read_pooled_name with a one-entry cache the caller keeps per ring position: ranks of one job
// record the same call sites at the same positions, so most records hit it with one compare and
// no hash. A hit is exact: the cached name is printable, so equal bytes need no cleaning.
template <size_t N>
std::string_view read_pooled_name(const char (&src)[N], std::string_view& cached) {
  const size_t n = strnlen(src, N);
  if (n != cached.size() || (n != 0 && std::memcmp(src, cached.data(), n) != 0)) cached = read_pooled_name(src);
  return cached;
}

bool checked_span(uint64_t offset, uint64_t count, uint64_t elem, uint64_t limit) {
  if (elem != 0 && count > (limit / elem)) return false;
  const uint64_t bytes = count * elem;
  return offset <= limit && bytes <= limit - offset;
}

CollectiveState to_state(uint8_t v, bool& ok) {
  ok = v <= uint8_t(CollectiveState::kFailed);
  return ok ? CollectiveState(v) : CollectiveState::kEmpty;
}

NcclCommSnapshot read_nccl_section(const NcclCommInfo& in, const seqlock::CopyWindow& copies,
                                   std::vector<std::string>& warnings) {
  auto load64 = [](const uint64_t& v) { return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(v)).load(std::memory_order_relaxed); };
  NcclCommSnapshot n;
  n.comm_hash = load64(in.comm_hash);
  n.abi_version = in.abi_version;
  n.event_mask = in.event_mask;
  n.n_nodes = in.n_nodes;
  n.finalized = in.finalized != 0;
  n.dropped_events = load64(in.dropped_events);
  n.foreign_events = load64(in.foreign_events);
  n.ignored_events = load64(in.ignored_events);
  n.last_kernel_ns = int64_t(load64(reinterpret_cast<const uint64_t&>(in.last_kernel_ns)));
  n.comm_name = read_name(in.comm_name);
  NcclApiState api;
  n.api_torn = !copies.read(&in.api, &api, sizeof(api), &in.api.seq);
  if (n.api_torn) warnings.push_back("NCCL API state torn");
  n.api_begin_ns = api.begin_ns;
  n.api_tid = api.tid;
  n.api_call = api.call <= uint32_t(NcclApiCall::kGroupEnd) ? NcclApiCall(api.call) : NcclApiCall::kNone;
  n.api_op = api.op <= kMaxCollectiveOp ? CollectiveOp(api.op) : CollectiveOp::kUnknown;
  n.api_depth = api.depth;
  n.peers_overflow = in.peers_overflow;
  for (const auto& p : in.peers) {
    if (p.peer < 0) continue;
    n.peers.push_back({p.peer, load64(p.send_launched), load64(p.send_completed), load64(p.recv_launched),
                       load64(p.recv_completed)});
  }
  return n;
}

}  // namespace

const CollectiveSnapshot* CommSnapshot::find(uint64_t s) const {
  auto it = std::lower_bound(ring.begin(), ring.end(), s,
                             [](const CollectiveSnapshot& c, uint64_t v) { return c.seq < v; });
  return (it != ring.end() && it->seq == s) ? &*it : nullptr;
}

const PeerCountsSnapshot* CommSnapshot::find_counts(uint64_t s) const {
  for (const auto& p : peer_counts)
    if (p.seq == s) return &p;
  return nullptr;
}

const CommSnapshot* FlightRecorderSnapshot::comm(std::string_view name) const {
  for (const auto& c : comms)
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<const ParamSnapshot*> FlightRecorderSnapshot::missing_gradients() const {
  std::vector<const ParamSnapshot*> out;
  if (grad.backward_step < 0) return out;
  for (const auto& p : params)
    if (p.arrived_step != grad.backward_step) out.push_back(&p);
  return out;
}

namespace {

// A section of T at `offset` of a copy is read through T pointers: the offset must keep T's
// alignment (the copies themselves are allocated aligned) or reading it is undefined behaviour, a
// fault on CPUs that do not forgive misaligned loads. A writer never places one so; a corrupt header can.
template <class T>
bool aligned_for(uint64_t offset) {
  return offset % alignof(T) == 0;
}

// The learned-bounds section the directory places, inside `limit` bytes and aligned.
bool bounds_consistent(const BoundsDirectory& bd, uint64_t limit) {
  return bd.bound_slot_bytes == sizeof(BoundSlot) && bd.max_bounds <= 4096 && aligned_for<BoundSlot>(bd.bounds_offset) &&
         checked_span(bd.bounds_offset, bd.max_bounds, sizeof(BoundSlot), limit);
}

// Every section the header places lies inside the file's `limit` bytes, aligned, with the sizes
// this reader's structs have.
bool layout_consistent(const FlightHeader& h, uint64_t limit) {
  const FlightLayoutParams& p = h.layout;
  return p.max_threads <= 4096 && p.max_range_depth <= 4096 && p.max_comms <= 4096 && p.ring_entries != 0 &&
         p.ring_entries <= (1u << 20) && p.max_params <= (1u << 20) &&
         h.thread_slot_bytes == sizeof(ThreadSlotHeader) + uint64_t(p.max_range_depth) * sizeof(OpenRange) &&
         h.comm_slot_bytes == sizeof(CommSlotHeader) + uint64_t(p.ring_entries) * sizeof(CollectiveRecord) &&
         h.collective_record_bytes == sizeof(CollectiveRecord) && h.param_slot_bytes == sizeof(ParamSlot) &&
         aligned_for<ThreadSlotHeader>(h.threads_offset) && aligned_for<CommSlotHeader>(h.comms_offset) &&
         aligned_for<ParamSlot>(h.params_offset) &&
         checked_span(h.threads_offset, p.max_threads, h.thread_slot_bytes, limit) &&
         checked_span(h.comms_offset, p.max_comms, h.comm_slot_bytes, limit) &&
         checked_span(h.params_offset, p.max_params, sizeof(ParamSlot), limit);
}

// The header of a copy, checked: magic, schema version, size, and every section inside the file.
Status check_header(std::span<const uint8_t> bytes, std::string_view name) {
  if (bytes.empty()) return corrupt(std::string(name) + ": empty file (the rank may have died before creating its flight recorder)");
  if (bytes.size() < sizeof(FlightHeader))
    return corrupt(fmt::format("{}: {} bytes, smaller than a flight recorder header ({} bytes): truncated",
                               name, bytes.size(), sizeof(FlightHeader)));
  const auto* h = reinterpret_cast<const FlightHeader*>(bytes.data());
  if (std::memcmp(h->magic, kFlightMagic, sizeof(kFlightMagic)) != 0) {
    const bool zero = std::all_of(bytes.begin(), bytes.begin() + 64, [](uint8_t b) { return b == 0; });
    return corrupt(std::string(name) + (zero ? ": zero-filled, no flight recorder magic (never initialised, or lost in a machine crash)"
                                : ": not a rankscope flight recorder (bad magic)"));
  }
  if (h->schema_version < kFlightSchemaMinReadable || h->schema_version > kFlightSchemaMaxReadable)
    return unsupported(fmt::format("{}: flight recorder schema version {}; this rankscope reads versions {}..{} "
                                   "(hint: use the rankscope release that wrote the run)",
                                   name, h->schema_version, kFlightSchemaMinReadable, kFlightSchemaMaxReadable));
  const uint64_t limit = bytes.size();
  if (h->header_bytes != sizeof(FlightHeader) || h->file_bytes > limit)
    return corrupt(fmt::format("{}: header says {} bytes but the file has {}: truncated", name, h->file_bytes, limit));
  if (!layout_consistent(*h, limit)) return corrupt(std::string(name) + ": inconsistent flight recorder layout (corrupt header)");
  return Status::ok_status();
}

// One checked copy's sections read into a snapshot, each against the copies around it (seqlock.h):
// the phases parse_copies runs, in order.
struct CopyParse {
  CopyParse(const seqlock::CopyWindow& window, std::span<const uint8_t> bytes)
      : copies(window), h(*reinterpret_cast<const FlightHeader*>(bytes.data())), base(bytes.data()) {}
  const seqlock::CopyWindow& copies;
  const FlightHeader& h;
  const uint8_t* base;  // the copy's first byte
  FlightRecorderSnapshot s;

  void read_identity();
  void read_live_state();
  void read_watchdog();
  void read_grad_state();
  void read_threads();
  void read_comms();
  void read_ring(const CommSlotHeader& ch, uint32_t slot, CommSnapshot& c);
  void read_params();
  void read_bounds(uint64_t limit);
};

void CopyParse::read_identity() {
  s.schema_version = h.schema_version;
  if (copies.before(h.ready) != 1) s.warnings.push_back("identity not complete: the rank was still initialising");
  s.rank = h.rank;
  s.world_size = h.world_size;
  s.local_rank = h.local_rank;
  s.pid = h.pid;
  s.start_ns = h.start_ns;
  s.host = read_name(h.host);
  s.run_id = read_name(h.run_id);
  s.ring_entries = h.layout.ring_entries;
}

void CopyParse::read_live_state() {
  LiveState live;
  s.live.torn = !copies.read(&h.live, &live, sizeof(live), &h.live.seq);
  s.live.heartbeat_ns = live.heartbeat_ns;
  s.live.step = live.step;
  s.live.process_state = live.process_state <= uint32_t(ProcessState::kAborted) ? ProcessState(live.process_state)
                                                                                : ProcessState::kStarting;
  s.live.step_begin_ns = live.step_begin_ns;
  s.live.collectives_issued = live.collectives_issued;
  s.live.collectives_completed = live.collectives_completed;
  s.live.clock_offset_ns = live.clock_offset_ns;
  s.live.clock_uncertainty_ns = live.clock_uncertainty_ns;
  s.live.phase = read_name(live.phase);
  if (s.live.torn) s.warnings.push_back("live state torn (a writer stopped mid-update)");
}

void CopyParse::read_watchdog() {
  WatchdogRecord wd;
  s.watchdog.torn = !copies.read(&h.watchdog, &wd, sizeof(wd), &h.watchdog.seq);
  s.watchdog.kind = wd.kind <= uint32_t(WatchdogKind::kSuspectedHang) ? WatchdogKind(wd.kind) : WatchdogKind::kNone;
  s.watchdog.time_ns = wd.time_ns;
  s.watchdog.comm_index = wd.comm_index;
  s.watchdog.comm_seq = wd.comm_seq;
  s.watchdog.waited_ns = wd.waited_ns;
  s.watchdog.event_count = wd.event_count;
  s.watchdog.range = read_name(wd.range);
  s.watchdog.message = read_name(wd.message);
  s.watchdog.stacks_file = read_name(wd.stacks_file);
  if (s.watchdog.torn) s.warnings.push_back("watchdog record torn");
}

void CopyParse::read_grad_state() {
  GradState g;
  s.grad.torn = !copies.read(&h.grad, &g, sizeof(g), &h.grad.seq);
  s.grad.backward_step = g.backward_step;
  s.grad.in_backward = g.in_backward != 0;
  s.grad.n_params = std::min(g.n_params, h.layout.max_params);
  s.grad.n_arrived = g.n_arrived;
  s.grad.backward_begin_ns = g.backward_begin_ns;
  if (s.grad.torn) s.warnings.push_back("gradient-arrival state torn");
}

// Each claimed thread slot's open ranges. A slot's bytes are copied out, never read through a
// pointer into the file's copy.
void CopyParse::read_threads() {
  const FlightLayoutParams& p = h.layout;
  thread_local std::vector<uint8_t> scratch;  // one per reading thread, not one per recorder
  scratch.resize(h.thread_slot_bytes);
  for (uint32_t i = 0; i < p.max_threads; ++i) {
    const uint8_t* slot = base + h.threads_offset + uint64_t(i) * h.thread_slot_bytes;
    ThreadSlotHeader th;
    std::memcpy(&th, slot, sizeof(th));
    // A slot written to but unclaimed lost its claim when the file was re-created under a live
    // writer (librankscope-nvtx.so before it opened one recorder per process): its ranges are real.
    // `claimed` from the earlier copy: once it shows 1, tid and name here are complete.
    const uint32_t claimed = copies.before_at<uint32_t>(slot + offsetof(ThreadSlotHeader, claimed));
    const bool lost_claim = claimed == 0 && th.seq != 0;
    if (claimed != 1 && !lost_claim) continue;
    ThreadSnapshot t;
    t.slot = int(i);
    t.tid = th.tid;
    t.name = read_name(th.name);
    if (lost_claim)
      s.warnings.push_back(fmt::format("thread slot {} holds ranges but lost its claim (file re-created while "
                                       "written): its thread id and name are unknown",
                                       i));
    t.torn = !copies.read(slot, scratch.data(), scratch.size(),
                          reinterpret_cast<const uint64_t*>(slot + offsetof(ThreadSlotHeader, seq)));
    ThreadSlotHeader copy;
    std::memcpy(&copy, scratch.data(), sizeof(copy));
    t.depth = copy.depth;
    const uint32_t stored = std::min(copy.depth, p.max_range_depth);
    t.stack.reserve(stored);
    for (uint32_t d = 0; d < stored; ++d) {
      OpenRange range;
      std::memcpy(&range, scratch.data() + sizeof(ThreadSlotHeader) + uint64_t(d) * sizeof(OpenRange), sizeof(range));
      t.stack.push_back({read_pooled_name(range.name), range.begin_ns});
    }
    if (t.torn) s.warnings.push_back(fmt::format("thread {} range stack torn", t.tid));
    s.threads.push_back(std::move(t));
  }
}

// The records of one communicator's ring still in it, oldest first; each checked by its own guard and seq.
void CopyParse::read_ring(const CommSlotHeader& ch, uint32_t slot, CommSnapshot& c) {
  const uint32_t entries = h.layout.ring_entries;
  thread_local std::vector<std::string_view> ring_names(1 << 14);  // per reading thread, across recorders
  const auto* ring = reinterpret_cast<const CollectiveRecord*>(&ch + 1);
  const uint64_t first = c.next_seq > entries ? c.next_seq - entries : 0;
  c.ring.reserve(c.next_seq - first);
  for (uint64_t seq = first; seq < c.next_seq; ++seq) {
    const CollectiveRecord* src = &ring[seq % entries];
    CollectiveRecord r;
    const bool consistent = copies.read(src, &r, sizeof(r), &src->guard);
    if (r.seq != seq) continue;  // claimed but not yet written, or already overwritten
    bool state_ok = true;
    CollectiveSnapshot cs;
    cs.seq = r.seq;
    cs.op = r.op <= kMaxCollectiveOp ? CollectiveOp(r.op) : CollectiveOp::kUnknown;
    cs.dtype = r.dtype <= uint8_t(DataType::kFloat64) ? DataType(r.dtype) : DataType::kUnknown;
    cs.state = to_state(r.state, state_ok);
    cs.peer = r.peer;
    cs.count = r.count;
    cs.bytes = r.bytes;
    cs.enqueue_ns = r.enqueue_ns;
    cs.start_ns = r.start_ns;
    cs.end_ns = r.end_ns;
    cs.step = r.step;
    cs.range = read_pooled_name(r.range, ring_names[(uint64_t(slot) * entries + seq % entries) % ring_names.size()]);
    cs.host_returned = (r.flags & kCollectiveHostReturned) != 0;
    cs.torn = !consistent || !state_ok;
    if (cs.torn) s.warnings.push_back(fmt::format("{} collective #{} torn", c.name, seq));
    c.ring.push_back(std::move(cs));
  }
}

void CopyParse::read_comms() {
  const FlightLayoutParams& p = h.layout;
  auto comm_slot = [&](uint32_t i) {
    return reinterpret_cast<const CommSlotHeader*>(base + h.comms_offset + uint64_t(i) * h.comm_slot_bytes);
  };
  uint32_t claimed_comms = 0;
  for (uint32_t i = 0; i < p.max_comms; ++i) claimed_comms += copies.before(comm_slot(i)->claimed) == 1;
  s.comms.reserve(claimed_comms);
  for (uint32_t i = 0; i < p.max_comms; ++i) {
    const CommSlotHeader* ch = comm_slot(i);
    if (copies.before(ch->claimed) != 1) continue;  // published once: name, size, rank are complete
    CommSnapshot c;
    c.index = int(i);
    c.name = read_name(ch->name);
    c.size = ch->size;
    c.rank_in_comm = ch->rank_in_comm;
    c.next_seq = ch->next_seq;  // each record is checked by its own guard and seq
    c.completed_count = ch->completed_count;
    read_ring(*ch, i, c);
    c.peer_counts = read_peer_counts(copies, int(i), c.next_seq, c.name, s.warnings);
    s.comms.push_back(std::move(c));
  }
}

void CopyParse::read_params() {
  const auto* params = reinterpret_cast<const ParamSlot*>(base + h.params_offset);
  s.params.reserve(s.grad.n_params);
  for (uint32_t i = 0; i < s.grad.n_params; ++i) {
    const ParamSlot& ps = params[i];
    ParamSnapshot out;
    out.name = read_pooled_name(ps.name);
    out.bucket = ps.bucket;
    out.numel = ps.numel;
    // The step from the earlier copy: written last, so order and time here are at least that new.
    out.arrived_step = copies.before(ps.arrived_step);
    out.arrived_ns = ps.arrived_ns;
    out.order = ps.order;
    s.params.push_back(std::move(out));
  }
}

// Learned bounds: absent (zeros) in files written before the section existed.
void CopyParse::read_bounds(uint64_t limit) {
  const BoundsDirectory& bd = h.bounds;
  if (bd.bounds_offset == 0) return;
  if (!bounds_consistent(bd, limit)) {
    s.warnings.push_back("learned-bounds section inconsistent: ignored");
    return;
  }
  const auto* slots = reinterpret_cast<const BoundSlot*>(base + bd.bounds_offset);
  for (uint32_t i = 0; i < bd.max_bounds; ++i) {
    BoundSlot b;
    const bool ok = copies.read(&slots[i], &b, sizeof(b), &slots[i].seq);
    if (!ok) {
      s.warnings.push_back(fmt::format("learned bound {} torn", i));
      continue;
    }
    if (b.kind != uint32_t(BoundKind::kCollective) && b.kind != uint32_t(BoundKind::kStep)) continue;
    BoundSnapshot out;
    out.kind = BoundKind(b.kind);
    out.comm = read_pooled_name(b.comm);
    out.site = read_pooled_name(b.site);
    out.samples = b.samples;
    out.warmup = b.warmup;
    out.quantile_ns = b.quantile_ns;
    out.bound_ns = b.bound_ns;
    out.updated_ns = b.updated_ns;
    out.quantile_permille = b.quantile_permille;
    out.window = b.window;
    s.bounds.push_back(std::move(out));
  }
}

// The parse of one copy of the file, its sections checked against the copies around it.
Result<FlightRecorderSnapshot> parse_copies(const seqlock::CopyWindow& copies, std::string_view display_name) {
  const std::span<const uint8_t> bytes = copies.data();
  if (Status st = check_header(bytes, display_name); !st.ok()) return st;
  CopyParse parse(copies, bytes);
  parse.read_identity();
  parse.read_live_state();
  parse.read_watchdog();
  parse.read_grad_state();
  parse.read_threads();
  parse.read_comms();
  parse.read_params();
  parse.read_bounds(bytes.size());
  FlightRecorderSnapshot& s = parse.s;
  if (std::memcmp(parse.h.nccl.magic, kNcclInfoMagic, sizeof(kNcclInfoMagic)) == 0) {
    s.nccl_plugin = true;
    const NcclCommSnapshot n = read_nccl_section(parse.h.nccl, copies, s.warnings);
    for (auto& c : s.comms) c.nccl = n;  // a plugin recorder holds one communicator
  }
  return std::move(s);
}

}  // namespace

Result<FlightRecorderSnapshot> parse_flight_recorder(std::span<const uint8_t> bytes, std::string_view display_name) {
  // The parse reads the header and sections through pointers of their types: bytes a caller holds
  // at an address without that alignment are parsed from an aligned copy instead.
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(FlightHeader) != 0) {
    std::vector<uint64_t> aligned((bytes.size() + sizeof(uint64_t) - 1) / sizeof(uint64_t));
    if (!bytes.empty()) std::memcpy(aligned.data(), bytes.data(), bytes.size());
    return parse_copies(seqlock::CopyWindow({reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size()}), display_name);
  }
  return parse_copies(seqlock::CopyWindow(bytes), display_name);
}

const BoundSnapshot* FlightRecorderSnapshot::bound(BoundKind kind, std::string_view comm_name, std::string_view site) const {
  for (const auto& b : bounds)
    if (b.kind == kind && (kind == BoundKind::kStep || (b.comm == comm_name && b.site == site))) return &b;
  return nullptr;
}

Result<FlightRecorderSnapshot> read_flight_recorder(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return not_found(fmt::format("{}: no such file", file.string()));
    return io_error(fmt::format("{}: cannot open: {}", file.string(), std::strerror(e)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(fmt::format("{}: not a regular file", file.string()));
  }
  if (st.st_size == 0) {
    ::close(fd);
    return parse_flight_recorder({}, file.string());
  }
  // pread, not a mapping: at 16K ranks, mapping and unmapping every recorder costs seconds in TLB
  // shootdowns (a VM here: 1024 x 680 KB files, 2.2 s mapped against 0.26 s for one pread each).
  const ReadFile read_file = [&](uint64_t offset, std::span<uint8_t> out) -> Status {
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, off_t(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
      if (n == 0) return io_error(fmt::format("{}: cannot read: truncated while being read", file.string()));
      done += size_t(n);
    }
    return Status::ok_status();
  };
  Result<FlightRecorderSnapshot> result = read_flight_recorder_copies(size_t(st.st_size), read_file, file.string());
  ::close(fd);
  return result;
}

namespace {

// The header of a copy whose layout validates, else null: what the reader's byte-range plans
// (writable_extents, unclaimed_rings) start from.
const FlightHeader* validated_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(FlightHeader)) return nullptr;
  const auto* h = reinterpret_cast<const FlightHeader*>(bytes.data());
  if (std::memcmp(h->magic, kFlightMagic, sizeof(kFlightMagic)) != 0 || h->header_bytes != sizeof(FlightHeader) ||
      !layout_consistent(*h, bytes.size()))
    return nullptr;
  return h;
}

}  // namespace

std::vector<FileExtent> writable_extents(std::span<const uint8_t> bytes) {
  const uint64_t limit = bytes.size();
  const FlightHeader* h = validated_header(bytes);
  if (h == nullptr) return {};
  const FlightLayoutParams& p = h->layout;
  std::vector<FileExtent> out;
  out.reserve(8 + 2 * size_t(p.max_comms));
  auto add = [&](uint64_t offset, uint64_t n) {
    if (n == 0) return;
    if (!out.empty() && out.back().offset + out.back().bytes == offset) out.back().bytes += n;
    else out.push_back({offset, n});
  };
  add(0, sizeof(FlightHeader));  // identity, live state, watchdog, gradient state, the NCCL section
  add(h->threads_offset, uint64_t(p.max_threads) * h->thread_slot_bytes);  // a few slots: all of them
  std::vector<bool> claimed(p.max_comms);
  for (uint32_t i = 0; i < p.max_comms; ++i) {
    const uint64_t at = h->comms_offset + uint64_t(i) * h->comm_slot_bytes;
    claimed[i] = reinterpret_cast<const CommSlotHeader*>(bytes.data() + at)->claimed == 1;
    if (claimed[i]) add(at, h->comm_slot_bytes);
  }
  add(h->params_offset, uint64_t(p.max_params) * sizeof(ParamSlot));
  const BoundsDirectory& bd = h->bounds;
  if (bd.bounds_offset != 0 && bounds_consistent(bd, limit)) {
    // The probe claims bound slots in order: those after the last one in use are still empty.
    uint32_t used = 0;
    for (uint32_t i = 0; i < bd.max_bounds; ++i) {
      BoundSlot slot;
      std::memcpy(&slot, bytes.data() + bd.bounds_offset + uint64_t(i) * sizeof(BoundSlot), sizeof(slot));
      if (slot.kind != uint32_t(BoundKind::kEmpty) || slot.seq != 0) used = i + 1;
    }
    add(bd.bounds_offset, uint64_t(used) * sizeof(BoundSlot));
  } else if (bd.bounds_offset != 0) {
    return {};  // the parse warns about it; read whole copies rather than judge a section it rejects
  }
  PeerCountsDirectory pd;
  std::memcpy(&pd, bytes.data() + kPeerCountsDirectoryOffset, sizeof(pd));
  if (pd.offset != 0) {
    // Each communicator's slot begins with its 8-byte call counter, read below: a slot smaller
    // than that would read past the section (past the file for the last one).
    if (pd.comm_bytes < sizeof(uint64_t) || !aligned_for<uint64_t>(pd.offset) ||
        !checked_span(pd.offset, p.max_comms, pd.comm_bytes, limit))
      return {};
    for (uint32_t i = 0; i < p.max_comms; ++i) {
      const uint64_t at = pd.offset + uint64_t(i) * pd.comm_bytes;
      uint64_t calls = 0;
      std::memcpy(&calls, bytes.data() + at, sizeof(calls));
      if (claimed[i] && calls != 0) add(at, pd.comm_bytes);  // communicators that made all_to_all_v calls
    }
  }
  std::sort(out.begin(), out.end(), [](const FileExtent& a, const FileExtent& b) { return a.offset < b.offset; });
  // A system call costs more than copying a few pages more (in a VM here, 1-2 us against 0.3 us a
  // page): extents closer than kMergeGap are read as one.
  constexpr uint64_t kMergeGap = 8192;
  std::vector<FileExtent> merged;
  merged.reserve(out.size());
  for (const FileExtent& e : out) {
    if (!merged.empty() && e.offset <= merged.back().offset + merged.back().bytes + kMergeGap)
      merged.back().bytes = std::max(merged.back().offset + merged.back().bytes, e.offset + e.bytes) - merged.back().offset;
    else
      merged.push_back(e);
  }
  return merged;
}

std::vector<FileExtent> unclaimed_rings(std::span<const uint8_t> bytes) {
  const FlightHeader* h = validated_header(bytes);
  if (h == nullptr) return {};
  std::vector<FileExtent> out;
  for (uint32_t i = 0; i < h->layout.max_comms; ++i) {
    const uint64_t at = h->comms_offset + uint64_t(i) * h->comm_slot_bytes;
    if (reinterpret_cast<const CommSlotHeader*>(bytes.data() + at)->claimed != 1)
      out.push_back({at + sizeof(CommSlotHeader), h->comm_slot_bytes - sizeof(CommSlotHeader)});
  }
  return out;
}

Result<FlightRecorderSnapshot> read_flight_recorder_copies(size_t size, const ReadFile& read_file,
                                                           std::string_view display_name) {
  // Reused buffers: a reader of thousands of recorders allocates once per thread.
  thread_local std::array<std::vector<uint8_t>, 3> copies;
  // The first copy is whole. The later ones read again only what the writer can still change
  // (writable_extents); the rest, unclaimed slots and never-written sections, is the first copy's
  // bytes in all three, judged as one copy is. At 16K ranks this is a third of the bytes read.
  // Of the rest, the unclaimed slots' rings are not even copied over (unclaimed_rings): `fills`,
  // what is copied from the first copy, is the file less the extents and those rings.
  std::vector<FileExtent> extents, fills;
  auto take = [&](std::vector<uint8_t>& copy, const std::vector<uint8_t>* rest_from) -> Status {
    copy.resize(size);
    if (rest_from == nullptr || extents.empty()) {
      RS_RETURN_IF_ERROR(read_file(0, copy));
    } else {
      for (const FileExtent& f : fills) std::memcpy(copy.data() + f.offset, rest_from->data() + f.offset, f.bytes);
      for (const FileExtent& e : extents) RS_RETURN_IF_ERROR(read_file(e.offset, {copy.data() + e.offset, e.bytes}));
    }
    // The next copy's loads stay after this one's (the kernel's copy does not promise an order).
    std::atomic_thread_fence(std::memory_order_acquire);
    return Status::ok_status();
  };
  size_t before = 0, data = 1, after = 2;
  RS_RETURN_IF_ERROR(take(copies[before], nullptr));
  extents = writable_extents(copies[before]);
  // writable_extents checks this already; a stray extent must mean whole copies, never a read past the end.
  if (std::any_of(extents.begin(), extents.end(),
                  [&](const FileExtent& e) { return e.offset > size || e.bytes > size - e.offset; }))
    extents.clear();
  if (!extents.empty()) {
    std::vector<FileExtent> not_filled = unclaimed_rings(copies[before]);
    not_filled.insert(not_filled.end(), extents.begin(), extents.end());
    std::sort(not_filled.begin(), not_filled.end(), [](const FileExtent& a, const FileExtent& b) { return a.offset < b.offset; });
    uint64_t at = 0;
    for (const FileExtent& n : not_filled) {
      if (n.offset > at) fills.push_back({at, n.offset - at});
      at = std::max(at, n.offset + n.bytes);
    }
    if (at < size) fills.push_back({at, size - at});
  }
  for (size_t i : {data, after}) RS_RETURN_IF_ERROR(take(copies[i], &copies[before]));
  const seqlock::CopyWindow::ReadAt read_at = [&](uint64_t offset, void* out, size_t bytes) {
    return offset <= size && bytes <= size - offset && read_file(offset, {static_cast<uint8_t*>(out), bytes}).ok();
  };
  std::optional<Result<FlightRecorderSnapshot>> result;
  for (int window = 0; window < 8; ++window) {
    result = parse_copies(seqlock::CopyWindow(copies[before], copies[data], copies[after], &read_at), display_name);
    const bool torn = result->ok() && std::any_of((*result)->warnings.begin(), (*result)->warnings.end(), [](const std::string& w) {
                        return w.find("torn") != std::string::npos;
                      });
    if (!torn || window == 7) break;
    // Slide: the data copy was taken wholly before the after copy, so it can serve as `before`.
    std::tie(before, data, after) = std::tuple(data, after, before);
    RS_RETURN_IF_ERROR(take(copies[after], &copies[data]));  // every copy holds the same rest
  }
  return std::move(*result);
}

}  // namespace rankscope::format
