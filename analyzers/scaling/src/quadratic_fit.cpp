// quadratic_fit.cpp — see quadratic_fit.h.
#include "rankscope/analyzers/scaling/quadratic_fit.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace rankscope::analyzers {
namespace {

// Solves the n x n system A x = y in place (n <= 3); returns false when singular.
template <size_t N>
bool solve(std::array<std::array<double, N>, N>& A, std::array<double, N>& y, size_t n, std::array<double, N>& x) {
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r) {
      if (std::abs(A[r][col]) > std::abs(A[pivot][col])) pivot = r;
    }
    if (std::abs(A[pivot][col]) < 1e-12) return false;
    std::swap(A[col], A[pivot]);
    std::swap(y[col], y[pivot]);
    for (size_t r = col + 1; r < n; ++r) {
      const double f = A[r][col] / A[col][col];
      for (size_t k = col; k < n; ++k) A[r][k] -= f * A[col][k];
      y[r] -= f * y[col];
    }
  }
  for (size_t i = n; i-- > 0;) {
    double s = y[i];
    for (size_t k = i + 1; k < n; ++k) s -= A[i][k] * x[k];
    x[i] = s / A[i][i];
  }
  return true;
}

}  // namespace

std::optional<double> QuadraticFit::crossover() const {
  const double scale = 1e-6 * std::abs(at(t_max));
  if (a * t_max > scale && b * t_max * t_max > scale) return a / b;
  return std::nullopt;
}

QuadraticFit fit_quadratic(std::span<const double> T, std::span<const double> t) {
  QuadraticFit fit;
  const size_t m = std::min(T.size(), t.size());
  fit.points = int(m);
  if (m == 0) return fit;
  const double scale = *std::max_element(T.begin(), T.begin() + m);
  fit.t_max = scale;
  // As many terms as the points allow: 1 -> c, 2 -> c + aT, 3+ -> c + aT + bT^2.
  for (size_t n = std::min<size_t>(3, m); n >= 1; --n) {
    std::array<std::array<double, 3>, 3> A{};
    std::array<double, 3> y{}, x{};
    for (size_t i = 0; i < m; ++i) {
      const double u = T[i] / scale;
      const double basis[3] = {1.0, u, u * u};
      for (size_t r = 0; r < n; ++r) {
        for (size_t k = 0; k < n; ++k) A[r][k] += basis[r] * basis[k];
        y[r] += basis[r] * t[i];
      }
    }
    if (!solve(A, y, n, x)) continue;
    fit.c = x[0];
    fit.a = n > 1 ? x[1] / scale : 0.0;
    fit.b = n > 2 ? x[2] / (scale * scale) : 0.0;
    break;
  }
  double mean = 0;
  for (size_t i = 0; i < m; ++i) mean += t[i];
  mean /= double(m);
  double ss_res = 0, ss_tot = 0;
  for (size_t i = 0; i < m; ++i) {
    ss_res += (t[i] - fit.at(T[i])) * (t[i] - fit.at(T[i]));
    ss_tot += (t[i] - mean) * (t[i] - mean);
  }
  fit.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  return fit;
}

double fit_leverage(std::span<const double> T, double T0) {
  if (T.empty()) return 0;
  const double scale = *std::max_element(T.begin(), T.end());
  const double u0 = T0 / scale;
  const double basis0[3] = {1.0, u0, u0 * u0};
  for (size_t n = std::min<size_t>(3, T.size()); n >= 1; --n) {
    std::array<std::array<double, 3>, 3> A{};
    std::array<double, 3> x0{}, z{};
    for (double Ti : T) {
      const double u = Ti / scale;
      const double basis[3] = {1.0, u, u * u};
      for (size_t r = 0; r < n; ++r) {
        for (size_t k = 0; k < n; ++k) A[r][k] += basis[r] * basis[k];
      }
    }
    for (size_t r = 0; r < n; ++r) x0[r] = basis0[r];
    std::array<double, 3> rhs = x0;
    if (!solve(A, rhs, n, z)) continue;  // (X'X) z = x0, so h0 = x0' z
    double h = 0;
    for (size_t r = 0; r < n; ++r) h += x0[r] * z[r];
    return std::max(0.0, h);
  }
  return 0;
}

std::vector<std::optional<double>> log_log_slopes(std::span<const double> T, std::span<const double> t) {
  std::vector<std::optional<double>> out;
  const size_t m = std::min(T.size(), t.size());
  for (size_t i = 0; i + 1 < m; ++i) {
    if (t[i] > 0 && t[i + 1] > 0 && T[i] > 0 && T[i + 1] > T[i]) {
      out.push_back(std::log(t[i + 1] / t[i]) / std::log(T[i + 1] / T[i]));
    } else {
      out.push_back(std::nullopt);
    }
  }
  return out;
}

}  // namespace rankscope::analyzers
