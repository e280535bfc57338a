// gpt2_tokenizer_test.cpp — GPT-2 BPE against reference ids, round trips, non-UTF-8 input.
//
// Reference ids: the first seven are the original acceptance list; the others were computed with
// OpenAI's encoder.py (the `regex` module, same encoder.json and vocab.bpe).
#include "tokenizer/gpt2_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace gpt2 {
namespace {

const std::string kDataDir = RANKSCOPE_SOURCE_DIR "/data";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto t = Gpt2Tokenizer::load_dir(kDataDir + "/gpt2");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tok_ = new Gpt2Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static std::string decode(const std::vector<TokenId>& ids) {
    auto r = tok_->decode(ids);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r.value() : std::string();
  }
  static Gpt2Tokenizer* tok_;
};
Gpt2Tokenizer* Gpt2TokenizerTest::tok_ = nullptr;

using Ids = std::vector<TokenId>;

TEST_F(Gpt2TokenizerTest, IssueReferenceIds) {
  EXPECT_EQ(tok_->encode(""), Ids{});
  EXPECT_EQ(tok_->encode(" "), Ids{220});
  EXPECT_EQ(tok_->encode("\t"), Ids{197});
  EXPECT_EQ(tok_->encode("This is some text"), (Ids{1212, 318, 617, 2420}));
  EXPECT_EQ(tok_->encode("indivisible"), (Ids{521, 452, 12843}));
  EXPECT_EQ(tok_->encode("hello \xF0\x9F\x91\x8B world \xF0\x9F\x8C\x8D"),  // hello 👋 world 🌍
            (Ids{31373, 50169, 233, 995, 12520, 234, 235}));
  EXPECT_EQ(tok_->encode("hello world"), (Ids{31373, 995}));
}

TEST_F(Gpt2TokenizerTest, MoreReferenceIdsFromEncoderPy) {
  EXPECT_EQ(tok_->encode("Hello world\n\n"), (Ids{15496, 995, 628}));  // "\n\n" at the end: one token
  EXPECT_EQ(tok_->encode("A\n\nB"), (Ids{32, 198, 198, 33}));          // before a word: \s+(?!\S)
  EXPECT_EQ(tok_->encode("I'll can't we're"), (Ids{40, 1183, 460, 470, 356, 821}));
  EXPECT_EQ(tok_->encode("   hi"), (Ids{220, 220, 23105}));
  EXPECT_EQ(tok_->encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  // U+0085 is whitespace to Python's regex (Unicode White_Space), not to PCRE2's \s.
  EXPECT_EQ(tok_->encode("\xC2\x85x"), (Ids{126, 227, 87}));
  EXPECT_EQ(tok_->encode("x\xC2\x85 y"), (Ids{87, 126, 227, 331}));
}

TEST_F(Gpt2TokenizerTest, LongWordsTakeTheHeapPathWithTheSameMerges) {
  // 220 bytes, one word: the heap BPE; "indivisible" alone is the scan BPE.
  std::string word;
  Ids expected;
  for (int i = 0; i < 20; ++i) word += "indivisible", expected.insert(expected.end(), {521, 452, 12843});
  EXPECT_EQ(tok_->encode(word), expected);
  Ids eq(15, 23926);
  eq.push_back(10052);
  eq.push_back(2559);
  EXPECT_EQ(tok_->encode(std::string(1000, '=')), eq);
  std::string super;
  for (int i = 0; i < 3; ++i) super += "Supercalifragilisticexpialidocious";
  Ids sup;
  for (int i = 0; i < 3; ++i) sup.insert(sup.end(), {12442, 9948, 361, 22562, 346, 396, 501, 42372, 498, 312, 32346});
  EXPECT_EQ(tok_->encode(super), sup);
  Ids spaces(99, 220);
  spaces.push_back(2124);  // " x"
  EXPECT_EQ(tok_->encode(std::string(100, ' ') + "x"), spaces);
}

TEST_F(Gpt2TokenizerTest, CachedAndUncachedAgree) {
  const std::string text = "the cat sat on the mat; the cat sat.";
  const Ids first = tok_->encode(text);
  EXPECT_GT(tok_->cache_size(), 0u);
  EXPECT_EQ(tok_->encode(text), first);
  tok_->clear_cache();
  EXPECT_EQ(tok_->cache_size(), 0u);
  EXPECT_EQ(tok_->encode(text), first);
}

TEST_F(Gpt2TokenizerTest, EndOfTextIsSpecialOnlyWhenAsked) {
  EXPECT_EQ(tok_->eot_token(), 50256);
  EXPECT_EQ(tok_->vocab_size(), 50257);
  EXPECT_EQ(tok_->token_bytes(kEndOfText), "<|endoftext|>");
  EXPECT_EQ(tok_->encode_with_special("<|endoftext|>"), Ids{kEndOfText});
  EXPECT_EQ(tok_->encode_with_special("hello world<|endoftext|>hello world<|endoftext|>"),
            (Ids{31373, 995, kEndOfText, 31373, 995, kEndOfText}));
  EXPECT_EQ(decode({31373, 995, kEndOfText}), "hello world<|endoftext|>");
}

TEST_F(Gpt2TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto r = tok_->decode(Ids{31373, 50257});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("token 1 is 50257"), std::string::npos) << r.status().message();
  EXPECT_FALSE(tok_->decode(Ids{-1}).ok());
  EXPECT_EQ(tok_->token_bytes(50304), "");  // a padded vocabulary's extra ids decode to nothing
  EXPECT_EQ(tok_->token_bytes(-3), "");
}

