// value.cpp — constructors and typed accessors of pickle::Value.
#include "rankscope/pickle/value.h"

namespace rankscope::pickle {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
  }
  return "?";
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.int_ = b ? 1 : 0;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.double_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.node_ = std::make_shared<Node>();
  v.node_->text = std::move(s);
  return v;
}

Value Value::container(Kind kind) {
  Value v;
  v.kind_ = kind;
  v.node_ = std::make_shared<Node>();
  return v;
}

std::optional<bool> Value::as_bool() const {
  if (kind_ != Kind::kBool) return std::nullopt;
  return int_ != 0;
}

std::optional<int64_t> Value::as_int() const {
  if (kind_ != Kind::kInt) return std::nullopt;
  return int_;
}

std::optional<double> Value::as_double() const {
  if (kind_ == Kind::kFloat) return double_;
  if (kind_ == Kind::kInt) return double(int_);
  return std::nullopt;
}

const std::string* Value::as_string() const { return kind_ == Kind::kString ? &node_->text : nullptr; }

const std::vector<Value>& Value::items() const {
  static const std::vector<Value> kEmpty;
  return is_sequence() ? node_->items : kEmpty;
}

const std::vector<std::pair<Value, Value>>& Value::entries() const {
  static const std::vector<std::pair<Value, Value>> kEmpty;
  return is_dict() ? node_->entries : kEmpty;
}

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : entries()) {
    const std::string* s = k.as_string();
    if (s && *s == key) return &v;
  }
  return nullptr;
}

}  // namespace rankscope::pickle
