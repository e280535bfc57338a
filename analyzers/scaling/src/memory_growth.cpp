// memory_growth.cpp — see memory_growth.h.
#include "rankscope/analyzers/scaling/memory_growth.h"

#include <cmath>

namespace rankscope::analyzers {

std::optional<double> memory_growth_exponent(double T0, double m0, double T1, double m1, double T2, double m2) {
  if (!(T0 > 0 && T1 > T0 && T2 > T1)) return std::nullopt;
  const double d1 = m1 - m0, d2 = m2 - m1;
  if (!(d1 > 0 && d2 > 0)) return std::nullopt;
  const double want = std::log(d2 / d1);
  // ln of (T2^e - T1^e) / (T1^e - T0^e), increasing in e for 0 < T0 < T1 < T2.
  auto ratio = [&](double e) {
    return std::log(std::pow(T2, e) - std::pow(T1, e)) - std::log(std::pow(T1, e) - std::pow(T0, e));
  };
  double lo = kMinGrowthExponent, hi = kMaxGrowthExponent;
  if (want <= ratio(lo)) return lo;
  if (want >= ratio(hi)) return hi;
  for (int i = 0; i < 60; i++) {
    const double mid = 0.5 * (lo + hi);
    (ratio(mid) < want ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace rankscope::analyzers
