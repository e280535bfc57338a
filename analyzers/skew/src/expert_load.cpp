// expert_load.cpp — how unevenly an MoE job's tokens fall on its experts and ranks, and what it costs.
//
// The rank that receives most tokens in its expert-parallel group runs the longest expert GEMMs,
// and the combine all_to_all makes every member wait for it: the step is paced by the busiest
// rank. Cost = its expert time (every .../moe/experts range, collectives excluded) beyond its
// group's mean, i.e. what a step saves when routing is balanced and every rank receives the mean.
#include "expert_load.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace rankscope::analyzers {
namespace {

constexpr std::string_view kReceived = "moe.tokens_received";

bool is_experts_range(const std::string& range) {
  constexpr std::string_view tail = "/moe/experts";
  return range.size() >= tail.size() && range.compare(range.size() - tail.size(), tail.size(), tail) == 0;
}

std::string thousands(double v) {  // 62515 -> "62,515"
  const std::string digits = fmt::format("{:.0f}", std::fabs(v));
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    out += digits[i];
    const size_t left = digits.size() - i - 1;
    if (left > 0 && left % 3 == 0) out += ',';
  }
  return out;
}

std::string ep_group_of(const format::RunMetadata* meta, int rank) {
  if (!meta) return "";
  for (const auto& g : meta->groups)
    if (g.name.rfind("ep", 0) == 0 && std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end()) return g.name;
  return "";
}

// Steps in bins of at most `max_bins`, each expert's tokens averaged over its bin.
void fill_series(const ExpertSeries& series, int max_bins, ExpertLoad& x) {
  x.experts = series.experts;
  x.tokens.assign(size_t(x.experts), {});
  std::vector<double> totals(size_t(x.experts), 0.0);
  const size_t n = series.by_step.size();
  if (n == 0) return;
  const size_t per_bin = (n + size_t(std::max(1, max_bins)) - 1) / size_t(std::max(1, max_bins));
  size_t i = 0;
  int64_t bin_first = 0, bin_last = 0;
  std::vector<double> acc(size_t(x.experts), 0.0);
  for (const auto& [step, values] : series.by_step) {
    if (i % per_bin == 0) bin_first = step;
    bin_last = step;
    for (size_t e = 0; e < values.size(); ++e) {
      acc[e] += values[e];
      totals[e] += values[e];
    }
    ++i;
    if (i % per_bin == 0 || i == n) {
      const size_t in_bin = (i - 1) % per_bin + 1;
      for (size_t e = 0; e < acc.size(); ++e) x.tokens[e].push_back(acc[e] / double(in_bin));
      x.step_labels.push_back(bin_first == bin_last ? std::to_string(bin_first) : fmt::format("{}-{}", bin_first, bin_last));
      std::fill(acc.begin(), acc.end(), 0.0);
    }
  }
  double sum = 0;
  for (double t : totals) sum += t;
  x.share.assign(totals.size(), 0.0);
  for (size_t e = 0; e < totals.size(); ++e) {
    x.share[e] = sum > 0 ? totals[e] / sum : 0.0;
    if (x.hottest_expert < 0 || totals[e] > totals[size_t(x.hottest_expert)]) x.hottest_expert = int(e);
  }
  const double mean = sum / double(std::max(1, x.experts));
  x.imbalance = mean > 0 && x.hottest_expert >= 0 ? totals[size_t(x.hottest_expert)] / mean : 1.0;
}

}  // namespace

void ExpertSeries::add(int64_t step, int expert, double tokens) {
  if (expert < 0 || expert > (1 << 16)) return;
  auto& v = by_step[step];
  if (v.size() <= size_t(expert)) v.resize(size_t(expert) + 1, 0.0);
  v[size_t(expert)] += tokens;
  experts = std::max(experts, expert + 1);
}

std::optional<int> routed_counter_expert(std::string_view name) {
  constexpr std::string_view head = "moe.expert", tail = ".routed";
  if (name.size() <= head.size() + tail.size() || name.substr(0, head.size()) != head ||
      name.substr(name.size() - tail.size()) != tail)
    return std::nullopt;
  const std::string_view digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  int e = -1;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), e);
  if (ec != std::errc() || p != digits.data() + digits.size() || e < 0) return std::nullopt;
  return e;
}

