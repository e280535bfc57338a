// validation_split.cpp — the train/val cut at a paragraph, line or token boundary.
#include "tokenizer/validation_split.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace gpt2 {

const char* split_boundary_name(SplitBoundary b) {
  switch (b) {
    case SplitBoundary::kParagraph: return "paragraph";
    case SplitBoundary::kLine: return "line";
    case SplitBoundary::kToken: return "token";
    case SplitBoundary::kNone: return "none";
  }
  return "?";
}

ValidationSplit choose_validation_split(std::string_view text, std::span<const TokenId> tokens,
                                        const Gpt2Tokenizer& tokenizer, double val_fraction) {
  ValidationSplit best;
  if (tokens.size() < 2) {
    best.token_index = tokens.size();
    best.byte_offset = text.size();
    return best;
  }
  const double target = std::floor((1.0 - val_fraction) * static_cast<double>(text.size()));
  // Best candidate per kind: the smallest distance to the target, the earlier one on a tie.
  struct Candidate {
    size_t token_index = 0, byte_offset = 0;
    double distance = std::numeric_limits<double>::infinity();
  };
  Candidate kinds[3];  // paragraph, line, token
  size_t offset = 0;
  // Interior boundaries only (after token i-1, before token i), so both parts are non-empty.
  for (size_t i = 1; i < tokens.size(); ++i) {
    offset += tokenizer.token_bytes(tokens[i - 1]).size();
    if (offset > text.size()) break;  // tokens do not belong to text; keep what was found
    const double distance = std::fabs(static_cast<double>(offset) - target);
    const bool line = text[offset - 1] == '\n';
    const bool paragraph = line && offset >= 2 && text[offset - 2] == '\n';
    const bool is_kind[3] = {paragraph, line, true};
    for (int k = 0; k < 3; ++k) {
      if (is_kind[k] && distance < kinds[k].distance) kinds[k] = Candidate{i, offset, distance};
    }
  }
  for (int k = 0; k < 3; ++k) {
    if (kinds[k].distance != std::numeric_limits<double>::infinity()) {
      best.token_index = kinds[k].token_index;
      best.byte_offset = kinds[k].byte_offset;
      best.boundary = static_cast<SplitBoundary>(k);
      return best;
    }
  }
  best.token_index = tokens.size();
  best.byte_offset = text.size();
  return best;
}

}  // namespace gpt2
