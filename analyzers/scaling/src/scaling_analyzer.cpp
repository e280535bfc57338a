// scaling_analyzer.cpp — see scaling_analyzer.h.
#include "rankscope/analyzers/scaling/scaling_analyzer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "rankscope/analyzers/scaling/flop_model.h"
#include "rankscope/analyzers/scaling/memory_growth.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "rankscope/analyzers/skew/range_names.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/stats.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers {
namespace {

constexpr std::string_view kKernelSuffix = " [gpu kernels]";

// One point reduced: step time and one time per range (median over ranks).
struct PointTimes {
  std::map<std::string, double> ranges;  // individual and block* aggregates
  std::map<std::string, bool> aggregated;
};

PointTimes reduce_point(const SkewReport& skew) {
  PointTimes out;
  std::map<std::string, std::vector<double>> per_range, per_aggregate;
  for (const RankSkew& r : skew.ranks) {
    if (r.steps == 0) continue;
    std::map<std::string, double> sums;  // this rank's block* sums
    auto add = [&](const std::string& name, double ms) {
      per_range[name].push_back(ms);
      const std::string agg = block_wildcard(name);
      if (agg != name) sums[agg] += ms;
    };
    for (const auto& [name, ms] : r.range_ms_min) add(name, ms);
    // On a GPU, the kernels under a range scale on their own (the host may only enqueue them).
    for (const auto& [name, ms] : r.range_kernel_ms_min) add(name + std::string(kKernelSuffix), ms);
    for (const auto& [name, ms] : sums) per_aggregate[name].push_back(ms);
  }
  for (auto& [name, v] : per_range) out.ranges[name] = median(std::move(v)), out.aggregated[name] = false;
  for (auto& [name, v] : per_aggregate) out.ranges[name] = median(std::move(v)), out.aggregated[name] = true;
  return out;
}

double tokens_per_step(const format::RunMetadata& meta, int64_t seq_len) {
  const auto& t = meta.training;
  if (!t.is_object() || !t.contains("batch") || !t["batch"].is_number()) return 0;
  const double accum = t.contains("grad_accum") && t["grad_accum"].is_number() ? t["grad_accum"].get<double>() : 1.0;
  return t["batch"].get<double>() * accum * double(seq_len) * double(std::max(1, meta.dp));
}

bool is_individual_block_range(const ScalingRange& r) { return !r.aggregated && block_wildcard(r.name) != r.name; }

void derive_findings(const ScalingOptions& options, ScalingReport& report) {
  const size_t n = report.points.size();
  if (n < 2) return;
  const ScalingPoint& top = report.points.back();
  for (const ScalingRange& r : report.ranges) {
    if (is_individual_block_range(r) || r.name == "step" || r.slopes.empty() || !r.slopes.back()) continue;
    const double slope = *r.slopes.back();
    const double ms = r.times_ms.back().value_or(0);
    const double share = top.step_ms > 0 ? ms / top.step_ms : 0;
    if (slope <= options.superlinear_slope || share < options.min_share) continue;
    ScalingFinding f;
    f.kind = "superlinear_range";
    f.range = r.name;
    f.slope = slope;
    f.share_at_max = share;
    // Cost: what the top point spends beyond linear growth from the point below it.
    const ScalingPoint& below = report.points[n - 2];
    f.cost_ms_per_step = std::max(0.0, ms - r.times_ms[n - 2].value_or(0) * double(top.seq_len) / double(below.seq_len));
    f.text = fmt::format("{} grows as T^{:.1f}; at T={} it is {:.0f}% of the step ({:.1f} ms)", r.name, slope,
                         top.seq_len, 100 * share, ms);
    if (auto x = r.fit.crossover()) f.text += fmt::format("; its T^2 term overtakes the linear one at T={:.0f}", *x);
    report.findings.push_back(std::move(f));
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const ScalingPoint& lo = report.points[i];
    const ScalingPoint& hi = report.points[i + 1];
    if (lo.tokens_per_s <= 0 || hi.tokens_per_s <= 0) continue;
    const double drop = 1.0 - hi.tokens_per_s / lo.tokens_per_s;
    if (drop < options.cliff_drop) continue;
    // The range whose time per token grew the most explains the fall.
    std::string culprit;
    double worst = 0;
    for (const ScalingRange& r : report.ranges) {
      if (is_individual_block_range(r) || r.name == "step" || !r.times_ms[i] || !r.times_ms[i + 1]) continue;
      const double growth = *r.times_ms[i + 1] / double(hi.seq_len) - *r.times_ms[i] / double(lo.seq_len);
      if (growth > worst) worst = growth, culprit = r.name;
    }
    ScalingFinding f;
    f.kind = "throughput_cliff";
    f.range = culprit;
    f.cost_ms_per_step = std::max(0.0, hi.step_ms - lo.step_ms * double(hi.seq_len) / double(lo.seq_len));
    f.share_at_max = 0;
    f.text = fmt::format("throughput falls {:.1f}x from T={} to T={} ({:.0f} to {:.0f} tokens/s)",
                         lo.tokens_per_s / hi.tokens_per_s, lo.seq_len, hi.seq_len, lo.tokens_per_s, hi.tokens_per_s);
    if (!culprit.empty()) f.text += fmt::format("; {} grows most per token", culprit);
    report.findings.push_back(std::move(f));
  }
  if (report.memory_exponent && *report.memory_exponent >= options.memory_cliff_exponent && n >= 3) {
    const ScalingPoint& below = report.points[n - 2];
    const double grew = top.peak_mem_bytes.value_or(0) - below.peak_mem_bytes.value_or(0);
    if (top.peak_mem_bytes && *top.peak_mem_bytes > 0 && grew >= options.memory_min_growth * *top.peak_mem_bytes) {
      ScalingFinding f;
      f.kind = "memory_cliff";
      f.slope = *report.memory_exponent;
      f.share_at_max = grew / *top.peak_mem_bytes;
      f.text = fmt::format("peak memory grows as T^{:.1f} above its fixed part: {:.0f} MiB at T={}, {:.0f} MiB more "
                           "than at T={} ({:.0f}% of the peak)",
                           *report.memory_exponent, *top.peak_mem_bytes / 1048576.0, top.seq_len, grew / 1048576.0,
                           below.seq_len, 100 * f.share_at_max);
      report.findings.push_back(std::move(f));
    }
  }
  std::stable_sort(report.findings.begin(), report.findings.end(),
                   [](const ScalingFinding& a, const ScalingFinding& b) { return a.cost_ms_per_step > b.cost_ms_per_step; });
}

// run.json model.attention, or "unknown" (runs older than the field, or other producers).
std::string attention_kind_of(const format::RunMetadata& meta) {
  const auto& m = meta.model;
  if (m.is_object() && m.contains("attention") && m["attention"].is_string()) return m["attention"].get<std::string>();
  return std::string(kUnknownAttention);
}

// The kind every point ran with; a problem when they differ, since their times are then not one curve.
std::string sweep_attention(ScalingReport& report) {
  std::set<std::string> kinds;
  for (const auto& p : report.points)
    if (p.attention != kUnknownAttention) kinds.insert(p.attention);
  if (kinds.empty()) return std::string(kUnknownAttention);
  if (kinds.size() == 1) return *kinds.begin();
  std::string joined;
  for (const auto& k : kinds) joined += (joined.empty() ? "" : ", ") + k;
  report.problems.push_back(fmt::format("the points ran with different attention kinds ({}): their times do "
                                        "not form one curve (hint: sweep each kind into its own directory)", joined));
  return fmt::format("mixed ({})", joined);
}

}  // namespace

