// name_table.h — interns (kind, name) pairs to small dense indices, lock-free on the lookup path.
//
// Is: the probe's cache from a std::string_view range/counter/comm name to a local index and to the
// event stream's name id. A range name is looked up on every push, from any thread, so lookups are
// a hash plus an open-addressing probe over atomic pointers with no lock and no allocation; only the
// first sight of a name takes the mutex, allocates the entry and asks the event stream for an id.
// Is not: the event stream's interning (format/) — this sits in front of it so the hot path never
// touches the writer. Entries are never removed; the table holds at most kCapacity names.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "rankscope/format/event_stream.h"

namespace rankscope::probe {

class NameTable {
 public:
  static constexpr uint32_t kCapacity = 4096;
  static constexpr uint32_t kNone = 0xffffffffu;   // no local index
  static constexpr uint32_t kNoStreamId = 0;        // the event stream's "no name"

  struct Entry {
    uint64_t hash = 0;
    format::NameKind kind = format::NameKind::kRange;
    std::string name;
    uint32_t index = kNone;      // dense local index, 0..kCapacity-1
    uint32_t stream_id = kNoStreamId;  // id in the event stream (from 1)
  };

  // Returns the entry of (kind, name), creating it on first sight; `assign_stream_id(kind, name)`
  // is called once per new name, under the table's mutex. nullptr when the table is full.
  template <class AssignStreamId>
  const Entry* find_or_insert(format::NameKind kind, std::string_view name, AssignStreamId&& assign) {
    uint64_t h = hash(kind, name);
    if (const Entry* e = find(h, kind, name)) return e;
    std::lock_guard<std::mutex> lock(mutex_);
    if (const Entry* e = find(h, kind, name)) return e;  // another thread won the race
    if (entries_.size() >= kCapacity) return nullptr;
    Entry& e = entries_.emplace_back();
    e.hash = h;
    e.kind = kind;
    e.name.assign(name);
    e.index = static_cast<uint32_t>(entries_.size() - 1);
    e.stream_id = assign(kind, std::string_view(e.name));
    by_index_[e.index].store(&e, std::memory_order_release);
    for (uint64_t i = 0;; ++i) {
      auto& slot = slots_[(h + i) & (kSlots - 1)];
      if (slot.load(std::memory_order_relaxed) == nullptr) {
        slot.store(&e, std::memory_order_release);  // publishes a fully built entry
        break;
      }
    }
    count_.store(static_cast<uint32_t>(entries_.size()), std::memory_order_release);
    return &e;
  }

  const Entry* entry(uint32_t index) const {
    return index < kCapacity ? by_index_[index].load(std::memory_order_acquire) : nullptr;
  }
  uint32_t size() const { return count_.load(std::memory_order_acquire); }

 private:
  static constexpr uint64_t kSlots = 2 * kCapacity;  // load factor <= 1/2 keeps probes short

  // Eight bytes per multiply (range names are 10-40 bytes): several times cheaper than a
  // byte-at-a-time FNV on the per-range path. Quality only needs to spread a few hundred names.
  static uint64_t hash(format::NameKind kind, std::string_view name) {
    constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
    uint64_t h = (static_cast<uint64_t>(kind) << 56) ^ name.size() ^ kMul;
    const char* p = name.data();
    size_t n = name.size();
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      h = (h ^ word) * kMul;
      h ^= h >> 29;
    }
    if (n > 0) {
      uint64_t tail = 0;
      std::memcpy(&tail, p, n);
      h = (h ^ tail) * kMul;
    }
    h ^= h >> 32;
    return h * kMul ^ (h >> 29);
  }

  const Entry* find(uint64_t h, format::NameKind kind, std::string_view name) const {
    for (uint64_t i = 0; i < kSlots; ++i) {
      const Entry* e = slots_[(h + i) & (kSlots - 1)].load(std::memory_order_acquire);
      if (e == nullptr) return nullptr;
      if (e->hash == h && e->kind == kind && e->name == name) return e;
    }
    return nullptr;
  }

  std::array<std::atomic<const Entry*>, kSlots> slots_{};
  std::array<std::atomic<const Entry*>, kCapacity> by_index_{};
  std::atomic<uint32_t> count_{0};
  std::mutex mutex_;
  std::deque<Entry> entries_;  // deque: entries never move once published
};

}  // namespace rankscope::probe
