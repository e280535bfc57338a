// arrival_table.cpp — see arrival_table.h.
#include "arrival_table.h"

#include <algorithm>
#include <map>

#include "interval_union.h"
#include "rankscope/analyzers/skew/stats.h"
#include "rankscope/format/vocabulary.h"
#include "rankscope/format/clock.h"

namespace rankscope::analyzers {
namespace {

// One rank's figures at one site, gathered over the steps.
struct SiteAccumulator {
  std::vector<double> rel_ms, wait_ms, margin_ms;
  double margin_sum_ms = 0;
};

}  // namespace

uint32_t* ArrivalTable::instance_slot(uint32_t comm, uint64_t seq) {
  constexpr uint64_t kMaxSpan = uint64_t(1) << 28;
  if (by_comm_.size() <= comm) by_comm_.resize(size_t(comm) + 1);
  CommInstances& c = by_comm_[comm];
  if (c.ids.empty()) c.first_seq = seq;
  if ((seq < c.first_seq ? c.first_seq - seq + c.ids.size() : seq - c.first_seq) > kMaxSpan) return nullptr;
  if (seq < c.first_seq) {  // a rank whose window starts earlier: shift the array
    c.ids.insert(c.ids.begin(), size_t(c.first_seq - seq), kNoInstance);
    c.first_seq = seq;
  }
  const size_t i = size_t(seq - c.first_seq);
  if (i >= c.ids.size()) c.ids.resize(std::max(i + 1, c.ids.size() * 2), kNoInstance);
  return &c.ids[i];
}

void ArrivalTable::add(int rank, const ArrivalObservation& a) {
  if (rank < 0 || size_t(rank) >= records_.size() || a.comm == kNoName) return;
  uint32_t* slot_ptr = instance_slot(a.comm, a.seq);
  if (!slot_ptr) return;
  uint32_t& slot = *slot_ptr;
  if (slot == kNoInstance) {
    // A site is the collective (its group, op and order in the step), not the range it started in:
    // the first all-reduce of a step may start inside different ranges in different steps.
    const SiteKey sk{a.comm, a.ordinal, a.op};
    auto [sit, site_new] = site_ids_.try_emplace(sk, uint32_t(sites_.size()));
    if (site_new) sites_.push_back(Site{a.comm, a.ordinal, a.op});
    ++sites_[sit->second].ranges[a.range];
    slot = uint32_t(instances_.size());
    instances_.push_back(Instance{sit->second, a.step, a.seq});
    ++sites_[sit->second].instances;
    sites_[sit->second].bytes_sum += a.bytes;
  }
  const uint32_t id = slot;
  Instance& inst = instances_[id];
  ++inst.count;
  if (a.arrival_ns > inst.last) {
    inst.second = inst.last;
    inst.last = a.arrival_ns;
    inst.last_rank = rank;
  } else if (a.arrival_ns > inst.second) {
    inst.second = a.arrival_ns;
  }
  records_[size_t(rank)].push_back(Record{id, a.arrival_ns, a.duration_ns});
}

// A call's transfer is its time after the last rank arrived (the wait before it is a late peer).
// A group's is the union of its calls' transfers on the rank: calls of one group run at the same
// time (Gloo's two worker threads, DDP's buckets in flight together), and that time counts once.
void ArrivalTable::add_transfers(const std::vector<Record>& records, std::vector<std::vector<float>>& transfer_ms,
                                 std::map<uint32_t, int64_t>& group_union_ns) const {
  std::map<uint32_t, std::vector<Interval>> by_comm;
  for (const Record& rec : records) {
    if (rec.duration_ns < 0) continue;
    const Instance& inst = instances_[rec.instance];
    const int64_t end = rec.arrival_ns + rec.duration_ns;
    const int64_t begin = std::min(end, std::max(rec.arrival_ns, inst.last));
    transfer_ms[inst.site].push_back(float(double(end - begin) / kNsPerMillisecond));
    by_comm[sites_[inst.site].comm].push_back({begin, end});
  }
  for (auto& [comm, intervals] : by_comm) group_union_ns[comm] = union_length(intervals);
}

void ArrivalTable::summarize(const NameTable& names, const std::vector<double>& collective_ms_mean,
                             int64_t detail_step, SkewReport& report) const {
  std::vector<CollectiveSite> sites(sites_.size());
  for (size_t s = 0; s < sites_.size(); ++s) {
    sites[s].comm = names.name(sites_[s].comm);
    // Named by the range it starts in most often (the first of equals).
    uint32_t range = kNoName;
    int64_t most = 0;
    for (const auto& [r, n] : sites_[s].ranges)
      if (n > most) range = r, most = n;
    sites[s].range = range == kNoName ? std::string() : names.name(range);
    sites[s].op = std::string(format::short_op_name(format::CollectiveOp(sites_[s].op)));
    sites[s].ordinal = int(sites_[s].ordinal);
    sites[s].instances = sites_[s].instances;
    sites[s].bytes = sites_[s].instances > 0 ? double(sites_[s].bytes_sum) / double(sites_[s].instances) : 0;
  }
  // Each call's transfer (its duration after the last arrival), by site, over every rank.
  std::vector<std::vector<float>> transfer_ms(sites_.size());
  std::map<uint32_t, std::vector<double>> group_transfer_ms;  // a rank's a step, by communicator
  std::map<uint32_t, size_t> detail_index;  // instance -> index in step_detail.collectives
  report.step_detail.step = detail_step;

  for (size_t r = 0; r < records_.size(); ++r) {
    if (records_[r].empty()) continue;
    std::map<uint32_t, SiteAccumulator> per_site;
    // Waits at collectives that run at the same time (several threads, several groups) overlap:
    // the rank's wait is their union per step, never their sum.
    std::vector<std::pair<int64_t, Interval>> waits;  // (step, [arrival, arrival + wait))
    waits.reserve(records_[r].size());
    for (const Record& rec : records_[r]) {
      const Instance& inst = instances_[rec.instance];
      int64_t wait_ns = inst.last - rec.arrival_ns;
      if (rec.duration_ns >= 0) wait_ns = std::min(wait_ns, rec.duration_ns);
      wait_ns = std::max<int64_t>(0, wait_ns);
      const double wait = double(wait_ns) / kNsPerMillisecond;
      if (wait_ns > 0) waits.push_back({inst.step, {rec.arrival_ns, rec.arrival_ns + wait_ns}});
      SiteAccumulator& acc = per_site[inst.site];
      const double rel = double(rec.arrival_ns - inst.last) / kNsPerMillisecond;
      acc.rel_ms.push_back(rel);
      acc.wait_ms.push_back(wait);
      if (inst.last_rank == int32_t(r) && inst.count >= 2) {
        const double margin = double(inst.last - inst.second) / kNsPerMillisecond;
        acc.margin_ms.push_back(margin);
        acc.margin_sum_ms += margin;
      }
      if (inst.step == detail_step) {
        auto [it, fresh] = detail_index.try_emplace(rec.instance, report.step_detail.collectives.size());
        if (fresh) {
          CollectiveInstance ci;
          ci.comm = sites[inst.site].comm;
          ci.op = sites[inst.site].op;
          ci.range = sites[inst.site].range;
          ci.seq = inst.seq;
          report.step_detail.collectives.push_back(std::move(ci));
        }
        report.step_detail.collectives[it->second].ranks.push_back(InstanceRank{int(r), rel, wait});
      }
    }
    std::map<uint32_t, int64_t> group_union_ns;
    add_transfers(records_[r], transfer_ms, group_union_ns);
    if (r < report.ranks.size() && report.ranks[r].steps > 0)
      for (const auto& [comm, ns] : group_union_ns)
        group_transfer_ms[comm].push_back(double(ns) / kNsPerMillisecond / double(report.ranks[r].steps));
    for (auto& [site, acc] : per_site) {
      SiteRank sr;
      sr.rank = int(r);
      const double n = double(acc.rel_ms.size());
      sr.arrival_rel_last_ms = median_inplace(acc.rel_ms);
      sr.wait_ms = median_inplace(acc.wait_ms);
      sr.last_fraction = double(acc.margin_ms.size()) / n;
      sr.late_margin_ms = median_inplace(acc.margin_ms);
      sr.cost_ms_per_step = acc.margin_sum_ms / n;
      sites[site].ranks.push_back(sr);
    }
    std::sort(waits.begin(), waits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t wait_union_ns = 0;
    std::vector<Interval> one_step;
    for (size_t i = 0; i < waits.size();) {
      one_step.clear();
      size_t j = i;
      for (; j < waits.size() && waits[j].first == waits[i].first; ++j) one_step.push_back(waits[j].second);
      wait_union_ns += union_length(one_step);
      i = j;
    }
    if (r < report.ranks.size() && report.ranks[r].steps > 0) {
      RankSkew& rs = report.ranks[r];
      rs.collective_wait_ms = double(wait_union_ns) / kNsPerMillisecond / double(rs.steps);
      const double coll = r < collective_ms_mean.size() ? collective_ms_mean[r] : 0.0;
      rs.collective_wait_ms = std::min(rs.collective_wait_ms, coll);
      rs.collective_transfer_ms = std::max(0.0, coll - rs.collective_wait_ms);
    }
  }
  for (size_t s = 0; s < sites.size(); ++s) {
    std::vector<double> t(transfer_ms[s].begin(), transfer_ms[s].end());
    sites[s].transfer_ms = t.empty() ? 0.0 : median_inplace(t);
  }
  report.groups.clear();
  for (auto& [comm, ms] : group_transfer_ms) {
    GroupBandwidth g;
    g.comm = names.name(comm);
    g.transfer_ms_per_step = median_inplace(ms);  // the median rank's
    report.groups.push_back(std::move(g));
  }
  // Sites in the order a step meets them: by communicator, then ordinal.
  std::sort(sites.begin(), sites.end(), [](const CollectiveSite& a, const CollectiveSite& b) {
    return std::tie(a.comm, a.ordinal, a.op, a.range) < std::tie(b.comm, b.ordinal, b.op, b.range);
  });
  report.collectives = std::move(sites);
  std::sort(report.step_detail.collectives.begin(), report.step_detail.collectives.end(),
            [](const CollectiveInstance& a, const CollectiveInstance& b) {
              return std::tie(a.comm, a.seq) < std::tie(b.comm, b.seq);
            });
}

}  // namespace rankscope::analyzers
