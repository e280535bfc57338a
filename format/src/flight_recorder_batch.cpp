// flight_recorder_batch.cpp — many flight recorders read on a few threads (see the header).
#include "flight_recorder_batch.h"

#include <algorithm>
#include <optional>
#include <thread>

namespace rankscope::format {
namespace {

constexpr unsigned kMaxThreads = 8;
constexpr size_t kFilesPerThread = 64;  // below this a thread's start costs more than it saves

}  // namespace

std::vector<Result<FlightRecorderSnapshot>> read_flight_recorders(const std::vector<std::filesystem::path>& files,
                                                                  unsigned max_threads) {
  // Result has no default state: each slot is filled exactly once by the thread owning its slice.
  std::vector<std::optional<Result<FlightRecorderSnapshot>>> slots(files.size());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned wanted = max_threads == 0 ? std::min(cores, kMaxThreads) : max_threads;
  const size_t threads = std::max<size_t>(1, std::min<size_t>(wanted, files.size() / kFilesPerThread));
  auto read_slice = [&](size_t t) {
    const size_t begin = files.size() * t / threads, end = files.size() * (t + 1) / threads;
    for (size_t i = begin; i < end; ++i) slots[i].emplace(read_flight_recorder(files[i]));
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < threads; ++t) workers.emplace_back(read_slice, t);
  read_slice(0);
  for (auto& w : workers) w.join();
  std::vector<Result<FlightRecorderSnapshot>> out;
  out.reserve(files.size());
  for (auto& s : slots) out.push_back(std::move(*s));
  return out;
}

}  // namespace rankscope::format
