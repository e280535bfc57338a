// shard_source.cpp — glob expansion and concatenation of llm.c token shards.
#include "shard_source.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "tokenizer/token_shard.h"

namespace gpt2 {

rankscope::Result<std::vector<std::string>> expand_shard_pattern(const std::string& pattern) {
  std::vector<std::string> out;
  if (pattern.find_first_of("*?[") == std::string::npos) {
    if (!std::filesystem::exists(pattern))
      return rankscope::not_found(fmt::format(
          "--data {}: no such file (hint: pass an llm.c token shard, a glob of shards in quotes, "
          "or synthetic:zipf / synthetic:uniform)", pattern));
    out.push_back(pattern);
    return out;
  }
  glob_t g{};
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (out.empty())
    return rankscope::not_found(fmt::format("--data {}: the pattern matches no file", pattern));
  std::sort(out.begin(), out.end());
  return out;
}

rankscope::Result<std::unique_ptr<ShardSource>> ShardSource::open(const std::string& pattern) {
  RS_ASSIGN_OR_RETURN(auto files, expand_shard_pattern(pattern));
  std::unique_ptr<ShardSource> src(new ShardSource());
  for (const auto& f : files) {
    RS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, read_token_shard(f));
    src->tokens_.reserve(src->tokens_.size() + ids.size());
    for (int32_t id : ids) {
      src->tokens_.push_back(static_cast<uint16_t>(id));
      src->max_id_ = std::max(src->max_id_, static_cast<int>(id));
    }
  }
  if (src->tokens_.size() < 2)
    return rankscope::invalid_argument(
        fmt::format("--data {}: the shards hold {} tokens; at least 2 are needed for one "
                    "input/target pair", pattern, src->tokens_.size()));
  src->files_ = std::move(files);
  return src;
}

void ShardSource::read(uint64_t pos, std::span<int> out) const {
  for (size_t i = 0; i < out.size(); ++i) out[i] = tokens_[pos + i];
}

std::string ShardSource::describe() const {
  std::string name = std::filesystem::path(files_.front()).filename().string();
  if (files_.size() > 1) name += fmt::format(" and {} more shards", files_.size() - 1);
  return fmt::format("{} ({} tokens)", name, tokens_.size());
}

}  // namespace gpt2
