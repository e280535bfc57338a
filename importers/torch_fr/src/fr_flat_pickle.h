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
// Also: FlatCursor, through which a caller reads one list (a dump's entries) straight from the
// opcodes into its own records, building no tree for it (FlatListHook).
#pragma once

#include <algorithm>
#include <array>
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
class FlatCursor;

// Opcodes, by their names in CPython's Lib/pickletools.py (the subset plain data uses).
namespace flat_op {
enum : uint8_t {
  kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kBinFloat = 'G', kBinInt = 'J', kBinInt1 = 'K',
  kBinInt2 = 'M', kNone = 'N', kBinUnicode = 'X', kBinBytes = 'B', kShortBinBytes = 'C', kAppend = 'a',
  kAppends = 'e', kBinGet = 'h', kLongBinGet = 'j', kEmptyList = ']', kBinPut = 'q', kLongBinPut = 'r',
  kSetItem = 's', kTuple = 't', kSetItems = 'u', kEmptyDict = '}', kEmptyTuple = ')', kProto = 0x80,
  kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88, kNewFalse = 0x89, kLong1 = 0x8a,
  kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kMemoize = 0x94, kFrame = 0x95,
};
// As the generic reader's limits.
constexpr size_t kMaxMemo = size_t(16) << 20;
// As the generic reader: a few bytes of memo references must not describe billions of entries.
constexpr uint64_t kMaxTreeSize = uint64_t(1) << 26;
}  // namespace flat_op

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
    // little past the memo's end ask for gigabytes (found by fuzz_fr_dump).
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
  bool is_handed_over() const;                    // the list a FlatListHook read (FlatTree::handed_over)
  // The same value: same kind, same payload (for a string: the same bytes of the file), same tree.
  bool is_same(const FlatValue& o) const { return kind_ == o.kind_ && payload_ == o.payload_ && tree_ == o.tree_; }
  bool partial() const { return false; }          // truncated streams go to the generic reader

 private:
  friend class FlatReader;
  friend class FlatCursor;
  friend class FlatTree;
  // 24 bytes, not 32: one payload of two 32-bit words for every kind (a dump is ~100K values, each
  // copied onto the stack, into the memo and into its container). One 64-bit word, written in one
  // store: two 32-bit stores read back by one wider load (a copy of the value) cannot be forwarded,
  // and that stall was a fifth of reading an entry.
  uint32_t a() const { return uint32_t(payload_); }        // string: offset in the file; container: its cell
  uint32_t b() const { return uint32_t(payload_ >> 32); }  // string: length
  int64_t i() const { return int64_t(payload_); }          // bool or int; a float's bits
  void set_a_b(uint32_t a, uint32_t b) { payload_ = uint64_t(a) | uint64_t(b) << 32; }
  void set_i(int64_t i) { payload_ = uint64_t(i); }
  uint64_t payload_ = 0;
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
  // The list read_flat_pickle handed to a FlatListHook (then empty here: its items went to the
  // hook), or null when no list was.
  const FlatValue* handed_over() const { return handed_over_.tree_ ? &handed_over_ : nullptr; }
  // Whether `v` is that list (the same container, not an equal one).
  bool is_handed_over(const FlatValue& v) const {
    return handed_over_.tree_ && v.kind_ == handed_over_.kind_ && v.tree_ == this && v.a() == handed_over_.a();
  }

 private:
  friend class FlatReader;
  friend class FlatValue;
  friend class FlatCursor;
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
  FlatValue handed_over_;  // no tree: none
};

inline bool FlatValue::is_handed_over() const { return tree_ && tree_->is_handed_over(*this); }

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

