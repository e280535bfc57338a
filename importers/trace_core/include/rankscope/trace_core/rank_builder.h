// rank_builder.h — one rank's rows turned into its event stream and flight recorder (internal).
//
// Is: NVTX ranges (push/pop nested per thread and domain, start/end flat; foreign domains named
// by their nesting path and prefixed with the domain), kernels projected onto ranges in one sorted
// sweep per thread (correlation id joined within the process; a GPU op belongs to every range of
// its launching thread that contains the launch call; the range's GPU time runs from its first op's
// start to its last op's end), NCCL kernels turned into collectives, steps (a named range, else a
// collective that repeats once per iteration), and the writing of STEP, TRACE and CLOCK records
// (TRACE_LAUNCHES: every traced GPU op whose launch was seen, with that call's host times).
// Time O(events log events), memory O(this rank's rows). Is not: choosing ranks or clocks
// (each importer: importers/nsys, importers/kineto).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/status.h"
#include "rankscope/trace_core/import_summary.h"
#include "rankscope/trace_core/trace_rows.h"

namespace rankscope::trace_core {

struct RankPlan {
  int rank = 0;
  int world_size = 1;
  uint64_t process = 0;            // process key of the rank's process in the export
  int64_t to_own_ns = 0;           // own time (ns since the epoch, this rank's clock) = ts + to_own_ns
  int64_t session_zero_ts = 0;     // the session start in the export's timestamps (0, or the epoch when absolute)
  format::ClockRecord clock{};     // offset to the reference rank, residual as uncertainty
  std::string run_id;
  std::string host;
  std::vector<std::string> comm_names;          // by NCCL stream ordinal (pass 1's order)
  std::vector<std::vector<int>> comm_members;   // world ranks of each
  // When the producer names each NCCL stream's communicator (Kineto's process-group args): stream
  // id -> index into comm_names. Empty: the stream's ordinal (first kernel first) is its index.
  std::map<uint32_t, uint32_t> comm_of_stream;
  std::filesystem::path run_dir;
};

// Writes rankNNNNN.events and rankNNNNN.flight; fills the counts, flags and warnings of `prov`.
// `file` names the rank's input in errors.
Status build_rank(const std::filesystem::path& file, const ProcessRows& rows, const RankPlan& plan, const ImportOptions& options,
                  RankProvenance& prov);

// The smallest period P such that the sequence repeats with period P (at most 2% of positions
// differ, at least two periods); 0 when none.
size_t repeating_period(const std::vector<uint32_t>& seq);

}  // namespace rankscope::trace_core
