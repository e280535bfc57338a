// gpt2_tokenizer.h — GPT-2's byte-level BPE tokenizer over the standard encoder.json and vocab.bpe.
//
// Is: OpenAI's encoder.py in C++. Text is cut into pre-tokens ("words") by GPT-2's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (PCRE2, UTF + UCP, JIT; \s spelled out as Unicode White_Space so it is exactly Python's), each
// word's bytes become byte tokens and are merged by rank (vocab.bpe order). A word cache makes
// repeated words one hash lookup. decode() concatenates the tokens' bytes.
// Any byte string encodes, not only UTF-8: a run of bytes that is not valid UTF-8 is matched by no
// part of the regex (PCRE2_MATCH_INVALID_UTF), so it becomes a word of its own and is encoded
// byte-level; decode(encode(x)) == x for every x.
// Is not: a general tokenizer library (no other vocabularies, no normalisation, no padding).
// Special tokens: encode() treats "<|endoftext|>" in the text as ordinary text (so any text
// round-trips); encode_with_special() maps each literal "<|endoftext|>" to kEndOfText.
//
// Threading: encode*() fills the word cache, so one thread at a time per Gpt2Tokenizer; decode(),
// token_bytes() and the accessors are const and safe to call from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"

namespace gpt2 {

using rankscope::Result;
using rankscope::Status;

using TokenId = int32_t;
inline constexpr TokenId kEndOfText = 50256;                  // "<|endoftext|>"
inline constexpr std::string_view kEndOfTextText = "<|endoftext|>";
inline constexpr int kGpt2VocabSize = 50257;                  // 50,000 merges + 256 bytes + EOT

// Where the shipped data lives: $RANKSCOPE_DATA_DIR if set, else the source tree's data/ folder
// (compiled in). default_vocab_dir() is its gpt2/ subfolder (encoder.json, vocab.bpe).
std::string default_data_dir();
std::string default_vocab_dir();

class Gpt2Tokenizer {
 public:
  // Loads encoder.json (token string -> id, in GPT-2's byte-to-unicode alphabet) and vocab.bpe
  // (a "#version" line, then one "left right" merge per line, highest priority first).
  static Result<Gpt2Tokenizer> load(const std::string& encoder_json_path,
                                    const std::string& vocab_bpe_path);
  // load(dir + "/encoder.json", dir + "/vocab.bpe").
  static Result<Gpt2Tokenizer> load_dir(const std::string& dir);

  Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept;
  Gpt2Tokenizer& operator=(Gpt2Tokenizer&&) noexcept;
  ~Gpt2Tokenizer();

  // Text (any bytes) -> token ids. "<|endoftext|>" in the text is ordinary text.
  std::vector<TokenId> encode(std::string_view text);
  // Same, appending to `out` (no reallocation when out has the capacity).
  void encode_append(std::string_view text, std::vector<TokenId>& out);
  // As encode(), but every literal "<|endoftext|>" becomes kEndOfText.
  std::vector<TokenId> encode_with_special(std::string_view text);

  // Token ids -> bytes. An id outside [0, vocab_size()) is an error naming its position.
  Result<std::string> decode(std::span<const TokenId> ids) const;
  // The bytes of one token ("" for an id outside the vocabulary): for printing tokens as they are
  // sampled. Note one token may hold part of a UTF-8 character; concatenate before displaying.
  std::string_view token_bytes(TokenId id) const;

  int vocab_size() const;  // 50257 for GPT-2
  TokenId eot_token() const { return kEndOfText; }
  size_t cache_size() const;  // distinct words cached so far (for tests and benchmarks)
  void clear_cache();

 private:
  struct Impl;
  explicit Gpt2Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpt2
