// hang_verdict_bench.cpp — time from a stall to hangdoctor's verdict with no flags (learned bounds),
// 10 times: the tiny TP2 gpt2-train job stalls rank 1 in forward/embed at step 25 (or the step given
// second: `hang_verdict_bench [RUNS] [STEP]`, e.g. 2 for an early hang; step 0, start-up, stalls in
// init/model); hangdoctor is polled every 0.25 s. Prints each time, the median and the maximum, and the 1-minute load average
// before and after (design budget: within 10 s of the stall, on a machine at load 2).
// Label bench (and mpi); asserts only that every run was diagnosed.
#include <algorithm>
#include <cstdio>

#include "hang_job.h"

int main(int argc, char** argv) {
  using namespace rankscope::analyzers::hang::e2e;
  const int runs = argc > 1 ? std::atoi(argv[1]) : 10;
  const int64_t step = argc > 2 ? std::atoll(argv[2]) : 25;
  const auto base = std::filesystem::temp_directory_path() / ("rs_hang_verdict_bench_" + std::to_string(::getpid()));
  const double load_before = load_average_1min();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    std::filesystem::remove_all(base);
    std::filesystem::create_directories(base);
    const StallTiming t = stall_to_verdict(base, step, 0.25, 120, step == 0 ? "init/model" : "forward/embed");
    const std::string by = t.verdict.j.is_object() && t.verdict.j["detection"].is_object()
                               ? t.verdict.j["detection"].value("by", "?")
                               : "?";
    std::printf("run %d: stall -> verdict %.2f s (detected by %s), load %.2f\n", i + 1, t.stall_to_verdict_s, by.c_str(),
                load_average_1min());
    std::fflush(stdout);
    if (t.stall_to_verdict_s <= 0) {
      std::fprintf(stderr, "hang_verdict_bench: run %d was not diagnosed\n%s\n", i + 1, t.log.c_str());
      return 1;
    }
    times.push_back(t.stall_to_verdict_s);
  }
  std::filesystem::remove_all(base);
  std::sort(times.begin(), times.end());
  const double median = times.size() % 2 ? times[times.size() / 2] : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  std::printf("stall at step %lld -> verdict with no flags over %zu runs: median %.2f s, max %.2f s (budget 10 s); load %.2f before, "
              "%.2f after\n",
              static_cast<long long>(step), times.size(), median, times.back(), load_before, load_average_1min());
  return 0;
}
