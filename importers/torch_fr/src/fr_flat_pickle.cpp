// fr_flat_pickle.cpp — the one-pass reader of fr_flat_pickle.h.
#include "fr_flat_pickle.h"

#include <bit>
#include <cstring>
#include <type_traits>
#include <unordered_map>

namespace rankscope::torch_fr {
namespace {

using pickle::Kind;

using namespace flat_op;

constexpr size_t kMaxInput = size_t(1) << 30;  // as the generic reader's limits

bool is_container(Kind k) { return k == Kind::kDict || k == Kind::kList || k == Kind::kTuple; }

}  // namespace

// The stack and memo of one thread, their capacity kept from dump to dump.
struct FlatReaderScratch {
  PodArray<FlatValue> stack, memo;
  PodArray<size_t> marks;
};

class FlatReader {
 public:
  FlatReader(std::span<const uint8_t> in, FlatTree* tree, FlatReaderScratch& scratch, const FlatListHook* hook)
      : in_(in), t_(tree), stack_(scratch.stack), marks_(scratch.marks), memo_(scratch.memo), hook_(hook) {
    t_->input_ = in;
    t_->handed_over_ = FlatValue();
    t_->cells_.clear();
    t_->items_.clear();
    t_->pairs_.clear();
    t_->root_ = FlatValue();
    // A dump has about one dict entry per 7 bytes and one list item per 12: grown once, if at all.
    t_->items_.reserve(in.size() / 10);
    t_->pairs_.reserve(in.size() / 6);
    t_->cells_.reserve(in.size() / 16);
    stack_.clear();
    marks_.clear();
    memo_.clear();
  }

