// part_causes.cpp — the causes of the waterfall's parts (part_causes.h).
#include "part_causes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/range_names.h"

namespace rankscope::analyzers::diff_detail {
namespace {

// ", on rank 1 alone (+50.1 ms a step there; the others +0.2 ms)" where one rank carries most of a
// range's growth: a straggler's work, not the job's. Ranks matched by rank only.
std::string concentration(const RunParts& a, const RunParts& b, const std::string& range) {
  const auto ia = a.range_by_rank.find(range), ib = b.range_by_rank.find(range);
  if (ib == b.range_by_rank.end() || ib->second.size() < 2) return {};
  std::vector<std::pair<double, int>> deltas;  // (delta, rank)
  for (const auto& [rank, v] : ib->second) {
    double before = 0;
    if (ia != a.range_by_rank.end())
      if (auto it = ia->second.find(rank); it != ia->second.end()) before = it->second;
    deltas.emplace_back(v - before, rank);
  }
  std::sort(deltas.rbegin(), deltas.rend());
  double others = 0;
  for (size_t i = 1; i < deltas.size(); ++i) others += deltas[i].first;
  others /= double(deltas.size() - 1);
  const double top = deltas.front().first;
  if (top <= 0 || others > 0.2 * top) return {};
  return fmt::format(", on rank {} alone ({:+.1f} ms a step there; the others {:+.1f} ms each on average)", deltas.front().second, top,
                     others);
}

bool is_straggler(const Finding& f) { return f.kind == "straggler" || f.kind == "late_arrival"; }

// "5", or "3 (tp rank 1)" where ranks are matched by role.
std::string rank_with_role(int rank, const RoleMatch& roles, bool in_new) {
  const auto& of = in_new ? roles.new_role : roles.base_role;
  const auto it = roles.by_rank ? of.end() : of.find(rank);
  return it == of.end() ? std::to_string(rank) : fmt::format("{} ({})", rank, it->second);
}

std::string megabytes(double bytes) { return bytes >= 1e8 ? fmt::format("{:.0f} MB", bytes / 1e6) : fmt::format("{:.2f} MB", bytes / 1e6); }

}  // namespace

// The range under `top` whose compute changed most.
std::string range_cause(const RunParts& a, const RunParts& b, const std::string& top, double part_delta, bool by_rank) {
  std::set<std::string> names;
  for (const auto& [n, v] : a.range_compute) names.insert(n);
  for (const auto& [n, v] : b.range_compute) names.insert(n);
  std::string best;
  double best_delta = 0;
  for (const auto& n : names) {
    if (n == top || !is_same_or_under(n, top)) continue;
    // Leaves and mid-level ranges alike: prefer the deepest whose change carries the part's sign.
    const double av = a.range_compute.count(n) ? a.range_compute.at(n) : 0;
    const double bv = b.range_compute.count(n) ? b.range_compute.at(n) : 0;
    const double d = bv - av;
    if ((d > 0) != (part_delta > 0)) continue;
    if (std::fabs(d) > std::fabs(best_delta) * 1.25 || (std::fabs(d) >= 0.8 * std::fabs(best_delta) && range_depth(n) > range_depth(best))) {
      best = n;
      best_delta = d;
    }
  }
  if (best.empty()) return {};
  const double av = a.range_compute.count(best) ? a.range_compute.at(best) : 0;
  const double bv = b.range_compute.count(best) ? b.range_compute.at(best) : 0;
  // "went from 6.3 ms to 6.3 ms (1.00x)" explains nothing: a change under 20 us or 2% is no cause.
  if (std::fabs(best_delta) < 0.02 || (av > 0 && std::fabs(best_delta) < 0.02 * av)) return {};
  if (av <= 0) return fmt::format("{} is new ({} a step)", best, format_ms(bv));
  if (bv <= 0) return fmt::format("{} is gone (was {} a step)", best, format_ms(av));
  return fmt::format("{} went from {} to {} a step ({:.2f}x){}", best, format_ms(av), format_ms(bv), bv / av,
                     by_rank && bv > av ? concentration(a, b, best) : "");
}

// A straggler of NEW whose rank (or role) had none in BASE; else one whose rank (role) straggled in
// BASE too but costs more now.
std::string straggler_cause(const SkewReport& a, const SkewReport& b, const RoleMatch& roles) {
  auto role_of = [&](int rank, bool in_new) {
    const auto& of = in_new ? roles.new_role : roles.base_role;
    const auto it = of.find(rank);
    return it == of.end() ? fmt::format("rank {}", rank) : it->second;
  };
  std::map<std::string, const Finding*> before;  // role -> BASE's costliest straggler finding there
  for (const auto& f : a.findings)
    if (is_straggler(f))
      for (int r : f.ranks) before.emplace(role_of(r, false), &f);  // findings come costliest first
  auto describe = [&](const Finding& f) {
    std::string ranks;
    for (int r : f.ranks) ranks += (ranks.empty() ? "" : ", ") + rank_with_role(r, roles, true);
    return fmt::format("rank{} {} ({}{})", f.ranks.size() == 1 ? "" : "s", ranks, f.kind == "straggler" ? "straggler" : "arrives late",
                       f.cls.empty() ? "" : ", " + f.cls);
  };
  // Findings come costliest first: the first straggler that is new, or whose role straggled in
  // BASE too but costs more now, is the cause (a cheap new one must not hide a costly old one).
  for (const auto& f : b.findings) {
    if (!is_straggler(f) || f.ranks.empty()) continue;
    const Finding* was = nullptr;
    for (int r : f.ranks) {
      const auto it = before.find(role_of(r, true));
      if (it == before.end()) {
        was = nullptr;
        break;
      }
      was = was ? was : it->second;
    }
    // BASE's finding for that role a fraction of this one's cost (a rank last by 0.1 ms, noise): new.
    if (!was || was->cost_ms_per_step < 0.25 * f.cost_ms_per_step)
      return fmt::format("a new straggler: {}, costing {} a step{}{}", describe(f), format_ms(f.cost_ms_per_step),
                         f.range.empty() ? "" : " in " + f.range, was ? fmt::format(" (BASE: {})", format_ms(was->cost_ms_per_step)) : "");
    if (f.cost_ms_per_step <= was->cost_ms_per_step) continue;
    std::string then;
    for (int r : was->ranks) then += (then.empty() ? "" : ",") + std::to_string(r);
    return fmt::format("{} straggles as BASE's rank{} {} did, costing {} a step (was {}){}", describe(f), was->ranks.size() == 1 ? "" : "s",
                       then, format_ms(f.cost_ms_per_step), format_ms(was->cost_ms_per_step), f.range.empty() ? "" : " in " + f.range);
  }
  return {};
}

// Each role's mean step in both runs (compute + wait + transfer + memcpy + idle, as the parts).
std::vector<RoleDiff> role_diffs(const SkewReport& a, const SkewReport& b, const RoleMatch& roles) {
  std::map<std::string, RoleDiff> by_role;
  std::map<std::string, std::pair<int, int>> counted;  // role -> ranks with a step in BASE, NEW
  auto add = [&](const SkewReport& rep, bool in_new) {
    const auto& of = in_new ? roles.new_role : roles.base_role;
    for (const auto& k : rep.ranks) {
      const auto it = of.find(k.rank);
      const std::string role = it == of.end() ? fmt::format("rank {}", k.rank) : it->second;
      RoleDiff& d = by_role[role];
      d.role = role;
      (in_new ? d.new_ranks : d.base_ranks).push_back(k.rank);
      if (!k.present || k.steps == 0) continue;
      const double step = k.compute_ms + k.collective_wait_ms + k.collective_transfer_ms + k.memcpy_ms + k.idle_ms;
      (in_new ? d.new_ms : d.base_ms) += step;
      ++(in_new ? counted[role].second : counted[role].first);
    }
  };
  add(a, false);
  add(b, true);
  std::vector<RoleDiff> out;
  for (auto& [role, d] : by_role) {
    const auto [nb, nn] = counted[role];
    d.base_ms = nb ? d.base_ms / nb : 0;
    d.new_ms = nn ? d.new_ms / nn : 0;
    d.delta_ms = nb && nn ? d.new_ms - d.base_ms : 0;
    out.push_back(std::move(d));
  }
  std::stable_sort(out.begin(), out.end(), [](const RoleDiff& x, const RoleDiff& y) { return std::fabs(x.delta_ms) > std::fabs(y.delta_ms); });
  return out;
}

// Under idle: on the device (both runs have kernel records) the GPU waiting with nothing to run, and
// how much of it the host set (its step longer than the GPU's busy time: launch overhead, data
// loading, Python between kernels); on the host, time in no range and no collective.
std::string idle_cause(const RunParts& a, const RunParts& b, double delta) {
  if (delta <= 0.02 * a.mean_step) return {};  // a few percent of idle moves with the machine
  if (a.device_ranks > 0 && b.device_ranks > 0)
    return fmt::format("the GPU idles more between kernels; host-bound (the host's step longer than the GPU's busy time: "
                       "launch overhead, data loading, Python between kernels) {} -> {} a step",
                       format_ms(a.host_bound), format_ms(b.host_bound));
  if (a.device_ranks == 0 && b.device_ranks == 0)
    return "more time in no range and no collective: host work between the ranges (data loading or setup not in a range)";
  return {};
}

// Under collective transfer: more collective sites (a fact of the job, whatever the time did), else
// more bytes through the same sites, else the same bytes at another bandwidth (bytes a rank moves a
// step over its transfer time: an algorithm bandwidth, comparable between the two runs only).
std::string transfer_cause(const RunParts& a, const RunParts& b, double base_ms, double new_ms) {
  if (b.collective_sites > a.collective_sites) {
    std::string added;
    for (const auto& [op, n] : b.sites_by_op) {
      const size_t before = a.sites_by_op.count(op) ? a.sites_by_op.at(op) : 0;
      if (n > before) added += fmt::format("{}{} more {}", added.empty() ? "" : ", ", n - before, op);
    }
    // The bytes say whether the extra calls carry more data or split the same (a smaller DDP bucket).
    std::string bytes;
    const double ratio = a.bytes_per_step > 0 ? b.bytes_per_step / a.bytes_per_step : 0;
    if (a.bytes_per_step > 0 && b.bytes_per_step > 0 && ratio > 0.95 && ratio < 1.05)
      bytes = fmt::format("; the same {} a step, split into {}x as many calls", megabytes(b.bytes_per_step),
                          fmt::format("{:.0f}", double(b.collective_sites) / std::max<size_t>(a.collective_sites, 1)));
    else if (a.bytes_per_step > 0 && b.bytes_per_step > 0)
      bytes = fmt::format("; {} a step moved instead of {}", megabytes(b.bytes_per_step), megabytes(a.bytes_per_step));
    return fmt::format("{} collective sites a step instead of {} ({}){}", b.collective_sites, a.collective_sites, added, bytes);
  }
  if (a.bytes_per_step <= 0 || b.bytes_per_step <= 0 || base_ms <= 0 || new_ms <= 0) return {};
  const double bytes_ratio = b.bytes_per_step / a.bytes_per_step;
  if (bytes_ratio > 1.05 || bytes_ratio < 0.95)
    return fmt::format("{} a step moved instead of {} through the same {} sites ({:.2f}x)", megabytes(b.bytes_per_step),
                       megabytes(a.bytes_per_step), b.collective_sites, bytes_ratio);
  const double bw_a = a.bytes_per_step / (base_ms * 1e-3) / 1e9, bw_b = b.bytes_per_step / (new_ms * 1e-3) / 1e9;
  if (std::fabs(new_ms - base_ms) < 0.05 * base_ms) return {};
  auto rate = [](double gbps) { return gbps >= 1 ? fmt::format("{:.2f} GB/s", gbps) : fmt::format("{:.1f} MB/s", gbps * 1e3); };
  return fmt::format("the same {} a step at {} bandwidth: {} -> {} a rank", megabytes(b.bytes_per_step),
                     bw_b < bw_a ? "lower" : "higher", rate(bw_a), rate(bw_b));
}

}  // namespace rankscope::analyzers::diff_detail
