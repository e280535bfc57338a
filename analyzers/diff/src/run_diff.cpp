// run_diff.cpp — the waterfall of a step's change between two runs, with causes (run_diff.h).
//
// Both runs go through analyze_skew (each without its warm-up steps) and into their parts
// (run_parts.h), which add up to each run's mean step exactly, so the parts' changes add up to the
// mean step's change. Ranks are matched (rank_roles.h), each part's cause looked for below it
// (part_causes.h), kernels compared (kernel_match.h), settings explained (settings_diff.h); this
// file puts them together, with the headline.
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
#include "headline_cause.h"
#include "part_causes.h"
#include "rank_roles.h"
#include "run_parts.h"
#include "settings_diff.h"

namespace rankscope::analyzers {

using diff_detail::format_ms;
using diff_detail::RunParts;

namespace {

// A run's skew analysis without its first warmup_steps steps (start-up: allocation, caches, lazy
// init), where it has more than warmup_steps + 2: a short run's first step can be most of its mean.
Result<SkewReport> analyze_after_warmup(const std::filesystem::path& dir, const char* side, int64_t warmup_steps,
                                        int64_t& skipped) {
  auto rep = analyze_skew(dir);
  if (rep.ok() && warmup_steps > 0 && rep->steps > warmup_steps + 2) {
    SkewOptions after;
    after.first_step = rep->first_step + warmup_steps;
    auto again = analyze_skew(dir, after);
    if (again.ok()) {
      skipped = warmup_steps;
      rep = std::move(again);
    }
  }
  if (!rep.ok()) {
    Status s = rep.status();
    // "BASE runs/a: ..." unless the reader's message names the directory already.
    s.prefix(s.message().starts_with(dir.string()) ? std::string(side) : std::string(side) + " " + dir.string());
    return s;
  }
  return rep;
}

// Each run's step: its median, spread and mean, and whether the medians differ past the noise.
void compare_steps(DiffReport& r, const RunParts& pa, const RunParts& pb, const DiffOptions& options) {
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
}

// The waterfall: every part of either run, its change and its cause, largest change first.
void compare_parts(DiffReport& r, const SkewReport& a, const SkewReport& b, const RunParts& pa, const RunParts& pb,
                   const diff_detail::RoleMatch& roles) {
  std::set<std::string> names;
  for (const auto& [n, v] : pa.parts) names.insert(n);
  for (const auto& [n, v] : pb.parts) names.insert(n);
  for (const auto& n : names) {
    DiffPart p;
    p.name = n;
    p.base_ms = pa.parts.count(n) ? pa.parts.at(n) : 0;
    p.new_ms = pb.parts.count(n) ? pb.parts.at(n) : 0;
    p.delta_ms = p.new_ms - p.base_ms;
    if (n.starts_with("compute in ")) p.cause = diff_detail::range_cause(pa, pb, n.substr(11), p.delta_ms, roles.by_rank);
    else if (n == "collective wait")
      p.cause = diff_detail::straggler_cause(a, b, roles);  // a new straggler is a fact of NEW
    else if (n == "collective transfer") p.cause = diff_detail::transfer_cause(pa, pb, p.base_ms, p.new_ms);
    else if (n.starts_with("idle")) p.cause = diff_detail::idle_cause(pa, pb, p.delta_ms);
    r.parts.push_back(std::move(p));
  }
  std::stable_sort(r.parts.begin(), r.parts.end(),
                   [](const DiffPart& x, const DiffPart& y) { return std::fabs(x.delta_ms) > std::fabs(y.delta_ms); });
}

// Kernels by family, and families replaced in a range; a replacement under a compute part is part of
// its cause ("flash_fwd_kernel replaced by ... in forward/block*/attn").
void compare_kernel_families(DiffReport& r, const std::filesystem::path& base, const std::filesystem::path& now) {
  auto ka = diff_detail::read_kernel_table(base), kb = diff_detail::read_kernel_table(now);
  if (!ka.ok() || !kb.ok()) return;
  diff_detail::KernelComparison k = diff_detail::compare_kernels(*ka, *kb);
  r.kernels_compared = k.available;
  r.kernels = std::move(k.changes);
  r.kernel_swaps = std::move(k.swaps);
  for (auto& p : r.parts) {
    if (!p.name.starts_with("compute in ")) continue;
    const std::string top = p.name.substr(11);
    for (const KernelSwap& s : r.kernel_swaps) {
      if (s.range != top && !s.range.starts_with(top + "/")) continue;
      p.cause += fmt::format("{}{} replaced by {} in {} ({:.2f} -> {:.2f} ms)", p.cause.empty() ? "" : "; ",
                             fmt::join(s.gone, " + "), fmt::join(s.added, " + "), s.range, s.base_ms, s.new_ms);
      break;
    }
  }
}

double range_compute_ms(const RunParts& run, const std::string& range) {
  return run.range_compute.count(range) ? run.range_compute.at(range) : 0;
}

// A longer (or shorter) sequence: what it predicts for attention and the MLP, each compute part's
// attention and MLP measured against it, and how much of the mean step's change they explain.
void explain_seq_len(DiffReport& r, const RunParts& pa, const RunParts& pb, const SeqLenFactors& f) {
  r.explanations.push_back(
      fmt::format("the sequence went from {:g} to {:g}: per step (same batch) attention's FLOPs "
                  "grow {:.1f}x and the MLP's {:.1f}x",
                  f.t_base, f.t_new, f.attention, f.mlp));
  for (auto& p : r.parts) {
    if (!p.name.starts_with("compute in ")) continue;
    const std::string top = p.name.substr(11);
    std::string measured;
    for (const auto& [leaf, predicted] : {std::pair<std::string, double>{"attn", f.attention}, {"mlp", f.mlp}}) {
      const std::string name = top + "/block*/" + leaf;
      const double av = range_compute_ms(pa, name), bv = range_compute_ms(pb, name);
      if (av > 0 && bv > 0)
        measured += fmt::format("{}{} {:.1f}x (the length predicts {:.1f}x)", measured.empty() ? "" : ", ", name,
                                bv / av, predicted);
    }
    if (!measured.empty()) p.cause += (p.cause.empty() ? "" : "; ") + measured;
  }
  // "attention explains 3.97x of the 4.63x": their ranges' change under every compute part.
  double attn_delta = 0, mlp_delta = 0;
  bool found = false;
  for (const auto& p : r.parts) {
    if (!p.name.starts_with("compute in ")) continue;
    const std::string top = p.name.substr(11);
    for (const auto& [leaf, sum] : {std::pair<std::string, double*>{"attn", &attn_delta}, {"mlp", &mlp_delta}}) {
      const std::string name = top + "/block*/" + leaf;
      const double av = range_compute_ms(pa, name), bv = range_compute_ms(pb, name);
      found = found || av > 0 || bv > 0;
      *sum += bv - av;
    }
  }
  if (!found || pa.mean_step <= 0) return;
  const double rest = r.mean_delta_ms - attn_delta - mlp_delta;
  r.explanations.back() += fmt::format(
      ". Of the mean step's {:.2f}x ({} -> {}), attention's ranges explain {:.2f}x ({:+.1f} ms), the MLP's {:+.1f} ms "
      "and the rest (embedding, head, optimizer, communication, idle) {:+.1f} ms",
      pb.mean_step / pa.mean_step, format_ms(pa.mean_step), format_ms(pb.mean_step),
      (pa.mean_step + attn_delta) / pa.mean_step, attn_delta, mlp_delta, rest);
}

// Settings that changed and what they explain: the sequence length, the attention kind, the
// recompute level (with the ranges they name as measured), the producers.
void explain_settings(DiffReport& r, const std::filesystem::path& base, const std::filesystem::path& now,
                      const RunParts& pa, const RunParts& pb) {
  r.settings = settings_changes(base, now, r.problems);
  if (auto f = seq_len_factors(base, now)) explain_seq_len(r, pa, pb, *f);
  for (auto effect : {attention_kind_effect(base, now), recompute_effect(base, now)}) {
    if (!effect) continue;
    std::string measured;
    for (const std::string& name : effect->ranges) {
      const double av = range_compute_ms(pa, name), bv = range_compute_ms(pb, name);
      if (av > 0 && bv > 0) measured += fmt::format("{}{} {} -> {} a step ({:.2f}x)", measured.empty() ? "" : ", ", name, format_ms(av), format_ms(bv), bv / av);
    }
    r.explanations.push_back(effect->text + (measured.empty() ? "" : "; measured: " + measured));
  }
  if (auto producers = producer_effect(base, now)) r.explanations.push_back(*producers);
}

void write_headline(DiffReport& r, const std::filesystem::path& base, const std::filesystem::path& now,
                    const RunParts& pa, const RunParts& pb) {
  // Parts are sorted largest first, so their names are too.
  for (const auto& p : r.parts)
    if (p.cause.empty() && std::fabs(p.delta_ms) >= 0.005) {
      r.unexplained_ms += p.delta_ms;
      r.unexplained_parts.push_back(p.name);
    }
  const double delta = pb.median_step - pa.median_step;
  if (!r.significant) {
    r.headline = fmt::format("NO SIGNIFICANT DIFFERENCE: {} a step in BASE, {} in NEW ({:+.1f}%), within the runs' "
                             "own noise of {}",
                             format_ms(pa.median_step), format_ms(pb.median_step), 100 * delta / pa.median_step, format_ms(r.noise_ms));
    if (pb.spread > 2 * std::max(pa.spread, 0.01 * pa.median_step))
      r.headline += fmt::format("; NEW is noisier (spread {} against {}) but not slower", format_ms(pb.spread), format_ms(pa.spread));
    return;
  }
  const auto factors = seq_len_factors(base, now);
  const diff_detail::HeadlineCause cause =
      diff_detail::headline_cause(pa, pb, r.parts, r.mean_delta_ms, factors ? factors->attention : 0.0);
  r.headline = fmt::format("{}: {} a step in BASE, {} in NEW ({:+.1f}%); most of it is {} ({:+.1f} ms{}{})",
                           delta > 0 ? "SLOWER" : "FASTER", format_ms(pa.median_step), format_ms(pb.median_step),
                           100 * delta / pa.median_step, cause.name, cause.delta_ms,
                           cause.detail.empty() ? "" : cause.joiner, cause.detail);
}

}  // namespace

Result<DiffReport> diff_runs(const std::filesystem::path& base, const std::filesystem::path& now,
                             const DiffOptions& options) {
  DiffReport r;
  auto a = analyze_after_warmup(base, "BASE", options.warmup_steps, r.base_warmup_steps);
  if (!a.ok()) return a.status();
  auto b = analyze_after_warmup(now, "NEW", options.warmup_steps, r.new_warmup_steps);
  if (!b.ok()) return b.status();
  r.base_dir = base.string();
  r.new_dir = now.string();
  const RunParts pa = diff_detail::parts_of(*a), pb = diff_detail::parts_of(*b);
  if (pa.ranks == 0 || pb.ranks == 0)
    return invalid_argument(
        fmt::format("{} has no rank with a complete step: nothing to compare", pa.ranks == 0 ? r.base_dir : r.new_dir));
  compare_steps(r, pa, pb, options);
  // Ranks matched by rank, or by role where the world sizes or groups differ.
  const auto meta_a = format::read_run_metadata(base), meta_b = format::read_run_metadata(now);
  const diff_detail::RoleMatch roles = diff_detail::match_roles(meta_a.ok() ? &*meta_a : nullptr, a->world_size,
                                                                meta_b.ok() ? &*meta_b : nullptr, b->world_size);
  r.ranks_by_rank = roles.by_rank;
  r.rank_match = roles.how;
  r.roles = diff_detail::role_diffs(*a, *b, roles);
  compare_parts(r, *a, *b, pa, pb, roles);
  compare_kernel_families(r, base, now);
  explain_settings(r, base, now, pa, pb);
  write_headline(r, base, now, pa, pb);
  return r;
}

}  // namespace rankscope::analyzers
