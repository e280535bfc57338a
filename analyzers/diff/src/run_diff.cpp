// run_diff.cpp — the waterfall of a step's change between two runs, with causes (run_diff.h).
//
// Both runs go through analyze_skew. Per rank the skew report splits the mean step into compute +
// collective wait + collective transfer + memcpy + idle; compute is split further over the
// top-level ranges in proportion to their compute time (collectives excluded), so that the parts
// of each run add up to its mean step exactly, and the parts' changes to the mean step's change.
// Each part's cause is looked for below it: the range (block indices folded) whose compute changed
// most, a straggler NEW has and BASE has not (by rank, or by role where the layouts differ:
// rank_roles.h), more collective sites per step.
#include "rankscope/analyzers/diff/run_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "kernel_match.h"
#include "rank_roles.h"
#include "settings_diff.h"

namespace rankscope::analyzers {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One run's parts, mean per step over its present ranks, and its compute per folded range.
struct RunParts {
  std::map<std::string, double> parts;       // part name -> ms per step
  std::map<std::string, double> range_compute;  // block-wildcarded range -> ms per step (mean over ranks)
  std::map<std::string, std::map<int, double>> range_by_rank;  // the same per rank
  double mean_step = 0, median_step = 0, spread = 0;
  int ranks = 0;
  int64_t steps = 0;
  size_t collective_sites = 0;
  double bytes_per_step = 0;                  // collective bytes a rank moves a step (0 unknown)
  int device_ranks = 0;                       // ranks whose breakdown is the device's (kernel records)
  double host_bound = 0;                      // of their GPU idle, the host-bound part (mean, ms a step)
  std::map<std::string, size_t> sites_by_op;  // "allreduce_sum on tp" -> sites
};

RunParts parts_of(const SkewReport& r) {
  RunParts p;
  std::vector<double> medians, spreads;
  for (const auto& k : r.ranks) {
    if (!k.present || k.steps == 0) continue;
    ++p.ranks;
    medians.push_back(k.step_ms_median);
    // 1.4826 x MAD is the standard deviation where the noise is normal; steps far off (start-up, a
    // stall, a burst of load on a shared machine) do not widen it as they widen p90 - median.
    spreads.push_back(1.4826 * k.step_ms_mad);
    // Compute over the top-level components ("forward", "backward", "optimizer"): the outermost
    // ranges recorded under each ("forward/embed" where no "forward" range exists; ranges include
    // their children). "step" and "init" hold the others: not parts.
    double named = 0;
    std::map<std::string, double> top;
    for (const auto& [name, ms] : k.range_compute_ms) {
      if (name == "step" || name == "init" || name.starts_with("init/")) continue;
      bool outermost = true;
      for (std::string_view up = parent_range(name); !up.empty() && outermost; up = parent_range(up))
        outermost = !k.range_compute_ms.count(std::string(up));
      if (!outermost) continue;
      top[std::string(top_level_range(name))] += ms;
      named += ms;
    }
    for (const auto& [name, ms] : top) p.parts["compute in " + name] += named > 0 ? k.compute_ms * ms / named : 0;
    if (named <= 0) p.parts["compute"] += k.compute_ms;
    p.parts["collective wait"] += k.collective_wait_ms;
    p.parts["collective transfer"] += k.collective_transfer_ms;
    p.parts["memcpy"] += k.memcpy_ms;
    p.parts["idle (outside ranges and collectives)"] += k.idle_ms;
    if (k.breakdown_source == "device" && k.device) {
      ++p.device_ranks;
      p.host_bound += k.device->host_bound_ms;
    }
    for (const auto& [name, ms] : k.range_compute_ms)
      if (name != "step" && name != "init") {
        const std::string folded = block_wildcard(name);
        p.range_compute[folded] += ms;
        p.range_by_rank[folded][k.rank] += ms;
      }
  }
  if (p.ranks > 0) {
    for (auto& [name, ms] : p.parts) ms /= p.ranks;
    for (auto& [name, ms] : p.range_compute) ms /= p.ranks;
  }
  if (p.device_ranks > 0) p.host_bound /= p.device_ranks;
  for (const auto& [name, ms] : p.parts) p.mean_step += ms;
  p.median_step = median(medians);
  p.spread = median(spreads);
  p.steps = r.steps;
  p.collective_sites = r.collectives.size();
  for (const auto& c : r.collectives) {
    ++p.sites_by_op[fmt::format("{} on {}", c.op, diff_detail::group_kind_of(c.comm))];
    p.bytes_per_step += c.bytes * double(c.instances);
  }
  if (r.steps > 0) p.bytes_per_step /= double(r.steps);
  return p;
}

std::string ms(double v) { return std::fabs(v) >= 100 ? fmt::format("{:.0f} ms", v) : fmt::format("{:.1f} ms", v); }

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
  if (av <= 0) return fmt::format("{} is new ({} a step)", best, ms(bv));
  if (bv <= 0) return fmt::format("{} is gone (was {} a step)", best, ms(av));
  return fmt::format("{} went from {} to {} a step ({:.2f}x){}", best, ms(av), ms(bv), bv / av,
                     by_rank && bv > av ? concentration(a, b, best) : "");
}