  // The opcode loop. One switch, its cases inline: a dump is ~130K opcodes a rank.
  bool run() {
    if (in_.size() > kMaxInput) return false;
    while (pos_ < in_.size()) {
      const uint8_t op = in_[pos_++];
      switch (op) {
        case kBinGet: {
          uint8_t id;
          if (!take(&id) || !memo_get(id)) return false;
          break;
        }
        case kBinUnicode:
        case kBinBytes: {
          uint32_t n;
          if (!take(&n) || !text(n)) return false;
          break;
        }
        case kShortBinUnicode:
        case kShortBinBytes: {
          uint8_t n;
          if (!take(&n) || !text(n)) return false;
          break;
        }
        case kBinPut: {
          uint8_t id;
          if (!take(&id) || !memo_put(id)) return false;
          break;
        }
        case kLongBinPut: {
          uint32_t id;
          if (!take(&id) || !memo_put(id)) return false;
          break;
        }
        case kMemoize:
          if (!memo_put(memo_.size())) return false;
          break;
        case kLongBinGet: {
          uint32_t id;
          if (!take(&id) || !memo_get(id)) return false;
          break;
        }
        case kBinInt1: {
          uint8_t v;
          if (!take(&v)) return false;
          stack_.push_back(int_value(Kind::kInt, v));
          break;
        }
        case kBinInt2: {
          uint16_t v;
          if (!take(&v)) return false;
          stack_.push_back(int_value(Kind::kInt, v));
          break;
        }
        case kBinInt: {
          uint32_t v;
          if (!take(&v)) return false;
          stack_.push_back(int_value(Kind::kInt, int32_t(v)));
          break;
        }
        case kLong1: {
          // Up to 8 bytes of little-endian two's complement fit in int64 whatever the value; longer
          // ones are the generic reader's to judge.
          uint8_t n;
          if (!take(&n) || n > 8 || in_.size() - pos_ < n) return false;
          uint64_t x = 0;
          for (size_t i = 0; i < n; ++i) x |= uint64_t(in_[pos_ + i]) << (8 * i);
          if (n > 0 && n < 8 && (in_[pos_ + n - 1] & 0x80)) x |= ~uint64_t(0) << (8 * n);
          pos_ += n;
          stack_.push_back(int_value(Kind::kInt, int64_t(x)));
          break;
        }
        case kBinFloat: {
          if (in_.size() - pos_ < 8) return false;
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | in_[pos_ + size_t(i)];  // big-endian on the wire
          pos_ += 8;
          stack_.push_back(int_value(Kind::kFloat, int64_t(bits)));
          break;
        }
        case kNone: stack_.push_back(value_of(Kind::kNone, 0, 0)); break;
        case kNewTrue: stack_.push_back(value_of(Kind::kBool, 1, 0)); break;
        case kNewFalse: stack_.push_back(value_of(Kind::kBool, 0, 0)); break;
        case kEmptyDict: stack_.push_back(container(Kind::kDict)); break;
        case kEmptyList: stack_.push_back(container(Kind::kList)); break;
        case kEmptyTuple: stack_.push_back(container(Kind::kTuple)); break;
        case kMark:
          if (hook_ && marks_.size() == 1 && hooked_list()) [[unlikely]] {
            if (!hand_over()) return false;
            break;
          }
          marks_.push_back(stack_.size());
          break;
        case kSetItems:
        case kAppends: {
          size_t m;
          if (!pop_mark(&m) || m == 0) return false;
          const FlatValue target = stack_[m - 1];
          if (op == kSetItems ? target.kind_ != Kind::kDict : target.kind_ != Kind::kList) return false;
          if (!insert(target, m)) return false;
          break;
        }
        case kSetItem:
        case kAppend: {
          const size_t n = op == kSetItem ? 2 : 1;
          if (stack_.size() < n + 1 + (marks_.empty() ? 0 : marks_.back())) return false;
          const FlatValue target = stack_[stack_.size() - n - 1];
          if (op == kSetItem ? target.kind_ != Kind::kDict : target.kind_ != Kind::kList) return false;
          if (!insert(target, stack_.size() - n)) return false;
          break;
        }
        case kTuple: {
          size_t m;
          if (!pop_mark(&m) || !tuple_of(m)) return false;
          break;
        }
        case kTuple1:
        case kTuple2:
        case kTuple3: {
          const size_t n = size_t(op - kTuple1 + 1);
          if (stack_.size() < n + (marks_.empty() ? 0 : marks_.back())) return false;
          if (!tuple_of(stack_.size() - n)) return false;
          break;
        }
        case kBinUnicode8:
        case kBinBytes8: {
          uint64_t n;
          if (!take(&n) || !text(n)) return false;
          break;
        }
        case kPop:
          if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) return false;
          stack_.pop_back();
          break;
        case kPopMark: {
          size_t m;
          if (!pop_mark(&m)) return false;
          stack_.shrink_to(m);
          break;
        }
        case kProto: {
          uint8_t v;
          if (!take(&v) || v < 2 || v > 5) return false;
          break;
        }
        case kFrame: {
          uint64_t n;
          if (!take(&n)) return false;
          break;
        }
        case kStop: return stop();
        default:
          return false;  // globals, reduce, anything else: the generic reader's
      }
    }
    return false;  // cut before STOP: the generic reader salvages it
  }

 private:
  FlatValue value_of(Kind k, uint32_t lo, uint32_t hi) const {
    FlatValue v;
    v.set_a_b(lo, hi);
    v.kind_ = k;
    v.tree_ = t_;
    return v;
  }
  // At a MARK: whether the top of the stack is the hook's list, just made, as the value of the top
  // dict's key, its first batch about to start (stack: dict, MARK, key, value, ..., key, list).
  bool hooked_list() const {
    const size_t n = stack_.size();
    if (marks_[0] != 1 || n < 3 || (n - 1) % 2 != 0 || stack_[0].kind_ != Kind::kDict) return false;
    const FlatValue& list = stack_[n - 1];
    if (list.kind_ != Kind::kList || list.a() + 1 != t_->cells_.size() || t_->cells_[list.a()].count != 0) return false;
    const FlatValue& key = stack_[n - 2];
    return key.kind_ == Kind::kString && key.text() == hook_->key;
  }

