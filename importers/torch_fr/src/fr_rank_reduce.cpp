// fr_rank_reduce.cpp — a dump reduced to what the import needs of it (fr_rank_reduce.h).
#include "fr_rank_reduce.h"

#include <algorithm>
#include <utility>

namespace rankscope::torch_fr {
namespace {

// The backend's rule decided completed and started (fr_entry_state.h).
format::CollectiveState state_of(const FrEntry& e) {
  if (e.completed) return format::CollectiveState::kCompleted;
  if (e.started) return format::CollectiveState::kStarted;
  return format::CollectiveState::kEnqueued;
}

// Marks the entries of one group that a job-wide pass reads (fr_rank_reduce.h says which, and the
// pass each is for). `keep` is indexed by the entry's place in the dump.
void mark_group(const FrDump& d, const GroupEntries& group, std::vector<bool>& keep) {
  auto mark = [&](const FrEntry* e) { keep[size_t(e - d.entries.data())] = true; };
  const FrEntry* with_desc = nullptr;  // resolve_groups: the desc the entries give
  const FrEntry* most_p2p = nullptr;   // pair_p2p: the group's send/recv counter
  const FrEntry* most_seq = nullptr;   // reopen_failed_retirements: how many collectives were issued
  std::vector<int64_t> pg_ids;         // resolve_groups: every pg_id the group has here
  for (const FrEntry* e : group.entries) {
    if (!with_desc && !e->group_desc.empty()) mark(with_desc = e);
    if (!most_p2p || e->p2p_seq > most_p2p->p2p_seq) most_p2p = e;
    if (!e->is_p2p && (!most_seq || e->collective_seq > most_seq->collective_seq)) most_seq = e;
    if (e->is_p2p) mark(e);  // pair_p2p, pair_comm
    if (e->pg_id >= 0 && std::find(pg_ids.begin(), pg_ids.end(), e->pg_id) == pg_ids.end()) {
      pg_ids.push_back(e->pg_id);
      mark(e);
    }
  }
  mark(group.entries.front());  // the group's place among the dump's groups
  mark(group.entries.back());   // group_progress: which counter pg_status holds
  mark(most_p2p);
  if (most_seq) mark(most_seq);
}

}  // namespace

format::CollectiveSnapshot record_of(const FrEntry& e, uint64_t seq, int peer_global, format::CollectiveOp op,
                                     std::string_view range) {
  format::CollectiveSnapshot c;
  c.seq = seq;
  c.op = op;
  c.dtype = e.dtype;
  c.state = state_of(e);
  c.peer = peer_global;
  c.count = e.numel;
  c.bytes = e.numel * format::dtype_size(e.dtype);
  c.enqueue_ns = e.time_created_ns;
  c.start_ns = e.time_started_ns;
  c.end_ns = c.state == format::CollectiveState::kCompleted ? std::max(e.time_completed_ns, e.time_created_ns) : 0;
  c.range = range;  // pooled (fr_dump.h): the snapshot outlives the dump
  // NCCL-like work is launched on a stream and the call returns: what is open waits on the device.
  // Gloo's caller waits for a worker thread: its host is in the call.
  c.host_returned = e.signal == CompletionSignal::kState;
  return c;
}

GroupRecords group_records(const GroupEntries& group) {
  GroupRecords r;
  r.group = group.name;
  // Sized once: grown entry by entry, 4096 ranks' rings spent a quarter of the import in the
  // kernel, clearing the fresh pages of each larger copy. Sized by the collectives, not by every
  // entry: a pipeline's send/recv are a tenth of them, and these records are most of the import.
  r.ring.reserve(size_t(std::count_if(group.entries.begin(), group.entries.end(),
                                      [](const FrEntry* e) { return !e->is_p2p && e->collective_seq >= 1; })));
  for (const FrEntry* entry : group.entries) {
    const FrEntry& e = *entry;
    // A send/recv carries the group's collective counter as it stood: that many were issued.
    r.max_seq = std::max(r.max_seq, e.collective_seq);
    if (e.is_p2p || e.collective_seq < 1) continue;
    const uint64_t seq = uint64_t(e.collective_seq);
    if (!r.ring.empty() && r.ring.back().seq >= seq) continue;  // coalesced ops share one seq: keep the first
    r.ring.push_back(record_of(e, seq, -1, e.op, e.call_site));
    if (e.op == format::CollectiveOp::kAllToAllV && e.out_numel > 0)
      r.all_to_all.push_back({seq, e.numel, e.out_numel});
    if (e.completed) r.max_completed = std::max(r.max_completed, e.collective_seq);
    if (!e.call_site.empty()) r.last_site = e.call_site;
  }
  return r;
}

bool entries_may_change(const FrDump& d) {
  return std::any_of(d.entries.begin(), d.entries.end(),
                     [](const FrEntry& e) { return e.signal == CompletionSignal::kRetired; });
}

void keep_for_job_passes(FrDump& d, std::vector<GroupEntries>& by_group, RankTimes& times) {
  std::vector<bool> keep(d.entries.size(), false);
  for (const GroupEntries& group : by_group) mark_group(d, group, keep);
  const FrEntry* oldest_open = times.oldest_open;  // bound_dump_time
  if (oldest_open) keep[size_t(oldest_open - d.entries.data())] = true;
  std::vector<FrEntry> kept;
  kept.reserve(size_t(std::count(keep.begin(), keep.end(), true)));
  for (size_t i = 0; i < d.entries.size(); ++i) {
    if (!keep[i]) continue;
    if (&d.entries[i] == oldest_open)
      times.oldest_open = &kept.emplace_back(d.entries[i]);
    else
      kept.push_back(d.entries[i]);
  }
  d.entries = std::move(kept);  // the dump's whole list is let go here, on its reader's thread
  by_group = entries_by_group(d);
}

}  // namespace rankscope::torch_fr
