// token_source.cpp — picks the TokenSource a --data spec names.
#include "token_source.h"

#include <fmt/format.h>

#include "shard_source.h"
#include "synthetic_source.h"

namespace gpt2 {

rankscope::Result<std::unique_ptr<TokenSource>> open_token_source(std::string_view spec,
                                                                  int vocab_size, uint64_t seed) {
  if (spec == "synthetic:uniform")
    return std::unique_ptr<TokenSource>(
        new SyntheticSource(SyntheticDistribution::kUniform, vocab_size, seed));
  if (spec == "synthetic:zipf")
    return std::unique_ptr<TokenSource>(
        new SyntheticSource(SyntheticDistribution::kZipf, vocab_size, seed));
  if (spec.starts_with("synthetic:"))
    return rankscope::invalid_argument(fmt::format(
        "--data {}: unknown synthetic distribution (known: synthetic:uniform, synthetic:zipf)", spec));
  RS_ASSIGN_OR_RETURN(auto shards, ShardSource::open(std::string(spec)));
  return std::unique_ptr<TokenSource>(std::move(shards));
}

}  // namespace gpt2
