// run_directory.h — opens a whole run directory the way every analyzer needs it.
//
// Is: discovery of the run's files, the metadata, and each rank's flight recorder, with every
// problem (a missing rank, a corrupt file) recorded per rank instead of failing the whole read, so
// a dead job's leftovers can still be diagnosed. Event streams are located, not read (they can be
// large; analyzers stream them). Is not: interpretation.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/format/status.h"

namespace rankscope::format {

struct RankFiles {
  int rank = 0;
  std::optional<FlightRecorderSnapshot> flight;  // absent when missing or unreadable
  Status flight_status;                          // why it is absent
  std::filesystem::path events_path;             // empty when the rank has no event stream
  // A stream the reader rebuilt in memory where the run wrote none (from the NCCL profiler plugin's
  // collective records: see nccl_plugin_run.h); null otherwise. Read either through scan_rank_events().
  std::shared_ptr<const std::vector<uint8_t>> rebuilt_events;

  bool has_events() const { return !events_path.empty() || rebuilt_events != nullptr; }
};

struct RunDirectory {
  std::filesystem::path dir;
  std::optional<RunMetadata> metadata;  // absent when run.json is missing or unreadable
  Status metadata_status;
  int world_size = 0;                   // from run.json, else from the flight recorders
  std::vector<RankFiles> ranks;         // one per rank 0..world_size-1, present or not
  std::vector<std::string> problems;    // human-readable, one per problem found

  int ranks_readable() const;
};

struct OpenOptions {
  bool read_flight_recorders = true;
};

// Fails (kNotFound / kInvalidArgument) only when `dir` does not exist, is not a directory, or holds
// nothing of a run (no run.json and no rank files). Everything else lands in `problems`.
Result<RunDirectory> open_run_directory(const std::filesystem::path& dir, const OpenOptions& options = {});

// Streams the rank's event stream, from its file or the rebuilt bytes, through `visitor`; kNotFound
// when it has neither.
Result<EventStreamScan> scan_rank_events(const RankFiles& rank, EventStreamVisitor& visitor);

}  // namespace rankscope::format
