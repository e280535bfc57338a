// skew_bench.cpp — `rankscope skew` on 1024 ranks x 1000 steps of always-on data (design budget:
// < 10 s and < 2 GB on a 2-core machine; the run directory itself < 1 GB).
//
// Writes a `rankscope synth` run (TP 8 x DP 128, one block, rank 5 20 ms slow in forward/block0/mlp), then
// re-runs itself as a fresh process to time what `rankscope skew RUN_DIR --json FILE` does (scan
// every event stream, join arrivals, findings, JSON), so the peak RSS printed (getrusage
// ru_maxrss) is the analysis's alone. Prints numbers; asserts only that the finding is right.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/analyzers/skew/skew_json.h"
#include "rankscope/synth/synth.h"

namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t directory_bytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

// The measured half: a fresh process, so ru_maxrss is the analysis's.
int analyze(const fs::path& dir) {
  using namespace rankscope;
  const auto t0 = std::chrono::steady_clock::now();
  auto report = analyzers::analyze_skew(dir);
  if (!report.ok()) {
    std::fprintf(stderr, "skew_bench: %s\n", report.status().to_string().c_str());
    return 2;
  }
  const double analyze_s = seconds_since(t0);
  const std::string json = analyzers::to_json(*report).dump(2);
  const double total_s = seconds_since(t0);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  // CPU time too: on a shared machine the wall time also counts other processes' turns.
  const double cpu_s = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  std::printf("skew report on %d ranks x %lld steps: %.2f s wall, %.2f s CPU (analysis %.2f s, JSON %.2f s, "
              "%.1f MiB); peak RSS %.0f MiB; budget < 10 s and < 2048 MiB\n",
              report->world_size, (long long)report->steps, total_s, cpu_s, analyze_s, total_s - analyze_s,
              double(json.size()) / (1 << 20), double(usage.ru_maxrss) / 1024.0);
  if (report->findings.empty()) {
    std::fprintf(stderr, "skew_bench: no finding\n");
    return 1;
  }
  const auto& top = report->findings.front();
  std::printf("top finding: %s\n", top.text.c_str());
  const bool right = top.ranks == std::vector<int>{5} && top.range == "forward/block0/mlp";
  if (!right) std::fprintf(stderr, "skew_bench: the top finding should name rank 5 and forward/block0/mlp\n");
  return right ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rankscope;
  if (argc == 3 && std::string(argv[1]) == "--analyze") return analyze(argv[2]);
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 1000;
  const fs::path dir = fs::temp_directory_path() / fmt::format("rs_skew_bench_{}", ::getpid());
  fs::remove_all(dir);

  synth::SynthOptions o;
  o.ranks = ranks;
  o.steps = steps;
  o.tp = ranks % 8 == 0 ? 8 : 1;
  // One block: 13 ranges and 8 collectives per rank per step, ~0.9 KB; two blocks would take the
  // 1024 x 1000 run directory to ~1.3 GB, past its 1 GB budget.
  o.layers = 1;
  o.fault = *synth::parse_fault("delay:rank=5,range=forward/block0/mlp,ms=20");
  auto t0 = std::chrono::steady_clock::now();
  auto summary = synth::write_synthetic_run(dir, o);
  if (!summary.ok()) {
    std::fprintf(stderr, "skew_bench: %s\n", summary.status().to_string().c_str());
    return 2;
  }
  std::printf("synth: %d ranks (tp %d x dp %d), %d steps, delay on rank 5: %.1f s; run directory %.1f MiB "
              "(budget < 1024 MiB)\n",
              ranks, o.tp, ranks / o.tp, steps, seconds_since(t0), double(directory_bytes(dir)) / (1 << 20));
  std::fflush(stdout);
  const std::string self = fs::canonical("/proc/self/exe").string();
  const int rc = std::system(("'" + self + "' --analyze '" + dir.string() + "'").c_str());
  fs::remove_all(dir);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 2;
}
