// value.h — a decoded pickle value: None, bool, int64, double, string, list, tuple or ordered dict.
//
// Is: the tree a plain-data pickle describes, with strings and containers held by shared pointer, so
// a memo reference (BINGET) costs one pointer however large the referenced value is — a hostile file
// cannot multiply memory by referencing one big value many times. Is not: a Python object model
// (no classes, no bytes-vs-str distinction: bytes are read as strings), nor mutable by its users.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rankscope::pickle {

enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };

const char* kind_name(Kind kind);

class Value;

// The shared body of a string or a container. Only the unpickler builds these.
struct Node {
  std::string text;                                 // kString
  std::vector<Value> items;                         // kList, kTuple
  std::vector<std::pair<Value, Value>> entries;     // kDict, in insertion order
  int height = 0;         // nesting depth below this node (0 for a string or an empty container)
  uint64_t tree_size = 1; // values a full walk visits, shared children counted each time they appear
  bool sealed = false;    // inserted into another container: never mutated again (so no cycles)
  bool partial = false;   // the file ended while this container was still being filled
};

class Value {
 public:
  Value() = default;  // None
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value container(Kind kind);  // empty list, tuple or dict

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }

  std::optional<bool> as_bool() const;
  std::optional<int64_t> as_int() const;     // an int (a bool is not an int here)
  std::optional<double> as_double() const;   // a float or an int
  const std::string* as_string() const;      // nullptr unless a string
  // Items of a list or tuple; empty for anything else.
  const std::vector<Value>& items() const;
  // Entries of a dict; empty for anything else.
  const std::vector<std::pair<Value, Value>>& entries() const;
  // The value of the first entry whose key is the string `key`; nullptr when absent or not a dict.
  const Value* find(std::string_view key) const;
  // True for a container the file ended inside (see unpickler.h on truncated files).
  bool partial() const { return node_ && node_->partial; }
  int height() const { return node_ ? node_->height : 0; }
  uint64_t tree_size() const { return node_ ? node_->tree_size : 1; }

  // For the unpickler.
  Node* node() const { return node_.get(); }
  bool same_node(const Value& other) const { return node_ && node_ == other.node_; }

 private:
  Kind kind_ = Kind::kNone;
  int64_t int_ = 0;  // kBool, kInt
  double double_ = 0;
  std::shared_ptr<Node> node_;
};

}  // namespace rankscope::pickle
