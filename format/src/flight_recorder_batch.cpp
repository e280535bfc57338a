// flight_recorder_batch.cpp — many flight recorders read on a few threads (see the header).
#include "flight_recorder_batch.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

namespace rankscope::format {
namespace {

constexpr unsigned kMaxThreads = 8;
constexpr size_t kFilesPerThread = 64;  // below this a thread's start costs more than it saves
constexpr size_t kFilesPerChunk = 16;

}  // namespace

std::vector<Result<FlightRecorderSnapshot>> read_flight_recorders(const std::vector<std::filesystem::path>& files,
                                                                  unsigned max_threads) {
  // Result has no default state: each slot is filled exactly once by the thread owning its slice.
  std::vector<std::optional<Result<FlightRecorderSnapshot>>> slots(files.size());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned wanted = max_threads == 0 ? std::min(cores, kMaxThreads) : max_threads;
  const size_t threads = std::max<size_t>(1, std::min<size_t>(wanted, files.size() / kFilesPerThread));
  // Chunks taken from a shared counter, not one fixed slice per thread: on a busy machine one
  // thread may get half a core, and fixed slices would wait for it.
  std::atomic<size_t> next{0};
  auto read_chunks = [&] {
    for (;;) {
      const size_t begin = next.fetch_add(kFilesPerChunk, std::memory_order_relaxed);
      if (begin >= files.size()) return;
      const size_t end = std::min(files.size(), begin + kFilesPerChunk);
      for (size_t i = begin; i < end; ++i) slots[i].emplace(read_flight_recorder(files[i]));
    }
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(read_chunks);
  read_chunks();
  for (auto& w : workers) w.join();
  std::vector<Result<FlightRecorderSnapshot>> out;
  out.reserve(files.size());
  for (auto& s : slots) out.push_back(std::move(*s));
  return out;
}

}  // namespace rankscope::format