  // The hook reads the list's batches; the list stays empty, counted as what was read.
  bool hand_over() {
    const FlatValue list = stack_.back();
    FlatCursor cursor(in_, pos_, t_, memo_);
    const bool ok = hook_->read(cursor, hook_->context);
    hook_ = nullptr;  // once
    if (!ok) return false;
    pos_ = cursor.pos();
    FlatTree::Cell& cell = t_->cells_[list.a()];
    cell.tree_size += cursor.values();
    if (cell.tree_size > kMaxTreeSize) return false;
    // The list's items are not in the tree: a memo get of it must not see it empty.
    for (size_t i = 0; i < memo_.size(); ++i)
      if (memo_[i].kind_ == Kind::kList && memo_[i].a() == list.a()) memo_[i] = FlatValue();
    t_->handed_over_ = list;
    return true;
  }

  FlatValue int_value(Kind k, int64_t i) const { return value_of(k, uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32)); }

  bool stop() {
    if (stack_.size() != 1 || !marks_.empty()) return false;
    t_->root_ = stack_[0];
    for (auto& [cell, mine] : spilled_items_) {
      t_->cells_[cell].first = uint32_t(t_->items_.size());
      t_->items_.append_bytes(mine.data(), mine.size());
    }
    for (auto& [cell, mine] : spilled_pairs_) {
      t_->cells_[cell].first = uint32_t(t_->pairs_.size());
      t_->pairs_.append_bytes(mine.data(), mine.size());
    }
    return t_->items_.size() < UINT32_MAX && t_->pairs_.size() < UINT32_MAX;
  }

  template <typename T>
  bool take(T* v) {
    if (in_.size() - pos_ < sizeof(T)) [[unlikely]] return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));  // little-endian on the wire and here (x86, arm64)
    pos_ += sizeof(T);
    return true;
  }

  FlatValue container(Kind k) {
    const FlatValue v = value_of(k, uint32_t(t_->cells_.size()), 0);
    t_->cells_.push_back({});
    return v;
  }

  bool text(uint64_t n) {
    if (n > in_.size() - pos_) [[unlikely]] return false;
    stack_.push_back(value_of(Kind::kString, uint32_t(pos_), uint32_t(n)));
    pos_ += size_t(n);
    return true;
  }

  // Appends stack[from..] to the container `target`: its range stays contiguous (moved to the end
  // of the array when something was appended after it, as when a list comes in batches).
  bool insert(const FlatValue& target, size_t from) {
    const bool dict = target.kind_ == Kind::kDict;
    if (!dict && target.kind_ != Kind::kList && target.kind_ != Kind::kTuple) return false;
    FlatTree::Cell& cell = t_->cells_[target.a()];
    if (cell.sealed) return false;
    const size_t n = stack_.size() - from;
    if (dict && n % 2) return false;
    uint64_t added = 0;
    const FlatValue* values = stack_.data() + from;
    for (size_t i = 0; i < n; ++i)
      if (is_container(values[i].kind_)) {
        if (values[i].a() == target.a()) return false;  // inside itself
        FlatTree::Cell& inner = t_->cells_[values[i].a()];
        inner.sealed = true;
        added += inner.tree_size;
      } else {
        ++added;
      }
    cell.tree_size += added;
    if (cell.tree_size > kMaxTreeSize) return false;
    // A container's first batch goes to the end of the shared array; a later batch extends it while
    // nothing came after it, and otherwise (a list built one APPEND at a time while its items' own
    // contents land in between) the container moves to a list of its own, laid out at STOP: every
    // value is copied at most twice.
    if (dict) {
      auto& pairs = t_->pairs_;
      // The stack's K V K V is the layout of n / 2 pairs.
      auto pairs_into = [&](FlatPair* out) { std::memcpy(static_cast<void*>(out), values, n * sizeof(FlatValue)); };
      // (Most dumps spill nothing: the hash is looked at only once something did.)
      auto spill = spilled_pairs_.empty() ? spilled_pairs_.end() : spilled_pairs_.find(target.a());
      if (spill == spilled_pairs_.end() && cell.count > 0 && cell.first + cell.count != pairs.size()) {
        spill = spilled_pairs_.try_emplace(target.a(), pairs.data() + cell.first, pairs.data() + cell.first + cell.count)
                    .first;
      }
      if (spill != spilled_pairs_.end()) {
        const size_t at = spill->second.size();
        spill->second.resize(at + n / 2);
        pairs_into(spill->second.data() + at);
      } else {
        if (cell.count == 0) cell.first = uint32_t(pairs.size());
        pairs_into(pairs.extend(n / 2));
      }
      cell.count += uint32_t(n / 2);
    } else {
      auto& items = t_->items_;
      auto items_into = [&](FlatValue* out) { std::memcpy(static_cast<void*>(out), values, n * sizeof(FlatValue)); };
      auto spill = spilled_items_.empty() ? spilled_items_.end() : spilled_items_.find(target.a());
      if (spill == spilled_items_.end() && cell.count > 0 && cell.first + cell.count != items.size()) {
        spill = spilled_items_.try_emplace(target.a(), items.data() + cell.first, items.data() + cell.first + cell.count)
                    .first;
      }
      if (spill != spilled_items_.end()) {
        const size_t at = spill->second.size();
        spill->second.resize(at + n);
        items_into(spill->second.data() + at);
      } else {
        if (cell.count == 0) cell.first = uint32_t(items.size());
        items_into(items.extend(n));
      }
      cell.count += uint32_t(n);
    }
    if (t_->items_.size() > UINT32_MAX / 2 || t_->pairs_.size() > UINT32_MAX / 2) return false;
    stack_.shrink_to(from);
    return true;
  }

  bool tuple_of(size_t from) {
    const FlatValue t = container(Kind::kTuple);
    if (!insert(t, from)) return false;
    stack_.push_back(t);
    return true;
  }

  bool pop_mark(size_t* m) {
    if (marks_.empty()) return false;
    *m = marks_.back();
    marks_.pop_back();
    return true;
  }

  bool memo_put(uint64_t id) {
    if (stack_.empty() || id > memo_.size() + 1024 || id >= kMaxMemo) return false;
    if (id == memo_.size()) {  // as PyTorch's pickler numbers them: the next one
      memo_.push_back(stack_.back());
      return true;
    }
    if (id > memo_.size()) memo_.grow_to(size_t(id) + 1, FlatValue());  // slots never put: no tree
    memo_[size_t(id)] = stack_.back();
    return true;
  }

  bool memo_get(uint64_t id) {
    if (id >= memo_.size() || !memo_[size_t(id)].tree_) [[unlikely]] return false;
    stack_.push_back(memo_[size_t(id)]);
    return true;
  }

  std::span<const uint8_t> in_;
  FlatTree* t_;
  size_t pos_ = 0;
  PodArray<FlatValue>& stack_;
  PodArray<size_t>& marks_;
  PodArray<FlatValue>& memo_;
  const FlatListHook* hook_;  // null once used
  std::unordered_map<uint32_t, std::vector<FlatValue>> spilled_items_;
  std::unordered_map<uint32_t, std::vector<FlatPair>> spilled_pairs_;
};

