// skew_findings.cpp — turns the skew figures into findings ranked by the time they cost per step.
//
// Kinds:
//  - late_arrival: a rank arrives last at a collective site in most steps; everyone else waits.
//    Cost = mean over steps of (its arrival - the next latest), the time the step would save if it
//    arrived with the others. The cause named is the range where this rank spends more than its
//    peers (collective time taken out, since the peers' waiting would otherwise look like work):
//    the most specific range that carries most of the largest excess.
//  - counter_imbalance: a counter's max/mean over a group is at or above the threshold.
//  - straggler: a rank slower without communication than the others, not already explained by a
//    late_arrival finding.
// Is not: the figures themselves (skew_analyzer.cpp, arrival_table.cpp, counter_skew.cpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/stats.h"
#include "skew_parts.h"

namespace rankscope::analyzers {
namespace {

// Who waits for `late` at `site`, and where (the site's per-rank median waits): ranks whose wait is
// at least `floor_ms`, longest first. The text names the first few: "; rank 0 waits for it 29.8 ms a
// step in all_reduce inside backward (GPU idle: a host collective)".
void name_waiters(const SkewReport& report, const CollectiveSite& site, int late, double floor_ms, Finding& f) {
  std::vector<Waiter> all;
  for (const SiteRank& other : site.ranks) {
    if (other.rank == late || other.wait_ms < floor_ms) continue;
    Waiter w{other.rank, other.wait_ms, site.op, site.range, false};
    if (other.rank >= 0 && size_t(other.rank) < report.ranks.size()) {
      const RankSkew& rs = report.ranks[size_t(other.rank)];
      w.gpu_idle = rs.device.has_value() && rs.device->transfer_ms <= 0;
    }
    all.push_back(std::move(w));
  }
  std::stable_sort(all.begin(), all.end(), [](const Waiter& a, const Waiter& b) { return a.wait_ms > b.wait_ms; });
  f.waiters_total = int(all.size());
  if (all.empty()) return;
  const std::string where = site.range.empty() ? site.op : fmt::format("{} inside {}", site.op, site.range);
  constexpr size_t kNamed = 3;
  std::string who;
  for (size_t i = 0; i < std::min(all.size(), kNamed); ++i) {
    who += fmt::format("{}rank {} {:.1f} ms", i == 0 ? "" : ", ", all[i].rank, all[i].wait_ms);
  }
  if (all.size() > kNamed) who += fmt::format(" and {} more ranks", all.size() - kNamed);
  const bool one = all.size() == 1;
  f.text += one ? fmt::format("; rank {} waits for it {:.1f} ms a step in {}", all[0].rank, all[0].wait_ms, where)
                : fmt::format("; {} wait for it a step in {}", who, where);
  if (std::all_of(all.begin(), all.end(), [](const Waiter& w) { return w.gpu_idle; })) {
    f.text += one ? " (its GPU sits idle meanwhile: a host collective, no NCCL kernel)"
                  : " (their GPUs sit idle meanwhile: a host collective, no NCCL kernel)";
  }
  if (all.size() > Finding::kMaxWaiters) all.resize(Finding::kMaxWaiters);
  f.waiters = std::move(all);
}

struct Excess {
  std::string range;
  double ms = 0;
};

// Median over `peers` of their compute time in `range` (peers without it are skipped).
double peer_median(const SkewReport& report, const std::vector<int>& peers, const std::string& range) {
  std::vector<double> v;
  for (int p : peers) {
    const auto& m = report.ranks[size_t(p)].range_compute_ms;
    if (auto it = m.find(range); it != m.end()) v.push_back(it->second);
  }
  return median(std::move(v));
}

// The range where `rank` spends most beyond its peers, made as specific as the data allows: among
// the ranges within 25% of the largest excess, the deepest (forward/block0/mlp, not forward).
Excess cause_range(const SkewReport& report, int rank, const std::vector<int>& peers) {
  std::vector<Excess> all;
  double largest = 0;
  for (const auto& [range, ms] : report.ranks[size_t(rank)].range_compute_ms) {
    if (range == "step") continue;
    const double e = ms - peer_median(report, peers, range);
    all.push_back({range, e});
    largest = std::max(largest, e);
  }
  Excess best;
  if (largest <= 0) return best;
  for (const Excess& e : all) {
    if (e.ms < 0.75 * largest) continue;
    const int d = range_depth(e.range), bd = range_depth(best.range);
    if (best.range.empty() || d > bd || (d == bd && e.ms > best.ms)) best = e;
  }
  return best;
}

std::string fmt_value(double v) {
  return std::abs(v - std::round(v)) < 1e-6 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

// Per-step wait of each rank at each communicator's collectives (sum of its site medians), so a
// rank's wait "elsewhere" than one communicator is its total minus that communicator's share.
class WaitByComm {
 public:
  explicit WaitByComm(const SkewReport& report) {
    for (const CollectiveSite& site : report.collectives) {
      for (const SiteRank& sr : site.ranks) {
        total_[sr.rank] += sr.wait_ms;
        per_comm_[{sr.rank, site.comm}] += sr.wait_ms;
      }
    }
  }
  double elsewhere(int rank, const std::string& comm) const {
    auto t = total_.find(rank);
    auto c = per_comm_.find({rank, comm});
    return (t == total_.end() ? 0.0 : t->second) - (c == per_comm_.end() ? 0.0 : c->second);
  }

 private:
  std::map<int, double> total_;
  std::map<std::pair<int, std::string>, double> per_comm_;
};

// Findings cheaper than this per step are noise (jitter makes some rank last at every collective).
double min_cost_ms(const SkewOptions& options, const SkewReport& report) {
  return std::max(options.min_finding_ms, options.min_finding_fraction * report.step_ms_median);
}

// The run's own spread, against which a rank's delay is told from chance: how far the ranks' median
// steps (without communication) lie from each other (1.4826 x MAD: a standard deviation where the
// noise is normal; the rank's own among them from 4 ranks on, the MAD being robust to it, its
// peers' alone below), or how much a rank's step varies against the median rank's at the same step
// (step_noise.cpp), whichever is larger. A delay seen in single steps (a late arrival's margin) is
// held against that variation; a rank's median step (a straggler's excess) against the standard
// error of a median of that many steps. A finding must be kFindingSignificance times past it.
enum class DelayKind { kPerStep, kMedianStep };

double noise_ms(const SkewReport& report, int rank, DelayKind kind) {
  std::vector<double> spread, within;
  size_t present = 0;
  for (const RankSkew& rs : report.ranks) present += rs.steps > 0;
  for (const RankSkew& rs : report.ranks) {
    if (rs.steps == 0) continue;
    within.push_back(1.4826 * rs.noncomm_paired_mad_ms);
    if (rs.rank != rank || present >= 4) spread.push_back(rs.noncomm_ms_median);
  }
  const double m = median(spread);
  std::vector<double> deviation;
  for (double x : spread) deviation.push_back(std::fabs(x - m));
  const double across = 1.4826 * median(std::move(deviation));
  const double step = median(std::move(within));
  const double steps = double(std::max<int64_t>(1, report.steps));
  return std::max(across, kind == DelayKind::kPerStep ? step : 1.2533 * step / std::sqrt(steps));
}

// "; 3.1x the run's noise (4.4 ms)": how far past chance a delay lies.
std::string past_noise_text(double delay_ms, double noise) {
  if (noise <= 0) return "";
  return fmt::format("; {:.1f}x the run's noise ({:.1f} ms)", delay_ms / noise, noise);
}

void note_below_noise(SkewReport& report, int rank, const char* kind, double delay_ms, double noise) {
  for (BelowNoise& b : report.below_noise) {
    if (b.rank != rank || b.kind != kind) continue;
    ++b.sites;
    if (delay_ms > b.delay_ms) b.delay_ms = delay_ms, b.noise_ms = noise;
    return;
  }
  report.below_noise.push_back({rank, kind, 1, delay_ms, noise});
}

void late_arrival_findings(const SkewOptions& options, SkewReport& report) {
  struct Candidate {
    Finding finding;
    bool near_cause;
  };
  std::vector<Candidate> found;
  const WaitByComm waits(report);
  // Each rank's lateness a step in each group, summed over the group's collectives: ranks that take
  // turns at being last (two ranks sharing cores, each late at its own collectives) cancel out.
  std::map<std::string, std::map<int, double>> late_in_group;
  for (const CollectiveSite& site : report.collectives)
    for (const SiteRank& sr : site.ranks) late_in_group[site.comm][sr.rank] += sr.cost_ms_per_step;
  for (const CollectiveSite& site : report.collectives) {
    for (const SiteRank& sr : site.ranks) {
      // Last in most steps, costly on average, and by a typical margin that matters too (a mean
      // made of one slow step is not a pattern).
      const double floor_ms = min_cost_ms(options, report);
      if (sr.last_fraction < 0.5 || sr.cost_ms_per_step < floor_ms || sr.late_margin_ms < floor_ms) continue;
      // Two ranks taking turns at being last (two ranks sharing cores) is no pattern; nor a margin
      // the run's own spread explains.
      const double noise = noise_ms(report, sr.rank, DelayKind::kPerStep);
      if (sr.last_fraction <= 0.5 || sr.late_margin_ms < kFindingSignificance * noise) {
        note_below_noise(report, sr.rank, "late_arrival", sr.late_margin_ms, noise);
        continue;
      }
      std::vector<int> peers;
      for (const SiteRank& other : site.ranks) {
        if (other.rank != sr.rank) peers.push_back(other.rank);
      }
      const Excess cause = cause_range(report, sr.rank, peers);
      const bool own_cause = !cause.range.empty() && cause.ms >= std::max(0.25 * sr.late_margin_ms, floor_ms);
      std::vector<double> peer_waits;
      for (int p : peers) peer_waits.push_back(waits.elsewhere(p, site.comm));
      const double extra_wait = waits.elsewhere(sr.rank, site.comm) - median(std::move(peer_waits));
      // Late only because it waited for someone else on another communicator first (its TP peer
      // held it up before this DP collective): the root cause has its own finding.
      if (!own_cause && extra_wait >= 0.5 * sr.late_margin_ms) continue;
      Finding f;
      f.kind = "late_arrival";
      f.ranks = {sr.rank};
      f.comm = site.comm;
      f.cost_ms_per_step = sr.cost_ms_per_step;
      const std::string where = site.range.empty() ? fmt::format("#{}", site.ordinal) : "after " + site.range;
      f.text = fmt::format("rank {} arrives last at {} {} {} by {:.1f} ms median (in {:.0f}% of steps)", sr.rank,
                           site.comm, site.op, where, sr.late_margin_ms, 100.0 * sr.last_fraction);
      f.text += past_noise_text(sr.late_margin_ms, noise);
      name_waiters(report, site, sr.rank, floor_ms, f);
      const SlowdownShape shape = classify_slowdown(report, sr.rank, peers, own_cause);
      f.cls = shape.cls;
      if (shape.cls == "uniform_slowdown") {  // the whole rank: no range is the cause
        f.slowdown_factor = shape.factor;
        f.text += shape.text;
      } else if (own_cause) {
        f.range = cause.range;
        f.text += fmt::format("; its {} takes {:.1f} ms longer than its peers' (class range-specific)", cause.range, cause.ms);
      } else if (shape.cls == "communication") {
        f.range = site.range;
        f.text += shape.text;
      } else {
        // No range of its own explains it: the rank is a cause only if it is later, over a step, than
        // the group's other ranks are at their own collectives.
        double others = 0;
        for (const auto& [rank, late] : late_in_group[site.comm])
          if (rank != sr.rank) others = std::max(others, late);
        const double net = late_in_group[site.comm][sr.rank] - others;
        if (net < kFindingSignificance * noise) {
          note_below_noise(report, sr.rank, "late_arrival", std::max(0.0, net), noise);
          continue;
        }
        f.range = site.range;
        f.text += "; no range of its own takes longer than its peers' (class outside ranges; look at time outside "
                  "ranges: data loading, the host, the network)";
      }
      // Where a delay shows at several collectives, the one inside (or around) the cause names it best.
      const bool near_cause = own_cause && !site.range.empty() &&
                              (is_same_or_under(site.range, cause.range) || is_same_or_under(cause.range, site.range));
      found.push_back({std::move(f), near_cause});
    }
  }
  // One finding per (rank, cause): a delay shows at the first collective of each group the rank
  // is in (its TP all-reduce, later its DP all-reduce). The site inside the cause names it best;
  // the cost is the largest of them (what the step saves when the cause goes away).
  std::map<std::pair<int, std::string>, std::vector<Candidate*>> by_cause;
  for (Candidate& c : found) by_cause[{c.finding.ranks.front(), c.finding.range}].push_back(&c);
  for (auto& [key, group] : by_cause) {
    double cost = 0;
    for (const Candidate* c : group) cost = std::max(cost, c->finding.cost_ms_per_step);
    Candidate* best = nullptr;
    for (Candidate* c : group) {
      const bool close = c->finding.cost_ms_per_step >= 0.9 * cost;
      if (!close) continue;
      if (!best || (c->near_cause && !best->near_cause) ||
          (c->near_cause == best->near_cause && c->finding.cost_ms_per_step > best->finding.cost_ms_per_step)) {
        best = c;
      }
    }
    best->finding.cost_ms_per_step = cost;
    report.findings.push_back(std::move(best->finding));
  }
}

void counter_findings(const format::RunMetadata* meta, const SkewOptions& options, SkewReport& report) {
  for (const CounterSkew& cs : report.counters) {
    if (!cs.worst_group || cs.worst_group->imbalance < options.counter_imbalance_threshold) continue;
    // mem.* counters describe the process, not a share of the step's work; moe.* counters have
    // their own finding (expert_load.cpp), which knows which ranges the tokens cost time in;
    // gpu.* counters are kernel time the probe could not book to a range (format/kernel_counters.h),
    // which the device breakdown reports as "outside any range", not a share of the work.
    if (cs.name.rfind("mem.", 0) == 0 || cs.name.rfind("moe.", 0) == 0 || cs.name.rfind("gpu.", 0) == 0) continue;
    const CounterGroupImbalance& g = *cs.worst_group;
    Finding f;
    f.kind = "counter_imbalance";
    f.counter = cs.name;
    f.comm = g.group;
    f.ranks = {g.max_rank, g.min_rank};
    // The ranges doing the counted work share the counter's first component: embed.local_tokens
    // -> forward/embed, backward/embed. Its cost is what the busiest rank spends there beyond the
    // group's mean (only the outermost matching ranges, so nothing is counted twice).
    const std::string subject = cs.name.substr(0, cs.name.find('.'));
    std::vector<int> group_ranks;
    if (meta) {
      if (const auto* cg = meta->group(g.group)) group_ranks = cg->ranks;
    }
    if (group_ranks.empty()) {
      for (const RankSkew& rs : report.ranks) group_ranks.push_back(rs.rank);
    }
    const auto& busiest = report.ranks[size_t(g.max_rank)].range_compute_ms;
    double range_excess = 0;
    for (const auto& [range, ms] : busiest) {
      if (!has_component(range, subject)) continue;
      const std::string_view parent = parent_range(range);
      if (!parent.empty() && has_component(parent, subject)) continue;
      std::vector<double> v;
      for (int r : group_ranks) {
        const auto& m = report.ranks[size_t(r)].range_compute_ms;
        if (auto it = m.find(range); it != m.end()) v.push_back(it->second);
      }
      const double excess = std::max(0.0, ms - mean(v));
      f.cost_ms_per_step += excess;
      // Named: the range that costs most; on a tie, the forward one (where the work is first done).
      if (f.range.empty() || excess > range_excess ||
          (excess == range_excess && range.rfind("forward/", 0) == 0 && f.range.rfind("forward/", 0) != 0)) {
        f.range = range;
        range_excess = excess;
      }
    }
    // What the counted work costs here: its range on the busiest and on the lightest rank.
    std::string measured;
    if (!f.range.empty()) {
      const auto& lightest = report.ranks[size_t(g.min_rank)].range_compute_ms;
      const double busy_ms = busiest.at(f.range);
      const double light_ms = lightest.count(f.range) ? lightest.at(f.range) : 0.0;
      if (f.cost_ms_per_step >= min_cost_ms(options, report))
        measured = fmt::format("; it costs {:.1f} ms per step in {} ({:.2f} ms on rank {} vs {:.2f} ms on rank {})",
                               f.cost_ms_per_step, f.range, busy_ms, g.max_rank, light_ms, g.min_rank);
      else
        measured = fmt::format("; the imbalance is real but costs nothing measurable here: {} takes {:.2f} ms on rank "
                               "{} and {:.2f} ms on rank {}",
                               f.range, busy_ms, g.max_rank, light_ms, g.min_rank);
    } else {
      measured = fmt::format("; no range named after '{}' was recorded, so its cost cannot be measured", subject);
    }
    // "20:1"; a rank with none of it reads "244:0".
    const std::string ratio = g.min > 0 ? fmt::format("{:.0f}:1", g.max / g.min) : fmt::format("{}:0", fmt_value(g.max));
    f.share_ratio = g.min > 0 ? g.max / g.min : g.max;
    f.share_text = ratio;
    f.text = fmt::format("{} imbalance {} across {} (rank {}: {}, rank {}: {} per step)", cs.name, ratio, g.group,
                         g.max_rank, fmt_value(g.max), g.min_rank, fmt_value(g.min));
    // gpt2-train records the sharding in run.json's model object; older runs had it in training.
    auto shard_is = [&](const nlohmann::json& j) {
      return j.is_object() && j.value("vocab_shard", std::string()) == "contiguous";
    };
    const bool contiguous = meta && (shard_is(meta->model) || shard_is(meta->training));
    if (cs.name == "embed.local_tokens" && contiguous) {
      f.text += ": vocab shards are contiguous and real token ids are skewed; use --vocab-shard strided";
    } else {
      f.text += fmt::format(": the ranks of {} get unequal shares of this work", g.group);
    }
    if (cs.groups_of_kind > 1) {
      f.text += fmt::format(" ({} of {} such groups are past {:.2f}x)", cs.groups_over_threshold, cs.groups_of_kind,
                            options.counter_imbalance_threshold);
    }
    f.text += measured;
    report.findings.push_back(std::move(f));
  }
}

void straggler_findings(const SkewOptions& options, SkewReport& report) {
  std::set<int> explained;
  for (const Finding& f : report.findings) {
    if (f.kind == "late_arrival") explained.insert(f.ranks.begin(), f.ranks.end());
  }
  std::vector<double> noncomm;
  std::vector<int> present;
  for (const RankSkew& rs : report.ranks) {
    if (rs.steps == 0) continue;
    noncomm.push_back(rs.noncomm_ms_median);
    present.push_back(rs.rank);
  }
  const double typical = median(noncomm);
  for (const RankSkew& rs : report.ranks) {
    if (rs.steps == 0 || rs.relative_score >= options.straggler_score_threshold || explained.count(rs.rank)) continue;
    const double cost = rs.noncomm_ms_median - typical;
    if (cost < min_cost_ms(options, report)) continue;
    const double noise = noise_ms(report, rs.rank, DelayKind::kMedianStep);
    if (cost < kFindingSignificance * noise) {
      note_below_noise(report, rs.rank, "straggler", cost, noise);
      continue;
    }
    std::vector<int> peers;
    for (int p : present) {
      if (p != rs.rank) peers.push_back(p);
    }
    const Excess cause = cause_range(report, rs.rank, peers);
    Finding f;
    f.kind = "straggler";
    f.ranks = {rs.rank};
    f.range = cause.range;
    f.cost_ms_per_step = cost;
    f.text = fmt::format("rank {} is a straggler: its step without communication takes {:.1f} ms, {:.1f} ms more "
                         "than the median rank (relative score {:.2f}, individual {:.2f})",
                         rs.rank, rs.noncomm_ms_median, cost, rs.relative_score, rs.individual_score);
    f.text += past_noise_text(cost, noise);
    const SlowdownShape shape = classify_slowdown(report, rs.rank, peers, !cause.range.empty());
    f.cls = shape.cls;
    if (shape.cls == "uniform_slowdown") {
      f.range.clear();  // the whole rank: no range is the cause
      f.slowdown_factor = shape.factor;
      f.text += shape.text;
    } else if (!cause.range.empty()) {
      f.text += fmt::format("; its {} takes {:.1f} ms longer than its peers' (class range-specific)", cause.range, cause.ms);
    } else {
      f.text += shape.text.empty() ? "; class outside ranges" : shape.text;
    }
    report.findings.push_back(std::move(f));
  }
}

void what_if(SkewReport& report) {
  for (const Finding& top : report.findings) {
    if (top.kind != "late_arrival" && top.kind != "straggler") continue;
    const int rank = top.ranks.front();
    double saving = 0;  // findings are one per (rank, cause) already, so they add up
    for (const Finding& f : report.findings) {
      if ((f.kind == "late_arrival" || f.kind == "straggler") && f.ranks.front() == rank) saving += f.cost_ms_per_step;
    }
    WhatIf w;
    w.rank = rank;
    w.step_ms = report.step_ms_median;
    w.estimated_step_ms = std::max(0.0, w.step_ms - saving);
    w.text = fmt::format("if rank {} kept pace with the median rank, a step would take about {:.1f} ms instead of "
                         "{:.1f} ms ({:.0f}% faster)",
                         rank, w.estimated_step_ms, w.step_ms, w.step_ms > 0 ? 100.0 * saving / w.step_ms : 0.0);
    report.what_if = w;
    return;
  }
}

}  // namespace

void derive_findings(const format::RunMetadata* meta, const SkewOptions& options, SkewReport& report) {
  late_arrival_findings(options, report);
  counter_findings(meta, options, report);
  straggler_findings(options, report);
  // Most costly first. An imbalance of work that costs nothing measurable yet ranks by what it
  // predicts: a share of 4:1 or more goes before delays under 5% of the step (a 20:1 vocab shard
  // is the finding to act on, where a rank a few ms late is the machine's jitter).
  const double small_ms = 0.05 * report.step_ms_median;
  auto rank_key = [&](const Finding& f) {
    const bool predicts = f.kind == "counter_imbalance" && f.share_ratio >= 4 && f.cost_ms_per_step < min_cost_ms(options, report);
    return predicts ? small_ms : f.cost_ms_per_step;
  };
  std::stable_sort(report.findings.begin(), report.findings.end(),
                   [&](const Finding& a, const Finding& b) { return rank_key(a) > rank_key(b); });
  if (report.findings.size() > options.max_findings) report.findings.resize(options.max_findings);
  what_if(report);
}

}  // namespace rankscope::analyzers
