// unpickler.cpp — the bounded plain-data pickle reader (see unpickler.h for what it accepts).
//
// Shape: one pass over the bytes; a value stack, a mark stack (indices into the value stack) and a
// memo (id -> Value). Each opcode is read whole before it changes any state, so when the bytes run
// out the stacks hold only complete values and can be salvaged.
#include "rankscope/pickle/unpickler.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

namespace rankscope::pickle {
namespace {

// Opcodes, by their names in CPython's Lib/pickletools.py.
enum : uint8_t {
  kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kBinFloat = 'G', kBinInt = 'J', kBinInt1 = 'K',
  kBinInt2 = 'M', kNone = 'N', kReduce = 'R', kBinUnicode = 'X', kBinBytes = 'B', kShortBinBytes = 'C',
  kAppend = 'a', kGlobal = 'c', kAppends = 'e', kBinGet = 'h', kLongBinGet = 'j', kEmptyList = ']',
  kBinPut = 'q', kLongBinPut = 'r', kSetItem = 's', kTuple = 't', kSetItems = 'u', kEmptyDict = '}',
  kEmptyTuple = ')', kProto = 0x80, kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88,
  kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b, kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e, kStackGlobal = 0x93, kMemoize = 0x94, kFrame = 0x95,
};

// The only callables a pickle may name: torch.jit's specialised-list builders, whose single
// argument is the list itself.
bool is_list_builder(std::string_view module, std::string_view name) {
  return module == "torch.jit._pickle" &&
         (name == "build_intlist" || name == "build_doublelist" || name == "build_boollist");
}

struct OutOfBytes {};  // internal signal: the input ended inside an opcode

class Unpickler {
 public:
  Unpickler(std::span<const uint8_t> bytes, const UnpickleLimits& limits) : in_(bytes), limits_(limits) {}

  Result<Unpickled> run() {
    Unpickled out;
    while (true) {
      if (pos_ >= in_.size()) return salvage(std::move(out));
      op_start_ = pos_;
      const uint8_t op = in_[pos_++];
      Status s = step(op, out);
      if (stopped_) {
        if (!s.ok()) return s;
        if (stack_.empty()) return corrupt(fmt::format("pickle: STOP at byte {} with nothing on the stack", op_start_));
        out.root = stack_.back();
        return out;
      }
      if (!s.ok()) {
        if (ran_out_) {
          pos_ = in_.size();
          return salvage(std::move(out));
        }
        return s;
      }
    }
  }

 private:
  Status err(const std::string& what) const {
    return corrupt(fmt::format("pickle: {} (opcode 0x{:02x} at byte {})", what, in_[op_start_], op_start_));
  }
  Status out_of_bytes() {
    ran_out_ = true;
    return corrupt("pickle: input ends inside an opcode");
  }

  // Each reader returns false when the input ends first; the caller returns out_of_bytes().
  bool take(size_t n, const uint8_t** p) {
    if (in_.size() - pos_ < n) return false;
    *p = in_.data() + pos_;
    pos_ += n;
    return true;
  }
  template <class T>
  bool take_le(T* v) {
    const uint8_t* p;
    if (!take(sizeof(T), &p)) return false;
    T x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x |= T(p[i]) << (8 * i);
    *v = x;
    return true;
  }
  bool take_line(std::string* line) {
    const size_t max_line = 256;
    for (size_t i = pos_; i < in_.size() && i - pos_ <= max_line; ++i) {
      if (in_[i] == '\n') {
        line->assign(reinterpret_cast<const char*>(in_.data() + pos_), i - pos_);
        pos_ = i + 1;
        return true;
      }
    }
    return false;
  }

