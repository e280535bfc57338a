// debug_server_client.cpp — a bounded HTTP/1.0 GET to a loopback address (debug_server_client.h).
#include "debug_server_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace rankscope::stacks {
namespace {
namespace debug_client_impl {

constexpr size_t kMaxBodyBytes = 64u << 20;  // the stacks of thousands of ranks are a few MiB

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace debug_client_impl
}  // namespace

Status parse_loopback_address(std::string_view address, std::string& host, int& port) {
  using namespace debug_client_impl;
  std::string_view h, p;
  if (address.starts_with("[")) {
    const size_t close = address.find("]:");
    if (close == std::string_view::npos) return invalid_argument(fmt::format("'{}': expected [HOST]:PORT", address));
    h = address.substr(1, close - 1);
    p = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return invalid_argument(fmt::format("'{}': expected HOST:PORT", address));
    h = address.substr(0, colon);
    p = address.substr(colon + 1);
  }
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port <= 0 || port > 65535)
    return invalid_argument(fmt::format("'{}': the port must be a number from 1 to 65535", address));
  host = std::string(h);
  if (!is_loopback(host))
    return invalid_argument(fmt::format("'{}': only a debug server on this machine is asked (localhost, 127.x.x.x, "
                                        "::1): it has no authentication; run hangdoctor on the job's rank-0 node",
                                        address));
  return Status::ok_status();
}

Result<std::string> http_get(const std::string& host, int port, const std::string& path, double timeout_s) {
  using namespace debug_client_impl;
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  const std::string where = fmt::format("http://{}:{}{}", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                                        port, path);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    return not_found(fmt::format("{}: cannot resolve {}", where, host));
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -1;
      continue;
    }
    pollfd pf{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&pf, 1, remaining_ms(deadline)) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0)
    return not_found(fmt::format("{}: nothing listens there (is the job running torch.distributed.debug."
                                 "start_debug_server? its frontend runs on rank 0, default port 25999)", where));
  const std::string request = fmt::format("GET {} HTTP/1.0\r\nHost: {}\r\nConnection: close\r\n\r\n", path, host);
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd pf{fd, POLLOUT, 0};
    if (poll(&pf, 1, remaining_ms(deadline)) != 1) break;
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
  }
  std::string reply;
  char buf[16384];
  bool timed_out = sent < request.size();
  while (!timed_out) {
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, remaining_ms(deadline)) != 1) {
      timed_out = true;
      break;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    reply.append(buf, size_t(n));
    if (reply.size() > kMaxBodyBytes) break;
  }
  close(fd);
  if (timed_out)
    return io_error(fmt::format("{}: no full answer within {:.0f} s (the server waits up to its fetch_timeout for "
                                "every rank's worker)", where, timeout_s));
  const size_t eol = reply.find("\r\n");
  const std::string status = reply.substr(0, eol == std::string::npos ? std::min<size_t>(reply.size(), 80) : eol);
  if (status.find(" 200") == std::string::npos)
    return io_error(fmt::format("{}: answered '{}'", where, status));
  const size_t body = reply.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : reply.substr(body + 4);
}

}  // namespace rankscope::stacks
