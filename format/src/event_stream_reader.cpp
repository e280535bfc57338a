// event_stream_reader.cpp — streams an event file through a visitor, stopping cleanly at a bad tail.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "event_stream_encoding.h"
#include "rankscope/format/event_stream.h"

namespace rankscope::format {
namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void load_array(const uint8_t* p, uint32_t n, std::vector<T>& out) {
  out.resize(n);
  if (n) std::memcpy(out.data(), p, size_t(n) * sizeof(T));
}

// Checks that a prefix plus `n` items of `elem` bytes fit in `payload` bytes.
bool fits(uint64_t payload, uint64_t prefix, uint64_t n, uint64_t elem) {
  return prefix <= payload && n <= (payload - prefix) / elem;
}

class Collector final : public EventStreamVisitor {
 public:
  explicit Collector(EventStream& s) : s_(s) {}
  void on_name(uint32_t id, NameKind kind, std::string_view name) override {
    if (id >= s_.names.size()) {
      s_.names.resize(id + 1);
      s_.name_kinds.resize(id + 1, NameKind::kRange);
    }
    s_.names[id] = std::string(name);
    s_.name_kinds[id] = kind;
  }
  void on_clock(const ClockRecord& c) override { s_.clock = c; }
  void on_step(const StepRecord& st) override { s_.steps.push_back(st); }
  void on_trace_ranges(int64_t step, std::span<const TraceRange> r) override {
    trace(step).ranges.assign(r.begin(), r.end());
  }
  void on_trace_kernels(int64_t step, std::span<const TraceKernel> k) override {
    auto& t = trace(step);
    t.kernels.insert(t.kernels.end(), k.begin(), k.end());
  }
  void on_grad_arrivals(int64_t step, std::span<const GradArrival> a) override {
    s_.grads.push_back({step, {a.begin(), a.end()}});
  }
  void on_trace_launches(int64_t step, std::span<const TraceLaunch> l) override {
    auto& t = trace(step);
    t.launches.insert(t.launches.end(), l.begin(), l.end());
  }
  void on_end(int64_t end_ns) override { s_.end_ns = end_ns; }

 private:
  EventStream::Trace& trace(int64_t step) {
    for (auto& t : s_.traces)
      if (t.step == step) return t;
    s_.traces.push_back({step, {}, {}, {}});
    return s_.traces.back();
  }
  EventStream& s_;
};

// The file header checked: size, magic, schema version.
Status check_stream_header(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < sizeof(events::FileHeader)) {
    if (bytes.empty()) return corrupt(name + ": empty event stream (the rank died before writing its header)");
    return corrupt(fmt::format("{}: {} bytes, shorter than the 64-byte event stream header: truncated", name, bytes.size()));
  }
  const auto fh = load<events::FileHeader>(bytes.data());
  if (std::memcmp(fh.magic, kEventsMagic, sizeof(kEventsMagic)) != 0)
    return corrupt(name + ": not a rankscope event stream (bad magic)");
  if (fh.schema_version < kEventsSchemaMinReadable || fh.schema_version > kEventsSchemaMaxReadable)
    return unsupported(fmt::format("{}: event stream schema version {}; this rankscope reads versions {}..{}", name,
                                   fh.schema_version, kEventsSchemaMinReadable, kEventsSchemaMaxReadable));
  if (fh.header_bytes < sizeof(events::FileHeader) || fh.header_bytes > bytes.size())
    return corrupt(name + ": bad event stream header size");
  return Status::ok_status();
}

// A record's payload decoded and handed to the visitor. The vectors are reused: they keep their
// capacity across records. Each returns false on a malformed payload.
struct RecordDecoder {
  explicit RecordDecoder(EventStreamVisitor& v) : visitor(v) {}
  EventStreamVisitor& visitor;
  StepRecord step;
  std::vector<TraceRange> ranges;
  std::vector<TraceKernel> kernels;
  std::vector<GradArrival> grads;
  std::vector<TraceLaunch> launches;

  bool name(const uint8_t* payload, uint32_t n);
  bool step_record(const uint8_t* payload, uint32_t n);
  bool array(RecordType type, const uint8_t* payload, uint32_t n);
};

bool RecordDecoder::name(const uint8_t* payload, uint32_t n) {
  if (n < sizeof(events::NamePrefix)) return false;
  const auto np = load<events::NamePrefix>(payload);
  if (np.id == 0 || np.id > (1u << 24)) return false;
  visitor.on_name(np.id, NameKind(np.kind),
                  std::string_view(reinterpret_cast<const char*>(payload) + sizeof(np), n - sizeof(np)));
  return true;
}

bool RecordDecoder::step_record(const uint8_t* payload, uint32_t n) {
  if (n < sizeof(events::StepPrefix)) return false;
  const auto sp = load<events::StepPrefix>(payload);
  const uint64_t need = sizeof(sp) + uint64_t(sp.n_ranges) * sizeof(RangeAggregate) +
                        uint64_t(sp.n_collectives) * sizeof(CollectiveEvent) +
                        uint64_t(sp.n_counters) * sizeof(CounterValue);
  if (need > n) return false;
  step.step = sp.step;
  step.begin_ns = sp.begin_ns;
  step.end_ns = sp.end_ns;
  const uint8_t* p = payload + sizeof(sp);
  load_array(p, sp.n_ranges, step.ranges);
  p += size_t(sp.n_ranges) * sizeof(RangeAggregate);
  load_array(p, sp.n_collectives, step.collectives);
  p += size_t(sp.n_collectives) * sizeof(CollectiveEvent);
  load_array(p, sp.n_counters, step.counters);
  visitor.on_step(step);
  return true;
}

