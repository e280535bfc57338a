// fuzz_flight_recorder.cpp — libFuzzer target: a flight recorder (format/src/flight_recorder_reader.cpp
// and flight_identity.cpp), the mapped file a dying rank was writing, whichever writer made it (the
// probe, the NCCL profiler plugin, the NVTX injection library).
//
// Is: parse_flight_recorder() on the input in memory (one copy: the reader's section, ring, slot,
// peer-count and name decoding), then the same bytes as a file through read_flight_recorder() (the
// pread copies) and read_flight_identity() (the header alone, what gather trusts). Is not: the
// seqlock race with a live writer (tests/format/flight_recorder_test.cpp).
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.h"
#include "rankscope/format/flight_identity.h"
#include "rankscope/format/flight_recorder_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto parsed = rankscope::format::parse_flight_recorder(bytes, "fuzz");
  if (!parsed.ok()) (void)parsed.status().user_text();

  const auto file = rankscope::fuzz::scratch().path() / "rank00000.flight";
  rankscope::fuzz::write_bytes(file, bytes);
  auto read = rankscope::format::read_flight_recorder(file);
  // One copy or three of the same unchanging bytes: the same answer.
  if (read.ok() != parsed.ok()) __builtin_trap();
  auto identity = rankscope::format::read_flight_identity(file);
  if (!identity.ok()) (void)identity.status().user_text();
  return 0;
}
