// arrival_table.h — joins collective arrivals across ranks by (communicator, sequence number).
//
// Is: the cross-rank half of the skew analysis. Ranks are scanned one after another; every
// arrival lands here as a 24-byte record, and each instance keeps only its latest two arrivals
// (who came last, and by how much). summarize() then derives each rank's waits and each site's
// per-rank figures. Memory: 24 bytes per (rank, collective call) plus one small entry per instance.
// Is not: per-rank step analysis (rank_scan.h) or the findings (skew_findings.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "name_table.h"
#include "rank_scan.h"
#include "rankscope/analyzers/skew/skew_report.h"

namespace rankscope::analyzers {

class ArrivalTable : public ArrivalSink {
 public:
  explicit ArrivalTable(int world_size) : records_(size_t(world_size)) {}

  void add(int rank, const ArrivalObservation& arrival) override;

  // Fills collective_wait_ms / collective_transfer_ms of `ranks` (collective_ms_mean by rank),
  // report.collectives (with each site's transfer), report.groups (each communicator's transfer a
  // step; the rates are collective_bandwidth.cpp's) and report.step_detail for `detail_step` (-1: none).
  void summarize(const NameTable& names, const std::vector<double>& collective_ms_mean,
                 int64_t detail_step, SkewReport& report) const;

  size_t instance_count() const { return instances_.size(); }

 private:
  struct Site {
    uint32_t comm, ordinal;
    uint8_t op;
    std::map<uint32_t, int64_t> ranges;  // the range each instance started in (first rank to report it)
    int64_t instances = 0;
    uint64_t bytes_sum = 0;  // over instances, as the first rank to report each had it
  };
  struct Instance {
    uint32_t site;
    int64_t step;
    uint64_t seq;
    int64_t last = INT64_MIN, second = INT64_MIN;
    int32_t last_rank = -1;
    uint32_t count = 0;
  };
  struct Record {
    uint32_t instance;
    int64_t arrival_ns;
    int64_t duration_ns;
  };
  struct SiteKey {
    uint32_t comm, ordinal;
    uint8_t op;
    bool operator==(const SiteKey&) const = default;
  };
  struct SiteKeyHash {
    size_t operator()(const SiteKey& k) const {
      return std::hash<uint64_t>()((uint64_t(k.comm) << 40) ^ (uint64_t(k.ordinal) << 8) ^ k.op);
    }
  };

  // One rank's calls' transfer times, by site, and the union of them by communicator.
  void add_transfers(const std::vector<Record>& records, std::vector<std::vector<float>>& transfer_ms,
                     std::map<uint32_t, int64_t>& group_union_ns) const;

  std::vector<Site> sites_;
  std::unordered_map<SiteKey, uint32_t, SiteKeyHash> site_ids_;
  std::vector<Instance> instances_;
  // Instance ids by communicator, indexed by seq - first seq seen: sequence numbers grow by one
  // per collective, so this is a dense array instead of a hash lookup per arrival.
  struct CommInstances {
    uint64_t first_seq = 0;
    std::vector<uint32_t> ids;  // kNoInstance where not seen yet
  };
  static constexpr uint32_t kNoInstance = 0xffffffffu;
  // nullptr for a sequence number absurdly far from the others (a corrupt record).
  uint32_t* instance_slot(uint32_t comm, uint64_t seq);
  std::vector<CommInstances> by_comm_;  // by global comm name id
  std::vector<std::vector<Record>> records_;  // by rank
};

}  // namespace rankscope::analyzers
