// probe_bench.cpp — the probe's cost: ns per range (push+pop), ns per collective record
// (enqueue+complete), and the probe-on / probe-off time ratio on a loop of mixed work shaped like a
// small training step (50 ranges, 10 collectives, GEMM-like compute, one event-stream write per step).
//
// Prints numbers; asserts nothing about speed (ctest label `bench`). The budget it is read against
// is design.md's: <= 1% of a training step. On/off steps alternate one by one so machine noise
// (other processes on a shared 2-core box) hits both sides alike; medians of wall and thread-CPU
// time are reported.
#include <stdlib.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/probe/probe.h"

namespace rp = rankscope::probe;
namespace rf = rankscope::format;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Work standing in for a layer: C += A*B on n x n fp32, written plainly (no BLAS) so the bench has
// no dependency; `sink` keeps the compiler from dropping it.
struct Gemm {
  int n;
  std::vector<float> a, b, c;
  explicit Gemm(int size) : n(size), a(size * size, 0.5f), b(size * size, 0.25f), c(size * size, 0.f) {}
  void run() {
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < n; ++k) {
        float aik = a[i * n + k];
        for (int j = 0; j < n; ++j) c[i * n + j] += aik * b[k * n + j];
      }
  }
};

const char* const kRangeNames[] = {"forward/embed", "forward/block0/attn", "forward/block0/mlp", "forward/block1/attn",
                                   "forward/block1/mlp", "forward/head", "backward/head", "backward/block1/mlp",
                                   "backward/block1/attn", "backward/block0/mlp", "backward/block0/attn",
                                   "backward/embed", "grad_sync", "optimizer"};
constexpr int kRangeNameCount = sizeof(kRangeNames) / sizeof(kRangeNames[0]);

struct BenchComms {
  rp::CommHandle world, dp;
};

// One training-like step: 50 ranges (5 levels of nesting is not needed; two are), 10 collectives.
void mixed_step(rp::Probe& probe, const BenchComms& comms, Gemm& gemm, int64_t step) {
  probe.begin_step(step);
  probe.push_range("step");
  rf::CollectiveDesc desc;
  desc.op = rf::CollectiveOp::kAllReduceSum;
  desc.dtype = rf::DataType::kFloat32;
  desc.count = 1 << 16;
  desc.bytes = 4 << 16;
  for (int r = 0; r < 49; ++r) {
    rp::ScopedRange range(&probe, kRangeNames[r % kRangeNameCount]);
    gemm.run();
    if (r % 5 == 4) {
      rp::CollectiveHandle h = probe.collective_enqueue(r % 10 == 4 ? comms.world : comms.dp, desc);
      probe.collective_complete(h);
    }
  }
  probe.counter("embed.local_tokens", 1024);
  probe.pop_range();
  probe.end_step();
}

double ns_per_range_pair(rp::Probe& probe, int iterations) {
  probe.begin_step(0);
  for (int i = 0; i < kRangeNameCount; ++i) rp::ScopedRange warm(&probe, kRangeNames[i]);
  double t0 = thread_cpu_seconds();
  for (int i = 0; i < iterations; ++i) {
    probe.push_range(kRangeNames[i % kRangeNameCount]);
    probe.pop_range();
  }
  double s = thread_cpu_seconds() - t0;
  probe.end_step();
  return s * 1e9 / iterations;
}

double ns_per_collective(rp::Probe& probe, const BenchComms& comms, int iterations) {
  rf::CollectiveDesc desc;
  desc.op = rf::CollectiveOp::kAllReduceSum;
  desc.dtype = rf::DataType::kFloat32;
  desc.count = 1024;
  desc.bytes = 4096;
  probe.begin_step(1);
  double t0 = thread_cpu_seconds();
  for (int i = 0; i < iterations; ++i) {
    rp::CollectiveHandle h = probe.collective_enqueue(comms.dp, desc);
    probe.collective_complete(h);
  }
  double s = thread_cpu_seconds() - t0;
  probe.end_step();
  return s * 1e9 / iterations;
}

// begin_step + end_step with the step's record of 14 range names, 10 collectives and a counter:
// the fixed per-step cost (StepRecord encoding and one write(2) of the event stream).
double us_per_step_marker(rp::Probe& probe, const BenchComms& comms, int iterations) {
  rf::CollectiveDesc desc;
  desc.op = rf::CollectiveOp::kAllReduceSum;
  double total = 0;
  for (int i = 0; i < iterations; ++i) {
    probe.begin_step(1000 + i);
    for (int r = 0; r < kRangeNameCount; ++r) rp::ScopedRange range(&probe, kRangeNames[r]);
    for (int c = 0; c < 10; ++c) probe.collective_complete(probe.collective_enqueue(comms.dp, desc));
    probe.counter("embed.local_tokens", 1024);
    double t0 = thread_cpu_seconds();
    probe.end_step();
    total += thread_cpu_seconds() - t0;
  }
  return total * 1e6 / iterations;
}

