// synthetic_source.h — endless token streams with a chosen id distribution, for runs without data.
//
// Is: "synthetic:uniform" (every id in [0, V) equally likely) and "synthetic:zipf" (id k drawn
// with probability proportional to 1/(k+q)^s, s = 1.1, q = 8: the Zipf–Mandelbrot law of word
// frequencies; low ids frequent, like GPT-2's BPE where common tokens have low ids. q is chosen so
// that two contiguous vocab shards split about 19:1, as GPT-2 BPE on tinyshakespeare does (20:1),
// while id parity stays balanced within about 2%, which is what strided shards rely on; real text
// is less even there — 55:45 on tinyshakespeare). Token i is a pure
// function of (seed, i) — a counter-based hash, no state — so any rank can read any position.
// Is not: text; the loss does not fall below the distribution's entropy.
#pragma once

#include <cstdint>
#include <vector>

#include "token_source.h"

namespace gpt2 {

enum class SyntheticDistribution { kUniform, kZipf };

class SyntheticSource final : public TokenSource {
 public:
  static constexpr double kZipfExponent = 1.1;
  static constexpr double kZipfOffset = 8.0;  // Mandelbrot's q

  SyntheticSource(SyntheticDistribution dist, int vocab_size, uint64_t seed);

  uint64_t size() const override { return uint64_t{1} << 48; }
  void read(uint64_t pos, std::span<int> out) const override;
  std::string describe() const override;
  int max_token_id() const override { return vocab_size_ - 1; }

 private:
  int token_at(uint64_t pos) const;

  SyntheticDistribution dist_;
  int vocab_size_;
  uint64_t seed_;
  std::vector<double> zipf_cdf_;  // (V) cumulative probabilities, last = 1
};

}  // namespace gpt2