Result<ScalingReport> analyze_scaling(const std::filesystem::path& sweep_dir, const ScalingOptions& options) {
  RS_ASSIGN_OR_RETURN(Sweep sweep, read_sweep(sweep_dir));
  ScalingReport report;
  report.sweep_dir = sweep_dir.string();
  std::vector<PointTimes> times;
  std::vector<double> point_noise_ms;  // per point: the noise of its step time (see below)
  for (const SweepPoint& p : sweep.points) {
    auto skew = analyze_skew(p.run_dir);
    if (!skew.ok()) {
      report.problems.push_back(fmt::format("T={}: {}; the point is left out", p.seq_len, skew.status().user_text()));
      continue;
    }
    for (const auto& problem : skew->problems) report.problems.push_back(fmt::format("T={}: {}", p.seq_len, problem));
    ScalingPoint point;
    point.seq_len = p.seq_len;
    point.run_dir = p.run_dir.string();
    std::vector<double> fastest;  // each rank's fastest step
    for (const RankSkew& r : skew->ranks) {
      if (r.steps > 0) fastest.push_back(r.step_ms_min);
    }
    point.step_ms = median(std::move(fastest));
    // The noise of a point's estimate: one step's spread (median minus fastest) shrinks as the
    // square root of the steps it is taken from.
    std::vector<double> spread;
    for (const RankSkew& r : skew->ranks) {
      if (r.steps > 0) spread.push_back(std::max(0.0, r.step_ms_median - r.step_ms_min) / std::sqrt(double(r.steps)));
    }
    point_noise_ms.push_back(median(std::move(spread)));
    for (const RankSkew& r : skew->ranks) {
      if (auto it = r.counters_max.find(std::string(kPeakMemoryCounter)); it != r.counters_max.end()) {
        point.peak_mem_bytes = std::max(point.peak_mem_bytes.value_or(0.0), it->second);
      }
    }
    auto meta = format::read_run_metadata(p.run_dir);
    if (meta.ok()) {
      point.attention = attention_kind_of(*meta);
      const double tokens = tokens_per_step(*meta, p.seq_len);
      if (tokens > 0 && point.step_ms > 0) point.tokens_per_s = tokens / (point.step_ms / 1e3);
      if (auto shape = gpt_shape_from_json(meta->model)) point.attention_share_flops = attention_flop_share(*shape, double(p.seq_len));
    }
    PointTimes pt = reduce_point(*skew);
    if (point.step_ms > 0) {
      double attn = 0;
      bool any = false;
      for (const char* name : {"forward/block*/attn", "backward/block*/attn"}) {
        if (auto it = pt.ranges.find(name); it != pt.ranges.end()) attn += it->second, any = true;
      }
      if (any) point.attention_share_measured = attn / point.step_ms;
    }
    report.points.push_back(std::move(point));
    times.push_back(std::move(pt));
  }
  report.attention = sweep_attention(report);
  if (report.points.empty()) {
    return not_found(fmt::format("{}: no sweep point could be read; {}", sweep_dir.string(),
                                 report.problems.empty() ? "" : report.problems.front()));
  }
  for (size_t i = 2; i < report.points.size(); ++i) {
    const ScalingPoint &a = report.points[i - 2], &b = report.points[i - 1], &c = report.points[i];
    if (a.peak_mem_bytes && b.peak_mem_bytes && c.peak_mem_bytes)
      report.points[i].memory_exponent = memory_growth_exponent(double(a.seq_len), *a.peak_mem_bytes, double(b.seq_len),
                                                                *b.peak_mem_bytes, double(c.seq_len), *c.peak_mem_bytes);
  }
  report.memory_exponent = report.points.back().memory_exponent;

  std::map<std::string, bool> names;
  for (const PointTimes& pt : times) {
    for (const auto& [name, agg] : pt.aggregated) names[name] = agg;
  }
  std::vector<double> Ts;
  for (const auto& p : report.points) Ts.push_back(double(p.seq_len));
  for (const auto& [name, agg] : names) {
    ScalingRange r;
    r.name = name;
    r.aggregated = agg;
    std::vector<double> T, t;
    for (size_t i = 0; i < times.size(); ++i) {
      auto it = times[i].ranges.find(name);
      r.times_ms.push_back(it == times[i].ranges.end() ? std::nullopt : std::optional<double>(it->second));
      if (it != times[i].ranges.end()) T.push_back(Ts[i]), t.push_back(it->second);
    }
    r.fit = fit_quadratic(T, t);
    // Slopes only between adjacent points where the range exists at both.
    for (size_t i = 0; i + 1 < times.size(); ++i) {
      if (r.times_ms[i] && r.times_ms[i + 1]) {
        const double TT[2] = {Ts[i], Ts[i + 1]}, tt[2] = {*r.times_ms[i], *r.times_ms[i + 1]};
        r.slopes.push_back(log_log_slopes(TT, tt).front());
      } else {
        r.slopes.push_back(std::nullopt);
      }
    }
    report.ranges.push_back(std::move(r));
  }
  derive_findings(options, report);
  add_forecasts(options.forecast_seq_lens, point_noise_ms, report);
  return report;
}

}  // namespace rankscope::analyzers