TEST_F(Gpt2TokenizerTest, NonUtf8IsEncodedByteLevel) {
  const std::string cases[] = {
      std::string("\xFF"),                     // never valid in UTF-8
      std::string("abc\xFF\xFE def"),          // invalid run between words
      std::string("\xE2\x82"),                 // truncated 3-byte character (of the euro sign)
      std::string("caf\xC3"),                  // truncated at the end
      std::string("\xC0\xAF overlong"),        // overlong encoding of '/'
      std::string("\xED\xA0\x80 surrogate"),   // UTF-16 surrogate in UTF-8
      std::string("\x80\x80\x80\x80\x80\x80"), // lone continuation bytes
      std::string("  \xFF  \n\xFE\n"),         // invalid bytes inside whitespace runs
      std::string("x\0y\0", 4),                // NUL bytes are ordinary
  };
  for (const std::string& s : cases) {
    const Ids ids = tok_->encode(s);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(decode(ids), s) << "case of " << s.size() << " bytes";
  }
  // Valid text around the invalid bytes keeps its own tokens.
  const Ids ids = tok_->encode("hello world\xFF");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], 31373);
  EXPECT_EQ(ids[1], 995);
}

TEST_F(Gpt2TokenizerTest, RoundTripsRandomBytes) {
  std::mt19937_64 rng(20240520);
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t n = rng() % 200;
    std::string s(n, '\0');
    const int kind = trial % 3;  // any byte; mostly ASCII; valid-looking UTF-8 lead/continuation mix
    for (char& c : s) {
      const uint64_t r = rng();
      if (kind == 0) c = static_cast<char>(r & 0xff);
      if (kind == 1) c = static_cast<char>((r & 7) == 0 ? r >> 8 & 0xff : ' ' + (r >> 8) % 95);
      if (kind == 2) c = static_cast<char>((r & 1) ? 0x80 | (r >> 8 & 0x3f) : 0xC2 + (r >> 8) % 0x33);
    }
    const Ids ids = tok_->encode(s);
    for (TokenId t : ids) ASSERT_TRUE(t >= 0 && t < kEndOfText) << "trial " << trial;
    ASSERT_EQ(decode(ids), s) << "trial " << trial;
  }
  // A long random blob, one call.
  std::string blob(1 << 18, '\0');
  for (char& c : blob) c = static_cast<char>(rng() & 0xff);
  EXPECT_EQ(decode(tok_->encode(blob)), blob);
}

TEST_F(Gpt2TokenizerTest, LongRunsDoNotBlowUp) {
  // One 256 KiB word of '=' and one 256 KiB whitespace run: the heap BPE (no quadratic scan) and the
  // pre-tokenizer on one very long match.
  const std::string eq(1 << 18, '=');
  const Ids eq_ids = tok_->encode(eq);
  EXPECT_EQ(eq_ids.size(), size_t(1 << 18) / 64);  // 23926 is 64 '='
  EXPECT_EQ(decode(eq_ids), eq);
  const std::string ws = std::string(1 << 18, ' ') + "x";
  EXPECT_EQ(decode(tok_->encode(ws)), ws);
}

TEST_F(Gpt2TokenizerTest, RoundTripsTheCorpusWithTheDocumentedCounts) {
  const std::string text = read_all(kDataDir + "/tinyshakespeare/tinyshakespeare.txt");
  ASSERT_EQ(text.size(), 1115394u);
  const Ids ids = tok_->encode(text);
  EXPECT_EQ(ids.size(), 338025u);  // design.md §6 (and encoder.py)
  std::vector<bool> seen(kGpt2VocabSize, false);
  size_t distinct = 0;
  for (TokenId t : ids) {
    ASSERT_TRUE(t >= 0 && t < kGpt2VocabSize);
    if (!seen[t]) seen[t] = true, ++distinct;
  }
  EXPECT_EQ(distinct, 11706u);
  EXPECT_EQ(decode(ids), text);
}

TEST(Gpt2TokenizerLoad, MissingFilesAreNotFound) {
  auto t = Gpt2Tokenizer::load_dir("/nonexistent/gpt2");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), rankscope::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/gpt2/encoder.json"), std::string::npos);
}

TEST(Gpt2TokenizerLoad, CorruptVocabularyIsReported) {
  const std::string dir = ::testing::TempDir() + "gpt2_bad_vocab_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/encoder.json") << "{\"a\": 0, ";
    std::ofstream(dir + "/vocab.bpe") << "#version: 0.2\n";
  }
  auto t = Gpt2Tokenizer::load_dir(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), rankscope::StatusCode::kCorrupt);
  {
    std::ofstream(dir + "/encoder.json") << "{\"a\": 0}";
  }
  t = Gpt2Tokenizer::load_dir(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no token for byte"), std::string::npos) << t.status().message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpt2