  Status push(Value v) {
    stack_.push_back(std::move(v));
    return Status::ok_status();
  }
  Status need(size_t n) const {
    if (stack_.size() < n + (marks_.empty() ? 0 : marks_.back())) return err("stack underflow");
    return Status::ok_status();
  }
  Result<size_t> pop_mark() {
    if (marks_.empty()) return err("no MARK to close");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  // Puts `items` into `target` (a list/tuple: appended; a dict: taken as key,value pairs).
  Status insert(Value& target, std::span<const Value> items) {
    Node* node = target.node();
    if (!node || !(target.is_sequence() || target.is_dict())) {
      return err(fmt::format("cannot add items to a {}", kind_name(target.kind())));
    }
    if (target.is_dict() && items.size() % 2 != 0) return err("odd number of items for a dict");
    for (const Value& item : items) {
      if (item.node()) item.node()->sealed = true;
    }
    // Sealing first makes "a container inside itself" fail here too.
    if (node->sealed) return err("a container is changed after it was put inside another (a cycle?)");
    for (const Value& item : items) {
      if (item.node() && item.kind() != Kind::kString) {
        node->height = std::max(node->height, item.height() + 1);
      }
      node->tree_size += item.tree_size();
    }
    if (node->height > limits_.max_depth) return err(fmt::format("nesting deeper than {}", limits_.max_depth));
    if (node->tree_size > limits_.max_tree_size) {
      return err(fmt::format("the value would expand to more than {} values", limits_.max_tree_size));
    }
    if (target.is_dict()) {
      for (size_t i = 0; i + 1 < items.size(); i += 2) node->entries.emplace_back(items[i], items[i + 1]);
    } else {
      node->items.insert(node->items.end(), items.begin(), items.end());
    }
    return Status::ok_status();
  }

  Status make_tuple(size_t first) {
    Value t = Value::container(Kind::kTuple);
    RS_RETURN_IF_ERROR(insert(t, std::span<const Value>(stack_).subspan(first)));
    stack_.resize(first);
    return push(std::move(t));
  }

  Status memo_put(uint64_t id) {
    if (stack_.empty()) return err("memo put with an empty stack");
    if (memo_.size() >= limits_.max_memo_entries && !memo_.count(id)) {
      return err(fmt::format("more than {} memo entries", limits_.max_memo_entries));
    }
    memo_[id] = stack_.back();
    return Status::ok_status();
  }
  Status memo_get(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) return err(fmt::format("memo id {} was never stored", id));
    return push(it->second);
  }

  Status text(uint64_t n) {
    const uint8_t* p;
    if (n > in_.size()) return err(fmt::format("string of {} bytes in a {}-byte input", n, in_.size()));
    if (!take(size_t(n), &p)) return out_of_bytes();
    return push(Value::string(std::string(reinterpret_cast<const char*>(p), size_t(n))));
  }

  // LONG1/LONG4: little-endian two's complement of n bytes; must fit int64.
  Status long_int(uint64_t n) {
    const uint8_t* p;
    if (n > in_.size()) return err(fmt::format("integer of {} bytes in a {}-byte input", n, in_.size()));
    if (!take(size_t(n), &p)) return out_of_bytes();
    if (n == 0) return push(Value::integer(0));
    const bool negative = p[n - 1] & 0x80;
    for (size_t i = 8; i < n; ++i) {
      if (p[i] != (negative ? 0xff : 0x00)) return err("integer does not fit in 64 bits");
    }
    uint64_t x = negative ? ~uint64_t(0) : 0;
    for (size_t i = 0; i < std::min<uint64_t>(n, 8); ++i) {
      x &= ~(uint64_t(0xff) << (8 * i));
      x |= uint64_t(p[i]) << (8 * i);
    }
    if (n >= 8 && (n > 8 && bool(x >> 63) != negative)) return err("integer does not fit in 64 bits");
    return push(Value::integer(int64_t(x)));
  }

  Status global(const std::string& module, const std::string& name) {
    if (!is_list_builder(module, name)) {
      return err(fmt::format("refuses global {}.{} (a data file never runs code)", module, name));
    }
    Value v = Value::string(module + "." + name);
    builders_.insert(v.node());
    return push(std::move(v));
  }