// A read position in the pickle for a caller that reads one part of it (a dump's entries, ~95% of
// its opcodes) straight into its own records: no value stack, no tree, no container built (the tree
// reader spent half its time on the entries' small lists and dicts). Given out by read_flat_pickle
// at the first MARK of the list a FlatListHook names.
// Is: the grammar PyTorch writes plain data in, each step exactly what the pickle machine does: a
// scalar (string, number, bool, None, or a memo get of one) and the memo puts after it; lists and
// dicts as EMPTY_LIST / EMPTY_DICT, memo puts, then MARK ... APPENDS / SETITEMS batches; tuples as
// EMPTY_TUPLE, MARK ... TUPLE, or up to three scalars then TUPLE1/2/3.
// Is not: a full reader. Anything else (a memo get of a container, a tuple of containers, SETITEM,
// an opcode out of place, nesting past 16) makes the call return false, and the caller then reads
// the whole pickle with the tree (read_flat_pickle without a hook), which is exact for all of it.
// A container read here has no tree: a memo put of it stores a slot nothing can get, so a later
// memo get of it fails too (and the tree reader takes over).
class FlatCursor {
 public:
  FlatCursor(std::span<const uint8_t> in, size_t pos, FlatTree* tree, PodArray<FlatValue>& memo)
      : begin_(in.data()), p_(in.data() + pos), end_(in.data() + in.size()), tree_(tree), memo_(memo) {}

  size_t pos() const { return size_t(p_ - begin_); }
  // Values read so far, counted as the tree reader counts a container's tree_size (each scalar and
  // each container once), so that the same limit applies.
  uint64_t values() const { return values_; }

  // The next opcode, FRAMEs (which only say where a file may be read in pieces) skipped; -1 at the
  // end of the bytes.
  [[gnu::always_inline]] int peek() {
    if (p_ < end_) [[likely]] {
      const uint8_t op = *p_;
      if (op != flat_op::kFrame) [[likely]] return op;
    }
    return peek_past_frames();
  }
  // Consumes the next opcode if it is `op`.
  [[gnu::always_inline]] bool take(uint8_t op) {
    if (peek() != op) return false;
    ++p_;
    return true;
  }

  // One scalar value and the memo puts after it.
  [[gnu::always_inline]] bool scalar(FlatValue* out);
  // The id of the BINGET that comes next, or -1 (FRAMEs not skipped: -1 then too).
  int next_memo_get() const { return end_ - p_ >= 2 && p_[0] == flat_op::kBinGet ? p_[1] : -1; }
  // The BINGET of memo slot `id` while the slot still holds `expected` (a dict's keys are the same
  // memoized strings entry after entry), with no memo put or FRAME after it: consumed, as scalar()
  // would, without building the value. false, nothing consumed, otherwise: then scalar() reads it
  // (a false that had consumed the get would leave the caller reading from the wrong place).
  [[gnu::always_inline]] bool take_memo_get(uint8_t id, const FlatValue& expected) {
    if (end_ - p_ < 2 || p_[0] != flat_op::kBinGet || p_[1] != id || id >= memo_.size()) return false;
    const FlatValue& held = memo_[id];
    if (!held.is_same(expected) || !held.tree_) return false;
    if (end_ - p_ > 2 && kMemoOrFrame[p_[2]]) return false;
    p_ += 2;
    ++values_;
    return true;
  }
  // Any value of the grammar, read and dropped (a scalar inline; a container out of line).
  [[gnu::always_inline]] bool skip_value(int depth = 0) {
    const int op = peek();
    if (op == flat_op::kEmptyList || op == flat_op::kEmptyDict || op == flat_op::kEmptyTuple || op == flat_op::kMark)
      return skip_container(depth);
    FlatValue v;
    return scalar(&v);
  }
  // A list or tuple whose items are scalars: item(index, value) for each.
  template <typename F>
  bool scalars(F&& item);
  // A list: item(cursor) reads each item (one value; false to give up).
  template <typename F>
  bool list(F&& item);
  // A dict: pair(cursor) reads each key and its value.
  template <typename F>
  bool dict(F&& pair);

