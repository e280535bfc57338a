// fr_flat_pickle.cpp — the one-pass reader of fr_flat_pickle.h.
#include "fr_flat_pickle.h"

#include <bit>
#include <cstring>
#include <unordered_map>

namespace rankscope::torch_fr {
namespace {

using pickle::Kind;

// Opcodes, by their names in CPython's Lib/pickletools.py (the subset plain data uses).
enum : uint8_t {
  kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kBinFloat = 'G', kBinInt = 'J', kBinInt1 = 'K',
  kBinInt2 = 'M', kNone = 'N', kBinUnicode = 'X', kBinBytes = 'B', kShortBinBytes = 'C', kAppend = 'a',
  kAppends = 'e', kBinGet = 'h', kLongBinGet = 'j', kEmptyList = ']', kBinPut = 'q', kLongBinPut = 'r',
  kSetItem = 's', kTuple = 't', kSetItems = 'u', kEmptyDict = '}', kEmptyTuple = ')', kProto = 0x80,
  kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88, kNewFalse = 0x89, kLong1 = 0x8a,
  kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kMemoize = 0x94, kFrame = 0x95,
};

constexpr size_t kMaxInput = size_t(1) << 30;  // as the generic reader's limits
constexpr size_t kMaxMemo = size_t(16) << 20;
// As the generic reader: a few bytes of memo references must not describe billions of entries.
constexpr uint64_t kMaxTreeSize = uint64_t(1) << 26;

}  // namespace

class FlatReader {
 public:
  FlatReader(std::span<const uint8_t> in, FlatTree* tree) : in_(in), t_(tree) {
    t_->input_ = in;
    t_->cells_.clear();
    t_->items_.clear();
    t_->pairs_.clear();
    t_->root_ = FlatValue();
    // A dump has about one dict entry per 7 bytes and one list item per 12: grown once, if at all.
    t_->items_.reserve(in.size() / 10);
    t_->pairs_.reserve(in.size() / 6);
    t_->cells_.reserve(in.size() / 16);
    stack_.reserve(64);
  }

  bool run() {
    if (in_.size() > kMaxInput) return false;
    while (pos_ < in_.size()) {
      const uint8_t op = in_[pos_++];
      if (op == kStop) {
        if (stack_.size() != 1 || !marks_.empty()) return false;
        t_->root_ = stack_.back();
        for (auto& [cell, mine] : spilled_items_) {
          t_->cells_[cell].first = uint32_t(t_->items_.size());
          t_->items_.insert(t_->items_.end(), mine.begin(), mine.end());
        }
        for (auto& [cell, mine] : spilled_pairs_) {
          t_->cells_[cell].first = uint32_t(t_->pairs_.size());
          t_->pairs_.insert(t_->pairs_.end(), mine.begin(), mine.end());
        }
        return t_->items_.size() < UINT32_MAX && t_->pairs_.size() < UINT32_MAX;
      }
      if (!step(op)) return false;
    }
    return false;  // cut before STOP: the generic reader salvages it
  }

