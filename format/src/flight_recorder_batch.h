// flight_recorder_batch.h — reads many ranks' flight recorders at once, on a few threads.
//
// Is: read_flight_recorder over a list of files, taken in chunks of a few files by up to
// `max_threads` threads (each with its own reused copy buffers), results in the order of the
// files. At 16K ranks reading is most of hangdoctor's time and each file is independent. Is not: a
// change of what one read sees (the seqlock checks are per file, as before) nor a thread pool kept
// between calls. Private to the format library.
#pragma once

#include <filesystem>
#include <vector>

#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/status.h"

namespace rankscope::format {

// 0: as many threads as the machine has cores (at most 8); fewer for short lists, since a thread
// costs more than reading a few dozen files.
std::vector<Result<FlightRecorderSnapshot>> read_flight_recorders(const std::vector<std::filesystem::path>& files,
                                                                  unsigned max_threads = 0);

}  // namespace rankscope::format
