// fuzz_pickle.cpp — libFuzzer target: the bounded pickle reader (importers/pickle) on any bytes.
//
// Is: unpickle() on the input, then a walk of the result that visits each shared node once and
// checks what the reader promises about it: the height it recorded is the real one, within the depth
// limit, and the tree size stays within its cap (a few hundred bytes must never describe 2^64
// values). Is not: a check of the values against Python's (tests/importers/pickle_test.cpp).
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <span>
#include <unordered_map>

#include "rankscope/pickle/unpickler.h"

namespace {

using rankscope::pickle::Node;
using rankscope::pickle::Value;

// The height of `value` as unpickler.cpp defines it (containers nested below it; strings and
// scalars add nothing), each shared node computed once; traps when the recorded height differs.
int checked_height(const Value& value, std::unordered_map<const Node*, int>& seen) {
  const Node* node = value.node();
  if (!node || value.kind() == rankscope::pickle::Kind::kString) return 0;
  if (auto it = seen.find(node); it != seen.end()) return it->second;
  int height = 0;
  auto child = [&](const Value& item) {
    if (item.node() && item.kind() != rankscope::pickle::Kind::kString) {
      height = std::max(height, checked_height(item, seen) + 1);
    }
  };
  for (const Value& item : value.items()) child(item);
  for (const auto& [key, item] : value.entries()) {
    child(key);
    child(item);
  }
  if (height != node->height) __builtin_trap();
  seen.emplace(node, height);
  return height;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rankscope::pickle::UnpickleLimits limits;
  auto result = rankscope::pickle::unpickle(std::span<const uint8_t>(data, size), limits);
  if (!result.ok()) {
    (void)result.status().user_text();
    return 0;
  }
  const Value& root = result.value().root;
  std::unordered_map<const Node*, int> seen;
  int height = checked_height(root, seen);
  if (height > limits.max_depth || root.tree_size() > limits.max_tree_size) __builtin_trap();
  return 0;
}
