// event_stream_writer.cpp — buffers records in memory and hands them to the OS on flush().
#include <fcntl.h>
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
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
void put_array(std::vector<uint8_t>& out, std::span<const T> items) {
  const auto* p = reinterpret_cast<const uint8_t*>(items.data());
  out.insert(out.end(), p, p + items.size_bytes());
}

void put_file_header(std::vector<uint8_t>& out, const EventStreamHeader& header) {
  events::FileHeader fh{};
  std::memcpy(fh.magic, kEventsMagic, sizeof(kEventsMagic));
  fh.schema_version = kEventsSchemaVersion;
  fh.header_bytes = sizeof(fh);
  fh.rank = header.rank;
  fh.world_size = header.world_size;
  fh.created_ns = header.created_ns;
  header.run_id.copy(fh.run_id, sizeof(fh.run_id) - 1);
  put(out, fh);
}

}  // namespace

std::unique_ptr<EventStreamWriter> EventStreamWriter::create_in_memory(const EventStreamHeader& header) {
  std::unique_ptr<EventStreamWriter> w(new EventStreamWriter());
  w->in_memory_ = true;
  put_file_header(w->buffer_, header);
  return w;
}

std::vector<uint8_t> EventStreamWriter::take_bytes() {
  std::vector<uint8_t> out;
  if (in_memory_) out.swap(buffer_);
  return out;
}

Result<std::unique_ptr<EventStreamWriter>> EventStreamWriter::create(const std::filesystem::path& file,
                                                                     const EventStreamHeader& header, FdPolicy policy) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot create {}: {}", file.string(), std::strerror(errno)));
  std::unique_ptr<EventStreamWriter> w(new EventStreamWriter());
  w->fd_ = fd;
  w->path_ = file.string();
  put_file_header(w->buffer_, header);
  RS_RETURN_IF_ERROR(w->flush());
  if (policy == FdPolicy::kOpenPerFlush) {
    ::close(w->fd_);
    w->fd_ = -1;
  }
  return w;
}

EventStreamWriter::~EventStreamWriter() {
  (void)flush();
  if (fd_ >= 0) ::close(fd_);
}

void EventStreamWriter::append_record(RecordType type, std::span<const uint8_t> payload) {
  const events::RecordHeader rh{uint32_t(type), uint32_t(payload.size())};
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(&rh), sizeof(rh));
  crc = crc32(crc, payload.data(), uInt(payload.size()));
  put(buffer_, rh);
  buffer_.insert(buffer_.end(), payload.begin(), payload.end());
  put(buffer_, uint32_t(crc));
}

uint32_t EventStreamWriter::intern(NameKind kind, std::string_view name) {
  std::string key;
  key.reserve(name.size() + 1);
  key.push_back(char(kind));
  key.append(name);
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  // Ids start at 1: 0 means "no name" in every record that refers to one.
  const uint32_t id = uint32_t(ids_.size()) + 1;
  ids_.emplace(std::move(key), id);
  scratch_.clear();
  put(scratch_, events::NamePrefix{id, uint8_t(kind), {0, 0, 0}});
  scratch_.insert(scratch_.end(), name.begin(), name.end());
  append_record(RecordType::kName, scratch_);
  return id;
}

void EventStreamWriter::write_clock(const ClockRecord& clock) {
  scratch_.clear();
  put(scratch_, clock);
  append_record(RecordType::kClock, scratch_);
}

void EventStreamWriter::write_step(const StepRecord& s) {
  scratch_.clear();
  put(scratch_, events::StepPrefix{s.step, s.begin_ns, s.end_ns, uint32_t(s.ranges.size()),
                                   uint32_t(s.collectives.size()), uint32_t(s.counters.size()), 0});
  put_array(scratch_, std::span<const RangeAggregate>(s.ranges));
  put_array(scratch_, std::span<const CollectiveEvent>(s.collectives));
  put_array(scratch_, std::span<const CounterValue>(s.counters));
  append_record(RecordType::kStep, scratch_);
}

void EventStreamWriter::write_trace_ranges(int64_t step, std::span<const TraceRange> ranges) {
  scratch_.clear();
  put(scratch_, events::ArrayPrefix{step, uint32_t(ranges.size()), 0});
  put_array(scratch_, ranges);
  append_record(RecordType::kTraceRanges, scratch_);
}

void EventStreamWriter::write_trace_kernels(int64_t step, std::span<const TraceKernel> kernels) {
  scratch_.clear();
  put(scratch_, events::ArrayPrefix{step, uint32_t(kernels.size()), 0});
  put_array(scratch_, kernels);
  append_record(RecordType::kTraceKernels, scratch_);
}

void EventStreamWriter::write_grad_arrivals(int64_t step, std::span<const GradArrival> arrivals) {
  scratch_.clear();
  put(scratch_, events::ArrayPrefix{step, uint32_t(arrivals.size()), 0});
  put_array(scratch_, arrivals);
  append_record(RecordType::kGradArrivals, scratch_);
}

void EventStreamWriter::write_trace_launches(int64_t step, std::span<const TraceLaunch> launches) {
  scratch_.clear();
  put(scratch_, events::ArrayPrefix{step, uint32_t(launches.size()), 0});
  put_array(scratch_, launches);
  append_record(RecordType::kTraceLaunches, scratch_);
}

void EventStreamWriter::write_end(int64_t end_ns) {
  scratch_.clear();
  put(scratch_, end_ns);
  append_record(RecordType::kEnd, scratch_);
}

Status EventStreamWriter::flush() {
  if (buffer_.empty() || in_memory_) return {};
  int fd = fd_;
  if (fd < 0) {  // kOpenPerFlush
    fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return io_error(fmt::format("{}: cannot open to append: {}", path_, std::strerror(errno)));
  }
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      buffer_.erase(buffer_.begin(), buffer_.begin() + long(done));
      if (fd != fd_) ::close(fd);
      return io_error(fmt::format("{}: write failed: {}", path_, std::strerror(e)));
    }
    done += size_t(n);
  }
  if (fd != fd_) ::close(fd);
  bytes_written_ += done;
  buffer_.clear();
  return {};
}

}  // namespace rankscope::format
