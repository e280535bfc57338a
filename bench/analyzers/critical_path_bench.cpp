// critical_path_bench.cpp — `rankscope critical-path` on a synthetic run (budget: 64 ranks x 10
// steps in under 5 s on 2 cores). The run is written first through the format library (not
// timed): per rank and traced step, four host ranges, OPS kernels on two streams with their
// launches, and an all-reduce every 50 kernels whose NCCL kernel starts on each rank when that
// rank's stream gets there and ends when the last rank's has started (so the walk crosses ranks).
// Usage: critical_path_bench [RANKS [STEPS [OPS]]]. Prints seconds and peak RSS; asserts nothing.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "rankscope/analyzers/critical_path/critical_path.h"
#include "synthetic_run.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace {

namespace fs = std::filesystem;
using namespace rankscope;

constexpr int64_t kStartNs = bench::kSyntheticStartNs;

// Every rank's kernel times for one step, so the all-reduces end together across ranks.
struct StepPlan {
  std::vector<std::vector<format::TraceKernel>> kernels;  // by rank
  std::vector<std::vector<format::TraceLaunch>> launches;
  std::vector<std::vector<format::CollectiveEvent>> collectives;
  std::vector<std::pair<int64_t, int64_t>> window;  // by rank
};

StepPlan plan_step(int ranks, int ops, int64_t step_begin, uint64_t seed, uint64_t& seq, uint32_t nccl_name, uint32_t comm, uint32_t api) {
  StepPlan p;
  p.kernels.resize(size_t(ranks));
  p.launches.resize(size_t(ranks));
  p.collectives.resize(size_t(ranks));
  std::vector<int64_t> host(static_cast<size_t>(ranks), step_begin), device(static_cast<size_t>(ranks), step_begin);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> kernel_ns(2'000, 60'000), launch_ns(3'000, 9'000), jitter(0, 30'000);
  for (int i = 0; i < ops; ++i) {
    const bool nccl = i % 50 == 49;
    std::vector<int64_t> starts(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const int64_t lb = host[size_t(r)] + jitter(rng), le = lb + launch_ns(rng);
      host[size_t(r)] = le;
      starts[size_t(r)] = std::max(device[size_t(r)], le + 1'000);
    }
    int64_t last_start = 0;
    for (int64_t b : starts) last_start = std::max(last_start, b);
    for (int r = 0; r < ranks; ++r) {
      const int64_t b = starts[size_t(r)];
      const int64_t e = nccl ? last_start + 40'000 : b + kernel_ns(rng);
      const uint32_t name = nccl ? nccl_name : 3 + uint32_t(i % 40);
      const uint32_t stream = nccl ? 20 : 7;
      p.kernels[size_t(r)].push_back({name, 1 + uint32_t(i * 4 / ops), stream, 0, b, e});
      p.launches[size_t(r)].push_back({api, name, 1, stream, 0, uint32_t(i), host[size_t(r)] - 5'000, host[size_t(r)], b, e});
      device[size_t(r)] = e;
      if (nccl) {
        format::CollectiveEvent c{};
        c.comm_id = comm;
        c.op = uint8_t(format::CollectiveOp::kAllReduceSum);
        c.seq = seq;
        c.enqueue_ns = host[size_t(r)] - 5'000;
        c.start_ns = b;
        c.end_ns = e;
        p.collectives[size_t(r)].push_back(c);
      }
    }
    if (nccl) ++seq;
  }
  for (int r = 0; r < ranks; ++r) p.window.emplace_back(step_begin, std::max(host[size_t(r)], device[size_t(r)]) + 10'000);
  return p;
}

bool write_run(const fs::path& dir, int ranks, int steps, int ops) {
  std::vector<std::unique_ptr<format::EventStreamWriter>> writers;
  uint32_t nccl = 0, comm = 0, api = 0;
  for (int r = 0; r < ranks; ++r) {
    auto w = bench::open_synthetic_stream(dir, r, ranks, "critical_path_bench");
    if (!w) return false;
    writers.push_back(std::move(w));
    format::EventStreamWriter& wr = *writers.back();
    for (const char* range : {"data", "forward", "backward", "optimizer"}) wr.intern(format::NameKind::kRange, range);  // ids 1-4
    for (int k = 0; k < 40; ++k) wr.intern(format::NameKind::kKernel, "void gemm_kernel_" + std::to_string(k) + "<bf16>(...)");
    nccl = wr.intern(format::NameKind::kKernel, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    comm = wr.intern(format::NameKind::kComm, "dp0");
    api = wr.intern(format::NameKind::kApi, "cudaLaunchKernel");
  }
  uint64_t seq = 0;
  int64_t begin = kStartNs;
  for (int s = 1; s <= steps; ++s) {
    StepPlan p = plan_step(ranks, ops, begin, uint64_t(s), seq, nccl, comm, api);
    int64_t next = begin;
    for (int r = 0; r < ranks; ++r) {
      format::EventStreamWriter& w = *writers[size_t(r)];
      auto [b, e] = p.window[size_t(r)];
      format::StepRecord step;
      step.step = s;
      step.begin_ns = b;
      step.end_ns = e;
      step.collectives = p.collectives[size_t(r)];
      w.write_step(step);
      std::vector<format::TraceRange> ranges;
      const int64_t quarter = (e - b) / 4;
      for (uint32_t q = 0; q < 4; ++q) ranges.push_back({1 + q, 1, b + int64_t(q) * quarter, b + int64_t(q + 1) * quarter, 0, 0});
      w.write_trace_ranges(s, ranges);
      w.write_trace_kernels(s, p.kernels[size_t(r)]);
      w.write_trace_launches(s, p.launches[size_t(r)]);
      if (!w.flush().ok()) return false;
      next = std::max(next, e);
    }
    begin = next + 10'000;
  }
  for (auto& w : writers) {
    w->write_end(begin);
    if (!w->flush().ok()) return false;
  }
  return true;
}


}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 64;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const int ops = argc > 3 ? std::atoi(argv[3]) : 2000;
  if (ranks < 1 || steps < 1 || ops < 50) {
    std::fprintf(stderr, "usage: critical_path_bench [RANKS >= 1 [STEPS >= 1 [OPS >= 50]]]\n");
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("rs_critical_path_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  if (!bench::write_synthetic_metadata(dir, ranks, "critical_path_bench") || !write_run(dir, ranks, steps, ops)) {
    std::fprintf(stderr, "critical_path_bench: cannot write the run under %s\n", dir.c_str());
    fs::remove_all(dir);
    return 1;
  }
  uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.is_regular_file() ? e.file_size() : 0;
  const bench::ProcessUsage before = bench::self_usage();
  const auto t0 = std::chrono::steady_clock::now();
  auto report = analyzers::analyze_critical_path(dir);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bench::ProcessUsage after = bench::self_usage();
  fs::remove_all(dir);
  if (!report.ok()) {
    std::fprintf(stderr, "critical_path_bench: %s\n", report.status().user_text().c_str());
    return 1;
  }
  int hops = 0;
  for (const auto& p : report->steps) hops += p.hops;
  std::printf("critical_path_bench: %d ranks x %d traced steps x %d kernels (%.1f MB of event streams)\n", ranks, steps, ops, double(bytes) / 1e6);
  std::printf("  critical path: %.3f s wall, %.3f s CPU, peak RSS %.1f MiB; %.2f of %.2f ms a step covered, %d rank changes\n", wall, after.cpu_s - before.cpu_s,
              after.peak_mib, report->covered_ms, report->step_ms, hops);
  return 0;
}
