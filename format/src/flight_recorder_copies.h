// flight_recorder_copies.h — reading a flight recorder that a live rank may be writing, from copies.
//
// Is: the reader's consistency loop (FORMAT.md "Consistency"): three whole copies taken one after
// another, sections of the middle one checked against the first and the last (seqlock.h
// CopyWindow); a section caught mid-update is read again on its own, then the window slides by one
// more copy. Is not: where the bytes come from. read_flight_recorder passes pread; tests pass reads
// they tear on purpose. Private to the format library and its tests.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/status.h"

namespace rankscope::format {

// Fills `out` with the file's bytes at `offset` as they are now (a whole copy: offset 0, the
// file's size).
using ReadFile = std::function<Status(uint64_t offset, std::span<uint8_t> out)>;

// Copies a recorder of `size` bytes (> 0) with `read_file` and parses it; at most 8 windows.
Result<FlightRecorderSnapshot> read_flight_recorder_copies(size_t size, const ReadFile& read_file,
                                                           std::string_view display_name);

}  // namespace rankscope::format