 private:
  template <typename T>
  bool take(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));  // little-endian on the wire and here (x86, arm64)
    pos_ += sizeof(T);
    return true;
  }

  FlatValue scalar(Kind k, int64_t i) {
    FlatValue v;
    v.kind_ = k;
    v.set_i(i);
    v.tree_ = t_;
    return v;
  }

  FlatValue container(Kind k) {
    FlatValue v;
    v.kind_ = k;
    v.set_a_b(uint32_t(t_->cells_.size()), 0);
    v.tree_ = t_;
    t_->cells_.push_back({});
    return v;
  }

  bool text(uint64_t n) {
    if (n > in_.size() - pos_) return false;
    FlatValue v;
    v.kind_ = Kind::kString;
    v.set_a_b(uint32_t(pos_), uint32_t(n));
    v.tree_ = t_;
    pos_ += size_t(n);
    stack_.push_back(v);
    return true;
  }

  // Appends stack_[from..] to the container `target`: its range stays contiguous (moved to the end
  // of the array when something was appended after it, as when a list comes in batches).
  bool insert(const FlatValue& target, size_t from) {
    const bool dict = target.kind_ == Kind::kDict;
    if (!dict && target.kind_ != Kind::kList && target.kind_ != Kind::kTuple) return false;
    FlatTree::Cell& cell = t_->cells_[target.a()];
    if (cell.sealed) return false;
    const size_t n = stack_.size() - from;
    if (dict && n % 2) return false;
    uint64_t added = 0;
    for (size_t i = from; i < stack_.size(); ++i)
      if (stack_[i].kind_ == Kind::kDict || stack_[i].kind_ == Kind::kList || stack_[i].kind_ == Kind::kTuple) {
        if (stack_[i].a() == target.a()) return false;  // inside itself
        t_->cells_[stack_[i].a()].sealed = true;
        added += t_->cells_[stack_[i].a()].tree_size;
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
      // (Most dumps spill nothing: the hash is looked at only once something did.)
      if (auto spill = spilled_pairs_.empty() ? spilled_pairs_.end() : spilled_pairs_.find(target.a());
          spill != spilled_pairs_.end()) {
        for (size_t i = from; i + 1 < stack_.size(); i += 2) spill->second.emplace_back(stack_[i], stack_[i + 1]);
      } else if (cell.count > 0 && cell.first + cell.count != pairs.size()) {
        auto& mine = spilled_pairs_[target.a()];
        mine.assign(pairs.begin() + cell.first, pairs.begin() + cell.first + cell.count);
        for (size_t i = from; i + 1 < stack_.size(); i += 2) mine.emplace_back(stack_[i], stack_[i + 1]);
      } else {
        if (cell.count == 0) cell.first = uint32_t(pairs.size());
        for (size_t i = from; i + 1 < stack_.size(); i += 2) pairs.emplace_back(stack_[i], stack_[i + 1]);
      }
      cell.count += uint32_t(n / 2);
    } else {
      auto& items = t_->items_;
      if (auto spill = spilled_items_.empty() ? spilled_items_.end() : spilled_items_.find(target.a());
          spill != spilled_items_.end()) {
        spill->second.insert(spill->second.end(), stack_.begin() + std::ptrdiff_t(from), stack_.end());
      } else if (cell.count > 0 && cell.first + cell.count != items.size()) {
        auto& mine = spilled_items_[target.a()];
        mine.assign(items.begin() + cell.first, items.begin() + cell.first + cell.count);
        mine.insert(mine.end(), stack_.begin() + std::ptrdiff_t(from), stack_.end());
      } else {
        if (cell.count == 0) cell.first = uint32_t(items.size());
        items.insert(items.end(), stack_.begin() + std::ptrdiff_t(from), stack_.end());
      }
      cell.count += uint32_t(n);
    }
    if (t_->items_.size() > UINT32_MAX / 2 || t_->pairs_.size() > UINT32_MAX / 2) return false;
    stack_.resize(from);
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
    if (id >= memo_.size()) {
      memo_.resize(size_t(id) + 1);
      set_.resize(size_t(id) + 1, 0);
    }
    memo_[size_t(id)] = stack_.back();
    set_[size_t(id)] = 1;
    return true;
  }

  bool memo_get(uint64_t id) {
    if (id >= memo_.size() || !set_[size_t(id)]) return false;
    stack_.push_back(memo_[size_t(id)]);
    return true;
  }

  bool step(uint8_t op) {
    switch (op) {
      case kProto: {
        uint8_t v;
        return take(&v) && v >= 2 && v <= 5;
      }
      case kFrame: {
        uint64_t n;
        return take(&n);
      }
      case kMark:
        marks_.push_back(stack_.size());
        return true;
      case kPop:
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) return false;
        stack_.pop_back();
        return true;
      case kPopMark: {
        size_t m;
        if (!pop_mark(&m)) return false;
        stack_.resize(m);
        return true;
      }
      case kEmptyDict: stack_.push_back(container(Kind::kDict)); return true;
      case kEmptyList: stack_.push_back(container(Kind::kList)); return true;
      case kEmptyTuple: stack_.push_back(container(Kind::kTuple)); return true;
      case kNone: stack_.push_back(scalar(Kind::kNone, 0)); return true;
      case kNewTrue: stack_.push_back(scalar(Kind::kBool, 1)); return true;
      case kNewFalse: stack_.push_back(scalar(Kind::kBool, 0)); return true;
      case kSetItems:
      case kAppends: {
        size_t m;
        if (!pop_mark(&m) || m == 0) return false;
        const FlatValue target = stack_[m - 1];
        if (op == kSetItems ? target.kind_ != Kind::kDict : target.kind_ != Kind::kList) return false;
        return insert(target, m);
      }
      case kSetItem:
      case kAppend: {
        const size_t n = op == kSetItem ? 2 : 1;
        if (stack_.size() < n + 1 + (marks_.empty() ? 0 : marks_.back())) return false;
        const FlatValue target = stack_[stack_.size() - n - 1];
        if (op == kSetItem ? target.kind_ != Kind::kDict : target.kind_ != Kind::kList) return false;
        return insert(target, stack_.size() - n);
      }
      case kTuple: {
        size_t m;
        return pop_mark(&m) && tuple_of(m);
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = size_t(op - kTuple1 + 1);
        if (stack_.size() < n + (marks_.empty() ? 0 : marks_.back())) return false;
        return tuple_of(stack_.size() - n);
      }
      case kBinUnicode:
      case kBinBytes: {
        uint32_t n;
        return take(&n) && text(n);
      }
      case kShortBinUnicode:
      case kShortBinBytes: {
        uint8_t n;
        return take(&n) && text(n);
      }
      case kBinUnicode8:
      case kBinBytes8: {
        uint64_t n;
        return take(&n) && text(n);
      }
      case kBinInt1: {
        uint8_t v;
        if (!take(&v)) return false;
        stack_.push_back(scalar(Kind::kInt, v));
        return true;
      }
      case kBinInt2: {
        uint16_t v;
        if (!take(&v)) return false;
        stack_.push_back(scalar(Kind::kInt, v));
        return true;
      }
      case kBinInt: {
        uint32_t v;
        if (!take(&v)) return false;
        stack_.push_back(scalar(Kind::kInt, int32_t(v)));
        return true;
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
        stack_.push_back(scalar(Kind::kInt, int64_t(x)));
        return true;
      }
      case kBinFloat: {
        if (in_.size() - pos_ < 8) return false;
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | in_[pos_ + size_t(i)];  // big-endian on the wire
        pos_ += 8;
        stack_.push_back(scalar(Kind::kFloat, int64_t(bits)));
        return true;
      }
      case kBinPut: {
        uint8_t id;
        return take(&id) && memo_put(id);
      }
      case kLongBinPut: {
        uint32_t id;
        return take(&id) && memo_put(id);
      }
      case kMemoize: return memo_put(memo_.size());
      case kBinGet: {
        uint8_t id;
        return take(&id) && memo_get(id);
      }
      case kLongBinGet: {
        uint32_t id;
        return take(&id) && memo_get(id);
      }
      default:
        return false;  // globals, reduce, anything else: the generic reader's
    }
  }

  std::span<const uint8_t> in_;
  FlatTree* t_;
  size_t pos_ = 0;
  std::vector<FlatValue> stack_;
  std::vector<size_t> marks_;
  std::vector<FlatValue> memo_;
  std::vector<uint8_t> set_;
  std::unordered_map<uint32_t, std::vector<FlatValue>> spilled_items_;
  std::unordered_map<uint32_t, std::vector<std::pair<FlatValue, FlatValue>>> spilled_pairs_;
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

bool read_flat_pickle(std::span<const uint8_t> bytes, FlatTree& tree) {
  FlatReader reader(bytes, &tree);
  return reader.run();
}

}  // namespace rankscope::torch_fr
