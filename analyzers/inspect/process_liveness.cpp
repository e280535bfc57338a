// process_liveness.cpp — kill(pid, 0) for processes on this host and boot.
#include "process_liveness.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace rankscope::analyzers {

std::string this_host_name() {
  // Read once: hangdoctor asks for every rank of a 16K-rank run (a uname(2) each cost 2% of its
  // time), and a process's host name does not change under it.
  static const std::string name = [] {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof(buf) - 1) != 0) return std::string();
    return std::string(buf);
  }();
  return name;
}

std::string this_boot_id() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  return id;
}

namespace {

// A process that has exited but was not yet reaped by its parent (a zombie, 'Z', or dying, 'X')
// still answers kill(pid, 0): its /proc/PID/stat state (the letter after the last ')', since the
// command name may hold one) says it is gone. A launcher reaps its ranks a moment after they die,
// so a verdict taken in that moment would otherwise read a dead rank as alive.
bool has_exited(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

Liveness process_liveness(const std::string& host, int pid, const std::string& boot_id) {
  if (pid <= 0 || host != this_host_name()) return Liveness::kUnknown;
  if (!boot_id.empty() && boot_id != this_boot_id()) return Liveness::kUnknown;
  if (::kill(pid, 0) == 0 || errno == EPERM) return has_exited(pid) ? Liveness::kGone : Liveness::kAlive;
  return Liveness::kGone;
}

const char* liveness_name(Liveness l) {
  switch (l) {
    case Liveness::kAlive: return "alive";
    case Liveness::kGone: return "gone";
    case Liveness::kUnknown: return "unknown";
  }
  return "unknown";
}

}  // namespace rankscope::analyzers
