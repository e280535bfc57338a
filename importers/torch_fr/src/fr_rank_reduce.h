// fr_rank_reduce.h — one rank's dump reduced, where it was read, to what the import needs of it.
// Private to the importer.
//
// Is: each group's collectives as the run model's records (GroupRecords), made from the rank's own
// entries, and the few entries the job-wide passes still read (keep_for_job_passes): every
// send/recv (pair_p2p pairs them across ranks) and, per group, the entries its summaries are taken
// from (the first and the newest, the first with a desc, one per pg_id, the largest counters) and
// the oldest open entry the dumps' time rests on. 16,384 ranks' dumps hold 32.8 million entries of
// 184 bytes: held all at once they were 6 GB; reduced, a tenth of them stay (a pipeline's send/recv).
// Is not: for dumps whose entries complete by `retired` (Gloo's): the job-wide rules can reopen or
// close those (fr_entry_state.h), so such a dump keeps its entries and its records are made after.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "fr_dump_time.h"
#include "fr_entry_groups.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/torch_fr/fr_dump.h"

namespace rankscope::torch_fr {

// An all_to_all's totals: what the rank sends in all (its input) and receives in all (its output).
struct AllToAllTotals {
  uint64_t seq = 0;
  uint64_t send = 0;
  uint64_t recv = 0;
};

// One rank's collectives on one group: one record per collective seq (coalesced ops share one: the
// first is kept), oldest first, and what the communicator made of them needs besides.
struct GroupRecords {
  std::string_view group;  // pooled (fr_dump.h)
  std::vector<format::CollectiveSnapshot> ring;
  std::vector<AllToAllTotals> all_to_all;  // all_to_all with an output, in ring order
  int64_t max_seq = 0;                     // the group's collective counter as the entries last show it
  int64_t max_completed = 0;               // the newest collective seq that completed
  std::string_view last_site;              // the newest record's call site that is not empty; pooled
};

GroupRecords group_records(const GroupEntries& group);

// The record of one entry. `op` and `range`: the entry's own, or as a pair communicator names them.
format::CollectiveSnapshot record_of(const FrEntry& e, uint64_t seq, int peer_global, format::CollectiveOp op,
                                     std::string_view range);

// Whether the dump's entries can change after it is read: some complete by `retired` (Gloo's).
bool entries_may_change(const FrDump& d);

// Drops every entry no job-wide pass reads (see above), in place; the survivors keep their order.
// `by_group` and `times` are remade or moved to point at the survivors.
void keep_for_job_passes(FrDump& d, std::vector<GroupEntries>& by_group, RankTimes& times);

}  // namespace rankscope::torch_fr
