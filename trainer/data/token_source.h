// token_source.h — a read-only sequence of token ids that batches are cut from.
//
// Is: the interface the data loader reads from, with two kinds behind it: llm.c token shards
// (shard_source.h; one file or a glob of files, concatenated in name order) and synthetic streams
// (synthetic_source.h; uniform or Zipf-distributed ids, a pure function of seed and position so
// every rank sees the same stream without communication). Is not: batching or rank sharding
// (data_loader.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "rankscope/format/status.h"

namespace gpt2 {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Tokens available; synthetic sources are effectively endless (a very large number).
  virtual uint64_t size() const = 0;
  // Copies tokens [pos, pos + out.size()) into out; pos + out.size() <= size().
  virtual void read(uint64_t pos, std::span<int> out) const = 0;
  // One line for the start-up banner: "tiny_shakespeare_train.bin (338,025 tokens)".
  virtual std::string describe() const = 0;
  // Largest token id the source can produce (checked against the model's vocabulary).
  virtual int max_token_id() const = 0;
};

// Opens `spec`: "synthetic:uniform", "synthetic:zipf" or a path / glob of llm.c shards
// ("data/fineweb_train_*.bin"). vocab_size bounds synthetic ids; seed seeds synthetic streams.
rankscope::Result<std::unique_ptr<TokenSource>> open_token_source(std::string_view spec,
                                                                  int vocab_size, uint64_t seed);

}  // namespace gpt2
