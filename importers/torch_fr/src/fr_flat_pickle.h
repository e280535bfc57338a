// fr_flat_pickle.h — a Flight Recorder pickle read in one pass into a few flat arrays. Private to the
// importer.
//
// Is: the fast path for what PyTorch writes (plain dicts, lists, tuples, strings, numbers, memo):
// strings are views of the file's bytes, containers are ranges of one array of values, memo entries
// are values; nothing is allocated per value. The generic reader (importers/pickle) builds a node per
// string and per container, which at 1024 ranks x 2000 entries was 80% of hangdoctor's time.
// Is not: a full unpickler. Anything else (a global such as torch.jit's list builders, a stream cut
// before STOP, an opcode it does not know, a container changed after it was put in another, sizes
// past the generic reader's limits) makes read_flat_pickle return nothing, and the caller reads the
// bytes with the generic unpickler, which says what is wrong or salvages a truncated file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "rankscope/pickle/value.h"

namespace rankscope::torch_fr {

class FlatTree;

// One value, the accessors named as pickle::Value's so that one normaliser reads both.
class FlatValue {
 public:
  pickle::Kind kind() const { return kind_; }
  bool is_dict() const { return kind_ == pickle::Kind::kDict; }
  std::optional<bool> as_bool() const;
  std::optional<int64_t> as_int() const;
  std::optional<double> as_double() const;
  std::optional<std::string_view> text() const;  // a string's bytes
  std::span<const FlatValue> items() const;       // a list's or tuple's items; empty otherwise
  std::span<const std::pair<FlatValue, FlatValue>> entries() const;  // a dict's entries; empty otherwise
  const FlatValue* find(std::string_view key) const;  // first entry whose key is the string `key`
  bool partial() const { return false; }          // truncated streams go to the generic reader

 private:
  friend class FlatReader;
  // 24 bytes, not 32: one payload word for every kind (a dump is ~100K values, each copied onto the
  // stack, into the memo and into its container).
  uint32_t a() const { return uint32_t(bits_); }         // string: offset in the file; container: its cell
  uint32_t b() const { return uint32_t(bits_ >> 32); }   // string: length
  int64_t i() const { return int64_t(bits_); }           // bool or int; a float's bits
  void set_a_b(uint32_t a, uint32_t b) { bits_ = uint64_t(a) | uint64_t(b) << 32; }
  void set_i(int64_t i) { bits_ = uint64_t(i); }
  pickle::Kind kind_ = pickle::Kind::kNone;
  uint64_t bits_ = 0;
  const FlatTree* tree_ = nullptr;
};

static_assert(sizeof(FlatValue) == 24);

class FlatTree {
 public:
  FlatTree() = default;
  FlatTree(const FlatTree&) = delete;  // values point to their tree
  FlatTree& operator=(const FlatTree&) = delete;
  const FlatValue& root() const { return root_; }

 private:
  friend class FlatReader;
  friend class FlatValue;
  struct Cell {
    uint32_t first = 0, count = 0;  // into items_ (list, tuple) or pairs_ (dict)
    bool sealed = false;            // put inside another container: never changed again
    uint64_t tree_size = 1;         // values a walk visits, shared ones once per reference
  };
  std::span<const uint8_t> input_;
  std::vector<Cell> cells_;
  std::vector<FlatValue> items_;
  std::vector<std::pair<FlatValue, FlatValue>> pairs_;
  FlatValue root_;
};

// The accessors the normaliser calls per value (~20 a entry): inline, not a call each.
inline std::optional<bool> FlatValue::as_bool() const {
  if (kind_ != pickle::Kind::kBool) return std::nullopt;
  return i() != 0;
}

inline std::optional<int64_t> FlatValue::as_int() const {
  if (kind_ != pickle::Kind::kInt) return std::nullopt;
  return i();
}

inline std::optional<std::string_view> FlatValue::text() const {
  if (kind_ != pickle::Kind::kString) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(tree_->input_.data()) + a(), b());
}

inline std::span<const FlatValue> FlatValue::items() const {
  if (kind_ != pickle::Kind::kList && kind_ != pickle::Kind::kTuple) return {};
  const FlatTree::Cell& c = tree_->cells_[a()];
  return std::span<const FlatValue>(tree_->items_).subspan(c.first, c.count);
}

inline std::span<const std::pair<FlatValue, FlatValue>> FlatValue::entries() const {
  if (kind_ != pickle::Kind::kDict) return {};
  const FlatTree::Cell& c = tree_->cells_[a()];
  return std::span<const std::pair<FlatValue, FlatValue>>(tree_->pairs_).subspan(c.first, c.count);
}

// Reads `bytes` (which must outlive the tree) into `tree`, reusing its arrays' capacity (a worker
// reading dump after dump keeps one tree: no page faults for fresh arrays each time); false when
// the generic reader must judge them (the tree then holds nothing usable).
bool read_flat_pickle(std::span<const uint8_t> bytes, FlatTree& tree);

}  // namespace rankscope::torch_fr
