// tokenize_cli_test.cpp — gpt2-tokenize: arguments, errors (exit 2), the train/val split, and the
// shipped tinyshakespeare shards regenerated from the text byte for byte.
#include "tokenizer/tokenize_cli.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/token_shard.h"
#include "tokenizer/validation_split.h"

namespace gpt2 {
namespace tokenize_cli_tests {  // its own: in a unity build the test files of this binary share one translation unit
namespace {

const std::string kDataDir = RANKSCOPE_SOURCE_DIR "/data";
const std::string kVocabDir = kDataDir + "/gpt2";
const std::string kCorpus = kDataDir + "/tinyshakespeare/tinyshakespeare.txt";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string slurp(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

struct CliRun {
  int status;
  std::string out, err;
};

CliRun run(std::vector<std::string> args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  CliRun r;
  r.status = run_tokenize_cli(views, out, err);
  r.out = slurp(out);
  r.err = slurp(err);
  std::fclose(out);
  std::fclose(err);
  return r;
}

// A fresh folder, removed at scope exit. Per process: ctest runs tests (and other builds' copies
// of them) side by side.
struct TempDir {
  explicit TempDir(const std::string& name)
      : path(::testing::TempDir() + name + "_" + std::to_string(::getpid())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

TEST(TokenizeCli, Help) {
  const CliRun r = run({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("usage: gpt2-tokenize encode"), std::string::npos);
  EXPECT_NE(r.out.find("--val-fraction"), std::string::npos);
}

TEST(TokenizeCli, BadArgumentsExitTwoWithOneLine) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate", "x.txt"},
      {"encode"},
      {"encode", kCorpus},                                   // no -o
      {"encode", kCorpus, "-o"},                             // -o without a value
      {"encode", kCorpus, "-o", "x.bin", "--val-fraction", "1.5"},
      {"encode", kCorpus, "-o", "x.bin", "--val-fraction", "abc"},
      {"encode", kCorpus, "-o", "x.bin", "--bogus"},
      {"encode", kCorpus, "extra.txt", "-o", "x.bin"},
      {"decode", "x.bin", "--val-fraction", "0.1"},
  };
  for (const auto& args : cases) {
    const CliRun r = run(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.status, 2) << joined;
    EXPECT_EQ(r.err.rfind("gpt2-tokenize: ", 0), 0u) << joined << " -> " << r.err;
    EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
  }
}

TEST(TokenizeCli, MissingFilesExitTwo) {
  const TempDir tmp("cli_missing");
  const std::string& dir = tmp.path;
  CliRun r = run({"encode", dir + "/nope.txt", "-o", dir + "/out.bin"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nope.txt: no such file"), std::string::npos) << r.err;
  r = run({"decode", dir + "/nope.bin"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("nope.bin: no such file"), std::string::npos) << r.err;
  std::ofstream(dir + "/in.txt") << "hello";
  r = run({"encode", dir + "/in.txt", "-o", dir + "/out.bin", "--vocab-dir", dir + "/novocab"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("encoder.json: no such file"), std::string::npos) << r.err;
  r = run({"encode", dir + "/in.txt", "-o", dir + "/no/such/dir/out.bin", "--vocab-dir", kVocabDir});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot create"), std::string::npos) << r.err;
}

TEST(TokenizeCli, BadShardsExitTwo) {
  const TempDir tmp("cli_bad_shard");
  const std::string& dir = tmp.path;
  std::ofstream(dir + "/text.bin") << std::string(2000, 'x');  // a text file, not a shard
  CliRun r = run({"decode", dir + "/text.bin", "--vocab-dir", kVocabDir});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad magic"), std::string::npos) << r.err;
  ASSERT_TRUE(write_token_shard(dir + "/big_id.bin", std::vector<int32_t>{31373, 60000}).ok());
  r = run({"decode", dir + "/big_id.bin", "--vocab-dir", kVocabDir});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("token 1 is 60000"), std::string::npos) << r.err;
}

TEST(TokenizeCli, EncodeDecodeRoundTripIncludingNonUtf8) {
  const TempDir tmp("cli_roundtrip");
  const std::string& dir = tmp.path;
  const std::string text = std::string("First Citizen:\nBefore we proceed.\n\nAll:\nSpeak, speak.\n\n") +
                           "caf\xC3\xA9 \xFF\xFE bytes\n\nLast:\nend\n";
  std::ofstream(dir + "/in.txt", std::ios::binary) << text;
  CliRun r = run({"encode", dir + "/in.txt", "-o", dir + "/one.bin", "--vocab-dir", kVocabDir});
  ASSERT_EQ(r.status, 0) << r.err;
  r = run({"decode", dir + "/one.bin", "--vocab-dir", kVocabDir});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, text);

  r = run({"encode", dir + "/in.txt", "-o", dir + "/two.bin", "--val-fraction=0.3", "--vocab-dir", kVocabDir});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("paragraph boundary"), std::string::npos) << r.out;
  ASSERT_EQ(run({"decode", dir + "/two_train.bin", "-o", dir + "/train.txt", "--vocab-dir", kVocabDir}).status, 0);
  ASSERT_EQ(run({"decode", dir + "/two_val.bin", "-o", dir + "/val.txt", "--vocab-dir", kVocabDir}).status, 0);
  const std::string train = read_all(dir + "/train.txt"), val = read_all(dir + "/val.txt");
  EXPECT_EQ(train + val, text);
  EXPECT_TRUE(train.ends_with("\n\n")) << train;
  EXPECT_EQ(read_token_shard(dir + "/two_train.bin")->size() + read_token_shard(dir + "/two_val.bin")->size(),
            read_token_shard(dir + "/one.bin")->size());
}

TEST(ValidationSplit, FallsBackToLinesThenTokens) {
  auto tok = Gpt2Tokenizer::load_dir(kVocabDir);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto check = [&](const std::string& text, SplitBoundary want) {
    const auto ids = tok->encode(text);
    const ValidationSplit s = choose_validation_split(text, ids, *tok, 0.5);
    EXPECT_EQ(s.boundary, want) << text;
    EXPECT_GT(s.token_index, 0u);
    EXPECT_LT(s.token_index, ids.size());
    std::string train = tok->decode(std::span(ids).first(s.token_index)).value();
    EXPECT_EQ(train.size(), s.byte_offset);
  };
  check("one two three\nfour five six\nseven eight nine\n", SplitBoundary::kLine);
  check("one two three four five six seven eight", SplitBoundary::kToken);
  check("a\n\nb c d e f g h i j k l m n o p q r s\n", SplitBoundary::kParagraph);  // nearest there is
  const auto one = tok->encode("x");
  EXPECT_EQ(choose_validation_split("x", one, *tok, 0.5).boundary, SplitBoundary::kNone);
}

TEST(ShardPath, Suffixes) {
  EXPECT_EQ(shard_path_with_suffix("d/tiny_shakespeare.bin", "_train"), "d/tiny_shakespeare_train.bin");
  EXPECT_EQ(shard_path_with_suffix("d/out", "_val"), "d/out_val.bin");
}

// The committed shards are exactly what gpt2-tokenize makes of the committed text.
TEST(ShippedShards, RegenerateByteForByte) {
  const TempDir tmp("cli_regenerate");
  const std::string& dir = tmp.path;
  const CliRun r = run({"encode", kCorpus, "-o", dir + "/tiny_shakespeare.bin", "--val-fraction", "0.1",
                        "--vocab-dir", kVocabDir});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* part : {"tiny_shakespeare_train.bin", "tiny_shakespeare_val.bin"}) {
    const std::string made = read_all(dir + "/" + part);
    const std::string shipped = read_all(kDataDir + "/tinyshakespeare/" + part);
    ASSERT_FALSE(shipped.empty()) << part;
    EXPECT_TRUE(made == shipped) << part << " differs from its regeneration (" << made.size() << " vs "
                                 << shipped.size() << " bytes): re-run gpt2-tokenize as data/README.md says";
  }
}

TEST(ShippedShards, HoldTheWholeCorpus) {
  auto tok = Gpt2Tokenizer::load_dir(kVocabDir);
  ASSERT_TRUE(tok.ok());
  auto train = read_token_shard(kDataDir + "/tinyshakespeare/tiny_shakespeare_train.bin");
  auto val = read_token_shard(kDataDir + "/tinyshakespeare/tiny_shakespeare_val.bin");
  ASSERT_TRUE(train.ok()) << train.status().to_string();
  ASSERT_TRUE(val.ok()) << val.status().to_string();
  const std::string text = read_all(kCorpus);
  EXPECT_EQ(train->size() + val->size(), tok->encode(text).size());
  EXPECT_EQ(train->size() + val->size(), 338025u);  // design.md §6
  const double val_share = double(val->size()) / double(train->size() + val->size());
  EXPECT_NEAR(val_share, 0.1, 0.01);
  EXPECT_EQ(tok->decode(*train).value() + tok->decode(*val).value(), text);
}

// As a process: the exit status a shell sees.
TEST(TokenizeProcess, ExitStatus) {
  const std::string exe = GPT2_TOKENIZE_EXE;
  auto status = [](const std::string& cmd) {
    const int s = std::system((cmd + " >/dev/null 2>&1").c_str());
    return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  };
  EXPECT_EQ(status(exe + " --help"), 0);
  EXPECT_EQ(status(exe), 2);
  EXPECT_EQ(status(exe + " encode /nonexistent/in.txt -o /tmp/x.bin"), 2);
  EXPECT_EQ(status(exe + " decode " + kCorpus), 2);  // text is not a shard
  EXPECT_EQ(status(exe + " decode " + kDataDir + "/tinyshakespeare/tiny_shakespeare_val.bin --vocab-dir " + kVocabDir), 0);
}

}  // namespace
}  // namespace tokenize_cli_tests
}  // namespace gpt2