void compute_expert_load(const format::RunMetadata* meta, const SkewOptions& options, const ExpertSeries& series,
                         SkewReport& report) {
  ExpertLoad x;
  double tokens_sum = 0, ms_sum = 0;
  for (const RankSkew& rs : report.ranks) {
    auto it = rs.counters.find(std::string(kReceived));
    if (!rs.present || it == rs.counters.end()) continue;
    RankExpertLoad r;
    r.rank = rs.rank;
    r.group = ep_group_of(meta, rs.rank);
    r.tokens_received = it->second;
    for (const auto& [range, ms] : rs.range_compute_ms)
      if (is_experts_range(range)) r.experts_ms += ms;
    tokens_sum += r.tokens_received;
    ms_sum += r.experts_ms;
    x.ranks.push_back(std::move(r));
  }
  if (x.ranks.empty() && series.by_step.empty()) return;  // not an MoE run
  fill_series(series, options.heatmap_max_steps, x);
  x.ms_per_token = tokens_sum > 0 ? ms_sum / tokens_sum : 0.0;

  // The expert-parallel group whose busiest rank costs most beyond the group's mean.
  std::map<std::string, std::vector<const RankExpertLoad*>> groups;
  for (const auto& r : x.ranks)
    if (!r.group.empty()) groups[r.group].push_back(&r);
  const double floor_ms = std::max(options.min_finding_ms, options.min_finding_fraction * report.step_ms_median);
  std::optional<Finding> best;
  for (const auto& [name, members] : groups) {
    if (members.size() < 2) continue;
    auto by_tokens = [](const RankExpertLoad* a, const RankExpertLoad* b) { return a->tokens_received < b->tokens_received; };
    const RankExpertLoad* hot = *std::max_element(members.begin(), members.end(), by_tokens);
    const RankExpertLoad* light = *std::min_element(members.begin(), members.end(), by_tokens);
    double mean_tokens = 0;
    for (const auto* m : members) mean_tokens += m->tokens_received;
    mean_tokens /= double(members.size());
    if (mean_tokens <= 0 || hot->tokens_received < 1.05 * mean_tokens) continue;
    // Expert time beyond the group's mean, range by range; the named range is the forward one
    // (else any) where the busiest rank is furthest ahead of the lightest.
    const auto& hot_ranges = report.ranks[size_t(hot->rank)].range_compute_ms;
    const auto& light_ranges = report.ranks[size_t(light->rank)].range_compute_ms;
    double cost = 0, named_gap = 0;
    std::string named;
    for (const auto& [range, ms] : hot_ranges) {
      if (!is_experts_range(range)) continue;
      double mean_ms = 0;
      int n = 0;
      for (const auto* m : members) {
        const auto& rm = report.ranks[size_t(m->rank)].range_compute_ms;
        if (auto it = rm.find(range); it != rm.end()) mean_ms += it->second, ++n;
      }
      if (n > 0) cost += std::max(0.0, ms - mean_ms / n);
      const auto lt = light_ranges.find(range);
      const double gap = ms - (lt == light_ranges.end() ? 0.0 : lt->second);
      const bool forward = range.rfind("forward/", 0) == 0, named_forward = named.rfind("forward/", 0) == 0;
      if (named.empty() || (forward && !named_forward) || (forward == named_forward && gap > named_gap)) {
        named = range;
        named_gap = gap;
      }
    }
    if (cost < floor_ms || (best && cost <= best->cost_ms_per_step)) continue;
    Finding f;
    f.kind = "expert_load";
    f.ranks = {hot->rank, light->rank};
    f.comm = name;
    f.counter = std::string(kReceived);
    f.range = named;
    f.cost_ms_per_step = cost;
    const double ratio = light->tokens_received > 0 ? hot->tokens_received / light->tokens_received : 0.0;
    f.text = fmt::format("rank {} received {} tokens vs {} on rank {} ({}) per step in {}", hot->rank,
                         thousands(hot->tokens_received), thousands(light->tokens_received), light->rank,
                         ratio > 0 ? fmt::format("{:.2f}:1", ratio) : std::string("none on the lightest"), name);
    // The experts it holds (contiguous shards, rank r of ep{k} holds [r*L, (r+1)*L)).
    const auto pos = size_t(std::find(members.begin(), members.end(), hot) - members.begin());
    if (x.experts > 0 && x.experts % int(members.size()) == 0) {
      const int per = x.experts / int(members.size()), first = int(pos) * per;
      f.text += per == 1 ? fmt::format(" (it holds expert {})", first)
                         : fmt::format(" (it holds experts {}-{})", first, first + per - 1);
    }
    if (!named.empty()) f.text += fmt::format("; its {} takes {:.1f} ms more per step", named, named_gap);
    f.text += fmt::format("; the expert load costs {:.1f} ms per step (its expert time beyond the {} mean)", cost, name);
    if (x.hottest_expert >= 0 && x.experts > 0)
      f.text += fmt::format("; hottest expert {} gets {:.0f}% of the routed tokens (balanced: {:.0f}%)", x.hottest_expert,
                            100.0 * x.share[size_t(x.hottest_expert)], 100.0 / x.experts);
    best = std::move(f);
  }
  if (best) {
    WhatIf w;
    w.rank = best->ranks.front();
    w.step_ms = report.step_ms_median;
    w.estimated_step_ms = std::max(0.0, w.step_ms - best->cost_ms_per_step);
    w.text = fmt::format("if routing were balanced (every rank of {} receiving the group's mean), a step would take about "
                         "{:.1f} ms instead of {:.1f} ms ({:.0f}% faster)",
                         best->comm, w.estimated_step_ms, w.step_ms,
                         w.step_ms > 0 ? 100.0 * best->cost_ms_per_step / w.step_ms : 0.0);
    x.balanced = w;
    report.findings.push_back(std::move(*best));
  }
  report.expert_load = std::move(x);
}

}  // namespace rankscope::analyzers
