// shard_source.h — llm.c token shards as one token sequence.
//
// Is: one shard file, or every file a glob pattern matches ("fineweb_train_*.bin", expanded in
// sorted order), read with the tokenizer's shard codec (tokenizer/token_shard.h: the one place the
// format is encoded) and concatenated. Each shard is validated on open; errors name the file.
// Is not: a streaming reader — shards are held in memory (2 bytes a token), which suits the
// shipped corpora; very large corpora would want an mmap'd variant.
#pragma once

#include <string>
#include <vector>

#include "token_source.h"

namespace gpt2 {

class ShardSource final : public TokenSource {
 public:
  // `pattern` is a path or a glob; fails when nothing matches or a shard is malformed.
  static rankscope::Result<std::unique_ptr<ShardSource>> open(const std::string& pattern);

  uint64_t size() const override { return tokens_.size(); }
  void read(uint64_t pos, std::span<int> out) const override;
  std::string describe() const override;
  int max_token_id() const override { return max_id_; }
  const std::vector<std::string>& files() const { return files_; }

 private:
  ShardSource() = default;
  std::vector<std::string> files_;
  std::vector<uint16_t> tokens_;  // all shards, concatenated in file order
  int max_id_ = 0;
};

// Paths matching `pattern` in sorted order; a pattern without wildcards yields itself if it exists.
rankscope::Result<std::vector<std::string>> expand_shard_pattern(const std::string& pattern);

}  // namespace gpt2
