// torch_style_pickler.h — test utility: writes a pickle::Value with the opcode choices of PyTorch's
// torch::jit::Pickler as used for Flight Recorder dumps (protocol 2, every distinct string memoized
// with BINPUT/LONG_BINPUT and repeated with BINGET/LONG_BINGET, shared containers memoized by
// identity after they close, ints by size class, LONG1 with 8 bytes, big-endian BINFLOAT).
// Is not: a general pickler; it writes only what FR dumps contain. Also builders for test values.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rankscope/pickle/value.h"

namespace rankscope::pickle::testing {

inline Value str(std::string s) { return Value::string(std::move(s)); }
inline Value num(int64_t i) { return Value::integer(i); }
inline Value list(std::initializer_list<Value> items) {
  Value v = Value::container(Kind::kList);
  v.node()->items.assign(items);
  return v;
}
inline Value tuple(std::initializer_list<Value> items) {
  Value v = Value::container(Kind::kTuple);
  v.node()->items.assign(items);
  return v;
}
inline Value dict(std::initializer_list<std::pair<std::string, Value>> entries) {
  Value v = Value::container(Kind::kDict);
  for (const auto& [k, val] : entries) v.node()->entries.emplace_back(str(k), val);
  return v;
}
inline void dict_set(Value& d, const std::string& key, Value v) { d.node()->entries.emplace_back(str(key), std::move(v)); }
inline void list_push(Value& l, Value v) { l.node()->items.push_back(std::move(v)); }

class TorchStylePickler {
 public:
  std::vector<uint8_t> write(const Value& root) {
    out_.clear();
    count_refs(root);
    out_ = {0x80, 0x02};
    emit(root);
    out_.push_back('.');
    return out_;
  }

 private:
  void count_refs(const Value& v) {
    if (!v.node() || v.kind() == Kind::kString) return;
    if (refs_[v.node()]++ > 0) return;
    for (const auto& i : v.node()->items) count_refs(i);
    for (const auto& [k, x] : v.node()->entries) {
      count_refs(k);
      count_refs(x);
    }
  }
  void u32(uint32_t x) {
    for (int i = 0; i < 4; ++i) out_.push_back(uint8_t(x >> (8 * i)));
  }
  void put(uint32_t id) {
    if (id < 256) {
      out_.push_back('q');
      out_.push_back(uint8_t(id));
    } else {
      out_.push_back('r');
      u32(id);
    }
  }
  void get(uint32_t id) {
    if (id < 256) {
      out_.push_back('h');
      out_.push_back(uint8_t(id));
    } else {
      out_.push_back('j');
      u32(id);
    }
  }
  void emit(const Value& v) {
    switch (v.kind()) {
      case Kind::kNone: out_.push_back('N'); return;
      case Kind::kBool: out_.push_back(*v.as_bool() ? 0x88 : 0x89); return;
      case Kind::kInt: {
        const int64_t i = *v.as_int();
        if (i >= 0 && i <= 255) {
          out_.insert(out_.end(), {'K', uint8_t(i)});
        } else if (i >= 256 && i <= 65535) {
          out_.insert(out_.end(), {'M', uint8_t(i), uint8_t(i >> 8)});
        } else if (i >= INT32_MIN && i <= INT32_MAX) {
          out_.push_back('J');
          u32(uint32_t(int32_t(i)));
        } else {
          out_.insert(out_.end(), {0x8a, 8});
          for (int b = 0; b < 8; ++b) out_.push_back(uint8_t(uint64_t(i) >> (8 * b)));
        }
        return;
      }
      case Kind::kFloat: {
        uint64_t bits;
        const double d = *v.as_double();
        std::memcpy(&bits, &d, 8);
        out_.push_back('G');
        for (int b = 7; b >= 0; --b) out_.push_back(uint8_t(bits >> (8 * b)));
        return;
      }
      case Kind::kString: {
        const std::string& s = *v.as_string();
        if (auto it = strings_.find(s); it != strings_.end()) return get(it->second);
        out_.push_back('X');
        u32(uint32_t(s.size()));
        out_.insert(out_.end(), s.begin(), s.end());
        strings_[s] = next_id_;
        return put(next_id_++);
      }
      default: break;
    }
    if (auto it = shared_.find(v.node()); it != shared_.end()) return get(it->second);
    if (v.kind() == Kind::kTuple) {
      const auto& items = v.items();
      if (items.empty()) {
        out_.push_back(')');
      } else if (items.size() <= 3) {
        for (const auto& i : items) emit(i);
        out_.push_back(uint8_t(0x85 + items.size() - 1));
      } else {
        out_.push_back('(');
        for (const auto& i : items) emit(i);
        out_.push_back('t');
      }
    } else if (v.kind() == Kind::kList) {
      out_.insert(out_.end(), {']', '('});
      for (const auto& i : v.items()) emit(i);
      out_.push_back('e');
    } else {
      out_.insert(out_.end(), {'}', '('});
      for (const auto& [k, x] : v.entries()) {
        emit(k);
        emit(x);
      }
      out_.push_back('u');
    }
    if (refs_[v.node()] > 1) {
      shared_[v.node()] = next_id_;
      put(next_id_++);
    }
  }

  std::vector<uint8_t> out_;
  std::map<std::string, uint32_t> strings_;
  std::map<const Node*, int> refs_;
  std::map<const Node*, uint32_t> shared_;
  uint32_t next_id_ = 0;
};

}  // namespace rankscope::pickle::testing
