// fuzz_event_stream.cpp — libFuzzer target: a rank's event stream (format/src/event_stream_reader.cpp),
// the append-only file a crashed rank leaves cut anywhere.
//
// Is: scan_event_stream_bytes() on the input with a visitor that reads every record it is handed.
// Is not: the run-directory reader around it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "event_visitor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankscope::fuzz::TouchingVisitor visitor;
  auto scan = rankscope::format::scan_event_stream_bytes(std::span<const uint8_t>(data, size), "fuzz", visitor);
  if (!scan.ok()) (void)scan.status().user_text();
  return 0;
}
