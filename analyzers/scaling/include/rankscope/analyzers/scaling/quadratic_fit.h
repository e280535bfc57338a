// quadratic_fit.h — least-squares fit t(T) = c + a*T + b*T^2 and the log-log slopes of a series.
//
// Is: ordinary least squares on the basis {1, T, T^2} (T scaled to [0, 1] first, so the 3x3
// normal equations stay well conditioned for T in the thousands), solved by Gaussian elimination
// with partial pivoting; R^2; slopes d ln t / d ln T between adjacent points; crossover T* = a/b
// where the quadratic term overtakes the linear one. Is not: a robust or weighted fit.
#pragma once

#include <optional>
#include <span>
#include <vector>

namespace rankscope::analyzers {

struct QuadraticFit {
  double c = 0, a = 0, b = 0;
  double r2 = 0;
  int points = 0;
  double t_max = 0;  // the largest T fitted

  double at(double T) const { return c + a * T + b * T * T; }
  // a/b when both terms are positive and matter at the top of the data (a term that is rounding
  // noise, e.g. a = 1e-17 for a purely quadratic range, crosses nothing).
  std::optional<double> crossover() const;
};

// Needs at least one point; with two points the fit is the line through them (b = 0), with one the
// constant. T must be positive.
QuadraticFit fit_quadratic(std::span<const double> T, std::span<const double> t);

// The leverage h0 = x0' (X'X)^-1 x0 of the fit's basis at T0: the variance of the fitted value at T0
// in units of the residual variance. It grows as T0 moves beyond the data (as T0^4 for a quadratic),
// which is what widens a forecast's interval. Same terms as fit_quadratic (as many as the points
// allow); 0 when there are no points or the system is singular.
double fit_leverage(std::span<const double> T, double T0);

// slopes[i] = ln(t[i+1]/t[i]) / ln(T[i+1]/T[i]); nullopt where a time is not positive.
std::vector<std::optional<double>> log_log_slopes(std::span<const double> T, std::span<const double> t);

}  // namespace rankscope::analyzers
