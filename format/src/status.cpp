// status.cpp — Status formatting and breadcrumbs.
#include "rankscope/format/status.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace rankscope {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kOutOfMemory: return "out of memory";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  if (breadcrumb_.empty()) return message_;
  return message_ + " (at " + breadcrumb_ + ")";
}

std::string Status::user_text() const {
  const char* debug = std::getenv("RANKSCOPE_DEBUG");
  return debug && *debug && std::string_view(debug) != "0" ? to_string() : message_;
}

Status& Status::add_breadcrumb(const char* file, int line) {
  // Only the file's base name: breadcrumbs are for people, and absolute paths are noise.
  const char* slash = std::strrchr(file, '/');
  std::string hop = std::string(slash ? slash + 1 : file) + ":" + std::to_string(line);
  breadcrumb_ = breadcrumb_.empty() ? hop : breadcrumb_ + " <- " + hop;
  return *this;
}

Status& Status::prefix(const std::string& context) {
  message_ = context + ": " + message_;
  return *this;
}

}  // namespace rankscope
