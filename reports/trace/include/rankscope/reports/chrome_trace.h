// chrome_trace.h — `rankscope export --chrome`: a run directory as a Chrome trace for Perfetto.
//
// Is: the Trace Event Format (JSON object form, "traceEvents"), one process per rank, on the
// aligned clock (each rank's ClockRecord offset applied; ts in microseconds since run.json's
// created_ns). Tracks per rank: "steps" (one slice per step), one track per communicator (each
// collective from arrival to completion, args with seq, bytes and wait), the capture window's
// ranges on their threads, one GPU track (the device timeline: every stream's kernels, NCCL ones
// in category "nccl", args with the launching range and stream; extra "concurrent" lanes only where
// kernels overlapped without nesting), and counters. Flow arrows join a collective
// across ranks by (comm, seq): from the last arriver to every rank that waited for it.
// Events are written as they are read, one rank at a time; only the collectives' arrival times
// are kept for the flows. Is not: a trace viewer or the always-on analysis (analyzers/skew).
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "rankscope/format/status.h"

namespace rankscope::reports {

struct ChromeTraceOptions {
  int64_t first_step = std::numeric_limits<int64_t>::min();  // inclusive window
  int64_t last_step = std::numeric_limits<int64_t>::max();
  std::vector<std::string> comm_kernel_patterns;  // `--comm-kernel`: extra communication-kernel regexes
};

struct ChromeTraceSummary {
  int ranks = 0;
  uint64_t events = 0;
  uint64_t flows = 0;
  std::vector<std::string> problems;
};

Result<ChromeTraceSummary> export_chrome_trace(const std::filesystem::path& run_dir, std::ostream& out,
                                               const ChromeTraceOptions& options = {});

}  // namespace rankscope::reports
