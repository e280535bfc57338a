// process_table.h — "is the process that wrote this flight recorder still alive?", as an interface.
//
// Is: the one question the hang classifier asks the operating system, behind a small interface so
// tests can hand it a fake process table (dynolog's fake /proc idea) and production uses kill(pid,0)
// on this host (analyzers/inspect's process_liveness). Is not: a remote probe; processes on other
// hosts are kUnknown and the classifier falls back on heartbeat age.
#pragma once

#include <string>

#include "process_liveness.h"

namespace rankscope::hang {

using analyzers::Liveness;

class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  virtual Liveness liveness(const std::string& host, int pid) = 0;
  virtual std::string local_host() = 0;
};

// The real one: kill(pid, 0) when `host` is this machine, kUnknown otherwise.
class SystemProcessTable final : public ProcessTable {
 public:
  Liveness liveness(const std::string& host, int pid) override;
  std::string local_host() override;
};

}  // namespace rankscope::hang
