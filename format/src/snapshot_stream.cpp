// snapshot_stream.cpp — encoder and bounded decoder of the node snapshot stream (docs/FORMAT.md).
//
// Body records inside the zlib stream (integers little-endian):
//   'F' u16 name_len, name bytes, u64 size, size bytes      one file
//   'E' u64 entries, u64 bytes                              the end: counts of what came before
// The decoder inflates on demand into small buffers, so memory stays at one entry (bounded by
// SnapshotLimits::max_entry_bytes), however large the stream claims to be.
#include "rankscope/format/snapshot_stream.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace rankscope::format {
namespace {

constexpr uint8_t kFileTag = 'F';
constexpr uint8_t kEndTag = 'E';
constexpr size_t kChunk = 1 << 16;
constexpr size_t kMaxNameBytes = 255;
constexpr int kMaxNameComponents = 4;

void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

bool name_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && std::strchr("._+@=,-", c) != nullptr);  // strchr finds the terminator
}

}  // namespace

Status check_snapshot_entry_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes)
    return corrupt(fmt::format("entry name of {} bytes (1..{} allowed)", name.size(), kMaxNameBytes));
  int components = 0;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..")
      return corrupt(fmt::format("entry name '{:.80}' is not a plain relative path (empty, '.' or '..' part)", name));
    for (char c : part)
      if (!name_char_ok(c))
        return corrupt(fmt::format("entry name '{:.80}' holds a character outside [A-Za-z0-9._+@=,-/]", name));
    if (++components > kMaxNameComponents)
      return corrupt(fmt::format("entry name '{:.80}' is nested deeper than {} parts", name, kMaxNameComponents));
    start = slash + 1;
  }
  return {};
}

struct SnapshotWriter::Zlib {
  z_stream s{};
  bool ready = false;
};

SnapshotWriter::SnapshotWriter(std::FILE* out) : z_(std::make_unique<Zlib>()), out_(out) {
  // Level 1: recorders are mostly zero-filled rings, which the fastest level already shrinks about
  // 28x (gather_bench); higher levels cost several times the CPU on a node that is busy training.
  z_->ready = deflateInit(&z_->s, Z_BEST_SPEED) == Z_OK;
  std::vector<uint8_t> header(kSnapshotMagic, kSnapshotMagic + sizeof(kSnapshotMagic));
  put_le(header, kSnapshotVersion, 4);
  put_le(header, 0, 4);  // flags: none defined in version 1
  failed_ = !z_->ready || std::fwrite(header.data(), 1, header.size(), out_) != header.size();
  bytes_out_ = header.size();
}

SnapshotWriter::~SnapshotWriter() {
  if (z_->ready) deflateEnd(&z_->s);
}

Status SnapshotWriter::deflate_bytes(std::span<const uint8_t> bytes, bool final) {
  std::array<uint8_t, kChunk> buf;
  z_->s.next_in = const_cast<Bytef*>(bytes.data());
  z_->s.avail_in = uInt(bytes.size());
  int rc = Z_OK;
  do {
    z_->s.next_out = buf.data();
    z_->s.avail_out = uInt(buf.size());
    rc = deflate(&z_->s, final ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) return internal_error("zlib deflate failed");
    const size_t n = buf.size() - z_->s.avail_out;
    if (n > 0 && std::fwrite(buf.data(), 1, n, out_) != n) return io_error("snapshot: cannot write the stream (stdout closed?)");
    bytes_out_ += n;
  } while (z_->s.avail_out == 0 || (final && rc != Z_STREAM_END));
  return {};
}

Status SnapshotWriter::add(std::string_view name, std::span<const uint8_t> bytes) {
  if (failed_ || finished_) return internal_error("snapshot: write after an error or after finish");
  if (Status s = check_snapshot_entry_name(name); !s.ok()) return invalid_argument(s.message());
  std::vector<uint8_t> head{kFileTag};
  put_le(head, name.size(), 2);
  head.insert(head.end(), name.begin(), name.end());
  put_le(head, bytes.size(), 8);
  // deflate's avail_in is 32-bit: feed large files in pieces.
  Status s = deflate_bytes(head, false);
  for (size_t off = 0; s.ok() && off < bytes.size(); off += size_t(1) << 30)
    s = deflate_bytes(bytes.subspan(off, std::min(bytes.size() - off, size_t(1) << 30)), false);
  failed_ = !s.ok();
  ++entries_;
  bytes_in_ += bytes.size();
  return s;
}