  Status step(uint8_t op, Unpickled& out) {
    switch (op) {
      case kProto: {
        uint8_t v;
        if (!take_le(&v)) return out_of_bytes();
        if (v < 2 || v > 5) return err(fmt::format("protocol {} is not read (2 to 5 are)", v));
        out.protocol = v;
        return Status::ok_status();
      }
      case kFrame: {
        uint64_t n;
        if (!take_le(&n)) return out_of_bytes();
        return Status::ok_status();  // framing is only a read-ahead hint
      }
      case kStop:
        stopped_ = true;
        return Status::ok_status();
      case kMark:
        marks_.push_back(stack_.size());
        return Status::ok_status();
      case kPop:
        RS_RETURN_IF_ERROR(need(1));
        stack_.pop_back();
        return Status::ok_status();
      case kPopMark: {
        RS_ASSIGN_OR_RETURN(const size_t m, pop_mark());
        stack_.resize(m);
        return Status::ok_status();
      }
      case kEmptyDict: return push(Value::container(Kind::kDict));
      case kEmptyList: return push(Value::container(Kind::kList));
      case kEmptyTuple: return push(Value::container(Kind::kTuple));
      case kNone: return push(Value());
      case kNewTrue: return push(Value::boolean(true));
      case kNewFalse: return push(Value::boolean(false));
      case kSetItems:
      case kAppends: {
        RS_ASSIGN_OR_RETURN(const size_t m, pop_mark());
        if (m == 0) return err("no container under the MARK");
        RS_RETURN_IF_ERROR(insert(stack_[m - 1], std::span<const Value>(stack_).subspan(m)));
        if (op == kSetItems && !stack_[m - 1].is_dict()) return err("SETITEMS on a non-dict");
        if (op == kAppends && stack_[m - 1].kind() != Kind::kList) return err("APPENDS on a non-list");
        stack_.resize(m);
        return Status::ok_status();
      }
      case kSetItem:
      case kAppend: {
        const size_t n = op == kSetItem ? 2 : 1;
        RS_RETURN_IF_ERROR(need(n + 1));
        Value& target = stack_[stack_.size() - n - 1];
        if (op == kSetItem ? !target.is_dict() : target.kind() != Kind::kList) {
          return err(fmt::format("{} on a {}", op == kSetItem ? "SETITEM" : "APPEND", kind_name(target.kind())));
        }
        RS_RETURN_IF_ERROR(insert(target, std::span<const Value>(stack_).subspan(stack_.size() - n)));
        stack_.resize(stack_.size() - n);
        return Status::ok_status();
      }
      case kTuple: {
        RS_ASSIGN_OR_RETURN(const size_t m, pop_mark());
        return make_tuple(m);
      }
      case kTuple1:
      case kTuple2:
      case kTuple3: {
        const size_t n = size_t(op - kTuple1 + 1);
        RS_RETURN_IF_ERROR(need(n));
        return make_tuple(stack_.size() - n);
      }
      case kBinUnicode:
      case kBinBytes: {
        uint32_t n;
        if (!take_le(&n)) return out_of_bytes();
        return text(n);
      }
      case kShortBinUnicode:
      case kShortBinBytes: {
        uint8_t n;
        if (!take_le(&n)) return out_of_bytes();
        return text(n);
      }
      case kBinUnicode8:
      case kBinBytes8: {
        uint64_t n;
        if (!take_le(&n)) return out_of_bytes();
        return text(n);
      }
      case kBinInt1: {
        uint8_t v;
        if (!take_le(&v)) return out_of_bytes();
        return push(Value::integer(v));
      }
      case kBinInt2: {
        uint16_t v;
        if (!take_le(&v)) return out_of_bytes();
        return push(Value::integer(v));
      }
      case kBinInt: {
        uint32_t v;
        if (!take_le(&v)) return out_of_bytes();
        return push(Value::integer(int32_t(v)));
      }
      case kLong1: {
        uint8_t n;
        if (!take_le(&n)) return out_of_bytes();
        return long_int(n);
      }
      case kLong4: {
        uint32_t n;
        if (!take_le(&n)) return out_of_bytes();
        return long_int(n);
      }
      case kBinFloat: {
        const uint8_t* p;
        if (!take(8, &p)) return out_of_bytes();
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];  // big-endian on the wire
        return push(Value::floating(std::bit_cast<double>(bits)));
      }
      case kBinPut: {
        uint8_t id;
        if (!take_le(&id)) return out_of_bytes();
        return memo_put(id);
      }
      case kLongBinPut: {
        uint32_t id;
        if (!take_le(&id)) return out_of_bytes();
        return memo_put(id);
      }
      case kMemoize: return memo_put(memo_.size());
      case kBinGet: {
        uint8_t id;
        if (!take_le(&id)) return out_of_bytes();
        return memo_get(id);
      }
      case kLongBinGet: {
        uint32_t id;
        if (!take_le(&id)) return out_of_bytes();
        return memo_get(id);
      }
      case kGlobal: {
        std::string module, name;
        if (!take_line(&module) || !take_line(&name)) {
          if (pos_ >= in_.size() || in_.size() - op_start_ < 520) return out_of_bytes();
          return err("GLOBAL name too long");
        }
        return global(module, name);
      }
      case kStackGlobal: {
        RS_RETURN_IF_ERROR(need(2));
        const std::string* module = stack_[stack_.size() - 2].as_string();
        const std::string* name = stack_.back().as_string();
        if (!module || !name) return err("STACK_GLOBAL needs two strings");
        const std::string m = *module, n = *name;
        stack_.resize(stack_.size() - 2);
        return global(m, n);
      }
      case kReduce: {
        RS_RETURN_IF_ERROR(need(2));
        const Value args = stack_.back();
        const Value callable = stack_[stack_.size() - 2];
        if (!builders_.count(callable.node())) return err("REDUCE of something that is not a list builder");
        if (args.kind() != Kind::kTuple || args.items().size() != 1 || args.items()[0].kind() != Kind::kList) {
          return err("a list builder takes one list");
        }
        stack_.resize(stack_.size() - 2);
        return push(args.items()[0]);
      }
      default:
        return err("unknown or refused opcode");
    }
  }

