// seqlock.h — the sequence-word protocol shared by the flight recorder's writer and reader.
//
// Writer (one thread per section): begin() makes the word odd, the section is written, end() makes
// it even. Reader: copy the section between two loads of the word; accept only an even, unchanged
// word. Private to the format library.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace rankscope::format::seqlock {

inline void begin(uint64_t& word) {
  std::atomic_ref<uint64_t> w(word);
  w.store(w.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}

// begin() for a section that more than one thread may write (e.g. a collective's record: launched
// on the application thread, started and completed on NCCL's proxy thread): waits while another
// writer holds the word odd, then makes it odd with a CAS. end() releases it as usual.
inline void begin_exclusive(uint64_t& word) {
  std::atomic_ref<uint64_t> w(word);
  uint64_t cur = w.load(std::memory_order_relaxed);
  for (;;) {
    if ((cur & 1) != 0) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      cur = w.load(std::memory_order_relaxed);
      continue;
    }
    if (w.compare_exchange_weak(cur, cur + 1, std::memory_order_acquire, std::memory_order_relaxed)) break;
  }
  std::atomic_thread_fence(std::memory_order_release);
}

inline void end(uint64_t& word) {
  std::atomic_ref<uint64_t> w(word);
  w.store(w.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// Copies `bytes` from `src` into `dst` consistently with the sequence word at `word` (which lies
// inside or outside the copied range). Returns false when every try saw a writer mid-update.
inline bool read(const void* src, void* dst, size_t bytes, const uint64_t* word, int tries = 64) {
  auto* w = const_cast<uint64_t*>(word);  // atomic_ref needs non-const; we only load
  for (int i = 0; i < tries; ++i) {
    const uint64_t before = std::atomic_ref<uint64_t>(*w).load(std::memory_order_acquire);
    std::memcpy(dst, src, bytes);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = std::atomic_ref<uint64_t>(*w).load(std::memory_order_relaxed);
    if (before == after && (before & 1) == 0) return true;
  }
  return false;
}

}  // namespace rankscope::format::seqlock
