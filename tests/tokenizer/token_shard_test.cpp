// token_shard_test.cpp — llm.c shard layout, round trip and every header error.
#include "tokenizer/token_shard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpt2 {
namespace {

// Per process: ctest runs tests (and other builds' copies of them) side by side.
std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + std::to_string(::getpid()) + "_" + name;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

int32_t header_int(const std::string& bytes, int i) {
  int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

TEST(TokenShard, LayoutIsLlmCs) {
  const std::vector<int32_t> tokens = {0, 1, 50256, 65535, 258};
  auto bytes = encode_token_shard(tokens);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ASSERT_EQ(bytes->size(), 1024u + 2 * tokens.size());
  EXPECT_EQ(header_int(*bytes, 0), 20240520);
  EXPECT_EQ(header_int(*bytes, 1), 1);
  EXPECT_EQ(header_int(*bytes, 2), 5);
  for (int i = 3; i < 256; ++i) ASSERT_EQ(header_int(*bytes, i), 0) << i;
  uint16_t t[5];
  std::memcpy(t, bytes->data() + 1024, sizeof t);
  EXPECT_EQ(t[2], 50256);
  EXPECT_EQ(t[3], 65535);
  EXPECT_EQ(t[4], 258);
}

TEST(TokenShard, WriteReadRoundTrip) {
  const std::string path = temp_path("shard_roundtrip.bin");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 10000; ++i) tokens.push_back((i * 7919) % 50257);
  ASSERT_TRUE(write_token_shard(path, tokens).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto header = read_token_shard_header(path);
  ASSERT_TRUE(header.ok()) << header.status().to_string();
  EXPECT_EQ(header->token_count, tokens.size());
  EXPECT_EQ(header->version, 1);
  auto back = read_token_shard(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, tokens);

  ASSERT_TRUE(write_token_shard(path, {}).ok());  // an empty shard is a valid shard
  back = read_token_shard(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
  std::filesystem::remove(path);
}

TEST(TokenShard, RefusesTokensThatDoNotFitUint16) {
  const std::vector<int32_t> bad = {1, 65536};
  auto bytes = encode_token_shard(bad);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("token 1 is 65536"), std::string::npos);
  EXPECT_FALSE(write_token_shard(temp_path("bad_token.bin"), std::vector<int32_t>{-1}).ok());
}

TEST(TokenShard, HeaderErrorsSayWhatIsWrong) {
  const std::vector<int32_t> tokens = {10, 20, 30};
  const std::string good = encode_token_shard(tokens).value();
  struct Case {
    std::string name, bytes, expect;
    rankscope::StatusCode code;
  };
  std::string bad_magic = good;
  bad_magic[0] = 'x';
  std::string v2 = good;
  v2[4] = 2;
  std::string negative = good;
  std::memset(negative.data() + 8, 0xff, 4);
  const std::vector<Case> cases = {
      {"short.bin", good.substr(0, 100), "shorter than the 1024-byte header", rankscope::StatusCode::kCorrupt},
      {"magic.bin", bad_magic, "bad magic", rankscope::StatusCode::kCorrupt},
      {"v2.bin", v2, "version 2", rankscope::StatusCode::kUnsupported},
      {"negative.bin", negative, "negative token count", rankscope::StatusCode::kCorrupt},
      {"truncated.bin", good.substr(0, good.size() - 1), "header says 3 tokens", rankscope::StatusCode::kCorrupt},
      {"long.bin", good + "xy", "header says 3 tokens", rankscope::StatusCode::kCorrupt},
  };
  for (const Case& c : cases) {
    const std::string path = temp_path(c.name);
    write_bytes(path, c.bytes);
    auto r = read_token_shard(path);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), c.code) << c.name;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
    EXPECT_FALSE(read_token_shard_header(path).ok()) << c.name;
    std::filesystem::remove(path);
  }
}

TEST(TokenShard, MissingFileIsNotFound) {
  auto r = read_token_shard(temp_path("does_not_exist.bin"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), rankscope::StatusCode::kNotFound);
  EXPECT_FALSE(read_token_shard(::testing::TempDir()).ok());  // a directory
}

}  // namespace
}  // namespace gpt2
