// rank_summary.cpp — the reduction of a snapshot to a summary, and the summary codec.
//
// Encoding (docs/FORMAT.md "Rank summaries"): unsigned integers as LEB128 varints, signed ones
// zigzagged first; a time as 0 when unset, else 1 + the zigzagged difference from the rank's
// heartbeat (the recorder's times sit within seconds of it: two or three bytes, not eight); a
// string as its index in the table that heads the buffer. A ring record's seq is the
// communicator's next_seq minus it.
#include "rankscope/format/rank_summary.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "rankscope/format/name_pool.h"

namespace rankscope::format {
namespace {

constexpr uint32_t kMaxStrings = 1u << 20;
constexpr uint32_t kMaxStringBytes = 4096;

uint64_t summary_zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t summary_unzigzag(uint64_t u) { return int64_t(u >> 1) ^ -int64_t(u & 1); }

void summary_put(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out.push_back(uint8_t(v));
}
void summary_put_signed(std::vector<uint8_t>& out, int64_t v) { summary_put(out, summary_zigzag(v)); }
// 0 stays 0 (unset); a time 2^63 ns away from the base (no real recorder's) reads back as unset.
void summary_put_time(std::vector<uint8_t>& out, int64_t t, int64_t base) {
  summary_put(out, t == 0 ? 0 : summary_zigzag(int64_t(uint64_t(t) - uint64_t(base))) + 1);
}

// Flags of a rank record.
enum : uint64_t {
  kLiveTorn = 1, kWatchdogTorn = 2, kGradTorn = 4, kInBackward = 8, kNcclPlugin = 16, kHasWatchdog = 32,
};
// Flags of a ring record and a thread.
enum : uint64_t { kHostReturned = 1, kRecordTorn = 2 };

bool summary_keeps_bound(const BoundSnapshot& b, const FlightRecorderSnapshot& s) {
  if (b.kind == BoundKind::kStep) return true;
  // A collective's bound matters while the rank is inside one of that call site's collectives.
  if (const CommSnapshot* c = s.comm(b.comm))
    for (const auto& r : c->ring)
      if (is_open(r.state) && r.range == b.site) return true;
  return false;
}

class SummaryReader {
 public:
  SummaryReader(std::span<const uint8_t> b, std::string_view source) : b_(b), source_(source) {}
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  size_t left() const { return b_.size() - at_; }

  uint64_t u() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= b_.size()) return fail("ends inside a number"), 0;
      const uint8_t byte = b_[at_++];
      v |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    return fail("a number longer than 10 bytes"), 0;
  }
  int64_t i() { return summary_unzigzag(u()); }
  int64_t time(int64_t base) {
    const uint64_t v = u();
    return v == 0 ? 0 : int64_t(uint64_t(base) + uint64_t(summary_unzigzag(v - 1)));
  }
  // A count of items each at least `min_bytes` long: more than the bytes left could hold is a lie.
  size_t count(size_t min_bytes, const char* what) {
    const uint64_t n = u();
    if (n > left() / std::max<size_t>(min_bytes, 1)) return fail(fmt::format("{} {} claimed, more than the bytes left hold", n, what)), 0;
    return size_t(n);
  }
  template <typename E>
  E enumeration(uint64_t max, const char* what) {
    const uint64_t v = u();
    if (v > max) return fail(fmt::format("{} {} out of range", what, v)), E{};
    return E(v);
  }
  std::string_view bytes(size_t n) {
    if (n > left()) return fail("ends inside a string"), std::string_view();
    std::string_view s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }
  void fail(std::string why) {
    if (error_.empty()) error_ = fmt::format("{}: rank summaries: {} at byte {}", source_, why, at_);
  }

