// node_launch.cpp — fork/exec, pipes and one poll loop for every node's command.
#include "rankscope/gather/node_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace rankscope::gather {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kErrTail = 2048;
constexpr auto kKillGrace = std::chrono::milliseconds(300);

struct Running {
  LaunchedCommand* cmd = nullptr;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  bool exited = false;
  bool term_sent = false;
};

bool spawn(Running& r) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return false;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execl("/bin/sh", "sh", "-c", r.cmd->command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return false;
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call
  r.pid = pid;
  r.out_fd = out[0];
  r.err_fd = err[0];
  ::fcntl(r.out_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(r.err_fd, F_SETFL, O_NONBLOCK);
  r.cmd->started = true;
  return true;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void reap(Running& r, bool block) {
  if (r.exited || r.pid <= 0) return;
  int status = 0;
  const pid_t got = ::waitpid(r.pid, &status, block ? 0 : WNOHANG);
  if (got != r.pid) return;
  r.exited = true;
  r.cmd->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace

std::string shell_quote(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void run_commands(std::vector<LaunchedCommand>& commands, double deadline_s, uint64_t max_stdout_bytes,
                  int max_parallel) {
  // The pipes of nodes that have already ended must not kill us when written to later.
  ::signal(SIGPIPE, SIG_IGN);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_s));
  auto seconds_now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::vector<Running> running;
  size_t next = 0;
  std::vector<char> buf(1 << 16);

  auto finish = [&](Running& r) {
    close_fd(r.out_fd);
    close_fd(r.err_fd);
    r.cmd->seconds = seconds_now();
  };

  for (;;) {
    while (next < commands.size() && int(running.size()) < std::max(1, max_parallel) && Clock::now() < deadline) {
      Running r;
      r.cmd = &commands[next++];
      if (spawn(r))
        running.push_back(r);
      else
        r.cmd->err_tail = std::string("cannot start the command: ") + std::strerror(errno);
    }
    // Done: every pipe closed and every child reaped.
    for (auto& r : running) reap(r, false);
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [&](Running& r) {
                                   if (r.out_fd >= 0 || r.err_fd >= 0 || !r.exited) return false;
                                   return true;
                                 }),
                  running.end());
    if (running.empty() && next >= commands.size()) break;
    if (Clock::now() >= deadline) break;

    std::vector<pollfd> fds;
    std::vector<std::pair<Running*, bool>> owners;  // (which, is stdout)
    for (auto& r : running) {
      if (r.out_fd >= 0) fds.push_back({r.out_fd, POLLIN, 0}), owners.push_back({&r, true});
      if (r.err_fd >= 0) fds.push_back({r.err_fd, POLLIN, 0}), owners.push_back({&r, false});
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    // Pipes all closed but a child not reaped yet: wake up soon to reap it.
    const int wait_ms = int(std::clamp<long long>(left, 0, fds.empty() ? 10 : 100));
    if (!fds.empty())
      ::poll(fds.data(), fds.size(), wait_ms);
    else
      ::usleep(useconds_t(wait_ms) * 1000);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      auto [r, is_out] = owners[i];
      int& fd = is_out ? r->out_fd : r->err_fd;
      for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n > 0) {
          if (is_out) {
            auto& out = r->cmd->out;
            if (out.size() + size_t(n) > max_stdout_bytes) {
              r->cmd->overflowed = true;
              ::kill(-r->pid, SIGKILL);
              close_fd(fd);
              break;
            }
            out.insert(out.end(), buf.data(), buf.data() + n);
          } else {
            auto& tail = r->cmd->err_tail;
            tail.append(buf.data(), size_t(n));
            if (tail.size() > kErrTail) tail.erase(0, tail.size() - kErrTail);
          }
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
        close_fd(fd);  // EOF or error
        break;
      }
      if (r->out_fd < 0 && r->err_fd < 0) r->cmd->seconds = seconds_now();
    }
  }

  // The deadline: whatever still runs is stopped, politely first (srun cancels its step on SIGTERM).
  for (auto& r : running) {
    reap(r, false);
    if (!r.exited || r.out_fd >= 0 || r.err_fd >= 0) {
      r.cmd->timed_out = true;
      ::kill(-r.pid, SIGTERM);
      r.term_sent = true;
    }
  }
  const auto grace_end = Clock::now() + kKillGrace;
  for (auto& r : running) {
    while (r.term_sent && !r.exited && Clock::now() < grace_end) {
      reap(r, false);
      if (!r.exited) ::usleep(10'000);
    }
    if (!r.exited) {
      ::kill(-r.pid, SIGKILL);
      reap(r, true);  // SIGKILL cannot be ignored; only a D-state child would hold us, and sh is not one
    }
    finish(r);
  }
  for (size_t i = next; i < commands.size(); ++i) {
    commands[i].timed_out = true;
    commands[i].err_tail = "not started before the deadline (too many nodes for --max-parallel)";
  }
}

std::string why_unanswered(const LaunchedCommand& c, double deadline_s) {
  std::string err = c.err_tail;
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (const size_t nl = err.rfind('\n'); nl != std::string::npos) err = err.substr(nl + 1);  // the last line says most
  if (c.timed_out)
    return fmt::format("no answer within the {:.1f} s deadline{}{}", deadline_s,
                       err.empty() ? "" : "; last said: ", err);
  if (c.overflowed) return "sent more than the stream limit; stopped";
  if (!c.started) return err.empty() ? "the launcher could not be started" : err;
  if (c.exit_code != 0 && err.empty()) return fmt::format("the command failed (exit {}) and said nothing", c.exit_code);
  if (c.exit_code != 0) return fmt::format("exit {}: {}", c.exit_code, err);
  return {};
}

}  // namespace rankscope::gather
