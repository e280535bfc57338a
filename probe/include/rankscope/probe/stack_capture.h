// stack_capture.h — writes symbolized native stacks of every thread of a process to a file.
//
// Is: tools tried in order until one gives stacks. First a real debugger-grade tool, preferring
// `eu-stack -p PID` (elfutils: fast, tens of ms; then a detail pass with -i -s) and falling back to
// `gdb -p PID -batch -ex "thread apply all bt"`, spawned with posix_spawn (safe from a multi-threaded
// process), stdout and stderr appended to the output file, and killed when it exceeds its time
// limit. Last, where neither exists or may attach (GPU containers often have neither) and the
// process is the caller's own, "in-process": every thread unwinds itself on a signal
// (thread_stacks.h), names come from libdw if it loads, else the ELF symbol tables, and the text
// has eu-stack's shape ("TID n:", "#0  0x... function - module"), so readers need no change.
// Used by the watchdog on its own process and reusable by hangdoctor on another one.
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
  // Tools to try in order; empty means {"eu-stack", "gdb", "in-process"}. Looked up on PATH, except
  // "in-process", which needs no program and works only when pid is the caller's own process.
  std::vector<std::string> tools;
  // In-process: how long to wait for the threads to answer the signal (a thread asleep in the
  // kernel may never answer; it is reported as such).
  double thread_answer_limit_s = 1.0;
  // After a fast eu-stack pass, append a second one with inlined frames and source lines (in-process:
  // the same frames again with source lines, when libdw is there to give them).
  bool detail = true;
};

struct StackCaptureResult {
  std::string tool;        // the tool whose output was kept ("eu-stack", "gdb", "in-process")
  double elapsed_s = 0;    // wall time until the first complete set of symbolized stacks
  double total_s = 0;      // including the detail pass
};

// Fails when no tool produced stacks within its limit; the output file then holds what was tried.
Result<StackCaptureResult> capture_native_stacks(const StackCaptureRequest& request);

}  // namespace rankscope::probe
