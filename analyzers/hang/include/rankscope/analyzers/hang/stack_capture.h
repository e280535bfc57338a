// stack_capture.h — native stacks of culprit ranks, for hangdoctor --stacks.
//
// Is: a StackCollector interface (tests fake it) and the real one, which runs elfutils'
// `eu-stack -p PID` and falls back to `gdb -p PID -batch -ex "thread apply all bt"` (both Debian
// packages); and the step that picks the ranks worth a look (culprits alive on this host, or the
// waiters of a collective nobody is to blame for), stores each stack under RUN_DIR/evidence via
// format::evidence_path and attaches it to the diagnosis. Is not: the probe's own watchdog stacks
// (probe runtime; analyzers never link it).
#pragma once

#include <filesystem>
#include <string>

#include "rankscope/analyzers/hang/diagnosis.h"
#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers::hang {

class StackCollector {
 public:
  virtual ~StackCollector() = default;
  // Symbolized stacks of every thread of `pid` as text.
  virtual Result<std::string> collect(int pid) = 0;
};

class ExternalStackCollector final : public StackCollector {
 public:
  Result<std::string> collect(int pid) override;
};

struct StackCaptureReport {
  int captured = 0;
  std::vector<std::string> notes;  // ranks skipped (other host, gone) or failures
};

// At most `max_ranks` ranks are captured.
StackCaptureReport capture_stacks(Diagnosis& d, const std::filesystem::path& run_dir, ProcessTable& processes,
                                  StackCollector& collector, int max_ranks = 8);

}  // namespace rankscope::analyzers::hang