// The per-step arrays of a trace: ranges, kernels, launches, gradient arrivals.
bool RecordDecoder::array(RecordType type, const uint8_t* payload, uint32_t n) {
  if (n < sizeof(events::ArrayPrefix)) return false;
  const auto ap = load<events::ArrayPrefix>(payload);
  const uint8_t* p = payload + sizeof(ap);
  if (type == RecordType::kTraceRanges) {
    if (!fits(n, sizeof(ap), ap.count, sizeof(TraceRange))) return false;
    load_array(p, ap.count, ranges);
    visitor.on_trace_ranges(ap.step, ranges);
  } else if (type == RecordType::kTraceKernels) {
    if (!fits(n, sizeof(ap), ap.count, sizeof(TraceKernel))) return false;
    load_array(p, ap.count, kernels);
    visitor.on_trace_kernels(ap.step, kernels);
  } else if (type == RecordType::kTraceLaunches) {
    if (!fits(n, sizeof(ap), ap.count, sizeof(TraceLaunch))) return false;
    load_array(p, ap.count, launches);
    visitor.on_trace_launches(ap.step, launches);
  } else {
    if (!fits(n, sizeof(ap), ap.count, sizeof(GradArrival))) return false;
    load_array(p, ap.count, grads);
    visitor.on_grad_arrivals(ap.step, grads);
  }
  return true;
}

}  // namespace

Result<EventStreamScan> scan_event_stream_bytes(std::span<const uint8_t> bytes, std::string_view display_name,
                                                EventStreamVisitor& visitor) {
  const std::string name(display_name);
  if (Status st = check_stream_header(bytes, name); !st.ok()) return st;
  const auto fh = load<events::FileHeader>(bytes.data());
  EventStreamScan scan;
  scan.header.schema_version = fh.schema_version;
  scan.header.rank = fh.rank;
  scan.header.world_size = fh.world_size;
  scan.header.created_ns = fh.created_ns;
  scan.header.run_id = std::string(fh.run_id, strnlen(fh.run_id, sizeof(fh.run_id)));

  RecordDecoder decode(visitor);
  size_t off = fh.header_bytes;
  const size_t size = bytes.size();
  auto stop = [&](std::string why) { scan.warnings.push_back(fmt::format("{}: {} at byte {}; later records ignored", name, why, off)); };
  while (off < size) {
    if (size - off < sizeof(events::RecordHeader) + 4) {
      scan.truncated_tail = true;
      break;
    }
    const auto rh = load<events::RecordHeader>(bytes.data() + off);
    if (rh.payload_bytes > events::kMaxPayloadBytes) {
      stop("implausible record length");
      break;
    }
    const size_t total = sizeof(rh) + size_t(rh.payload_bytes) + 4;
    if (total > size - off) {
      scan.truncated_tail = true;  // the writer died mid-record: expected after a crash
      break;
    }
    const uint8_t* payload = bytes.data() + off + sizeof(rh);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, bytes.data() + off, uInt(sizeof(rh)));
    crc = crc32(crc, payload, uInt(rh.payload_bytes));
    if (uint32_t(crc) != load<uint32_t>(payload + rh.payload_bytes)) {
      if (off + total == size) scan.truncated_tail = true;
      else stop("checksum mismatch");
      break;
    }
    const uint32_t n = rh.payload_bytes;
    bool ok = true;
    switch (RecordType(rh.type)) {
      case RecordType::kName: ok = decode.name(payload, n); break;
      case RecordType::kClock:
        ok = n >= sizeof(ClockRecord);
        if (ok) visitor.on_clock(load<ClockRecord>(payload));
        break;
      case RecordType::kStep: ok = decode.step_record(payload, n); break;
      case RecordType::kTraceRanges:
      case RecordType::kTraceKernels:
      case RecordType::kGradArrivals:
      case RecordType::kTraceLaunches: ok = decode.array(RecordType(rh.type), payload, n); break;
      case RecordType::kEnd:
        ok = n >= sizeof(int64_t);
        if (ok) {
          scan.ended = true;
          visitor.on_end(load<int64_t>(payload));
        }
        break;
      default: break;  // a record type from a newer writer: skipped on purpose
    }
    if (!ok) {
      stop(fmt::format("malformed record of type {}", rh.type));
      break;
    }
    ++scan.records;
    off += total;
  }
  return scan;
}

Result<EventStreamScan> scan_event_stream(const std::filesystem::path& file, EventStreamVisitor& visitor) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return not_found(fmt::format("{}: no such file", file.string()));
    return io_error(fmt::format("{}: cannot open: {}", file.string(), std::strerror(e)));
  }
  // Read whatever is there now; a live writer may append more, which the next scan will see.
  std::vector<uint8_t> bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(size_t(st.st_size));
  uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return io_error(fmt::format("{}: read failed: {}", file.string(), std::strerror(e)));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  ::close(fd);
  return scan_event_stream_bytes(bytes, file.string(), visitor);
}

std::string_view EventStream::name(uint32_t id) const {
  return id < names.size() ? std::string_view(names[id]) : std::string_view();
}

std::optional<uint32_t> EventStream::find_name(std::string_view n) const {
  for (uint32_t i = 1; i < names.size(); ++i)
    if (names[i] == n) return i;
  return std::nullopt;
}

Result<EventStream> read_event_stream(const std::filesystem::path& file) {
  EventStream s;
  Collector c(s);
  RS_ASSIGN_OR_RETURN(s.scan, scan_event_stream(file, c));
  return s;
}

}  // namespace rankscope::format
