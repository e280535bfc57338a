// fr_pg_status.h — where each rank stands on each of its process groups, from pg_status. Private
// to the importer.
//
// Is: two rules, each from PyTorch's source (docs/TORCH_FLIGHT_RECORDER.md, "Progress"):
//   1. Which group a pg_status key is. The key is the process-local pg_id (ProcessGroupNCCL's
//      local_id_, a per-process counter), so only the rank's own entries name it. A rank with few or
//      no entries (only active entries dumped, or a rank holding the GIL: 0 entries) still has one
//      pg_status row per group. Group names made by new_group are torch's global creation counter
//      (distributed_c10d._process_group_name: str(_world.group_count), bumped on every rank for every
//      group, member or not), and a rank's pg_ids count up in the order it created the groups it is
//      a member of. So pg_ids sorted and names sorted as numbers line up; the ids the entries name
//      are fixed points, and between two of them the remaining ids and names are paired in order
//      when their counts agree (never guessed when they do not, nor for names that are not numbers).
//   2. Which counter a row holds. pg_status copies the seq of the newest work enqueued and completed
//      (ProcessGroupNCCL::workEnqueue / watchdog: pgStatus_->lastEnqueuedSeq = work->seq_), and a
//      work's seq is the p2p counter for send/recv and the collective counter otherwise (initWork:
//      isP2P ? seqP2P_ : seqCollective_). A row is p2p-numbered when the rank's newest entry on that
//      group is a send/recv whose p2p_seq_id is the row's last_enqueued, collective-numbered when it
//      is a collective whose collective_seq_id is; a rank with no entry on the group takes the
//      numbering every member that has one agrees on. The two counters can come from works of
//      different kinds (a collective enqueued last, a send/recv completed last): a row whose
//      last_completed exceeds its last_enqueued has its completed count dropped.
// Is not: the mapping into the run model (fr_import.cpp).
#pragma once

#include <map>
#include <string>

#include "fr_entry_groups.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

enum class SeqNumbering { kUnknown, kCollective, kP2P };

struct GroupProgress {
  FrStatus status;
  SeqNumbering numbering = SeqNumbering::kUnknown;
};

// Fills every dump's `status` (by group name) from `status_by_pg_id` by rule 1.
void resolve_pg_status(FrDump& d);

// Rule 2 over the job: rank -> group name -> progress.
// `grouped`: as resolve_groups' (fr_groups.h).
std::map<int, std::map<std::string, GroupProgress>> group_progress(const std::map<int, FrDump>& dumps,
                                                                   const GroupedEntries* grouped = nullptr);

}  // namespace rankscope::torch_fr