  // The input ended before STOP: close every open container with what it had, outermost value wins.
  Result<Unpickled> salvage(Unpickled out) {
    out.truncated = true;
    // Partial: every container a MARK was opened over, and an empty container on top (its MARK or
    // first item may be what was cut off).
    auto flag = [](Value& v) {
      if (v.node() && (v.is_dict() || v.kind() == Kind::kList)) v.node()->partial = true;
    };
    for (size_t m : marks_) {
      if (m > 0) flag(stack_[m - 1]);
    }
    if (!stack_.empty() && stack_.back().items().empty() && stack_.back().entries().empty()) flag(stack_.back());
    while (!marks_.empty()) {
      const size_t m = marks_.back();
      marks_.pop_back();
      if (m > 0 && (stack_[m - 1].is_dict() || stack_[m - 1].kind() == Kind::kList) &&
          !stack_[m - 1].node()->sealed) {
        std::span<const Value> items = std::span<const Value>(stack_).subspan(m);
        if (stack_[m - 1].is_dict() && items.size() % 2) items = items.first(items.size() - 1);
        if (!insert(stack_[m - 1], items).ok()) return corrupt("pickle: truncated and unreadable");
      }
      stack_.resize(m);
    }
    if (stack_.empty() || !stack_.front().node() || stack_.front().kind() == Kind::kString) {
      return corrupt(fmt::format("pickle: truncated at byte {} before any container was complete enough to read",
                                 in_.size()));
    }
    out.root = stack_.front();
    return out;
  }

  std::span<const uint8_t> in_;
  const UnpickleLimits& limits_;
  size_t pos_ = 0;
  size_t op_start_ = 0;
  bool stopped_ = false;
  bool ran_out_ = false;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  std::unordered_set<const Node*> builders_;
};

}  // namespace

Result<Unpickled> unpickle(std::span<const uint8_t> bytes, const UnpickleLimits& limits) {
  if (bytes.size() > limits.max_input_bytes) {
    return corrupt(fmt::format("pickle: {} bytes is over the {}-byte limit", bytes.size(), limits.max_input_bytes));
  }
  if (bytes.empty()) return corrupt("pickle: empty input");
  return Unpickler(bytes, limits).run();
}

Result<Unpickled> unpickle_file(const std::filesystem::path& path, const UnpickleLimits& limits) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return not_found(fmt::format("{}: {}", path.string(), ec.message()));
  if (size > limits.max_input_bytes) {
    return corrupt(fmt::format("{}: {} bytes is over the {}-byte limit", path.string(), size, limits.max_input_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("{}: cannot open", path.string()));
  std::vector<uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  bytes.resize(size_t(in.gcount()));
  auto r = unpickle(bytes, limits);
  if (!r.ok()) r.mutable_status().prefix(path.string());
  return r;
}

}  // namespace rankscope::pickle