 private:
  static constexpr int kMaxDepth = 16;
  bool skip_container(int depth);
  // The opcodes memo_puts has to look at: one load to tell, not four compares.
  static constexpr std::array<bool, 256> kMemoOrFrame = [] {
    std::array<bool, 256> t{};
    for (uint8_t op : {flat_op::kBinPut, flat_op::kLongBinPut, flat_op::kMemoize, flat_op::kFrame}) t[op] = true;
    return t;
  }();
  template <typename T>
  bool read(T* v) {
    if (size_t(end_ - p_) < sizeof(T)) [[unlikely]] return false;
    std::memcpy(v, p_, sizeof(T));  // little-endian on the wire and here (x86, arm64)
    p_ += sizeof(T);
    return true;
  }
  bool text(uint64_t n, FlatValue* v) {
    if (n > size_t(end_ - p_)) [[unlikely]] return false;
    v->set_a_b(uint32_t(p_ - begin_), uint32_t(n));
    v->kind_ = pickle::Kind::kString;
    p_ += size_t(n);
    return true;
  }
  [[gnu::noinline]] int peek_past_frames() {
    while (p_ < end_ && *p_ == flat_op::kFrame) {
      if (size_t(end_ - p_) < 9) return -1;
      p_ += 9;
    }
    return p_ < end_ ? *p_ : -1;
  }
  [[gnu::always_inline]] bool get(uint64_t id, FlatValue* v) {
    if (id >= memo_.size() || !memo_[size_t(id)].tree_) [[unlikely]] return false;
    *v = memo_[size_t(id)];
    // A container from the memo may be shared or changed later: the tree reader's to judge.
    static_assert(pickle::Kind::kList > pickle::Kind::kString && pickle::Kind::kTuple > pickle::Kind::kString &&
                  pickle::Kind::kDict > pickle::Kind::kString);
    return v->kind_ <= pickle::Kind::kString;
  }
  // The memo puts after a value: `v` is stored (a container read here is stored as a slot nothing
  // can get). The id rules are the tree reader's.
  [[gnu::always_inline]] bool memo_puts(const FlatValue& v) {
    // Most values have none (PyTorch memoizes each distinct string once): one test, inline.
    if (p_ < end_) [[likely]] {
      const uint8_t op = *p_;
      if (!kMemoOrFrame[op]) return true;
    }
    return memo_puts_slow(v);
  }
  [[gnu::noinline]] bool memo_puts_slow(const FlatValue& v) {
    while (true) {
      const int op = peek();
      uint64_t id;
      if (op == flat_op::kBinPut) {
        ++p_;
        uint8_t i;
        if (!read(&i)) return false;
        id = i;
      } else if (op == flat_op::kLongBinPut) {
        ++p_;
        uint32_t i;
        if (!read(&i)) return false;
        id = i;
      } else if (op == flat_op::kMemoize) {
        ++p_;
        id = memo_.size();
      } else {
        return true;
      }
      if (id > memo_.size() + 1024 || id >= flat_op::kMaxMemo) return false;
      if (id == memo_.size()) {
        memo_.push_back(v);
      } else {
        if (id > memo_.size()) memo_.grow_to(size_t(id) + 1, FlatValue());
        memo_[size_t(id)] = v;
      }
    }
  }
  // A container's end: counted, and its memo puts (of a slot nothing can get).
  bool close_container() {
    ++values_;
    return memo_puts(FlatValue());
  }

  // Pointers, not a span and an index: one register each in the loops (a dump is ~130K opcodes a rank).
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  FlatTree* tree_;
  PodArray<FlatValue>& memo_;
  uint64_t values_ = 0;
};

inline bool FlatCursor::scalar(FlatValue* out) {
  using namespace flat_op;
  const int op = peek();
  // Written in place, field by field, and read so (not built aside and copied: see FlatValue).
  FlatValue& v = *out;
  v.tree_ = tree_;
  v.payload_ = 0;
  ++p_;
  switch (op) {
    case kBinGet: {
      uint8_t id;
      if (!read(&id) || !get(id, &v)) return false;
      break;
    }
    case kLongBinGet: {
      uint32_t id;
      if (!read(&id) || !get(id, &v)) return false;
      break;
    }
    case kShortBinUnicode:
    case kShortBinBytes: {
      uint8_t n;
      if (!read(&n) || !text(n, &v)) return false;
      break;
    }
    case kBinUnicode:
    case kBinBytes: {
      uint32_t n;
      if (!read(&n) || !text(n, &v)) return false;
      break;
    }
    case kBinUnicode8:
    case kBinBytes8: {
      uint64_t n;
      if (!read(&n) || !text(n, &v)) return false;
      break;
    }
    case kBinInt1: {
      uint8_t x;
      if (!read(&x)) return false;
      v.set_i(x);
      v.kind_ = pickle::Kind::kInt;
      break;
    }
    case kBinInt2: {
      uint16_t x;
      if (!read(&x)) return false;
      v.set_i(x);
      v.kind_ = pickle::Kind::kInt;
      break;
    }
    case kBinInt: {
      uint32_t x;
      if (!read(&x)) return false;
      v.set_i(int32_t(x));
      v.kind_ = pickle::Kind::kInt;
      break;
    }
    case kLong1: {
      // As the tree reader: up to 8 bytes of little-endian two's complement.
      uint8_t n;
      if (!read(&n) || n > 8 || size_t(end_ - p_) < n) return false;
      uint64_t x = 0;
      std::memcpy(&x, p_, n);  // little-endian, as on the wire
      if (n > 0 && n < 8 && (p_[n - 1] & 0x80)) x |= ~uint64_t(0) << (8 * n);
      p_ += n;
      v.set_i(int64_t(x));
      v.kind_ = pickle::Kind::kInt;
      break;
    }
    case kBinFloat: {
      if (size_t(end_ - p_) < 8) return false;
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | p_[i];  // big-endian on the wire
      p_ += 8;
      v.set_i(int64_t(bits));
      v.kind_ = pickle::Kind::kFloat;
      break;
    }
    case kNone: v.kind_ = pickle::Kind::kNone; break;
    case kNewTrue:
      v.set_i(1);
      v.kind_ = pickle::Kind::kBool;
      break;
    case kNewFalse: v.kind_ = pickle::Kind::kBool; break;
    default: --p_; return false;  // not a scalar (or the end: -1)
  }
  ++values_;
  return memo_puts(v);
}

