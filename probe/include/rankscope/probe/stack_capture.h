// stack_capture.h — writes symbolized native stacks of every thread of a process to a file.
//
// Is: a launcher for a real debugger-grade tool, preferring `eu-stack -p PID` (elfutils: fast, tens
// of ms; then a detail pass with -i -s) and falling back to `gdb -p PID -batch -ex "thread apply all bt"`, spawned with
// posix_spawn (safe from a multi-threaded process), stdout and stderr appended to the output file,
// and killed when it exceeds its time limit. Used by the watchdog on its own process and reusable
// by hangdoctor on another one. Is not: an in-process unwinder (a wedged process may not run one).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::probe {

struct StackCaptureRequest {
  int pid = 0;
  std::filesystem::path output;  // created (with parent directories); the header is written first
  std::string header;            // lines written before the tool's output ("# reason ...")
  double time_limit_s = 10.0;    // per tool attempt
  // Tools to try in order; empty means {"eu-stack", "gdb"}. Looked up on PATH.
  std::vector<std::string> tools;
  // After a fast eu-stack pass, append a second one with inlined frames and source lines.
  bool detail = true;
};

struct StackCaptureResult {
  std::string tool;        // the tool whose output was kept
  double elapsed_s = 0;    // wall time until the first complete set of symbolized stacks
  double total_s = 0;      // including the detail pass
};

// Fails when no tool produced stacks within its limit; the output file then holds what was tried.
Result<StackCaptureResult> capture_native_stacks(const StackCaptureRequest& request);

}  // namespace rankscope::probe
