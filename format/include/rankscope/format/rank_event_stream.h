// rank_event_stream.h — the event stream of one rank of a run directory, created with its header
// filled (rank, world size, creation time, run id): what every writer of a whole run does first
// (imports, synthetic runs, benchmarks and tests). Is not: the writer (event_stream.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::format {

inline Result<std::unique_ptr<EventStreamWriter>> create_rank_event_stream(const std::filesystem::path& run_dir, int rank,
                                                                           int world_size, int64_t created_ns,
                                                                           const std::string& run_id) {
  EventStreamHeader h;
  h.rank = rank;
  h.world_size = world_size;
  h.created_ns = created_ns;
  h.run_id = run_id;
  return EventStreamWriter::create(event_stream_path(run_dir, rank), h);
}

}  // namespace rankscope::format