int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = arg_int(argc, argv, "--steps", 150);
  const int gemm_n = arg_int(argc, argv, "--gemm", 64);
  const int micro_iters = arg_int(argc, argv, "--iters", 2'000'000);

  std::string pattern = (std::filesystem::temp_directory_path() / "rs_probe_bench_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  std::filesystem::path dir = pattern;
  rp::Options options;
  options.read_environment = false;
  options.run_dir = dir;
  options.run_id = "probe-bench";
  auto created = rp::Probe::create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "probe_bench: %s\n", created.status().to_string().c_str());
    return 1;
  }
  rp::Probe& on = **created;
  std::unique_ptr<rp::Probe> off = rp::Probe::disabled();
  BenchComms on_comms{on.register_comm("world", 1, 0), on.register_comm("dp0", 1, 0)};
  BenchComms off_comms{off->register_comm("world", 1, 0), off->register_comm("dp0", 1, 0)};

  double range_ns = ns_per_range_pair(on, micro_iters);
  double range_off_ns = ns_per_range_pair(*off, micro_iters);
  double coll_ns = ns_per_collective(on, on_comms, micro_iters / 4);
  double coll_off_ns = ns_per_collective(*off, off_comms, micro_iters / 4);
  double step_marker_us = us_per_step_marker(on, on_comms, 2000);

  Gemm gemm(gemm_n);
  int64_t step = 10;
  for (int i = 0; i < 3; ++i) {  // warm caches, names and the page cache of the event stream
    mixed_step(on, on_comms, gemm, step++);
    mixed_step(*off, off_comms, gemm, step++);
  }
  // Steps alternate on/off one by one; each is timed on the wall clock and on this thread's CPU
  // clock (which a busy shared machine disturbs less: preemption does not count).
  std::error_code ec;
  const std::filesystem::path events_file = dir / "rank00000.events";
  const uint64_t events_before = std::filesystem::file_size(events_file, ec);
  std::vector<double> on_wall, off_wall, on_cpu, off_cpu;
  for (int i = 0; i < 2 * steps; ++i) {
    bool probe_on = i % 2 == 0;
    auto t0 = Clock::now();
    double c0 = thread_cpu_seconds();
    mixed_step(probe_on ? on : *off, probe_on ? on_comms : off_comms, gemm, step++);
    double cpu_ms = (thread_cpu_seconds() - c0) * 1e3;
    double wall_ms = seconds_since(t0) * 1e3;
    (probe_on ? on_wall : off_wall).push_back(wall_ms);
    (probe_on ? on_cpu : off_cpu).push_back(cpu_ms);
  }
  const uint64_t events_bytes = std::filesystem::file_size(events_file, ec) - events_before;
  on.shutdown();
  std::filesystem::remove_all(dir, ec);

  double step_on = median(on_wall), step_off = median(off_wall);
  double cpu_on = median(on_cpu), cpu_off = median(off_cpu);
  double ratio = step_on / step_off, cpu_ratio = cpu_on / cpu_off;
  // Model of the always-on cost per step from the micro numbers: 50 ranges + 10 collectives.
  double modeled_us = (50 * range_ns + 10 * coll_ns) / 1e3 + step_marker_us;
  std::printf("probe_bench: %ld CPUs online; micro costs are thread-CPU time (robust to a busy machine)\n",
              ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("range push+pop:          %8.1f ns per pair (%.1f ns per call); probe off: %.1f ns\n", range_ns,
              range_ns / 2, range_off_ns);
  std::printf("collective enqueue+complete: %6.1f ns per collective; probe off: %.1f ns\n", coll_ns, coll_off_ns);
  std::printf("end_step (record of 14 ranges, 10 collectives, 1 counter; encode + write(2)): %.1f us\n",
              step_marker_us);
  std::printf("mixed step (50 ranges, 10 collectives, %dx%d GEMM per range), median of %d steps each, "
              "alternating:\n", gemm_n, gemm_n, steps);
  std::printf("  wall:       off %.3f ms, on %.3f ms, ratio on/off %.4f (overhead %+.2f%%)\n", step_off, step_on,
              ratio, (ratio - 1) * 100);
  std::printf("  thread CPU: off %.3f ms, on %.3f ms, ratio on/off %.4f (overhead %+.2f%%)\n", cpu_off, cpu_on,
              cpu_ratio, (cpu_ratio - 1) * 100);
  std::printf("  modeled from the micro numbers: %.1f us per step = %.3f%% of the step (budget <= 1%%)\n",
              modeled_us, modeled_us / (step_off * 1e3) * 100);
  std::printf("event stream: %.0f bytes per step always-on\n",
              static_cast<double>(events_bytes) / static_cast<double>(steps));
  return 0;
}
