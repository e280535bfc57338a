// ras_client.cpp — the client side of NCCL's RAS socket protocol (see ras_client.h), with a bound on
// every wait: a stuck job must not make hangdoctor hang too. POSIX sockets only.
#include "ras_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <strings.h>

namespace rankscope::logs {
namespace {
// Named inside the anonymous namespace: a unity build puts several readers in one translation unit.
namespace ras_client_impl {

// From NCCL's ras_internal.h (every tag 2.24..2.30): the protocol version the client announces and
// the extra time RAS may take beyond the client's TIMEOUT before it answers.
constexpr int kRasClientProtocol = 2;
constexpr double kRasCollectiveExtraTimeoutS = 5;
constexpr double kSlackS = 1;                   // ncclras's TIMEOUT_INCREMENT
constexpr size_t kMaxReportBytes = 256u << 20;  // a report of ~100k ranks is a few MiB
constexpr size_t kMaxReplyLineBytes = 4096;     // ncclras reads handshake replies into 4 KiB

using Clock = std::chrono::steady_clock;

std::string endpoint(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string nothing_listens(const std::string& host, int port) {
  return "nothing listens on " + endpoint(host, port) +
         ": is the job running NCCL >= 2.24 with RAS enabled (NCCL_RAS_ENABLE, on by default)? RAS listens "
         "where NCCL_RAS_ADDR says (default localhost:28028), so query from a node of the job";
}

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd until the deadline: 1 ready, 0 timed out, -1 error (errno set).
int wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

// Non-blocking connect to each address getaddrinfo gives, the first that accepts wins.
Result<Socket> connect_to(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return not_found("cannot resolve the RAS host " + host + ": " + ::gai_strerror(rc));
  }
  bool refused = false, timed_out = false;
  std::string other_error;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (s.fd() < 0) continue;
    const int flags = ::fcntl(s.fd(), F_GETFL, 0);
    if (flags < 0 || ::fcntl(s.fd(), F_SETFL, flags | O_NONBLOCK) < 0) continue;
    int err = 0;
    if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const int ready = wait_for(s.fd(), POLLOUT, deadline);
        if (ready == 0) {
          timed_out = true;
          continue;
        }
        socklen_t len = sizeof(err);
        if (ready < 0 || ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      ::freeaddrinfo(found);
      return std::move(s);
    }
    if (err == ECONNREFUSED) refused = true;
    else other_error = std::strerror(err);
  }
  ::freeaddrinfo(found);
  if (refused) return not_found(nothing_listens(host, port));
  if (timed_out) {
    return io_error("connecting to the RAS service at " + endpoint(host, port) +
                    " timed out: is the host reachable, and is RAS's port open to you?");
  }
  return io_error("cannot connect to the RAS service at " + endpoint(host, port) + ": " +
                  (other_error.empty() ? std::string("no usable address") : other_error));
}

class Connection {
 public:
  Connection(Socket socket, std::string where) : socket_(std::move(socket)), where_(std::move(where)) {}

  Status send_line(const std::string& line, Clock::time_point deadline) {
    const std::string data = line + "\n";
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::send(socket_.fd(), data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (wait_for(socket_.fd(), POLLOUT, deadline) <= 0)
          return io_error("the RAS service at " + where_ + " stopped reading (sending \"" + line + "\" timed out)");
        continue;
      }
      return io_error("the RAS service at " + where_ + " closed the connection while we sent \"" + line +
                      "\": " + std::strerror(errno));
    }
    return Status::ok_status();
  }

  // One reply line, without its "\n" (and "\r").
  Result<std::string> read_line(const std::string& after, Clock::time_point deadline) {
    while (true) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (buffer_.size() > kMaxReplyLineBytes)
        return corrupt("the service at " + where_ + " is not NCCL RAS: its reply to \"" + after + "\" is not a line");
      RS_ASSIGN_OR_RETURN(const bool more, read_some(after, deadline));
      if (!more) {
        return io_error("the RAS service at " + where_ + " closed the connection without answering \"" + after +
                        "\"");
      }
    }
  }

  // Everything until the server closes the connection.
  Result<std::string> read_to_eof(const std::string& after, Clock::time_point deadline) {
    while (true) {
      RS_ASSIGN_OR_RETURN(const bool more, read_some(after, deadline));
      if (!more) break;
      if (buffer_.size() > kMaxReportBytes)
        return corrupt("the report of the RAS service at " + where_ + " exceeds 256 MiB; stopped reading");
    }
    return std::move(buffer_);
  }

 private:
  // Appends what arrives to buffer_: true, or false at end of stream.
  Result<bool> read_some(const std::string& after, Clock::time_point deadline) {
    char chunk[16384];
    while (true) {
      const ssize_t n = ::recv(socket_.fd(), chunk, sizeof(chunk), 0);
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return io_error("reading from the RAS service at " + where_ + " failed: " + std::strerror(errno));
      }
      const int ready = wait_for(socket_.fd(), POLLIN, deadline);
      if (ready == 0) {
        return io_error("the RAS service at " + where_ + " did not answer \"" + after +
                        "\" in time: the job's RAS thread may be stuck or busy; try a longer timeout");
      }
      if (ready < 0) return io_error("waiting for the RAS service at " + where_ + " failed: " + std::strerror(errno));
    }
  }

  Socket socket_;
  std::string where_;
  std::string buffer_;
};

bool equals_ignoring_case(const std::string& a, const char* b) { return ::strcasecmp(a.c_str(), b) == 0; }

