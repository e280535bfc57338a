// scaling_sweep_bench.cpp — the timings of the tiny seq-len sweep (tiny_sweep.h): how each
// aggregated range's time grows with T on this machine, whether `rankscope scaling` flags
// attention as superlinear, and how close the forecast of T=1024 made from T<=512 lands to the
// T=1024 run. Prints numbers and what a quiet machine gives (attention's top slope above 1.5, the
// MLP's between 0.8 and 1.2, the forecast interval holding the measurement); fails only when the
// sweep or the analysis fails. The e2e test (scaling_e2e_test.cpp) asserts what holds under load.
#include <cstdio>

#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "tiny_sweep.h"

using namespace rankscope::analyzers;

namespace {

const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

int main() {
  auto sweep = tiny_sweep::run("scaling_sweep_bench");
  if (!sweep.ok()) {
    std::fprintf(stderr, "scaling_sweep_bench: %s\n", sweep.status().to_string().c_str());
    return 1;
  }
  auto index = read_sweep(*sweep);
  auto report = index.ok() ? analyze_scaling(*sweep) : rankscope::Result<ScalingReport>(index.status());
  if (!report.ok()) {
    std::fprintf(stderr, "scaling_sweep_bench: %s\n", report.status().to_string().c_str());
    return 1;
  }
  for (const auto& p : report->points) {
    std::printf("T=%-5lld step %8.1f ms  %9.0f tokens/s\n", (long long)p.seq_len, p.step_ms, p.tokens_per_s);
  }
  double attn_top = 0, mlp_top = 0;
  for (const char* name : {"forward/block*/attn", "forward/block*/mlp"}) {
    const ScalingRange* r = tiny_sweep::find_range(*report, name);
    if (r == nullptr) continue;
    std::printf("%-22s slopes", name);
    for (const auto& s : r->slopes) std::printf(" %5.2f", s.value_or(-1));
    std::printf("   fit c %.3g a %.3g b %.3g R^2 %.3f\n", r->fit.c, r->fit.a, r->fit.b, r->fit.r2);
    const double top = r->slopes.empty() ? 0 : r->slopes.back().value_or(0);
    (r->name == "forward/block*/attn" ? attn_top : mlp_top) = top;
  }
  bool flagged = false;
  for (const auto& f : report->findings) flagged |= f.kind == "superlinear_range" && f.range == "forward/block*/attn";

  auto forecast = tiny_sweep::forecast_top_from_lower(*index, "scaling_sweep_bench_to512");
  if (!forecast.ok() || forecast->forecasts.empty()) {
    std::fprintf(stderr, "scaling_sweep_bench: forecast: %s\n",
                 forecast.ok() ? "none made" : forecast.status().to_string().c_str());
    return 1;
  }
  const ScalingForecast& f = forecast->forecasts[0];
  const double measured = report->points.back().step_ms;
  const bool held = f.step_ms.low <= measured && measured <= f.step_ms.high;
  std::printf("forecast T=%lld from T<=512: %.1f ms [%.1f, %.1f]; measured %.1f ms (%+.1f%%)\n",
              (long long)f.seq_len, f.step_ms.value, f.step_ms.low, f.step_ms.high, measured,
              100.0 * (f.step_ms.value - measured) / measured);
  std::printf("quiet-machine expectations: attn top slope > 1.5: %s (%.2f); mlp top slope in [0.8, 1.2]: %s (%.2f); "
              "attn flagged superlinear: %s; interval holds the measurement: %s\n",
              yes_no(attn_top > 1.5), attn_top, yes_no(mlp_top >= 0.8 && mlp_top <= 1.2), mlp_top, yes_no(flagged),
              yes_no(held));
  return 0;
}
