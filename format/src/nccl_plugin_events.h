// nccl_plugin_events.h — a rank's event stream rebuilt from the NCCL plugin's collective rings (internal).
//
// Is: what lets skew, export and startup read a job that only ran under librankscope-nccl.so. The
// plugin keeps, per communicator, the last RANKSCOPE_NCCL_RING collectives (launch, first channel
// start, completion) and no notion of a training step. A step is rebuilt as one period of the job's
// repeating collective pattern: on the rank's anchor communicator (the largest it belongs to; ties:
// most records, then the smallest name, so symmetric ranks pick the same kind), the smallest period
// p over which (op, bytes, peer) repeats in the newest records (a run of two periods and half the
// ring; initialisation collectives before it are skipped), starting at the residue of seq mod p that
// follows the longest median pause (the gap between iterations: optimizer, data). Step k then holds every
// collective of every communicator launched between the anchor's boundaries k and k+1, and is
// numbered (seq - phase) / p, so the same step of every rank carries the same number. Steps older
// than the oldest record of a communicator whose ring wrapped, and the last, unfinished one, are
// left out: each rebuilt step holds every collective the rank ran in it.
// Is not: ranges (the job's NVTX ranges are kept as a stack of what is open now, not as history) or
// clock alignment across hosts (the plugin measures none; one host shares one clock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/format/flight_recorder_reader.h"

namespace rankscope::format {

struct RebuiltEvents {
  std::vector<uint8_t> bytes;  // a complete event stream (file header, NAME and STEP records)
  int64_t steps = 0;
  int period = 0;              // anchor collectives per step (0: too few records to find one)
  std::string anchor;          // the anchor communicator's display name
};

// `flight` is the rank's merged snapshot (one CommSnapshot per communicator, display names set).
RebuiltEvents rebuild_events_from_rings(const FlightRecorderSnapshot& flight, int world_size);

}  // namespace rankscope::format