bool is_straggler(const Finding& f) { return f.kind == "straggler" || f.kind == "late_arrival"; }

// "5", or "3 (tp rank 1)" where ranks are matched by role.
std::string rank_with_role(int rank, const diff_detail::RoleMatch& roles, bool in_new) {
  const auto& of = in_new ? roles.new_role : roles.base_role;
  const auto it = roles.by_rank ? of.end() : of.find(rank);
  return it == of.end() ? std::to_string(rank) : fmt::format("{} ({})", rank, it->second);
}

// A straggler of NEW whose rank (or role) had none in BASE; else one whose rank (role) straggled in
// BASE too but costs more now.
std::string straggler_cause(const SkewReport& a, const SkewReport& b, const diff_detail::RoleMatch& roles) {
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
      return fmt::format("a new straggler: {}, costing {} a step{}{}", describe(f), ms(f.cost_ms_per_step),
                         f.range.empty() ? "" : " in " + f.range, was ? fmt::format(" (BASE: {})", ms(was->cost_ms_per_step)) : "");
    if (f.cost_ms_per_step <= was->cost_ms_per_step) continue;
    std::string then;
    for (int r : was->ranks) then += (then.empty() ? "" : ",") + std::to_string(r);
    return fmt::format("{} straggles as BASE's rank{} {} did, costing {} a step (was {}){}", describe(f), was->ranks.size() == 1 ? "" : "s",
                       then, ms(f.cost_ms_per_step), ms(was->cost_ms_per_step), f.range.empty() ? "" : " in " + f.range);
  }
  return {};
}

