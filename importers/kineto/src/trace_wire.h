// trace_wire.h — one read Kineto trace (trace_reader.h's KinetoTrace) as bytes, and back (internal).
//
// Is: the compact form a node sends to the head in `rankscope import-kineto --slurm/--hosts`: each
// node reads its own ranks' traces (the text is 10-50x the rows kept from it) and ships the rows;
// the head decodes them and runs the job-level steps (ranks, communicators, clocks) and the rank
// builder exactly as a local import does, so both write the same run directory. Little-endian,
// field by field (no struct images: no padding bytes, no layout tied to one compiler), behind the
// magic "RSKWIRE2". The decoder trusts nothing: every length is checked against the bytes left
// before anything is allocated (a count of N elements needs at least N bytes), every enum against
// its range, and every string-pool index against the pool, so a hostile or cut stream is a clean
// error, never a crash or an allocation larger than about 64 x the input.
// Is not: the transport (a snapshot stream, format/snapshot_stream.h) or the launch (gather/).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rankscope/format/status.h"
#include "trace_reader.h"

namespace rankscope::kineto {

std::vector<uint8_t> encode_trace(const KinetoTrace& trace);

// `source` names the bytes in errors ("node n2, trace-00003.rkw").
Result<KinetoTrace> decode_trace(std::span<const uint8_t> bytes, std::string_view source);

}  // namespace rankscope::kineto
