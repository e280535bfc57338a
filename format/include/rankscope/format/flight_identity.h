// flight_identity.h — who wrote a flight recorder, from its 4 KiB header alone.
//
// Is: the identity fields (rank, world size, pid, host, run id, whether the NCCL plugin wrote it)
// read with one small pread, for tools that must sort thousands of recorders by host before they
// read them whole (`rankscope snapshot`). The identity is written once before `ready` and never
// changes, so no seqlock is needed. Is not: the full reader (flight_recorder_reader.h), which checks
// every section.
#pragma once

#include <filesystem>
#include <string>

#include "rankscope/format/status.h"

namespace rankscope::format {

// Not the writer's FlightIdentity (flight_recorder_writer.h), which holds what a writer is given.
struct HeaderIdentity {
  int rank = -1;
  int world_size = 0;
  int pid = 0;
  std::string host;
  std::string run_id;
  bool nccl_plugin = false;
};

// kCorrupt for a short file, a bad magic or a header not yet `ready`; kUnsupported for another
// schema version; kNotFound / kIo from the filesystem.
Result<HeaderIdentity> read_flight_identity(const std::filesystem::path& file);

}  // namespace rankscope::format
