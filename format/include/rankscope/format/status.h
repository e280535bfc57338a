// status.h — the error type of rankscope: a message plus a breadcrumb of where it travelled.
//
// Is: NCCL's idea (a status carried up by a check macro that appends "file:line") in a
// Result<T> shape, so readers can say "rank00003.flight: bad magic (at flight_recorder_reader.cpp:88
// <- run_directory.cpp:41)". Is not: an exception hierarchy; nothing in the format or probe throws
// across its public API.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace rankscope {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something wrong (a flag, a name)
  kNotFound,         // a file or directory that should exist does not
  kCorrupt,          // bytes on disk that do not parse: bad magic, torn beyond repair, bad checksum
  kUnsupported,      // a well-formed file of a schema version outside the readable range
  kIo,               // the operating system said no (open, mmap, write)
  kInternal,         // a bug of ours
  kOutOfMemory,      // the run needs more (device) memory than there is; gpt2-train exits 2
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& breadcrumb() const { return breadcrumb_; }
  // "message" plus " (at a.cpp:10 <- b.cpp:20)" when a breadcrumb was left: for logs and tests.
  std::string to_string() const;
  // What a user is shown: the message alone; the breadcrumb only with RANKSCOPE_DEBUG set (a source
  // location means nothing to a user, and a report to us can carry it on request).
  std::string user_text() const;

  // Appends one "file:line" hop; used by RS_RETURN_IF_ERROR and RS_ASSIGN_OR_RETURN.
  Status& add_breadcrumb(const char* file, int line);
  // Prefixes context, e.g. the file name: "rank00003.flight: " + message.
  Status& prefix(const std::string& context);

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string breadcrumb_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status out_of_memory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }

// A value or the Status explaining why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {}    // NOLINT(implicit); must not be ok
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  Status& mutable_status() { return std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rankscope

#define RS_INTERNAL_CONCAT2(a, b) a##b
#define RS_INTERNAL_CONCAT(a, b) RS_INTERNAL_CONCAT2(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok, leaving a breadcrumb.
#define RS_RETURN_IF_ERROR(expr)                                   \
  do {                                                             \
    ::rankscope::Status rs_status_ = (expr);                       \
    if (!rs_status_.ok()) {                                        \
      rs_status_.add_breadcrumb(__FILE__, __LINE__);               \
      return rs_status_;                                           \
    }                                                              \
  } while (0)

// `lhs = value of expr`, or return its Status with a breadcrumb. lhs may be a declaration.
#define RS_ASSIGN_OR_RETURN(lhs, expr) \
  RS_INTERNAL_ASSIGN_OR_RETURN(RS_INTERNAL_CONCAT(rs_result_, __LINE__), lhs, expr)
#define RS_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr)      \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) {                                        \
    ::rankscope::Status rs_s_ = tmp.status();             \
    rs_s_.add_breadcrumb(__FILE__, __LINE__);             \
    return rs_s_;                                         \
  }                                                       \
  lhs = std::move(tmp).value()
