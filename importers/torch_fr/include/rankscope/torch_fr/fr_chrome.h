// fr_chrome.h — a Chrome trace (chrome://tracing, Perfetto) of imported Flight Recorder dumps: one
// process per rank, one track per process group, each collective a slice from enqueue to its
// discovered completion (to the newest time in the dumps when it never completed), with the group,
// seq, op, size, state and call site as arguments. Is not: the run-directory exporter
// (reports/trace), which has ranges and steps that dumps do not hold.
#pragma once

#include <ostream>

#include "rankscope/format/status.h"
#include "rankscope/torch_fr/fr_import.h"

namespace rankscope::torch_fr {

struct FrChromeSummary {
  int ranks = 0;
  uint64_t events = 0;
};

Result<FrChromeSummary> write_fr_chrome_trace(const FrImport& imp, std::ostream& out);

}  // namespace rankscope::torch_fr
