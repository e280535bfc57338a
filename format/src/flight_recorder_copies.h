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
#include <vector>
#include <string_view>

#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/status.h"

namespace rankscope::format {

// Fills `out` with the file's bytes at `offset` as they are now (a whole copy: offset 0, the
// file's size).
using ReadFile = std::function<Status(uint64_t offset, std::span<uint8_t> out)>;

// A byte range of a recorder file.
struct FileExtent {
  uint64_t offset = 0, bytes = 0;
};

// The byte ranges of a recorder that its writer may still change, judged from one whole copy,
// ascending and inside the copy: the header (identity, live state, watchdog, gradients, the NCCL
// section), the thread slots, each communicator claimed in this copy with its ring, and its
// peer-counts slot where it made all_to_all_v calls, the parameters, the learned-bound slots in
// use. Left out: what no one has claimed or written yet; the parse takes a slot's claim from the
// copy before, so a slot claimed after this copy is not read in any case. Empty when the copy's
// layout does not validate (read whole copies: the parse names the error).
std::vector<FileExtent> writable_extents(std::span<const uint8_t> copy);

// The rings of the communicator slots not claimed in `copy`, ascending. The parse reads only such a
// slot's claim flag, and only from the earliest copy, so the later copies need not hold these bytes
// at all: with the default layout most of a recorder (12 of 16 slots of 35 KB, typically). Empty
// when the layout does not validate.
std::vector<FileExtent> unclaimed_rings(std::span<const uint8_t> copy);

// Copies a recorder of `size` bytes (> 0) with `read_file` and parses it; at most 8 windows.
Result<FlightRecorderSnapshot> read_flight_recorder_copies(size_t size, const ReadFile& read_file,
                                                           std::string_view display_name);

}  // namespace rankscope::format
