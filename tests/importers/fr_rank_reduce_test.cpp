// fr_rank_reduce_test.cpp — a dump reduced where it was read (fr_rank_reduce.h) must tell the
// job-wide passes what the whole dump tells them: the groups, each rank's progress, the send/recv
// pairs and the dumps' time, on Megatron-shaped jobs with a pipeline's send/recv, MoE all-to-alls and
// each fault (tests/importers/fr_megatron_job.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "fr_dump_time.h"
#include "fr_entry_groups.h"
#include "fr_groups.h"
#include "fr_megatron_job.h"
#include "fr_p2p.h"
#include "fr_pg_status.h"
#include "fr_rank_reduce.h"

namespace rankscope::torch_fr {
namespace {

using testing::MegatronFault;
using testing::MegatronJobSpec;

struct Job {
  std::map<int, FrDump> dumps;
  GroupedEntries grouped;
  std::map<int, RankTimes> times;
  std::map<int, std::vector<GroupRecords>> records;  // made before the reduction (empty when whole)
};

// The job's dumps as the import reads them, reduced or whole.
Job read_job(const MegatronJobSpec& spec, bool reduce) {
  Job job;
  for (const auto& [rank, bytes] : testing::megatron_job(spec).dumps) {
    auto parsed = parse_fr_dump(bytes, "generated");
    EXPECT_TRUE(parsed.ok());
    if (!parsed.ok()) continue;
    FrDump& d = job.dumps.emplace(rank, std::move(*parsed)).first->second;
    resolve_pg_status(d);
    std::vector<GroupEntries> by_group = entries_by_group(d);
    RankTimes times = rank_times(d);
    EXPECT_FALSE(entries_may_change(d)) << "NCCL dumps: their states are final once read";
    if (reduce) {
      std::vector<GroupRecords>& mine = job.records[rank];
      for (const GroupEntries& g : by_group) mine.push_back(group_records(g));
      const size_t before = d.entries.size();
      keep_for_job_passes(d, by_group, times);
      EXPECT_LE(d.entries.size(), before);
    }
    job.grouped.emplace(rank, std::move(by_group));
    job.times.emplace(rank, times);
  }
  return job;
}

// Returns how many send/recv calls the pairs hold (only open ones where a pair is not aligned).
size_t expect_same_passes(const MegatronJobSpec& spec, const char* what) {
  SCOPED_TRACE(what);
  Job whole = read_job(spec, false), reduced = read_job(spec, true);
  size_t entries_whole = 0, entries_kept = 0;
  for (const auto& [rank, d] : whole.dumps) entries_whole += d.entries.size();
  for (const auto& [rank, d] : reduced.dumps) entries_kept += d.entries.size();
  EXPECT_LT(entries_kept * 2, entries_whole) << "most entries go";

  const int world = spec.layout.world();
  const JobGroups groups_whole = resolve_groups(whole.dumps, world, &whole.grouped);
  const JobGroups groups_reduced = resolve_groups(reduced.dumps, world, &reduced.grouped);
  EXPECT_EQ(groups_whole.by_name.size(), groups_reduced.by_name.size());
  for (const auto& [name, g] : groups_whole.by_name) {
    const FrGroup& r = groups_reduced.by_name.at(name);
    EXPECT_EQ(g.desc, r.desc) << name;
    EXPECT_EQ(g.ranks, r.ranks) << name;
  }
  EXPECT_EQ(groups_whole.members_guessed, groups_reduced.members_guessed);

  const auto progress_whole = group_progress(whole.dumps, &whole.grouped);
  const auto progress_reduced = group_progress(reduced.dumps, &reduced.grouped);
  EXPECT_EQ(progress_whole.size(), progress_reduced.size());
  for (const auto& [rank, groups] : progress_whole)
    for (const auto& [name, p] : groups) {
      const GroupProgress& r = progress_reduced.at(rank).at(name);
      EXPECT_EQ(int(p.numbering), int(r.numbering)) << rank << " " << name;
      EXPECT_EQ(p.status.last_enqueued, r.status.last_enqueued);
      EXPECT_EQ(p.status.last_completed, r.status.last_completed);
    }

  const auto pairs_whole = pair_p2p(whole.dumps, groups_whole.by_name, progress_whole, &whole.grouped);
  const auto pairs_reduced = pair_p2p(reduced.dumps, groups_reduced.by_name, progress_reduced, &reduced.grouped);
  if (pairs_whole.size() != pairs_reduced.size()) {
    ADD_FAILURE() << pairs_whole.size() << " pairs from the whole dumps, " << pairs_reduced.size() << " reduced";
    return 0;
  }
  size_t calls = 0;
  for (size_t i = 0; i < pairs_whole.size(); ++i) {
    const PairComm &w = pairs_whole[i], &r = pairs_reduced[i];
    EXPECT_EQ(std::tie(w.group, w.lo, w.hi, w.aligned, w.src), std::tie(r.group, r.lo, r.hi, r.aligned, r.src));
    for (const auto& [rank, side] : w.sides) {
      const PairSide& rs = r.sides.at(rank);
      EXPECT_EQ(side.next_seq, rs.next_seq);
      EXPECT_EQ(side.completed_count, rs.completed_count);
      if (side.calls.size() != rs.calls.size()) {
        ADD_FAILURE() << "rank " << rank << " on pair " << w.lo << "-" << w.hi;
        continue;
      }
      for (size_t k = 0; k < side.calls.size(); ++k) {
        EXPECT_EQ(side.calls[k].second, rs.calls[k].second);
        EXPECT_EQ(side.calls[k].first->p2p_seq, rs.calls[k].first->p2p_seq);
        EXPECT_EQ(side.calls[k].first->completed, rs.calls[k].first->completed);
      }
      calls += side.calls.size();
    }
  }

  std::map<std::string, std::string> names;
  for (const auto& [name, g] : groups_whole.by_name) names[name] = name;
  const DumpTime t_whole = bound_dump_time(whole.dumps, names, &whole.times);
  const DumpTime t_reduced = bound_dump_time(reduced.dumps, names, &reduced.times);
  EXPECT_EQ(t_whole.now_ns, t_reduced.now_ns);
  EXPECT_EQ(t_whole.earliest_ns, t_reduced.earliest_ns);
  EXPECT_EQ(t_whole.pending, t_reduced.pending);
  EXPECT_EQ(t_whole.basis, t_reduced.basis);

  // The records made before the reduction are those the whole entries make.
  for (const auto& [rank, by_group] : whole.grouped) {
    const std::vector<GroupRecords>& made = reduced.records.at(rank);
    if (made.size() != by_group.size()) {
      ADD_FAILURE() << "rank " << rank << ": " << made.size() << " groups of records";
      continue;
    }
    for (size_t g = 0; g < by_group.size(); ++g) {
      const GroupRecords w = group_records(by_group[g]);
      EXPECT_EQ(w.group, made[g].group);
      EXPECT_EQ(w.max_seq, made[g].max_seq);
      EXPECT_EQ(w.max_completed, made[g].max_completed);
      EXPECT_EQ(w.last_site, made[g].last_site);
      EXPECT_EQ(w.all_to_all.size(), made[g].all_to_all.size());
      EXPECT_EQ(w.ring.size(), made[g].ring.size());
      for (size_t k = 0; k < std::min(w.ring.size(), made[g].ring.size()); ++k) {
        EXPECT_EQ(w.ring[k].seq, made[g].ring[k].seq);
        EXPECT_EQ(int(w.ring[k].state), int(made[g].ring[k].state));
      }
    }
  }
  return calls;
}

TEST(FrRankReduce, TheJobWidePassesSeeWhatTheWholeDumpsShow) {
  MegatronJobSpec spec;
  spec.layout.tp = 2;
  spec.layout.pp = 4;  // a longer pipeline: stages talk to both neighbours on one group
  spec.layout.dp = 2;
  spec.only_active = false;
  spec.ring = 400;
  spec.iterations = 3;
  expect_same_passes(spec, "healthy");
  spec.fault = MegatronFault::kGpuError;
  spec.fault_ranks = {5};
  spec.fault_iteration = 2;
  size_t calls = expect_same_passes(spec, "GPU error");
  spec.fault = MegatronFault::kStageStall;
  spec.fault_ranks = {2};
  calls += expect_same_passes(spec, "stage stall");
  spec.layout.pp = 2;  // two stages: one direction runs on the default group (aligned pairs)
  spec.fault = MegatronFault::kGilHeld;
  spec.fault_ranks = {1};
  const size_t aligned_calls = expect_same_passes(spec, "GIL held, two stages");
  EXPECT_GT(calls, 0u) << "a hung pipeline's open send/recv are paired";
  EXPECT_GT(aligned_calls, 0u) << "an aligned pair lists every call";
}

}  // namespace
}  // namespace rankscope::torch_fr