 private:
  std::span<const uint8_t> b_;
  std::string_view source_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace

std::string why_not_summarized(const FlightRecorderSnapshot& s) {
  for (const auto& c : s.comms) {
    if (c.nccl) return fmt::format("communicator {} holds the NCCL profiler plugin's section", c.name);
    if (!c.peer_counts.empty()) return fmt::format("communicator {} holds all_to_all_v per-peer counts", c.name);
  }
  return "";
}

FlightRecorderSnapshot summarize(const FlightRecorderSnapshot& s, const SummaryOptions& o) {
  FlightRecorderSnapshot out;
  out.schema_version = s.schema_version;
  out.rank = s.rank;
  out.world_size = s.world_size;
  out.local_rank = s.local_rank;
  out.pid = s.pid;
  out.host = s.host;
  out.run_id = s.run_id;
  out.start_ns = s.start_ns;
  out.ring_entries = s.ring_entries;
  out.live = s.live;
  out.watchdog = s.watchdog;
  out.grad = s.grad;
  out.threads = s.threads;
  out.warnings = s.warnings;
  out.nccl_plugin = s.nccl_plugin;
  out.boot_id = s.boot_id;
  for (const auto* p : s.missing_gradients()) out.params.push_back(*p);
  for (const auto& b : s.bounds)
    if (summary_keeps_bound(b, s)) out.bounds.push_back(b);
  for (const auto& c : s.comms) {
    CommSnapshot k;
    k.index = c.index;
    k.name = c.name;
    k.size = c.size;
    k.rank_in_comm = c.rank_in_comm;
    k.next_seq = c.next_seq;
    k.completed_count = c.completed_count;
    // Every open record, and the newest closed ones: ascending seq, as the reader gives them.
    int closed = 0;
    for (auto it = c.ring.rbegin(); it != c.ring.rend(); ++it)
      if (is_open(it->state) || closed++ < o.completed_per_comm) k.ring.push_back(*it);
    std::reverse(k.ring.begin(), k.ring.end());
    out.comms.push_back(std::move(k));
  }
  return out;
}

uint32_t RankSummaryWriter::string_index(std::string_view s) {
  auto [it, fresh] = index_.try_emplace(std::string(s.substr(0, kMaxStringBytes)), uint32_t(strings_.size()));
  if (fresh) strings_.push_back(it->first);
  return it->second;
}

void RankSummaryWriter::add(const FlightRecorderSnapshot& full) {
  const FlightRecorderSnapshot s = summarize(full, options_);
  auto& b = body_;
  auto str = [&](std::string_view v) { summary_put(b, string_index(v)); };
  const int64_t base = s.live.heartbeat_ns;
  auto time = [&](int64_t t) { summary_put_time(b, t, base); };
  ++ranks_;
  summary_put_signed(b, s.rank);
  summary_put(b, uint64_t(uint32_t(s.world_size)));
  summary_put_signed(b, s.local_rank);
  summary_put_signed(b, s.pid);
  summary_put(b, s.schema_version);
  summary_put(b, s.ring_entries);
  str(s.host);
  str(s.run_id);
  str(s.boot_id);
  summary_put_signed(b, base);
  time(s.start_ns);
  const bool watchdog = s.watchdog.kind != WatchdogKind::kNone || s.watchdog.time_ns != 0;
  summary_put(b, (s.live.torn ? kLiveTorn : 0) | (s.watchdog.torn ? kWatchdogTorn : 0) | (s.grad.torn ? kGradTorn : 0) |
             (s.grad.in_backward ? kInBackward : 0) | (s.nccl_plugin ? kNcclPlugin : 0) | (watchdog ? kHasWatchdog : 0));
  // live
  summary_put_signed(b, s.live.step);
  summary_put(b, uint64_t(s.live.process_state));
  time(s.live.step_begin_ns);
  summary_put(b, s.live.collectives_issued);
  summary_put(b, s.live.collectives_completed);
  summary_put_signed(b, s.live.clock_offset_ns);
  summary_put_signed(b, s.live.clock_uncertainty_ns);
  str(s.live.phase);
  if (watchdog) {
    summary_put(b, uint64_t(s.watchdog.kind));
    time(s.watchdog.time_ns);
    summary_put_signed(b, s.watchdog.comm_index);
    summary_put(b, s.watchdog.comm_seq);
    summary_put_signed(b, s.watchdog.waited_ns);
    summary_put(b, s.watchdog.event_count);
    str(s.watchdog.range);
    str(s.watchdog.message);
    str(s.watchdog.stacks_file);
  }
  summary_put_signed(b, s.grad.backward_step);
  summary_put(b, s.grad.n_params);
  summary_put(b, s.grad.n_arrived);
  time(s.grad.backward_begin_ns);
  summary_put(b, s.params.size());
  for (const auto& p : s.params) {
    str(p.name);
    summary_put_signed(b, p.bucket);
    summary_put(b, p.numel);
    summary_put_signed(b, p.arrived_step);
    time(p.arrived_ns);
    summary_put(b, p.order);
  }
  summary_put(b, s.threads.size());
  for (const auto& t : s.threads) {
    summary_put(b, uint64_t(uint32_t(t.slot)));
    summary_put_signed(b, t.tid);
    str(t.name);
    summary_put(b, t.depth);
    summary_put(b, t.torn ? kRecordTorn : 0);
    summary_put(b, t.stack.size());
    for (const auto& r : t.stack) {
      str(r.name);
      time(r.begin_ns);
    }
  }
  summary_put(b, s.bounds.size());
  for (const auto& x : s.bounds) {
    summary_put(b, uint64_t(x.kind));
    str(x.comm);
    str(x.site);
    summary_put(b, x.samples);
    summary_put(b, x.warmup);
    summary_put_signed(b, x.quantile_ns);
    summary_put_signed(b, x.bound_ns);
    time(x.updated_ns);
    summary_put(b, x.quantile_permille);
    summary_put(b, x.window);
  }
  summary_put(b, s.warnings.size());
  for (const auto& w : s.warnings) str(w);
  summary_put(b, s.comms.size());
  for (const auto& c : s.comms) {
    summary_put(b, uint64_t(uint32_t(c.index)));
    str(c.name);
    summary_put(b, uint64_t(uint32_t(c.size)));
    summary_put_signed(b, c.rank_in_comm);
    summary_put(b, c.next_seq);
    summary_put(b, c.completed_count);
    summary_put(b, c.ring.size());
    for (const auto& r : c.ring) {
      summary_put(b, c.next_seq - r.seq);
      summary_put(b, uint64_t(r.op));
      summary_put(b, uint64_t(r.dtype));
      summary_put(b, uint64_t(r.state));
      summary_put_signed(b, r.peer);
      summary_put(b, r.count);
      summary_put(b, r.bytes);
      time(r.enqueue_ns);
      time(r.start_ns);
      time(r.end_ns);
      summary_put_signed(b, r.step);
      str(r.range);
      summary_put(b, (r.host_returned ? kHostReturned : 0) | (r.torn ? kRecordTorn : 0));
    }
  }
}

std::vector<uint8_t> RankSummaryWriter::finish() {
  std::vector<uint8_t> rest;
  summary_put(rest, strings_.size());
  for (const auto& s : strings_) {
    summary_put(rest, s.size());
    rest.insert(rest.end(), s.begin(), s.end());
  }
  summary_put(rest, ranks_);
  rest.insert(rest.end(), body_.begin(), body_.end());
  std::vector<uint8_t> out(std::begin(kRankSummaryMagic), std::end(kRankSummaryMagic));
  summary_put(out, kRankSummaryVersion);
  summary_put(out, rest.size());
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

namespace {

// One block's ranks read from `in`: its string table first, then rank by rank, each rank's times
// relative to its own base (its heartbeat). Field for field what RankSummaryWriter::add wrote.
struct BlockDecoder {
  explicit BlockDecoder(SummaryReader& reader) : in(reader) {}
  SummaryReader& in;
  std::vector<std::string_view> strings;
  int64_t base = 0;  // the rank being read's heartbeat: its times are stored relative to it

  void read_strings();
  std::string_view str() {
    const uint64_t i = in.u();
    if (i >= strings.size()) return in.fail(fmt::format("string {} of {}", i, strings.size())), std::string_view();
    return strings[size_t(i)];
  }
  std::string_view pooled() { return intern_name(str()); }
  int64_t time() { return in.time(base); }
  void read_rank(FlightRecorderSnapshot& s);
  void read_watchdog(WatchdogSnapshot& w);
  void read_params(FlightRecorderSnapshot& s);
  void read_threads(FlightRecorderSnapshot& s);
  void read_bounds(FlightRecorderSnapshot& s);
  void read_comms(FlightRecorderSnapshot& s);
};

void BlockDecoder::read_strings() {
  strings.resize(in.count(1, "strings"));
  if (strings.size() > kMaxStrings) in.fail("too many strings");
  for (auto& s : strings) {
    const size_t n = in.count(1, "string bytes");
    if (n > kMaxStringBytes) in.fail("a string longer than 4096 bytes");
    s = in.bytes(n);
    if (in.failed()) break;
  }
}

void BlockDecoder::read_rank(FlightRecorderSnapshot& s) {
  s.rank = int(in.i());
  s.world_size = int(uint32_t(in.u()));
  s.local_rank = int(in.i());
  s.pid = int(in.i());
  s.schema_version = uint32_t(in.u());
  s.ring_entries = uint32_t(in.u());
  s.host = str();
  s.run_id = str();
  s.boot_id = str();
  base = in.i();
  s.live.heartbeat_ns = base;
  s.start_ns = time();
  const uint64_t flags = in.u();
  s.live.torn = flags & kLiveTorn;
  s.watchdog.torn = flags & kWatchdogTorn;
  s.grad.torn = flags & kGradTorn;
  s.grad.in_backward = flags & kInBackward;
  s.nccl_plugin = flags & kNcclPlugin;
  s.live.step = in.i();
  s.live.process_state = in.enumeration<ProcessState>(3, "process state");
  s.live.step_begin_ns = time();
  s.live.collectives_issued = in.u();
  s.live.collectives_completed = in.u();
  s.live.clock_offset_ns = in.i();
  s.live.clock_uncertainty_ns = in.i();
  s.live.phase = str();
  if (flags & kHasWatchdog) read_watchdog(s.watchdog);
  s.grad.backward_step = in.i();
  s.grad.n_params = uint32_t(in.u());
  s.grad.n_arrived = uint32_t(in.u());
  s.grad.backward_begin_ns = time();
  read_params(s);
  read_threads(s);
  read_bounds(s);
  s.warnings.resize(in.count(1, "warnings"));
  for (auto& w : s.warnings) w = str();
  read_comms(s);
}

void BlockDecoder::read_watchdog(WatchdogSnapshot& w) {
  w.kind = in.enumeration<WatchdogKind>(3, "watchdog kind");
  w.time_ns = time();
  w.comm_index = int(in.i());
  w.comm_seq = in.u();
  w.waited_ns = in.i();
  w.event_count = uint32_t(in.u());
  w.range = str();
  w.message = str();
  w.stacks_file = str();
}

void BlockDecoder::read_params(FlightRecorderSnapshot& s) {
  s.params.resize(in.count(6, "parameters"));
  for (auto& p : s.params) {
    p.name = pooled();
    p.bucket = int(in.i());
    p.numel = in.u();
    p.arrived_step = in.i();
    p.arrived_ns = time();
    p.order = uint32_t(in.u());
  }
}

void BlockDecoder::read_threads(FlightRecorderSnapshot& s) {
  s.threads.resize(in.count(6, "threads"));
  for (auto& t : s.threads) {
    t.slot = int(uint32_t(in.u()));
    t.tid = int(in.i());
    t.name = str();
    t.depth = uint32_t(in.u());
    t.torn = in.u() & kRecordTorn;
    t.stack.resize(in.count(2, "open ranges"));
    for (auto& r : t.stack) {
      r.name = pooled();
      r.begin_ns = time();
    }
  }
}

void BlockDecoder::read_bounds(FlightRecorderSnapshot& s) {
  s.bounds.resize(in.count(10, "bounds"));
  for (auto& x : s.bounds) {
    x.kind = in.enumeration<BoundKind>(2, "bound kind");
    x.comm = pooled();
    x.site = pooled();
    x.samples = uint32_t(in.u());
    x.warmup = uint32_t(in.u());
    x.quantile_ns = in.i();
    x.bound_ns = in.i();
    x.updated_ns = time();
    x.quantile_permille = uint32_t(in.u());
    x.window = uint32_t(in.u());
  }
}

void BlockDecoder::read_comms(FlightRecorderSnapshot& s) {
  s.comms.resize(in.count(7, "communicators"));
  for (auto& c : s.comms) {
    c.index = int(uint32_t(in.u()));
    c.name = str();
    c.size = int(uint32_t(in.u()));
    c.rank_in_comm = int(in.i());
    c.next_seq = in.u();
    c.completed_count = in.u();
    c.ring.resize(in.count(13, "ring records"));
    for (auto& r : c.ring) {
      r.seq = c.next_seq - in.u();
      r.op = in.enumeration<CollectiveOp>(kMaxCollectiveOp, "op");
      r.dtype = in.enumeration<DataType>(7, "dtype");
      r.state = in.enumeration<CollectiveState>(4, "state");
      r.peer = int32_t(in.i());
      r.count = in.u();
      r.bytes = in.u();
      r.enqueue_ns = time();
      r.start_ns = time();
      r.end_ns = time();
      r.step = in.i();
      r.range = pooled();
      const uint64_t f = in.u();
      r.host_returned = f & kHostReturned;
      r.torn = f & kRecordTorn;
    }
    if (in.failed()) break;
  }
}

// One block's string table and ranks (`in` holds exactly them), appended to `out`.
void decode_block(SummaryReader& in, std::vector<FlightRecorderSnapshot>& out) {
  BlockDecoder block(in);
  block.read_strings();
  constexpr size_t kMinRankBytes = 29;  // the fixed fields of a rank alone take this many
  const size_t first = out.size();
  out.resize(first + in.count(kMinRankBytes, "ranks"));
  for (size_t k = first; k < out.size(); ++k) {
    if (in.failed()) break;
    block.read_rank(out[k]);
  }
  if (!in.failed() && in.left() != 0) in.fail(fmt::format("{} bytes after the last rank", in.left()));
}

}  // namespace

Result<std::vector<FlightRecorderSnapshot>> decode_rank_summaries(std::span<const uint8_t> bytes, std::string_view source) {
  std::vector<FlightRecorderSnapshot> out;
  size_t at = 0;
  do {
    const auto block = bytes.subspan(at);
    if (block.size() < sizeof kRankSummaryMagic || std::memcmp(block.data(), kRankSummaryMagic, sizeof kRankSummaryMagic) != 0)
      return invalid_argument(fmt::format("{}: not rank summaries (bad magic at byte {})", source, at));
    SummaryReader head(block.subspan(sizeof kRankSummaryMagic), source);
    const uint64_t version = head.u();
    if (!head.failed() && version != kRankSummaryVersion)
      return invalid_argument(fmt::format("{}: rank summaries of version {}; this rankscope reads {}..{} (mixed rankscope "
                                          "versions across nodes?)", source, version, kRankSummaryVersion, kRankSummaryVersion));
    const uint64_t length = head.u();
    if (!head.failed() && length > head.left()) head.fail(fmt::format("a block of {} bytes where {} are left", length, head.left()));
    if (head.failed()) return invalid_argument(head.error());
    const size_t body_at = block.size() - head.left();
    SummaryReader in(block.subspan(body_at, size_t(length)), source);
    decode_block(in, out);
    if (in.failed()) return invalid_argument(in.error());
    at += body_at + size_t(length);
  } while (at < bytes.size());
  return out;
}

}  // namespace rankscope::format