// Each role's mean step in both runs (compute + wait + transfer + memcpy + idle, as the parts).
std::vector<RoleDiff> role_diffs(const SkewReport& a, const SkewReport& b, const diff_detail::RoleMatch& roles) {
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

std::string megabytes(double bytes) { return bytes >= 1e8 ? fmt::format("{:.0f} MB", bytes / 1e6) : fmt::format("{:.2f} MB", bytes / 1e6); }

// Under idle: on the device (both runs have kernel records) the GPU waiting with nothing to run, and
// how much of it the host set (its step longer than the GPU's busy time: launch overhead, data
// loading, Python between kernels); on the host, time in no range and no collective.
std::string idle_cause(const RunParts& a, const RunParts& b, double delta) {
  if (delta <= 0.02 * a.mean_step) return {};  // a few percent of idle moves with the machine
  if (a.device_ranks > 0 && b.device_ranks > 0)
    return fmt::format("the GPU idles more between kernels; host-bound (the host's step longer than the GPU's busy time: "
                       "launch overhead, data loading, Python between kernels) {} -> {} a step",
                       ms(a.host_bound), ms(b.host_bound));
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
    std::string bytes;
    if (a.bytes_per_step > 0 && b.bytes_per_step > 0)
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

}  // namespace

Result<DiffReport> diff_runs(const std::filesystem::path& base, const std::filesystem::path& now,
                             const DiffOptions& options) {
  // Each run without its first warmup_steps steps (start-up: allocation, caches, lazy init), where
  // it has more than warmup_steps + 2: a short run's first step can be most of its mean.
  int64_t skipped_a = 0, skipped_b = 0;
  auto analyze = [&](const std::filesystem::path& dir, const char* side, int64_t& skipped) -> Result<SkewReport> {
    auto rep = analyze_skew(dir);
    if (rep.ok() && options.warmup_steps > 0 && rep->steps > options.warmup_steps + 2) {
      SkewOptions after;
      after.first_step = rep->first_step + options.warmup_steps;
      auto again = analyze_skew(dir, after);
      if (again.ok()) {
        skipped = options.warmup_steps;
        rep = std::move(again);
      }
    }
    if (!rep.ok()) {
      Status s = rep.status();
      s.prefix(std::string(side) + " " + dir.string());
      return s;
    }
    return rep;
  };
  auto a = analyze(base, "BASE", skipped_a);
  if (!a.ok()) return a.status();
  auto b = analyze(now, "NEW", skipped_b);
  if (!b.ok()) return b.status();
  DiffReport r;
  r.base_warmup_steps = skipped_a;
  r.new_warmup_steps = skipped_b;
  r.base_dir = base.string();
  r.new_dir = now.string();
  const RunParts pa = parts_of(*a), pb = parts_of(*b);
  if (pa.ranks == 0 || pb.ranks == 0)
    return invalid_argument(fmt::format("{} has no rank with a complete step: nothing to compare",
                                        pa.ranks == 0 ? r.base_dir : r.new_dir));
  r.base_ranks = pa.ranks;
  r.new_ranks = pb.ranks;
  r.base_steps = pa.steps;
  r.new_steps = pb.steps;
  r.base_step_ms = pa.median_step;
  r.new_step_ms = pb.median_step;
  r.base_spread_ms = pa.spread;
  r.new_spread_ms = pb.spread;
  // The spreads' mean: a few slow steps (the first ones warm caches) in one run do not hide a shift.
  r.noise_ms = std::max(0.5 * (pa.spread + pb.spread), options.min_noise_fraction * pa.median_step);
  r.significant = std::fabs(pb.median_step - pa.median_step) > r.noise_ms;
  r.base_mean_ms = pa.mean_step;
  r.new_mean_ms = pb.mean_step;
  r.mean_delta_ms = pb.mean_step - pa.mean_step;
  // Ranks matched by rank, or by role where the world sizes or groups differ.
  const auto meta_a = format::read_run_metadata(base), meta_b = format::read_run_metadata(now);
  const diff_detail::RoleMatch roles = diff_detail::match_roles(meta_a.ok() ? &*meta_a : nullptr, a->world_size,
                                                                meta_b.ok() ? &*meta_b : nullptr, b->world_size);
  r.ranks_by_rank = roles.by_rank;
  r.rank_match = roles.how;
  r.roles = role_diffs(*a, *b, roles);
  std::set<std::string> names;
  for (const auto& [n, v] : pa.parts) names.insert(n);
  for (const auto& [n, v] : pb.parts) names.insert(n);
  for (const auto& n : names) {
    DiffPart p;
    p.name = n;
    p.base_ms = pa.parts.count(n) ? pa.parts.at(n) : 0;
    p.new_ms = pb.parts.count(n) ? pb.parts.at(n) : 0;
    p.delta_ms = p.new_ms - p.base_ms;
    if (n.starts_with("compute in ")) p.cause = range_cause(pa, pb, n.substr(11), p.delta_ms, roles.by_rank);
    else if (n == "collective wait") p.cause = straggler_cause(*a, *b, roles);  // a new straggler is a fact of NEW
    else if (n == "collective transfer") p.cause = transfer_cause(pa, pb, p.base_ms, p.new_ms);
    else if (n.starts_with("idle")) p.cause = idle_cause(pa, pb, p.delta_ms);
    r.parts.push_back(std::move(p));
  }
  std::stable_sort(r.parts.begin(), r.parts.end(),
                   [](const DiffPart& x, const DiffPart& y) { return std::fabs(x.delta_ms) > std::fabs(y.delta_ms); });
  // Kernels by family, and families replaced in a range; a replacement under a compute part is
  // part of its cause ("flash_fwd_kernel replaced by ... in forward/block*/attn").
  if (auto ka = diff_detail::read_kernel_table(base), kb = diff_detail::read_kernel_table(now); ka.ok() && kb.ok()) {
    diff_detail::KernelComparison k = diff_detail::compare_kernels(*ka, *kb);
    r.kernels_compared = k.available;
    r.kernels = std::move(k.changes);
    r.kernel_swaps = std::move(k.swaps);
    for (auto& p : r.parts) {
      if (!p.name.starts_with("compute in ")) continue;
      const std::string top = p.name.substr(11);
      for (const KernelSwap& s : r.kernel_swaps) {
        if (s.range != top && !s.range.starts_with(top + "/")) continue;
        p.cause += fmt::format("{}{} replaced by {} in {} ({:.2f} -> {:.2f} ms)", p.cause.empty() ? "" : "; ", fmt::join(s.gone, " + "),
                               fmt::join(s.added, " + "), s.range, s.base_ms, s.new_ms);
        break;
      }
    }
  }
  r.settings = settings_changes(base, now, r.problems);
  if (auto f = seq_len_factors(base, now)) {
    r.explanations.push_back(fmt::format("the sequence went from {:g} to {:g}: per step (same batch) attention's FLOPs "
                                         "grow {:.1f}x and the MLP's {:.1f}x",
                                         f->t_base, f->t_new, f->attention, f->mlp));
    // Under each compute part, attention and the MLP measured against what the length predicts.
    for (auto& p : r.parts) {
      if (!p.name.starts_with("compute in ")) continue;
      const std::string top = p.name.substr(11);
      std::string measured;
      for (const auto& [leaf, predicted] : {std::pair<std::string, double>{"attn", f->attention}, {"mlp", f->mlp}}) {
        const std::string name = top + "/block*/" + leaf;
        const double av = pa.range_compute.count(name) ? pa.range_compute.at(name) : 0;
        const double bv = pb.range_compute.count(name) ? pb.range_compute.at(name) : 0;
        if (av > 0 && bv > 0)
          measured += fmt::format("{}{} {:.1f}x (the length predicts {:.1f}x)", measured.empty() ? "" : ", ", name, bv / av, predicted);
      }
      if (!measured.empty()) p.cause += (p.cause.empty() ? "" : "; ") + measured;
    }
    // How much of the step's change attention and the MLP explain, as factors of the mean step
    // ("attention explains 3.97x of the 4.63x"): their ranges' change under every compute part.
    double attn_delta = 0, mlp_delta = 0;
    bool found = false;
    for (const auto& p : r.parts) {
      if (!p.name.starts_with("compute in ")) continue;
      const std::string top = p.name.substr(11);
      for (const auto& [leaf, sum] : {std::pair<std::string, double*>{"attn", &attn_delta}, {"mlp", &mlp_delta}}) {
        const std::string name = top + "/block*/" + leaf;
        const double av = pa.range_compute.count(name) ? pa.range_compute.at(name) : 0;
        const double bv = pb.range_compute.count(name) ? pb.range_compute.at(name) : 0;
        found = found || av > 0 || bv > 0;
        *sum += bv - av;
      }
    }
    if (found && pa.mean_step > 0) {
      const double rest = r.mean_delta_ms - attn_delta - mlp_delta;
      r.explanations.back() += fmt::format(
          ". Of the mean step's {:.2f}x ({} -> {}), attention's ranges explain {:.2f}x ({:+.1f} ms), the MLP's {:+.1f} ms "
          "and the rest (embedding, head, optimizer, communication, idle) {:+.1f} ms",
          pb.mean_step / pa.mean_step, ms(pa.mean_step), ms(pb.mean_step), (pa.mean_step + attn_delta) / pa.mean_step,
          attn_delta, mlp_delta, rest);
    }
  }
  // A changed attention kind or recompute level: the sentence, and the ranges it names as measured.
  for (auto effect : {attention_kind_effect(base, now), recompute_effect(base, now)}) {
    if (!effect) continue;
    std::string measured;
    for (const std::string& name : effect->ranges) {
      const double av = pa.range_compute.count(name) ? pa.range_compute.at(name) : 0;
      const double bv = pb.range_compute.count(name) ? pb.range_compute.at(name) : 0;
      if (av > 0 && bv > 0) measured += fmt::format("{}{} {} -> {} a step ({:.2f}x)", measured.empty() ? "" : ", ", name, ms(av), ms(bv), bv / av);
    }
    r.explanations.push_back(effect->text + (measured.empty() ? "" : "; measured: " + measured));
  }
  if (auto producers = producer_effect(base, now)) r.explanations.push_back(*producers);
  const double delta = pb.median_step - pa.median_step;
  if (!r.significant) {
    r.headline = fmt::format("NO SIGNIFICANT DIFFERENCE: {} a step in BASE, {} in NEW ({:+.1f}%), within the runs' "
                             "own noise of {}",
                             ms(pa.median_step), ms(pb.median_step), 100 * delta / pa.median_step, ms(r.noise_ms));
    if (pb.spread > 2 * std::max(pa.spread, 0.01 * pa.median_step))
      r.headline += fmt::format("; NEW is noisier (spread {} against {}) but not slower", ms(pb.spread), ms(pa.spread));
  } else {
    // The largest part that moved the way the step did (a part that shrank does not explain a
    // slower run, however large).
    const DiffPart* top = &r.parts.front();
    for (const auto& p : r.parts)
      if ((p.delta_ms > 0) == (delta > 0)) {
        top = &p;
        break;
      }
    r.headline = fmt::format("{}: {} a step in BASE, {} in NEW ({:+.1f}%); most of it is {} ({:+.1f} ms{}{})",
                             delta > 0 ? "SLOWER" : "FASTER", ms(pa.median_step), ms(pb.median_step),
                             100 * delta / pa.median_step, top->name, top->delta_ms,
                             top->cause.empty() ? "" : ": ", top->cause);
  }
  return r;
}

}  // namespace rankscope::analyzers
