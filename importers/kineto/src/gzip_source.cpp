// gzip_source.cpp — see gzip_source.h.
#include "gzip_source.h"

#include <zlib.h>

#include <fmt/format.h>

namespace rankscope::kineto {

Result<std::unique_ptr<GzipSource>> GzipSource::open(const std::filesystem::path& file) {
  gzFile handle = gzopen(file.c_str(), "rb");
  if (!handle) return io_error(fmt::format("{}: cannot open", file.string()));
  gzbuffer(handle, 1 << 18);
  // gzdirect() is only meaningful once the header was looked at: peek one byte.
  const int first = gzgetc(handle);
  if (first != -1) gzungetc(first, handle);
  const bool compressed = gzdirect(handle) == 0;
  return std::unique_ptr<GzipSource>(new GzipSource(handle, compressed));
}

GzipSource::GzipSource(void* handle, bool compressed) : handle_(handle), compressed_(compressed), buffer_(1 << 18) {}

GzipSource::~GzipSource() { gzclose(static_cast<gzFile>(handle_)); }

GzipSource::int_type GzipSource::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (!error_.empty()) return traits_type::eof();
  const int n = gzread(static_cast<gzFile>(handle_), buffer_.data(), unsigned(buffer_.size()));
  if (n <= 0) {
    int code = 0;
    const char* message = gzerror(static_cast<gzFile>(handle_), &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) error_ = message && *message ? message : "read error";
    return traits_type::eof();
  }
  delivered_ += uint64_t(n);
  setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
  return traits_type::to_int_type(*gptr());
}

}  // namespace rankscope::kineto