std::optional<double> FlatValue::as_double() const {
  if (kind_ == Kind::kFloat) return std::bit_cast<double>(uint64_t(i()));
  if (kind_ == Kind::kInt) return double(i());
  return std::nullopt;
}

const FlatValue* FlatValue::find(std::string_view key) const {
  for (const auto& [k, v] : entries())
    if (auto t = k.text(); t && *t == key) return &v;
  return nullptr;
}

bool FlatCursor::skip_container(int depth) {
  if (depth > kMaxDepth) return false;
  switch (peek()) {
    case kEmptyList: return list([&](FlatCursor& c) { return c.skip_value(depth + 1); });
    case kEmptyDict: return dict([&](FlatCursor& c) { return c.skip_value(depth + 1) && c.skip_value(depth + 1); });
    case kEmptyTuple: ++p_; return close_container();
    case kMark:
      ++p_;
      while (!take(kTuple))
        if (!skip_value(depth + 1)) return false;
      return close_container();
    default: return false;  // skip_value's
  }
}

bool read_flat_pickle(std::span<const uint8_t> bytes, FlatTree& tree, const FlatListHook* hook) {
  thread_local FlatReaderScratch scratch;
  FlatReader reader(bytes, &tree, scratch, hook);
  return reader.run();
}

}  // namespace rankscope::torch_fr
