// name_pool.cpp — the process-wide name pool (see the header), with a per-thread cache in front
// so that the reading threads of read_flight_recorders do not meet on the lock per record.
#include "rankscope/format/name_pool.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace rankscope::format {
namespace {

struct Pool {
  std::mutex mu;
  std::unordered_set<std::string> names;  // node-based: an element's address never changes
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: views may be used by other statics' destructors
  return *p;
}

}  // namespace

std::string_view intern_name(std::string_view name) {
  if (name.empty()) return {};
  // Keys are views into the pool, so the cache holds no copies of its own.
  thread_local std::unordered_map<std::string_view, std::string_view> seen;
  if (auto it = seen.find(name); it != seen.end()) return it->second;
  Pool& p = pool();
  std::string_view pooled;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    pooled = *p.names.emplace(name).first;
  }
  seen.emplace(pooled, pooled);
  return pooled;
}

}  // namespace rankscope::format
