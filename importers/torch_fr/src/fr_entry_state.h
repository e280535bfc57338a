// fr_entry_state.h — whether each Flight Recorder entry completed, started or is still open, by the
// rules of the backend that recorded it. Private to the importer.
//
// Is: the rules, each from PyTorch's source (docs/TORCH_FLIGHT_RECORDER.md, "Entry states"):
//   - the dump writes `state` from the entry's discovered times: "completed" once the end event was
//     seen to fire, "started" once the start event was (only with TORCH_NCCL_ENABLE_TIMING, the
//     only time a start event exists), else "scheduled" (FlightRecorderDetail.hpp);
//   - NCCL-like backends (nccl, xccl, ...) hand the recorder CUDA events, so `state` is the truth; the
//     watchdog sets `retired` when it drops the work, which a timeout or abort does too, so
//     "retired but not completed" is a timed-out or aborted collective, not a finished one;
//   - Gloo hands the recorder no events: its entries stay "scheduled" for ever, and its worker
//     thread retires an entry when the work finished (ProcessGroupGloo::runLoop), so `retired` is
//     completion;
//   - another prefix (or none) is read as NCCL when some entry of the dump left "scheduled", else
//     as Gloo;
//   - across ranks: Gloo's worker also retires an op that failed (a Gloo timeout throws inside
//     AsyncWork::execute, which runLoop catches, then retires the entry and counts it completed in
//     pg_status), so a Gloo entry retired on one member while another member, whose dump is whole,
//     never enqueued that collective did not complete: it is open again (aborted).
//   - across ranks, the other way: Gloo's worker retires an entry only after the caller's wait()
//     returned, so a dump taken in between (an on-demand dump right after a barrier) shows on that
//     rank a collective its peers already retired. A collective completes on every member or on
//     none: an open Gloo entry that every other member (with a whole dump) retired as completed
//     completed too.
// Is not: parsing (fr_dump.cpp) or the mapping into the run model (fr_import.cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

// Fills every entry's signal, completed, started and aborted, and d.timing. `pg_status_saw_start`:
// some pg_status has last_started_collective >= 0 (the watchdog saw a start event fire).
void decide_entry_states(FrDump& d, bool pg_status_saw_start);

// The cross-rank rule above. `groups`: the job's groups by name, with their members. Returns whether
// it reopened any entry (what was worked out from the entries before is then stale).
bool reopen_failed_retirements(std::map<int, FrDump>& dumps, const std::map<std::string, FrGroup>& groups);

// The cross-rank rule above for late retirements; after reopen_failed_retirements (a retirement it
// reopened is no completion). Returns one note per entry it closed ("rank 1's barrier #11 on
// default_pg ...").
std::vector<std::string> close_late_retirements(std::map<int, FrDump>& dumps, const std::map<std::string, FrGroup>& groups);

// False for PyTorch's own frames (torch/distributed/..., the c10d logger wrapper): a user's call
// site is the innermost frame for which this is true.
bool is_user_frame(std::string_view filename);

}  // namespace rankscope::torch_fr
