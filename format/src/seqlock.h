// seqlock.h — the sequence-word protocol shared by the flight recorder's writer and reader.
//
// Writer (one thread per section, or begin_exclusive for sections with several): begin() makes the
// word odd, the section is written, end() makes it even.
// Reader: never reads the writer's memory directly. It takes whole copies of the file (pread) and
// checks each section's word in a copy taken wholly before and one taken wholly after the copy the
// section is read from (CopyWindow). Is not: a lock; a writer never waits for a reader.
// Private to the format library.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>

namespace rankscope::format::seqlock {

inline void begin(uint64_t& word) {
  std::atomic_ref<uint64_t> w(word);
  w.store(w.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // Orders the odd word before every store of the section that follows.
  std::atomic_thread_fence(std::memory_order_release);
}

// begin() for a section that more than one thread may write (e.g. a collective's record: launched
// on the application thread, started and completed on NCCL's proxy thread or the probe's watchdog):
// waits while another writer holds the word odd, then makes it odd with a CAS. end() releases it as
// usual. Every writer of such a word must use this: one plain begin() racing a CAS loses an
// increment and leaves the word even while a write is under way.
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

// Three copies of one file, taken one after another (the caller puts an acquire fence between the
// reads). A copy is not a snapshot: the kernel copies bytes in no promised order while the writer
// runs, so within one copy a section can hold half of one update and half of the next while its
// word, copied at another instant, is even. Comparing the word with itself inside that copy proves
// nothing. A section read from `data` is consistent when its word is even and the same in `before`
// and `after`: the word only grows, so the writer did not touch the section while `data` was taken.
// With a single copy (a file nobody writes any more, or bytes in a test) the three are the same and
// only an odd word (a writer that died mid-update) is caught.
//
// Three whole copies span hundreds of microseconds; a section its writer changes every few (a host
// thread's range stack while it launches kernels) is rarely still in them all. Given `read_at`, a
// section that fails the check is read again on its own, word / section / word, three small reads
// a few microseconds apart, up to kTightTries times.
class CopyWindow {
 public:
  // Reads `bytes` at file `offset` into `out` from the live file; false on an I/O error.
  using ReadAt = std::function<bool(uint64_t offset, void* out, size_t bytes)>;
  static constexpr int kTightTries = 8;

  explicit CopyWindow(std::span<const uint8_t> only) : CopyWindow(only, only, only) {}
  // All three the same size (the file's).
  CopyWindow(std::span<const uint8_t> before, std::span<const uint8_t> data, std::span<const uint8_t> after,
             const ReadAt* read_at = nullptr)
      : before_(before.data()), data_(data), after_(after.data()), read_at_(read_at) {}

  std::span<const uint8_t> data() const { return data_; }

  // Copies `bytes` from `src` (inside data()) to `dst`; true when consistent by the word at `word`
  // (inside data()).
  bool read(const void* src, void* dst, size_t bytes, const uint64_t* word) const {
    std::memcpy(dst, src, bytes);
    const uint64_t in_before = load(before_, word);
    if ((in_before & 1) == 0 && in_before == load(after_, word) && in_before == load(data_.data(), word)) return true;
    return read_at_ != nullptr && read_alone(offset_of(src), dst, bytes, offset_of(word));
  }

  // The value `field` (inside data()) had in the copy taken before. For a field written with
  // release order after the data it publishes (a slot's `claimed` flag, a parameter's arrival step):
  // when the earlier copy shows it, data() holds what it published, as an acquire load would.
  template <class T>
  T before(const T& field) const {
    T v;
    std::memcpy(&v, before_ + offset_of(&field), sizeof(T));
    return v;
  }
  // before() for a field given by its address inside data(), read without forming a T reference.
  template <class T>
  T before_at(const void* field) const {
    T v;
    std::memcpy(&v, before_ + offset_of(field), sizeof(T));
    return v;
  }

 private:
  // The same check with the three reads around this one section only.
  bool read_alone(size_t section_at, void* dst, size_t bytes, size_t word_at) const {
    for (int i = 0; i < kTightTries; ++i) {
      uint64_t first = 1, last = 0;
      if (!(*read_at_)(word_at, &first, sizeof(first))) return false;
      std::atomic_thread_fence(std::memory_order_acquire);
      if ((first & 1) != 0) continue;
      if (!(*read_at_)(section_at, dst, bytes)) return false;
      std::atomic_thread_fence(std::memory_order_acquire);
      if (!(*read_at_)(word_at, &last, sizeof(last))) return false;
      if (first == last) return true;
    }
    return false;
  }

  size_t offset_of(const void* p) const { return size_t(static_cast<const uint8_t*>(p) - data_.data()); }
  uint64_t load(const uint8_t* copy, const uint64_t* word) const {
    uint64_t v;
    std::memcpy(&v, copy + offset_of(word), sizeof(v));
    return v;
  }

  const uint8_t* before_;
  std::span<const uint8_t> data_;
  const uint8_t* after_;
  const ReadAt* read_at_;
};

}  // namespace rankscope::format::seqlock
