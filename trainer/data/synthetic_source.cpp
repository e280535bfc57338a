// synthetic_source.cpp — counter-based uniform and Zipf token streams.
#include "synthetic_source.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpt2 {
namespace {

// splitmix64's finaliser: a bijective mix, so (seed, position) pairs map to independent-looking
// 64-bit values without any generator state.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform double in [0, 1) from the top 53 bits.
double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

SyntheticSource::SyntheticSource(SyntheticDistribution dist, int vocab_size, uint64_t seed)
    : dist_(dist), vocab_size_(vocab_size), seed_(seed) {
  if (dist_ == SyntheticDistribution::kZipf) {
    zipf_cdf_.resize(static_cast<size_t>(vocab_size_));
    double total = 0;
    for (int k = 0; k < vocab_size_; ++k) {
      total += 1.0 / std::pow(static_cast<double>(k) + kZipfOffset, kZipfExponent);
      zipf_cdf_[k] = total;
    }
    for (double& c : zipf_cdf_) c /= total;
    zipf_cdf_.back() = 1.0;
  }
}

int SyntheticSource::token_at(uint64_t pos) const {
  const uint64_t bits = mix64(mix64(seed_) ^ pos);
  if (dist_ == SyntheticDistribution::kUniform)
    return static_cast<int>(bits % static_cast<uint64_t>(vocab_size_));
  const double u = unit(bits);
  auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
  return static_cast<int>(std::min<ptrdiff_t>(it - zipf_cdf_.begin(), vocab_size_ - 1));
}

void SyntheticSource::read(uint64_t pos, std::span<int> out) const {
  for (size_t i = 0; i < out.size(); ++i) out[i] = token_at(pos + i);
}

std::string SyntheticSource::describe() const {
  if (dist_ == SyntheticDistribution::kUniform)
    return fmt::format("synthetic:uniform (ids 0..{}, seed {})", vocab_size_ - 1, seed_);
  return fmt::format("synthetic:zipf (ids 0..{}, exponent {}, offset {}, seed {})", vocab_size_ - 1,
                     kZipfExponent, kZipfOffset, seed_);
}

}  // namespace gpt2