template <typename F>
bool FlatCursor::scalars(F&& item) {
  using namespace flat_op;
  const int op = peek();
  if (op == kEmptyList) {
    ++p_;
    if (!memo_puts(FlatValue())) return false;
    size_t i = 0;
    while (take(kMark)) {
      while (!take(kAppends)) {
        FlatValue v;
        if (!scalar(&v)) return false;
        item(i++, v);
      }
    }
    return close_container();
  }
  if (op == kEmptyTuple) {
    ++p_;
    return close_container();
  }
  if (op == kMark) {
    ++p_;
    size_t i = 0;
    while (!take(kTuple)) {
      FlatValue v;
      if (!scalar(&v)) return false;
      item(i++, v);
    }
    return close_container();
  }
  // Up to three scalars, then the TUPLE1/2/3 that makes them one value.
  FlatValue v[3];
  for (size_t n = 0; n < 3; ++n) {
    if (!scalar(&v[n])) return false;
    if (take(uint8_t(kTuple1 + n))) {
      for (size_t i = 0; i <= n; ++i) item(i, v[i]);
      return close_container();
    }
  }
  return false;
}

template <typename F>
bool FlatCursor::list(F&& item) {
  using namespace flat_op;
  if (!take(kEmptyList) || !memo_puts(FlatValue())) return false;
  // Each batch's APPENDS adds to the item below its MARK: this list, the top of the stack.
  while (take(kMark)) {
    while (!take(kAppends)) {
      const uint8_t* at = p_;
      if (!item(*this) || p_ == at) return false;
    }
  }
  return close_container();
}

template <typename F>
bool FlatCursor::dict(F&& pair) {
  using namespace flat_op;
  if (!take(kEmptyDict) || !memo_puts(FlatValue())) return false;
  while (take(kMark)) {
    while (!take(kSetItems)) {
      const uint8_t* at = p_;
      if (!pair(*this) || p_ == at) return false;
    }
  }
  return close_container();
}

// Hands the items of one list to `read` instead of building them: the list that is the value of
// the top-level dict's `key` (a dump's "entries"), at its first MARK, once. `read` consumes the list's
// batches (from just after that MARK to the last APPENDS) or returns false; the list stays in the
// tree empty (FlatTree::handed_over), and any memo slot that held it is emptied.
struct FlatListHook {
  std::string_view key;
  bool (*read)(FlatCursor& cursor, void* context);
  void* context;
};

// Reads `bytes` (which must outlive the tree) into `tree`, reusing its arrays' capacity (a worker
// reading dump after dump keeps one tree: no page faults for fresh arrays each time); false when
// the generic reader must judge them (the tree then holds nothing usable), or when `hook` gave up.
bool read_flat_pickle(std::span<const uint8_t> bytes, FlatTree& tree, const FlatListHook* hook = nullptr);

}  // namespace rankscope::torch_fr
