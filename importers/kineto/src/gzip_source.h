// gzip_source.h — a std::streambuf over a file that may be gzip-compressed (internal).
//
// Is: zlib's gzread, which reads gzip and plain files alike, behind a 256 KiB buffer, so a
// streaming JSON parser pulls bytes without the file (or its decompressed text) ever being held
// whole. Remembers why the stream ended early (truncated or corrupt gzip) and how many bytes of
// text it delivered. Is not: a parser (trace_reader.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <streambuf>
#include <string>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::kineto {

class GzipSource : public std::streambuf {
 public:
  static Result<std::unique_ptr<GzipSource>> open(const std::filesystem::path& file);
  ~GzipSource() override;
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  // "" when the stream ended cleanly; else zlib's reason ("unexpected end of file", ...).
  const std::string& error() const { return error_; }
  uint64_t bytes_delivered() const { return delivered_; }
  bool compressed() const { return compressed_; }

 protected:
  int_type underflow() override;

 private:
  explicit GzipSource(void* handle, bool compressed);
  void* handle_;  // gzFile
  bool compressed_;
  std::vector<char> buffer_;
  std::string error_;
  uint64_t delivered_ = 0;
};

}  // namespace rankscope::kineto
