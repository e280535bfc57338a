// forecast.cpp — see forecast.h.
#include "rankscope/analyzers/scaling/forecast.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "rankscope/analyzers/scaling/quadratic_fit.h"
#include "rankscope/analyzers/scaling/scaling_analyzer.h"

namespace rankscope::analyzers {
namespace {

constexpr double kZ = 2.0;  // +-2 standard errors: about 95% under normal errors
// Beyond the sweep a 3-term fit cannot know about cache or memory effects it never saw, and noise
// alone understates that on a quiet machine: the half-width beyond the data is at least this share
// of the value (T=1024 forecast from 128..512 on tiny landed 3-9% from the measurement here).
constexpr double kModelErrorFloor = 0.10;

std::string bytes_text(double b) {
  return b >= 1024.0 * 1048576 ? fmt::format("{:.2f} GiB", b / (1024.0 * 1048576)) : fmt::format("{:.0f} MiB", b / 1048576);
}

// Only ranges directly under a block aggregate ("forward/block*/attn"): a parent ("forward")
// carries every child's T^2 term and would always win.
bool is_block_part(const ScalingRange& r) {
  if (!r.aggregated) return false;
  const size_t star = r.name.find("block*/");
  return star != std::string::npos && r.name.find('/', star + 7) == std::string::npos;
}

}  // namespace

Estimate forecast_quadratic(std::span<const double> T, std::span<const double> t, double T0, double noise_sd) {
  const QuadraticFit fit = fit_quadratic(T, t);
  const size_t terms = std::min<size_t>(3, T.size());
  double s2 = noise_sd * noise_sd;
  if (T.size() > terms) {
    double ss = 0;
    for (size_t i = 0; i < T.size(); ++i) ss += (t[i] - fit.at(T[i])) * (t[i] - fit.at(T[i]));
    s2 = std::max(s2, ss / double(T.size() - terms));
  }
  const double se = std::sqrt(s2 * (1.0 + fit_leverage(T, T0)));
  Estimate e;
  e.value = fit.at(T0);
  const double beyond = !T.empty() && T0 > *std::max_element(T.begin(), T.end()) ? kModelErrorFloor * std::abs(e.value) : 0.0;
  const double half = std::max(kZ * se, beyond);
  e.low = std::max(0.0, e.value - half);
  e.high = e.value + half;
  return e;
}

void add_forecasts(std::span<const int64_t> seq_lens, std::span<const double> point_noise_ms, ScalingReport& report) {
  if (seq_lens.empty()) return;
  if (report.points.size() < 2) {
    report.problems.push_back("a forecast needs a sweep of at least two points");
    return;
  }
  std::vector<double> T, step, mem_T, mem;
  double tokens_per_T = 0;  // tokens per step per unit of T (batch x accum x dp)
  for (const ScalingPoint& p : report.points) {
    T.push_back(double(p.seq_len));
    step.push_back(p.step_ms);
    if (p.peak_mem_bytes) mem_T.push_back(double(p.seq_len)), mem.push_back(*p.peak_mem_bytes);
    if (p.tokens_per_s > 0 && p.step_ms > 0) tokens_per_T = p.tokens_per_s * p.step_ms / 1e3 / double(p.seq_len);
  }
  double noise2 = 0;
  for (double n : point_noise_ms) noise2 += n * n;
  const double noise = point_noise_ms.empty() ? 0 : std::sqrt(noise2 / double(point_noise_ms.size()));
  const double T_top = T.back();

  for (int64_t seq_len : seq_lens) {
    const double T0 = double(seq_len);
    ScalingForecast f;
    f.seq_len = seq_len;
    f.extrapolated = T0 > T_top;
    f.step_ms = forecast_quadratic(T, step, T0, noise);
    if (tokens_per_T > 0 && f.step_ms.value > 0) {
      const double tokens = tokens_per_T * T0 * 1e3;
      // A slower step is fewer tokens/s: the interval's ends swap.
      f.tokens_per_s = Estimate{tokens / f.step_ms.value, tokens / f.step_ms.high,
                                f.step_ms.low > 0 ? tokens / f.step_ms.low : tokens / f.step_ms.value};
    }
    if (mem.size() >= 2) {
      f.peak_mem_bytes = forecast_quadratic(mem_T, mem, T0, 0.0);
      const QuadraticFit mfit = fit_quadratic(mem_T, mem);
      if (f.peak_mem_bytes->value > 0) f.memory_quadratic_share = std::max(0.0, mfit.b * T0 * T0) / f.peak_mem_bytes->value;
    }
    for (const ScalingRange& r : report.ranges) {
      if (!is_block_part(r)) continue;
      const double term = r.fit.b * T0 * T0;
      if (term > 0 && f.step_ms.value > 0 && term / f.step_ms.value > f.quadratic_range_share) {
        f.quadratic_range = r.name;
        f.quadratic_range_share = term / f.step_ms.value;
      }
    }
    f.text = fmt::format("T={}: step {:.1f} ms [{:.1f}, {:.1f}]", seq_len, f.step_ms.value, f.step_ms.low, f.step_ms.high);
    if (f.tokens_per_s) {
      f.text += fmt::format(", {:.0f} tokens/s [{:.0f}, {:.0f}]", f.tokens_per_s->value, f.tokens_per_s->low, f.tokens_per_s->high);
    }
    if (f.peak_mem_bytes) {
      f.text += fmt::format(", peak memory {} [{}, {}]", bytes_text(f.peak_mem_bytes->value), bytes_text(f.peak_mem_bytes->low),
                            bytes_text(f.peak_mem_bytes->high));
    }
    if (!f.quadratic_range.empty()) {
      f.text += fmt::format("; {}'s T^2 term is {:.0f}% of the step", f.quadratic_range, 100 * f.quadratic_range_share);
      if (f.memory_quadratic_share) f.text += fmt::format(" and memory's T^2 term {:.0f}% of the peak", 100 * *f.memory_quadratic_share);
    }
    if (f.extrapolated && T0 > 2 * T_top) f.text += fmt::format(" (far beyond the sweep's top T={:.0f}: wide by nature)", T_top);
    report.forecasts.push_back(std::move(f));
  }
}

}  // namespace rankscope::analyzers