Status SnapshotWriter::add(std::string_view name, std::string_view text) {
  return add(name, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Status SnapshotWriter::finish() {
  if (failed_ || finished_) return internal_error("snapshot: finish after an error or twice");
  std::vector<uint8_t> end{kEndTag};
  put_le(end, entries_, 8);
  put_le(end, bytes_in_, 8);
  Status s = deflate_bytes(end, true);
  finished_ = true;
  if (s.ok() && std::fflush(out_) != 0) s = io_error("snapshot: cannot flush the stream");
  failed_ = !s.ok();
  return s;
}

namespace {

// Pulls inflated bytes on demand, 64 KiB at a time.
class Inflater {
 public:
  explicit Inflater(std::span<const uint8_t> compressed) {
    ok_ = inflateInit(&s_) == Z_OK;
    s_.next_in = const_cast<Bytef*>(compressed.data());
    s_.avail_in = uInt(std::min<size_t>(compressed.size(), UINT32_MAX));
    rest_ = compressed.subspan(s_.avail_in);
  }
  ~Inflater() {
    if (ok_) inflateEnd(&s_);
  }
  // Exactly n bytes into `out`, or an error saying why not.
  Status read(uint8_t* out, size_t n) {
    if (!ok_) return internal_error("zlib inflateInit failed");
    while (n > 0) {
      if (have_ == pos_) RS_RETURN_IF_ERROR(refill());
      const size_t take = std::min(n, have_ - pos_);
      std::memcpy(out, buf_.data() + pos_, take);
      pos_ += take;
      out += take;
      n -= take;
    }
    return {};
  }
  // After the end record: the zlib stream must end there, and nothing may follow it.
  Status expect_end() {
    if (pos_ != have_) return corrupt("bytes after the end record");
    if (!ended_) {
      Status s = refill();
      if (s.ok() || !ended_) return corrupt("bytes after the end record");
    }
    if (s_.avail_in != 0 || !rest_.empty()) return corrupt("bytes after the end of the compressed stream");
    return {};
  }

 private:
  Status refill() {
    if (ended_) return corrupt("stream ends inside a record (truncated)");
    pos_ = have_ = 0;
    while (have_ == 0) {
      if (s_.avail_in == 0 && !rest_.empty()) {
        s_.next_in = const_cast<Bytef*>(rest_.data());
        s_.avail_in = uInt(std::min<size_t>(rest_.size(), UINT32_MAX));
        rest_ = rest_.subspan(s_.avail_in);
      }
      const uint64_t in_before = s_.total_in;
      s_.next_out = buf_.data();
      s_.avail_out = uInt(buf_.size());
      const int rc = inflate(&s_, Z_NO_FLUSH);
      have_ = buf_.size() - s_.avail_out;
      if (rc == Z_STREAM_END) {
        ended_ = true;
      } else if (rc == Z_BUF_ERROR || (rc == Z_OK && have_ == 0 && s_.total_in == in_before)) {
        return corrupt("stream ends early (truncated: the node stopped sending)");
      } else if (rc != Z_OK) {
        return corrupt(fmt::format("compressed data is damaged ({})", s_.msg ? s_.msg : "zlib error"));
      }
      if (have_ == 0 && ended_) return corrupt("stream ends inside a record (truncated)");
    }
    return {};
  }

  z_stream s_{};
  bool ok_ = false, ended_ = false;
  std::span<const uint8_t> rest_;
  std::array<uint8_t, kChunk> buf_{};
  size_t pos_ = 0, have_ = 0;
};

// Writes `bytes` to `file`, seeking over all-zero 4 KiB blocks: a recorder is mostly unfilled
// rings, so the gathered copy costs the disk what it holds, not its size.
Status write_sparse(const std::filesystem::path& file, std::span<const uint8_t> bytes) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
  constexpr size_t kBlock = 4096;
  static const std::array<uint8_t, kBlock> zeros{};
  bool ok = true;
  for (size_t off = 0; ok && off < bytes.size(); off += kBlock) {
    const size_t n = std::min(kBlock, bytes.size() - off);
    if (n == kBlock && std::memcmp(bytes.data() + off, zeros.data(), kBlock) == 0) continue;
    for (size_t done = 0; ok && done < n;) {
      const ssize_t w = ::pwrite(fd, bytes.data() + off + done, n - done, off_t(off + done));
      ok = w > 0;
      done += ok ? size_t(w) : 0;
    }
  }
  ok = ok && ::ftruncate(fd, off_t(bytes.size())) == 0;  // the trailing holes, and the size
  ok = (::close(fd) == 0) && ok;
  if (!ok) return io_error(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
  return {};
}

}  // namespace

SnapshotDecodeResult decode_snapshot(std::span<const uint8_t> stream, std::string_view source,
                                     const SnapshotVisitor& visitor, const SnapshotLimits& limits) {
  SnapshotDecodeResult r;
  auto fail = [&](const Status& s) {
    r.status = Status(s.code(), fmt::format("{}: snapshot stream: {} (after {} whole entries)", source, s.message(), r.entries));
    return r;
  };
  constexpr size_t kHeader = sizeof(kSnapshotMagic) + 8;
  if (stream.empty()) return fail(corrupt("empty: the node sent nothing"));
  if (stream.size() < kHeader) return fail(corrupt(fmt::format("{} bytes, shorter than the header", stream.size())));
  if (std::memcmp(stream.data(), kSnapshotMagic, sizeof(kSnapshotMagic)) != 0)
    return fail(corrupt("bad magic: not a rankscope snapshot (did the node print something else to stdout?)"));
  r.version = uint32_t(get_le(stream.data() + 8, 4));
  if (r.version != kSnapshotVersion)
    return fail(unsupported(fmt::format("version {} (this reader knows {}): use the same rankscope on every node",
                                        r.version, kSnapshotVersion)));
  Inflater in(stream.subspan(kHeader));
  std::vector<uint8_t> payload;
  for (;;) {
    uint8_t tag = 0;
    if (Status s = in.read(&tag, 1); !s.ok()) return fail(s);
    if (tag == kEndTag) {
      uint8_t counts[16];
      if (Status s = in.read(counts, sizeof(counts)); !s.ok()) return fail(s);
      if (get_le(counts, 8) != r.entries || get_le(counts + 8, 8) != r.bytes)
        return fail(corrupt(fmt::format("the end record counts {} entries and {} bytes; {} and {} arrived",
                                        get_le(counts, 8), get_le(counts + 8, 8), r.entries, r.bytes)));
      if (Status s = in.expect_end(); !s.ok()) return fail(s);
      return r;
    }
    if (tag != kFileTag) return fail(corrupt(fmt::format("unknown record tag 0x{:02x}", tag)));
    uint8_t len_bytes[2];
    if (Status s = in.read(len_bytes, 2); !s.ok()) return fail(s);
    std::string name(size_t(get_le(len_bytes, 2)), '\0');
    if (name.size() > kMaxNameBytes) return fail(corrupt(fmt::format("entry name of {} bytes", name.size())));
    if (Status s = in.read(reinterpret_cast<uint8_t*>(name.data()), name.size()); !s.ok()) return fail(s);
    if (Status s = check_snapshot_entry_name(name); !s.ok()) return fail(s);
    uint8_t size_bytes[8];
    if (Status s = in.read(size_bytes, 8); !s.ok()) return fail(s);
    const uint64_t size = get_le(size_bytes, 8);
    if (size > limits.max_entry_bytes)
      return fail(corrupt(fmt::format("entry '{}' claims {} bytes, over the limit of {}", name, size, limits.max_entry_bytes)));
    if (r.bytes + size > limits.max_total_bytes)
      return fail(corrupt(fmt::format("entries add up to more than the limit of {} bytes", limits.max_total_bytes)));
    if (r.entries + 1 > limits.max_entries)
      return fail(corrupt(fmt::format("more than {} entries", limits.max_entries)));
    // Grown as bytes arrive, so a size that lies costs nothing before it is caught.
    payload.clear();
    while (payload.size() < size) {
      const size_t old = payload.size();
      const size_t take = size_t(std::min<uint64_t>(size - old, kChunk));
      payload.resize(old + take);
      if (Status s = in.read(payload.data() + old, take); !s.ok()) return fail(s);
    }
    if (Status s = visitor(name, payload); !s.ok()) return fail(s);
    ++r.entries;
    r.bytes += size;
    r.names.push_back(std::move(name));
  }
}

Status write_snapshot_entry(const std::filesystem::path& dir, std::string_view name, std::span<const uint8_t> bytes) {
  std::error_code ec;
  const auto file = dir / std::filesystem::path(std::string(name));
  std::filesystem::create_directories(file.parent_path(), ec);
  // A name may not reuse a directory or a link the stream made earlier (a second way out).
  if (std::filesystem::is_symlink(file, ec) || std::filesystem::is_directory(file, ec))
    return corrupt(fmt::format("entry '{}' would replace a directory or a link", name));
  return write_sparse(file, bytes);
}

SnapshotDecodeResult unpack_snapshot(std::span<const uint8_t> stream, std::string_view source,
                                     const std::filesystem::path& dir, const SnapshotLimits& limits) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto write_entry = [&](std::string_view name, std::span<const uint8_t> bytes) -> Status {
    return write_snapshot_entry(dir, name, bytes);
  };
  return decode_snapshot(stream, source, write_entry, limits);
}

}  // namespace rankscope::format