Result<std::string> query(const std::string& host, int port, bool json, double timeout_s, bool verbose) {
  if (!(timeout_s > 0) || !std::isfinite(timeout_s) || timeout_s > 86400)
    return invalid_argument("the RAS query timeout must be a number of seconds in (0, 86400]");
  if (port < 1 || port > 65535) return invalid_argument("the RAS port must be in 1..65535");
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const std::string where = endpoint(host, port);

  RS_ASSIGN_OR_RETURN(Socket socket, connect_to(host, port, Clock::now() + seconds(timeout_s)));
  Connection conn(std::move(socket), where);

  // Handshake. The server answers every command line with one line; we wait for each in turn, as
  // ncclras does, so an error names the command that caused it.
  const std::string hello = "CLIENT PROTOCOL " + std::to_string(kRasClientProtocol);
  RS_RETURN_IF_ERROR(conn.send_line(hello, Clock::now() + seconds(timeout_s)));
  RS_ASSIGN_OR_RETURN(std::string reply, conn.read_line(hello, Clock::now() + seconds(timeout_s)));
  if (::strncasecmp(reply.c_str(), "SERVER PROTOCOL ", 16) != 0) {
    return corrupt("the service at " + where + " is not NCCL RAS: it answered \"" + reply.substr(0, 80) +
                   "\" to \"" + hello + "\"");
  }
  // A different protocol number is not fatal: ncclras warns and goes on, and so do we (silently:
  // every NCCL with RAS so far speaks 2).

  // RAS's own wait for the other processes, in whole seconds (0 would mean "no timeout").
  const int ras_timeout = std::max(1, static_cast<int>(std::ceil(timeout_s)));
  const std::string timeout_cmd = "TIMEOUT " + std::to_string(ras_timeout);
  RS_RETURN_IF_ERROR(conn.send_line(timeout_cmd, Clock::now() + seconds(timeout_s)));
  RS_ASSIGN_OR_RETURN(reply, conn.read_line(timeout_cmd, Clock::now() + seconds(timeout_s)));
  if (!equals_ignoring_case(reply, "OK"))
    return corrupt("the RAS service at " + where + " refused \"" + timeout_cmd + "\": " + reply.substr(0, 200));

  if (json) {
    // Only 2.28.7+ servers know SET FORMAT; older ones answer "ERROR: Unknown command ..." and keep
    // the connection, so we go on and take their text report (parse_nccl_ras reads both).
    const std::string format_cmd = "SET FORMAT json";
    RS_RETURN_IF_ERROR(conn.send_line(format_cmd, Clock::now() + seconds(timeout_s)));
    RS_ASSIGN_OR_RETURN(reply, conn.read_line(format_cmd, Clock::now() + seconds(timeout_s)));
    if (!equals_ignoring_case(reply, "OK") && ::strncasecmp(reply.c_str(), "ERROR: Unknown command", 22) != 0)
      return corrupt("the RAS service at " + where + " refused \"" + format_cmd + "\": " + reply.substr(0, 200));
  }

  const std::string status_cmd = verbose ? "VERBOSE STATUS" : "STATUS";
  RS_RETURN_IF_ERROR(conn.send_line(status_cmd, Clock::now() + seconds(timeout_s)));
  // RAS gathers from every process for up to its TIMEOUT, plus its extra timeout, before the last
  // of the report arrives; then it closes the connection.
  RS_ASSIGN_OR_RETURN(std::string report,
                      conn.read_to_eof(status_cmd, Clock::now() + seconds(timeout_s + kRasCollectiveExtraTimeoutS +
                                                                          kSlackS)));
  if (report.empty())
    return io_error("the RAS service at " + where + " closed the connection without a report");
  return report;
}

}  // namespace ras_client_impl
}  // namespace

Status parse_ras_address(std::string_view address, std::string& host, int& port) {
  const std::string shown(address);
  std::string_view port_text = address;
  std::string parsed_host = "localhost";
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close == 1)
      return invalid_argument("bad RAS address \"" + shown + "\": an IPv6 host goes in brackets, e.g. [::1]:28028");
    parsed_host = std::string(address.substr(1, close - 1));
    if (close + 1 >= address.size() || address[close + 1] != ':')
      return invalid_argument("bad RAS address \"" + shown + "\": expected [HOST]:PORT");
    port_text = address.substr(close + 2);
  } else if (const size_t colon = address.rfind(':'); colon != std::string_view::npos) {
    if (address.find(':') != colon)
      return invalid_argument("bad RAS address \"" + shown + "\": put an IPv6 host in brackets, e.g. [::1]:28028");
    if (colon == 0) return invalid_argument("bad RAS address \"" + shown + "\": empty host before ':'");
    parsed_host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
  }
  int value = 0;
  bool digits = !port_text.empty() && port_text.size() <= 5;
  for (char c : port_text) {
    if (c < '0' || c > '9') {
      digits = false;
      break;
    }
    value = value * 10 + (c - '0');
  }
  if (!digits || value < 1 || value > 65535)
    return invalid_argument("bad RAS address \"" + shown + "\": expected [HOST:]PORT with PORT in 1..65535 "
                            "(RAS's default is 28028)");
  host = std::move(parsed_host);
  port = value;
  return Status::ok_status();
}

Result<std::string> query_nccl_ras(const std::string& host, int port, bool json, double timeout_s,
                                   bool verbose) {
  return ras_client_impl::query(host, port, json, timeout_s, verbose);
}

}  // namespace rankscope::logs
