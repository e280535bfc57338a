// validation_split.h — where gpt2-tokenize cuts a corpus into a train and a validation shard.
//
// The whole text is encoded once; the token sequence is cut at a token boundary, so
//   train ++ val == encode(text)   and   decode(train) + decode(val) == text
// (encoding the two halves separately could tokenize the seam differently). Validation is the
// tail. The cut goes at the token boundary nearest to byte (1 - val_fraction) * size that starts a
// paragraph (follows "\n\n": in tinyshakespeare, a new speaker); failing that, one that starts a
// line; failing that, any token boundary. Both parts are non-empty when the text has two tokens.
// Is not: a shuffler or a document sampler.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "tokenizer/gpt2_tokenizer.h"

namespace gpt2 {

enum class SplitBoundary { kParagraph, kLine, kToken, kNone };
const char* split_boundary_name(SplitBoundary b);  // "paragraph", "line", "token", "none"

struct ValidationSplit {
  size_t token_index = 0;   // train = tokens[0, token_index), val = tokens[token_index, end)
  size_t byte_offset = 0;   // the val part's first byte in the text
  SplitBoundary boundary = SplitBoundary::kNone;  // kNone: fewer than two tokens, all train
};

// `tokens` must be tokenizer.encode(text). val_fraction in (0, 1).
ValidationSplit choose_validation_split(std::string_view text, std::span<const TokenId> tokens,
                                        const Gpt2Tokenizer& tokenizer, double val_fraction);

}  // namespace gpt2
