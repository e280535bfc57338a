// trace_wire.cpp — see trace_wire.h. The field order below is the format; a change to it or to a
// field's width changes the magic's version digit.
#include "trace_wire.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "rankscope/format/run_metadata.h"

namespace rankscope::kineto {
namespace {

constexpr std::string_view kMagic = "RSKWIRE3";

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(uint64_t(v), 8); }
  void i32(int32_t v) { le(uint64_t(uint32_t(v)), 4); }
  void str(std::string_view s) {
    u64(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void opt_i32(const std::optional<int>& v) {
    u8(v.has_value());
    i32(v.value_or(0));
  }
  void opt_i64(const std::optional<int64_t>& v) {
    u8(v.has_value());
    i64(v.value_or(0));
  }
  void count(size_t n) { u64(n); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(uint8_t(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Reads with every length checked; the first failure sticks (later reads give zeros) and is
// reported once at the end, so the decoding code reads straight through without a check per field.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string why) {
    if (error_.empty()) error_ = fmt::format("{} (at byte {} of {})", why, pos_, b_.size());
  }
  uint64_t le(int bytes) {
    if (!need(size_t(bytes))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(b_[pos_ + size_t(i)]) << (8 * i);
    pos_ += size_t(bytes);
    return v;
  }
  uint8_t u8() { return uint8_t(le(1)); }
  uint32_t u32() { return uint32_t(le(4)); }
  uint64_t u64() { return le(8); }
  int64_t i64() { return int64_t(le(8)); }
  int32_t i32() { return int32_t(uint32_t(le(4))); }
  bool boolean() {
    const uint8_t v = u8();
    if (v > 1) fail("a flag that is neither 0 nor 1");
    return v == 1;
  }
  std::string str() {
    const uint64_t n = u64();
    if (!need(n)) return {};
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }
  std::optional<int> opt_i32() {
    const bool has = boolean();
    const int v = i32();
    return has ? std::optional<int>(v) : std::nullopt;
  }
  std::optional<int64_t> opt_i64() {
    const bool has = boolean();
    const int64_t v = i64();
    return has ? std::optional<int64_t>(v) : std::nullopt;
  }
  // A count of elements each at least `min_bytes` long: never more than the bytes left allow, so a
  // lying count cannot make the decoder allocate more than the input's size in elements.
  size_t count(size_t min_bytes) {
    const uint64_t n = u64();
    if (!ok()) return 0;
    if (n > (b_.size() - pos_) / min_bytes) {
      fail(fmt::format("a count of {} that the bytes left cannot hold", n));
      return 0;
    }
    return size_t(n);
  }
  bool at_end() const { return pos_ == b_.size(); }
  bool magic(std::string_view m) {
    if (b_.size() < m.size() || std::memcmp(b_.data(), m.data(), m.size()) != 0) return false;
    pos_ = m.size();
    return true;
  }

 private:
  bool need(uint64_t n) {
    if (!ok()) return false;
    if (n > b_.size() - pos_) {
      fail("cut short");
      return false;
    }
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  std::string error_;
};

// What the reader lets through (trace_reader.cpp): ranks, world sizes and group counts under the
// 2^20 a job can have, times within +-4e18 ns with durations under 1e15 ns. A packed trace is held to
// the same, so the import after it meets nothing a local import could not (a world of 2^31 ranks
// would size its tables; a time near INT64_MAX would overflow the clock arithmetic).
constexpr int64_t kMaxSpanNs = 4'000'000'000'000'000'000 + 1'000'000'000'000'000;  // a start, plus a duration

std::optional<int> small(Reader& r, std::optional<int> v, const char* what) {
  if (v && (*v < 0 || *v >= format::kMaxWorldSize)) r.fail(fmt::format("{} {} out of range", what, *v));
  return v;
}

void span(Reader& r, int64_t start, int64_t end) {
  if (start < -kMaxSpanNs || end > kMaxSpanNs || end < start) r.fail(fmt::format("a time span {}..{} no trace reader gives", start, end));
}

void put_group(Writer& w, const ProcessGroupInfo& g) {
  w.str(g.name);
  w.str(g.desc);
  w.str(g.backend);
  w.count(g.ranks.size());
  for (int r : g.ranks) w.i32(r);
}

ProcessGroupInfo get_group(Reader& r) {
  ProcessGroupInfo g;
  g.name = r.str();
  g.desc = r.str();
  g.backend = r.str();
  g.ranks.resize(r.count(4));
  for (int& x : g.ranks) x = *small(r, r.i32(), "a group's rank");
  return g;
}

template <typename E>
E get_enum(Reader& r, uint8_t max, const char* what) {
  const uint8_t v = r.u8();
  if (v > max) r.fail(fmt::format("{} {} out of range", what, v));
  return E(v);
}

void put_rows(Writer& w, const trace_core::ProcessRows& rows) {
  w.count(rows.pool.size());
  for (const std::string& s : rows.pool) w.str(s);
  w.count(rows.nvtx.size());
  for (const trace_core::NvtxRow& n : rows.nvtx) {
    w.i64(n.start), w.i64(n.end), w.u64(n.gtid), w.u64(n.end_gtid), w.i64(n.id), w.i64(n.payload);
    w.u32(n.text), w.u32(n.domain), w.u8(uint8_t(n.kind)), w.u8(n.open_end), w.u8(n.has_payload);
  }
  w.count(rows.domains.size());
  for (const auto& [key, name] : rows.domains) w.u64(key.first), w.u32(key.second), w.str(name);
  w.count(rows.runtime.size());
  for (const trace_core::RuntimeRow& c : rows.runtime) w.i64(c.start), w.i64(c.end), w.u64(c.gtid), w.u32(c.correlation), w.u32(c.name);
  w.count(rows.ops.size());
  for (const trace_core::GpuOp& o : rows.ops) {
    w.i64(o.start), w.i64(o.end), w.u64(o.process), w.u32(o.correlation), w.u32(o.stream), w.u32(o.device);
    w.u32(o.name), w.u32(o.short_name), w.u8(uint8_t(o.kind));
  }
  w.count(rows.host_collectives.size());
  for (const trace_core::HostCollective& h : rows.host_collectives) {
    w.i64(h.enqueue), w.i64(h.start), w.i64(h.end), w.u64(h.gtid), w.u32(h.comm), w.u64(h.seq), w.u64(h.bytes);
    w.u8(uint8_t(h.op)), w.u8(uint8_t(h.dtype));
  }
  // By op index: the map is unordered, and the same trace must always give the same bytes.
  std::vector<std::pair<uint32_t, uint64_t>> sizes(rows.collective_bytes.begin(), rows.collective_bytes.end());
  std::sort(sizes.begin(), sizes.end());
  w.count(sizes.size());
  for (const auto& [op, bytes] : sizes) w.u32(op), w.u64(bytes);
  w.i64(rows.max_ts);
}

constexpr uint8_t kMaxNvtxKind = uint8_t(trace_core::NvtxKind::kMark);
constexpr uint8_t kMaxGpuOpKind = uint8_t(trace_core::GpuOpKind::kMemset);
constexpr uint8_t kMaxDataType = uint8_t(format::DataType::kFloat64);

void get_rows(Reader& r, trace_core::ProcessRows& rows) {
  rows.pool.resize(r.count(8));
  for (std::string& s : rows.pool) s = r.str();
  if (r.ok() && (rows.pool.empty() || !rows.pool[0].empty())) r.fail("a string pool whose first entry is not the empty string");
  const size_t pool = rows.pool.size();
  auto pooled = [&](uint32_t i) {
    if (i >= pool) r.fail(fmt::format("string {} past the pool's {}", i, pool));
    return r.ok() ? i : 0;
  };
  rows.nvtx.resize(r.count(59));
  for (trace_core::NvtxRow& n : rows.nvtx) {
    n.start = r.i64(), n.end = r.i64(), n.gtid = r.u64(), n.end_gtid = r.u64(), n.id = r.i64(), n.payload = r.i64();
    n.text = pooled(r.u32()), n.domain = r.u32();
    n.kind = get_enum<trace_core::NvtxKind>(r, kMaxNvtxKind, "NVTX kind");
    n.open_end = r.boolean(), n.has_payload = r.boolean();
    span(r, n.start, n.end);
  }
  for (size_t n = r.count(20); n > 0 && r.ok(); --n) {
    const uint64_t process = r.u64();
    const uint32_t domain = r.u32();
    rows.domains[{process, domain}] = r.str();
  }
  rows.runtime.resize(r.count(32));
  for (trace_core::RuntimeRow& c : rows.runtime) {
    c.start = r.i64(), c.end = r.i64(), c.gtid = r.u64(), c.correlation = r.u32(), c.name = pooled(r.u32());
    span(r, c.start, c.end);
  }
  rows.ops.resize(r.count(45));
  for (trace_core::GpuOp& o : rows.ops) {
    o.start = r.i64(), o.end = r.i64(), o.process = r.u64(), o.correlation = r.u32(), o.stream = r.u32(), o.device = r.u32();
    o.name = pooled(r.u32()), o.short_name = pooled(r.u32());
    o.kind = get_enum<trace_core::GpuOpKind>(r, kMaxGpuOpKind, "GPU op kind");
    span(r, o.start, o.end);
  }
  rows.host_collectives.resize(r.count(54));
  for (trace_core::HostCollective& h : rows.host_collectives) {
    h.enqueue = r.i64(), h.start = r.i64(), h.end = r.i64(), h.gtid = r.u64(), h.comm = r.u32(), h.seq = r.u64(), h.bytes = r.u64();
    h.op = get_enum<format::CollectiveOp>(r, format::kMaxCollectiveOp, "collective op");
    h.dtype = get_enum<format::DataType>(r, kMaxDataType, "data type");
  }
  // The reader fills no host collective (the import makes them from annotations): one that names a
  // communicator could index past the import's list, so none is accepted.
  if (r.ok() && !rows.host_collectives.empty()) r.fail("host collectives in a trace as read (the import makes them)");
  for (size_t n = r.count(12); n > 0 && r.ok(); --n) {
    const uint32_t op = r.u32();
    const uint64_t bytes = r.u64();
    if (op >= rows.ops.size()) r.fail(fmt::format("message size of GPU op {} past the {} ops", op, rows.ops.size()));
    rows.collective_bytes[op] = bytes;
  }
  rows.max_ts = r.i64();
  if (rows.max_ts != INT64_MIN) span(r, rows.max_ts, rows.max_ts);  // INT64_MIN: nothing was read
}

}  // namespace

std::vector<uint8_t> encode_trace(const KinetoTrace& t) {
  Writer w;
  for (char c : kMagic) w.u8(uint8_t(c));
  w.str(t.file.string());
  w.u8(t.compressed);
  w.opt_i32(t.rank), w.opt_i32(t.world_size);
  w.str(t.backend);
  w.opt_i32(t.group_count);
  w.count(t.groups.size());
  for (const ProcessGroupInfo& g : t.groups) put_group(w, g);
  w.count(t.device_names.size());
  for (const std::string& d : t.device_names) w.str(d);
  w.opt_i64(t.base_time_ns);
  w.count(t.versions.size());
  for (const auto& [k, v] : t.versions) w.str(k), w.str(v);
  put_rows(w, t.rows);
  w.i64(t.min_ts);
  w.count(t.host_annotations.size());
  for (const HostAnnotation& h : t.host_annotations)
    w.i64(h.start), w.i64(h.end), w.u64(h.gtid), w.str(h.backend), w.u8(uint8_t(h.op)), w.u64(h.bytes);
  w.count(t.nccl_stream_groups.size());
  for (const auto& [stream, g] : t.nccl_stream_groups) w.u32(stream), put_group(w, g);
  w.u64(t.process_key), w.u64(t.main_gtid), w.i64(t.profiler_steps), w.i64(t.events);
  w.count(t.device_ops.size());
  for (const auto& [kind, n] : t.device_ops) w.str(kind), w.i64(n);
  w.count(t.not_read.size());
  for (const auto& [what, n] : t.not_read) w.str(what), w.i64(n.events), w.i64(n.duration_ns), w.u8(n.on_device), w.str(n.why);
  w.i64(t.old_operator_ranges), w.i64(t.host_ops_read);
  w.i64(t.dropped.wrong_type), w.i64(t.dropped.bad_time), w.i64(t.dropped.negative_duration), w.i64(t.dropped.missing_field);
  w.str(t.stopped_early);
  w.count(t.warnings.size());
  for (const std::string& s : t.warnings) w.str(s);
  return w.take();
}

Result<KinetoTrace> decode_trace(std::span<const uint8_t> bytes, std::string_view source) {
  Reader r(bytes);
  if (!r.magic(kMagic))
    return invalid_argument(fmt::format("{}: not a trace packed by this rankscope (no {} magic: is the nodes' rankscope a "
                                        "different version?)", source, kMagic));
  KinetoTrace t;
  t.file = r.str();
  t.compressed = r.boolean();
  t.rank = small(r, r.opt_i32(), "rank"), t.world_size = small(r, r.opt_i32(), "world size");
  t.backend = r.str();
  t.group_count = small(r, r.opt_i32(), "process group count");
  t.groups.resize(r.count(32));
  for (ProcessGroupInfo& g : t.groups) g = get_group(r);
  t.device_names.resize(r.count(8));
  for (std::string& d : t.device_names) d = r.str();
  t.base_time_ns = r.opt_i64();
  t.versions.resize(r.count(16));
  for (auto& [k, v] : t.versions) k = r.str(), v = r.str();
  get_rows(r, t.rows);
  t.min_ts = r.i64();
  if (t.min_ts != INT64_MAX) span(r, t.min_ts, t.min_ts);  // INT64_MAX: nothing was read
  t.host_annotations.resize(r.count(41));
  for (HostAnnotation& h : t.host_annotations) {
    h.start = r.i64(), h.end = r.i64(), h.gtid = r.u64(), h.backend = r.str();
    h.op = get_enum<format::CollectiveOp>(r, format::kMaxCollectiveOp, "collective op");
    h.bytes = r.u64();
    span(r, h.start, h.end);
  }
  for (size_t n = r.count(36); n > 0 && r.ok(); --n) {
    const uint32_t stream = r.u32();
    t.nccl_stream_groups[stream] = get_group(r);
  }
  t.process_key = r.u64(), t.main_gtid = r.u64(), t.profiler_steps = r.i64(), t.events = r.i64();
  for (size_t n = r.count(16); n > 0 && r.ok(); --n) {
    std::string kind = r.str();
    t.device_ops[kind] = r.i64();
  }
  for (size_t n = r.count(33); n > 0 && r.ok(); --n) {
    std::string what = r.str();
    NotRead& x = t.not_read[what];
    x.events = r.i64(), x.duration_ns = r.i64(), x.on_device = r.boolean(), x.why = r.str();
  }
  t.old_operator_ranges = r.i64();
  t.host_ops_read = r.i64();
  t.dropped.wrong_type = r.i64(), t.dropped.bad_time = r.i64(), t.dropped.negative_duration = r.i64();
  t.dropped.missing_field = r.i64();
  t.stopped_early = r.str();
  t.warnings.resize(r.count(8));
  for (std::string& s : t.warnings) s = r.str();
  if (r.ok() && !r.at_end()) r.fail("bytes after the trace's end");
  if (!r.ok()) return invalid_argument(fmt::format("{}: corrupt packed trace: {}", source, r.error()));
  return t;
}

}  // namespace rankscope::kineto
