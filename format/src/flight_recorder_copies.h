// flight_recorder_copies.h — reading a flight recorder that a live rank may be writing, from copies.
//
// Is: the reader's consistency loop (FORMAT.md "Consistency"): three whole copies taken one after
// another, sections of the middle one checked against the first and the last (seqlock.h
// CopyWindow); while a section is caught mid-update the window slides by one more copy.
// Is not: where the bytes come from. read_flight_recorder passes pread; tests pass copies they tear
// on purpose. Private to the format library and its tests.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/status.h"

namespace rankscope::format {

// Fills the span (the file's size) with the file's bytes as they are now.
using TakeCopy = std::function<Status(std::span<uint8_t>)>;

// Copies a recorder of `size` bytes (> 0) with `take_copy` and parses it; at most 8 windows.
Result<FlightRecorderSnapshot> read_flight_recorder_copies(size_t size, const TakeCopy& take_copy,
                                                           std::string_view display_name);

}  // namespace rankscope::format
