// kernels_bench.cpp — `rankscope kernels` (all five analyses) on a synthetic 64-rank run.
// The run is written first through the format library (not timed): per rank, STEPS traced steps of
// OPS GPU ops each on four streams (compute kernels, an NCCL kernel per 50 ops overlapping them,
// memcpys), every op with its launch record. Usage: kernels_bench [RANKS [STEPS [OPS]]]. Prints wall
// seconds, CPU seconds and peak RSS; asserts nothing about speed.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"
#include "synthetic_run.h"

namespace {

namespace fs = std::filesystem;
using namespace rankscope;

constexpr int64_t kStartNs = bench::kSyntheticStartNs;

bool write_rank(const fs::path& dir, int rank, int ranks, int steps, int ops) {
  auto w = bench::open_synthetic_stream(dir, rank, ranks, "kernels_bench");
  if (!w) return false;
  format::EventStreamWriter& writer = *w;
  std::mt19937_64 rng(uint64_t(rank) * 7919 + 1);
  std::uniform_int_distribution<int64_t> kernel_ns(2'000, 80'000), launch_ns(3'000, 12'000), gap_ns(0, 20'000);
  const uint32_t api = writer.intern(format::NameKind::kApi, "cudaLaunchKernel");
  uint32_t names[64];
  for (int i = 0; i < 64; ++i)
    names[i] = writer.intern(format::NameKind::kKernel, i == 0   ? std::string("ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
                                                         : i == 1 ? std::string("Memcpy HtoD (Pinned -> Device)")
                                                                  : "void gemm_kernel_" + std::to_string(i) + "<bf16>(...)");
  int64_t host = kStartNs, device = kStartNs;
  std::vector<format::TraceKernel> kernels;
  std::vector<format::TraceLaunch> launches;
  for (int s = 1; s <= steps; ++s) {
    format::StepRecord step;
    step.step = s;
    step.begin_ns = host;
    kernels.clear();
    launches.clear();
    for (int i = 0; i < ops; ++i) {
      const bool nccl = i % 50 == 49, copy = i % 97 == 3;
      const uint32_t name = nccl ? names[0] : copy ? names[1] : names[2 + int(rng() % 62)];
      const uint32_t stream = nccl ? 20 : copy ? 9 : 7 + uint32_t(i % 2);
      const int64_t lb = host, le = host + launch_ns(rng);
      host = le + gap_ns(rng);
      const int64_t b = std::max(device, le + 1'000), e = b + kernel_ns(rng) * (nccl ? 4 : 1);
      if (!nccl) device = e;  // NCCL runs beside the compute stream
      kernels.push_back({name, 0, stream, 0, b, e});
      launches.push_back({api, name, 1, stream, 0, uint32_t(i), lb, le, b, e});
    }
    host = std::max(host, device);
    step.end_ns = host;
    writer.write_step(step);
    writer.write_trace_kernels(s, kernels);
    writer.write_trace_launches(s, launches);
    if (!writer.flush().ok()) return false;
  }
  writer.write_end(host);
  return writer.flush().ok();
}

}  // namespace

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 64;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const int ops = argc > 3 ? std::atoi(argv[3]) : 2000;
  const fs::path dir = fs::temp_directory_path() / ("rs_kernels_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  if (!bench::write_synthetic_metadata(dir, ranks, "kernels_bench")) return 1;
  for (int r = 0; r < ranks; ++r) {
    if (!write_rank(dir, r, ranks, steps, ops)) {
      std::fprintf(stderr, "kernels_bench: cannot write rank %d under %s\n", r, dir.c_str());
      return 1;
    }
  }
  uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.is_regular_file() ? e.file_size() : 0;

  const bench::ProcessUsage before = bench::self_usage();
  const auto t0 = std::chrono::steady_clock::now();
  auto report = analyzers::analyze_kernels(dir);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bench::ProcessUsage after = bench::self_usage();
  fs::remove_all(dir);
  if (!report.ok()) {
    std::fprintf(stderr, "kernels_bench: %s\n", report.status().user_text().c_str());
    return 1;
  }
  int64_t analysed_ops = 0;
  for (const auto& r : report->ranks) analysed_ops += r.ops;
  std::printf("kernels_bench: %d ranks x %d traced steps x %d ops (%.1f MB of event streams, %lld ops)\n", ranks, steps, ops,
              double(bytes) / 1e6, static_cast<long long>(analysed_ops));
  std::printf("  all five analyses: %.3f s wall, %.3f s CPU, peak RSS %.1f MiB, %zu findings\n", wall, after.cpu_s - before.cpu_s,
              after.peak_mib, report->findings.size());
  return 0;
}
