// name_table.h — one id space for names across ranks (internal to the skew analyzer).
//
// Each rank's event stream interns names with its own ids; cross-rank joins (the same communicator,
// the same range on two ranks) need one id per string. Is not: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rankscope::analyzers {

inline constexpr uint32_t kNoName = 0xffffffffu;

class NameTable {
 public:
  uint32_t id(std::string_view name) {
    auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    const uint32_t id = uint32_t(names_.size());
    names_.emplace_back(name);
    ids_.emplace(names_.back(), id);
    return id;
  }
  const std::string& name(uint32_t id) const {
    static const std::string kEmpty;
    return id < names_.size() ? names_[id] : kEmpty;
  }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

}  // namespace rankscope::analyzers
