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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "rankscope/pickle/value.h"

namespace rankscope::torch_fr {

class FlatTree;
struct FlatPair;

// A growable array of plain values that never initialises what it grows into and pushes inline:
// the reader's value stack, memo and containers (a dump is ~130K opcodes a rank, each a push or a
// copy; std::vector's out-of-line emplace_back was a fifth of hangdoctor's time at 1024 ranks).
// Is not: a general container (no destructors run: T must be trivially copyable).
template <typename T>
class PodArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  PodArray() = default;
  PodArray(const PodArray&) = delete;
  PodArray& operator=(const PodArray&) = delete;
  ~PodArray() { std::allocator<T>().deallocate(data_, capacity_); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  void clear() { size_ = 0; }
  void shrink_to(size_t n) { size_ = n; }  // n <= size()
  void pop_back() { --size_; }
  void reserve(size_t n) {
    if (n > capacity_) regrow(n);
  }
  [[gnu::always_inline]] void push_back(const T& v) {
    if (size_ == capacity_) [[unlikely]] regrow(capacity_ * 2 + 16);
    data_[size_++] = v;
  }
  // Appends `n` values' bytes from `src` (which may be of another type of the same layout: a dict's
  // keys and values lie on the stack as K V K V, the layout of FlatPair).
  void append_bytes(const void* src, size_t n) {
    if (size_ + n > capacity_) regrow(std::max(capacity_ * 2, size_ + n));
    if (n) std::memcpy(static_cast<void*>(data_ + size_), src, n * sizeof(T));
    size_ += n;
  }
  // Grows by `n` values left for the caller to write; returns the first.
  T* extend(size_t n) {
    if (size_ + n > capacity_) regrow(std::max(capacity_ * 2, size_ + n));
    size_ += n;
    return data_ + size_ - n;
  }
  // Grows to `n` values, the new ones `fill`.
  void grow_to(size_t n, const T& fill) {
    // Doubles only when `n` does not fit: doubling on every call let a dump of repeated BINPUTs a
    // little past the memo's end ask for gigabytes (fuzz_fr_dump, issue 36).
    if (n > capacity_) reserve(std::max(n, capacity_ * 2));
    while (size_ < n) data_[size_++] = fill;
  }

 private:
  [[gnu::noinline]] void regrow(size_t n) {
    T* fresh = std::allocator<T>().allocate(n);
    if (size_) std::memcpy(static_cast<void*>(fresh), data_, size_ * sizeof(T));
    std::allocator<T>().deallocate(data_, capacity_);
    data_ = fresh;
    capacity_ = n;
  }
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

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
  std::span<const FlatPair> entries() const;      // a dict's entries; empty otherwise
  const FlatValue* find(std::string_view key) const;  // first entry whose key is the string `key`
  bool partial() const { return false; }          // truncated streams go to the generic reader

 private:
  friend class FlatReader;
  // 24 bytes, not 32: one payload of two 32-bit words for every kind (a dump is ~100K values, each
  // copied onto the stack, into the memo and into its container).
  uint32_t a() const { return lo_; }  // string: offset in the file; container: its cell
  uint32_t b() const { return hi_; }  // string: length
  int64_t i() const { return int64_t(uint64_t(lo_) | uint64_t(hi_) << 32); }  // bool or int; a float's bits
  void set_a_b(uint32_t a, uint32_t b) {
    lo_ = a;
    hi_ = b;
  }
  void set_i(int64_t i) { set_a_b(uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32)); }
  uint32_t lo_ = 0, hi_ = 0;
  pickle::Kind kind_ = pickle::Kind::kNone;
  const FlatTree* tree_ = nullptr;  // null only in a memo slot nothing was put in
};

static_assert(sizeof(FlatValue) == 24);

// A dict's entry, read with structured bindings as pickle::Value's pairs are.
struct FlatPair {
  FlatValue key, value;
};

static_assert(sizeof(FlatPair) == 2 * sizeof(FlatValue) && std::is_trivially_copyable_v<FlatPair>);

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
  PodArray<Cell> cells_;
  PodArray<FlatValue> items_;
  PodArray<FlatPair> pairs_;
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
  return std::span<const FlatValue>(tree_->items_.data() + c.first, c.count);
}

inline std::span<const FlatPair> FlatValue::entries() const {
  if (kind_ != pickle::Kind::kDict) return {};
  const FlatTree::Cell& c = tree_->cells_[a()];
  return std::span<const FlatPair>(tree_->pairs_.data() + c.first, c.count);
}

// Reads `bytes` (which must outlive the tree) into `tree`, reusing its arrays' capacity (a worker
// reading dump after dump keeps one tree: no page faults for fresh arrays each time); false when
// the generic reader must judge them (the tree then holds nothing usable).
bool read_flat_pickle(std::span<const uint8_t> bytes, FlatTree& tree);

}  // namespace rankscope::torch_fr
