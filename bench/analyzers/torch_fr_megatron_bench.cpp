// torch_fr_megatron_bench.cpp — hangdoctor on 1024 ranks of Megatron-LM-shaped PyTorch Flight
// Recorder dumps (tests/importers/fr_megatron_job.h): TP 8 x PP 8 x DP 16 with MoE (EP 128), about 13
// process groups and 2000 entries per rank (only_active off, ring 2000, completed entries marked),
// a GPU error on two ranks. The dumps are written first (not timed); then the bench re-runs itself as
// a fresh process that times `hangdoctor DIR --json FILE` in-process (discover, unpickle, import,
// classify, text and JSON), so the peak RSS it prints (getrusage ru_maxrss) is hangdoctor's alone.
// Usage: torch_fr_megatron_bench [TP PP DP [ITERATIONS]] [--write DIR]. Prints numbers and whether the
// verdict names the fault ranks; asserts nothing about the verdict (the analyzer is being rewritten).
// With --write the dumps are only written into DIR and kept (for a profiler), their fault ranks printed.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "process_usage.h"

#include "fr_megatron_job.h"
#include "rankscope/cli/hangdoctor_app.h"

namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The measured half: a fresh process, so ru_maxrss is hangdoctor's.
int analyze(const fs::path& dir, const std::string& fault_ranks) {
  using namespace rankscope;
  const std::string d = dir.string(), json = (dir.parent_path() / (dir.filename().string() + ".json")).string();
  std::FILE* text = std::tmpfile();
  const bench::TimedRun run = bench::time_hangdoctor_cli({d, "--json", json}, text);
  const double s = run.wall_s, cpu_s = run.usage.cpu_s;
  const int rc = run.exit_code;
  const bench::ProcessUsage usage = run.usage;
  std::rewind(text);
  char line[4096] = {0};
  std::string first, second;
  if (std::fgets(line, sizeof line, text)) first = line;
  if (std::fgets(line, sizeof line, text)) second = line;
  std::printf("hangdoctor on Megatron Flight Recorder dumps: %.3f s wall, %.3f s CPU, peak RSS %.0f MiB, exit %d\n", s,
              cpu_s, usage.peak_mib, rc);
  std::printf("  %s  %s", first.c_str(), second.c_str());
  std::set<int> named;
  std::ifstream in(json);
  const auto report = nlohmann::json::parse(in, nullptr, false);
  if (!report.is_discarded() && report.contains("culprit_ranks") && report["culprit_ranks"].is_array())
    for (const auto& r : report["culprit_ranks"]) named.insert(r.get<int>());
  std::set<int> want;
  for (size_t start = 0; start < fault_ranks.size();) {
    const size_t comma = std::min(fault_ranks.find(',', start), fault_ranks.size());
    want.insert(std::atoi(fault_ranks.substr(start, comma - start).c_str()));
    start = comma + 1;
  }
  std::string got;
  for (int r : named) got += (got.empty() ? "" : ",") + std::to_string(r);
  const bool names_them = named == want;
  std::printf("verdict: %s; culprit_ranks [%s], fault ranks [%s]: %s\n",
              report.is_discarded() ? "(no JSON report)" : report.value("verdict", std::string("?")).c_str(), got.c_str(),
              fault_ranks.c_str(), names_them ? "names exactly the fault ranks" : "DOES NOT name exactly the fault ranks");
  fs::remove(json);
  return 0;  // the verdict is printed, not asserted, while the analyzer is being rewritten
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rankscope::torch_fr::testing;
  if (argc == 4 && std::string(argv[1]) == "--analyze") return analyze(argv[2], argv[3]);
  fs::path keep;  // --write DIR
  if (argc >= 3 && std::string(argv[argc - 2]) == "--write") {
    keep = argv[argc - 1];
    argc -= 2;
  }
  MegatronJobSpec spec;
  spec.layout.tp = argc > 3 ? std::atoi(argv[1]) : 8;
  spec.layout.pp = argc > 3 ? std::atoi(argv[2]) : 8;
  spec.layout.dp = argc > 3 ? std::atoi(argv[3]) : 16;
  spec.layout.microbatches = 8;
  spec.layout.layers_per_stage = 2;
  // About 330 records per rank per iteration in the default layout: the fault in the 7th iteration
  // leaves every rank more than the ring's 2000.
  spec.iterations = argc > 4 ? std::atoi(argv[4]) : 7;
  spec.fault_iteration = spec.iterations;
  spec.fault = MegatronFault::kGpuError;
  const int world = spec.layout.world(), stage = spec.layout.tp * spec.layout.dp;
  // As the real job's ranks 9 and 14: two ranks of one stage past the middle, in different TP groups.
  spec.fault_ranks = {world / 2 + 9 % stage, world / 2 + 14 % stage + (stage > 16 ? spec.layout.tp : 0)};
  spec.only_active = false;
  spec.ring = 2000;
  const fs::path dir =
      keep.empty() ? fs::temp_directory_path() / fmt::format("rs_torch_fr_megatron_bench_{}", ::getpid()) : keep;
  fs::remove_all(dir);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  MegatronJob job;
  try {
    job = write_megatron_job(spec, dir, "_dump_", &bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_fr_megatron_bench: %s\n", e.what());
    return 2;
  }
  std::string fault_ranks;
  for (int r : job.culprits) fault_ranks += (fault_ranks.empty() ? "" : ",") + std::to_string(r);
  std::printf("torch_fr_megatron_bench: %s\n  dumps: %.1f MB, written in %.1f s (not timed)\n", job.description.c_str(),
              double(bytes) / 1e6, seconds_since(t0));
  std::fflush(stdout);
  if (!keep.empty()) {
    std::printf("  kept in %s; fault ranks %s\n", dir.c_str(), fault_ranks.c_str());
    return 0;
  }
  const std::string self = fs::canonical("/proc/self/exe").string();
  const int rc = std::system(("'" + self + "' --analyze '" + dir.string() + "' " + fault_ranks).c_str());
  fs::remove_all(dir);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 2;
}
