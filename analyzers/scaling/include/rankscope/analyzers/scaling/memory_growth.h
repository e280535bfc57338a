// memory_growth.h — how fast a sweep's peak memory grows with T once its fixed part is set aside.
//
// Is: the exponent e of m(T) = m_fixed + k * T^e through three points, taken from the increments:
// (m2 - m1) / (m1 - m0) = (T2^e - T1^e) / (T1^e - T0^e). Parameters, optimizer state and buffers that
// do not depend on T cancel in the increments, so activations that grow linearly read 1.0 and the
// (B,NH,T,T) buffers of naive attention push it to 2.0 (the memory cliff), whatever the model's fixed
// size. Solved by bisection (the right side grows monotonically with e). Is not: a fit over all
// points (quadratic_fit.h), nor a forecast (forecast.h).
#pragma once

#include <optional>

namespace rankscope::analyzers {

// The exponent in [kMinGrowthExponent, kMaxGrowthExponent] for T0 < T1 < T2 and their peak memory;
// nullopt when the T are not increasing or memory did not grow at both steps (a flat or noisy
// series has no exponent). Values beyond the range are clamped to it.
inline constexpr double kMinGrowthExponent = 0.05;
inline constexpr double kMaxGrowthExponent = 4.0;
std::optional<double> memory_growth_exponent(double T0, double m0, double T1, double m1, double T2, double m2);

}  // namespace rankscope::analyzers
