// token_shard.cpp — llm.c token shards: header validation, encoding, file read/write.
#include "tokenizer/token_shard.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace gpt2 {
namespace {

using rankscope::Result;
using rankscope::Status;

int32_t load_i32(const uint8_t* p) {
  return static_cast<int32_t>(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                              uint32_t(p[3]) << 24);
}

void store_i32(char* p, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  p[0] = char(u & 0xff), p[1] = char(u >> 8 & 0xff), p[2] = char(u >> 16 & 0xff), p[3] = char(u >> 24);
}

std::string prefixed(std::string_view name, const std::string& message) {
  return std::string(name) + ": " + message;
}

Status read_prefix(const std::string& path, size_t max_bytes, std::string& out, uint64_t& file_size) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    if (!std::filesystem::exists(path, ec)) {
      return rankscope::not_found(path + ": no such file (hint: make shards with `gpt2-tokenize encode TEXT -o OUT.bin`)");
    }
    return rankscope::invalid_argument(path + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return rankscope::io_error(path + ": cannot open: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0, std::ios::beg);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(file_size, max_bytes));
  out.resize(n);
  if (n > 0 && !in.read(out.data(), static_cast<std::streamsize>(n))) {
    return rankscope::io_error(path + ": read failed");
  }
  return Status::ok_status();
}

}  // namespace

Result<TokenShardHeader> parse_token_shard_header(std::span<const uint8_t> header, uint64_t file_size,
                                                  std::string_view name) {
  if (file_size < kTokenShardHeaderBytes || header.size() < kTokenShardHeaderBytes) {
    return rankscope::corrupt(prefixed(name, "not a token shard: " + std::to_string(file_size) +
                                                 " bytes, shorter than the 1024-byte header"));
  }
  const int32_t magic = load_i32(header.data());
  if (magic != kTokenShardMagic) {
    return rankscope::corrupt(prefixed(name, "bad magic " + std::to_string(magic) + " (expected " +
                                                 std::to_string(kTokenShardMagic) +
                                                 "): not an llm.c token shard"));
  }
  const int32_t version = load_i32(header.data() + 4);
  if (version != kTokenShardVersion) {
    std::string hint = version == 2 ? " (version 2 holds uint32 tokens, llm.c's Llama 3 format)" : "";
    return rankscope::unsupported(prefixed(name, "token shard version " + std::to_string(version) +
                                                     "; only version 1 (uint16 tokens) is read" + hint));
  }
  const int32_t count = load_i32(header.data() + 8);
  if (count < 0) {
    return rankscope::corrupt(prefixed(name, "negative token count " + std::to_string(count)));
  }
  const uint64_t expected = kTokenShardHeaderBytes + 2ull * static_cast<uint64_t>(count);
  if (file_size != expected) {
    return rankscope::corrupt(prefixed(
        name, "header says " + std::to_string(count) + " tokens, so " + std::to_string(expected) +
                  " bytes, but the file has " + std::to_string(file_size) + " (truncated or not a shard)"));
  }
  TokenShardHeader h;
  h.version = version;
  h.token_count = static_cast<uint64_t>(count);
  return h;
}

Result<std::string> encode_token_shard(std::span<const int32_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return rankscope::invalid_argument("too many tokens for one shard: " + std::to_string(tokens.size()) +
                                       " (the header's count is an int32)");
  }
  std::string bytes(kTokenShardHeaderBytes + 2 * tokens.size(), '\0');
  store_i32(bytes.data(), kTokenShardMagic);
  store_i32(bytes.data() + 4, kTokenShardVersion);
  store_i32(bytes.data() + 8, static_cast<int32_t>(tokens.size()));
  char* p = bytes.data() + kTokenShardHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t > kTokenShardMaxTokenId) {
      return rankscope::invalid_argument("token " + std::to_string(i) + " is " + std::to_string(t) +
                                         ": a shard stores uint16 ids in [0, 65535]");
    }
    p[2 * i] = char(t & 0xff);
    p[2 * i + 1] = char(t >> 8);
  }
  return bytes;
}

Result<std::vector<int32_t>> decode_token_shard(std::string_view bytes, std::string_view name) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  RS_ASSIGN_OR_RETURN(TokenShardHeader h,
                      parse_token_shard_header(std::span<const uint8_t>(data, bytes.size()), bytes.size(), name));
  std::vector<int32_t> tokens(h.token_count);
  const uint8_t* p = data + kTokenShardHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(p[2 * i]) | int32_t(p[2 * i + 1]) << 8;
  return tokens;
}

Status write_token_shard(const std::string& path, std::span<const int32_t> tokens) {
  RS_ASSIGN_OR_RETURN(std::string bytes, encode_token_shard(tokens));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return rankscope::io_error(tmp + ": cannot create: " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return rankscope::io_error(tmp + ": write failed: " + std::strerror(errno));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return rankscope::io_error(path + ": cannot rename from " + tmp + ": " + ec.message());
  }
  return Status::ok_status();
}

Result<TokenShardHeader> read_token_shard_header(const std::string& path) {
  std::string head;
  uint64_t file_size = 0;
  RS_RETURN_IF_ERROR(read_prefix(path, kTokenShardHeaderBytes, head, file_size));
  return parse_token_shard_header(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(head.data()), head.size()), file_size, path);
}

Result<std::vector<int32_t>> read_token_shard(const std::string& path) {
  std::string bytes;
  uint64_t file_size = 0;
  RS_RETURN_IF_ERROR(read_prefix(path, SIZE_MAX, bytes, file_size));
  return decode_token_shard(bytes, path);
}

}  // namespace gpt2
