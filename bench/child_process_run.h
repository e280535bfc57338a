// child_process_run.h — runs one of our command-line tools as a child process and measures it:
// wall seconds, CPU seconds (user + system) and peak RSS, as the import benchmarks report them.
//
// Is: fork + execv + wait4, the child's stdout sent to /dev/null. Is not: a timeout or a shell.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace rankscope::bench {

struct ChildRun {
  int rc = -1;
  double seconds = 0, cpu_seconds = 0, peak_mb = 0;
};

inline ChildRun run_child(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);  // else the child's freopen flushes this process's buffered lines a second time
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    ::execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  ChildRun r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.peak_mb = double(ru.ru_maxrss) / 1024.0;
  // CPU time as well: on a shared machine the wall time says more about the neighbours.
  r.cpu_seconds = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  return r;
}

}  // namespace rankscope::bench
