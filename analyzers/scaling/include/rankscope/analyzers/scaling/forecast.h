// forecast.h — step time, tokens/s and peak memory at sequence lengths beyond a sweep.
//
// Is: the sweep's quadratic fits (c + aT + bT^2) of the step time and of peak memory evaluated at
// each requested T, each with an interval of about 95% (+-2 standard errors): the standard error
// is s * sqrt(1 + h0), with h0 the fit's leverage at T (quadratic_fit.h: it grows as T^4 beyond the
// data) and s from the fit's residuals, or the measured noise of the points where that is larger
// (the median rank's median step minus its fastest, over the square root of its steps), so a three-point sweep, which a
// quadratic fits exactly, still gets an honest width; beyond the largest swept T the half-width is
// at least 10% of the value (what a 3-term fit cannot know about effects past the sweep's top).
// The range whose T^2 term contributes most to the forecast step is named with its share. Is not: a model of memory per range (only the process
// peak is measured) or of effects the sweep never saw (a cache or memory cliff past its top).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rankscope::analyzers {

struct ScalingReport;

struct Estimate {
  double value = 0, low = 0, high = 0;
};

struct ScalingForecast {
  int64_t seq_len = 0;
  bool extrapolated = false;            // beyond the largest swept T
  Estimate step_ms;
  std::optional<Estimate> tokens_per_s; // when the sweep knows tokens per step
  std::optional<Estimate> peak_mem_bytes;
  std::string quadratic_range;          // the range whose b*T^2 is the largest at this T
  double quadratic_range_share = 0;     // that term over the forecast step time
  std::optional<double> memory_quadratic_share;  // memory's b*T^2 over the forecast peak memory
  std::string text;
};

// An estimate of t at T0 from the points (T, t) with extra per-point noise noise_sd (same unit as t).
Estimate forecast_quadratic(std::span<const double> T, std::span<const double> t, double T0, double noise_sd);

// Fills report.forecasts for each requested T (the report's points and ranges must be complete).
// Needs at least two points; otherwise a problem is added instead.
void add_forecasts(std::span<const int64_t> seq_lens, std::span<const double> point_noise_ms, ScalingReport& report);

}  // namespace rankscope::analyzers
