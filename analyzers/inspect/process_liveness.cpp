// process_liveness.cpp — kill(pid, 0) for processes on this host and boot.
#include "process_liveness.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

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

Liveness process_liveness(const std::string& host, int pid, const std::string& boot_id) {
  if (pid <= 0 || host != this_host_name()) return Liveness::kUnknown;
  if (!boot_id.empty() && boot_id != this_boot_id()) return Liveness::kUnknown;
  if (::kill(pid, 0) == 0 || errno == EPERM) return Liveness::kAlive;
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
