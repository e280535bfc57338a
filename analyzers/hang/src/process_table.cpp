// process_table.cpp — the production ProcessTable: kill(pid, 0) on this host.
#include "rankscope/analyzers/hang/process_table.h"

namespace rankscope::hang {

Liveness SystemProcessTable::liveness(const std::string& host, int pid) {
  return analyzers::process_liveness(host, pid);
}

std::string SystemProcessTable::local_host() { return analyzers::this_host_name(); }

}  // namespace rankscope::hang
