// token_shard.h — llm.c token shards (.bin): write, validate and read.
//
// Layout (little-endian, as llm.c's dev/data/data_common.py writes it):
//   bytes [0, 1024)      header: 256 x int32; [0] magic 20240520, [1] version 1, [2] token count,
//                        the rest 0
//   bytes [1024, ...)    token count x uint16 token ids
// The file size must be exactly 1024 + 2 * count; anything else is reported as corrupt with what
// was expected. Version 2 (llm.c's uint32 tokens for Llama 3) is recognised and refused.
// Is: the one place the shard format is encoded; gpt2-tokenize writes shards with it and the
// trainer's data loader reads them with it. Is not: a loader (no batching, no rank sharding).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace gpt2 {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr size_t kTokenShardHeaderInts = 256;
inline constexpr size_t kTokenShardHeaderBytes = kTokenShardHeaderInts * sizeof(int32_t);  // 1024
inline constexpr int32_t kTokenShardMaxTokenId = 65535;  // tokens are stored as uint16

struct TokenShardHeader {
  int32_t version = kTokenShardVersion;
  uint64_t token_count = 0;
  // Byte offset of token i in the file: kTokenShardHeaderBytes + 2 * i.
};

// Validates a header (`header` holds at least kTokenShardHeaderBytes bytes of the file's start) of
// a file of `file_size` bytes. `name` (a path) prefixes every error message.
rankscope::Result<TokenShardHeader> parse_token_shard_header(std::span<const uint8_t> header,
                                                             uint64_t file_size,
                                                             std::string_view name);

// The whole shard as bytes: header + uint16 tokens. Fails if a token is outside [0, 65535].
rankscope::Result<std::string> encode_token_shard(std::span<const int32_t> tokens);
// Parses bytes made by encode_token_shard (or read from a file) back into token ids.
rankscope::Result<std::vector<int32_t>> decode_token_shard(std::string_view bytes,
                                                           std::string_view name);

// Writes `path` (through `path`.tmp and a rename, so a reader never sees half a shard).
rankscope::Status write_token_shard(const std::string& path, std::span<const int32_t> tokens);
// Reads and validates only the header (a loader's cheap check of many shards).
rankscope::Result<TokenShardHeader> read_token_shard_header(const std::string& path);
// Reads and validates the whole shard.
rankscope::Result<std::vector<int32_t>> read_token_shard(const std::string& path);

}  // namespace gpt2
