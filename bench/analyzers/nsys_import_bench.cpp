// nsys_import_bench.cpp — `rankscope import-nsys` on 64 ranks x 1,000 steps of fixture exports
// (budget: under 60 s and within 2 GB). Writes the exports with the test fixture writer
// (the acceptance step: 2 blocks, TP all-reduces, an all-to-all, adversarial rows), then runs the
// real CLI in a child process and reports its wall time and peak RSS (wait4), then times `rankscope
// skew` on the result the same way. Prints numbers; fails only when a command fails.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "nsys_fixture.h"

#include "child_process_run.h"

namespace {

using Run = rankscope::bench::ChildRun;
constexpr auto run = rankscope::bench::run_child;

}  // namespace

int main(int argc, char** argv) {
  using namespace rankscope::nsys::testing;
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 64;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 1000;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("rs_nsys_bench_{}", ::getpid());
  std::filesystem::remove_all(dir);
  FixtureSpec spec;
  spec.flavour = Flavour::k2026;
  spec.identity = Identity::kRankMark;
  spec.world = ranks;
  spec.steps = steps;
  spec.nccl_ranges = true;
  spec.script = standard_script(2, false, nullptr, nullptr, [](int r, int64_t) { return r == 5 ? 20.0 : 0.0; });
  spec.clock_error_ns = [](int r) { return r == 3 ? int64_t(37'000'000) : int64_t(0); };
  // The exports are written by a child process, so that this one stays small: a child's peak RSS
  // (wait4) counts what it inherited at fork, even across exec.
  const auto tw = std::chrono::steady_clock::now();
  const pid_t writer = ::fork();
  if (writer == 0) {
    write_nsys_fixture(dir / "exports", spec);
    std::_Exit(0);
  }
  int wstatus = 0;
  ::waitpid(writer, &wstatus, 0);
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count();
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    std::printf("nsys_import_bench: writing the fixture exports failed\n");
    return 1;
  }
  std::vector<std::filesystem::path> files;
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "exports")) {
    files.push_back(e.path());
    bytes += e.file_size();
  }
  std::sort(files.begin(), files.end());

  const std::string bin = std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope";
  std::vector<std::string> args = {bin, "import-nsys"};
  for (const auto& f : files) args.push_back(f.string());
  args.insert(args.end(), {"-o", (dir / "run").string()});
  const Run imp = run(args);
  const Run skew = run({bin, "skew", (dir / "run").string(), "--json", (dir / "skew.json").string()});
  uint64_t out_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "run")) out_bytes += e.is_regular_file() ? e.file_size() : 0;

  std::printf("nsys_import_bench: %d ranks x %d steps of fixture exports, %.0f MB of SQLite (written in %.1f s)\n", ranks, steps,
              double(bytes) / 1e6, write_s);
  std::printf("rankscope import-nsys: %.2f s (budget 60 s), peak RSS %.0f MB (budget 2048 MB), exit %d, run directory %.0f MB\n",
              imp.seconds, imp.peak_mb, imp.rc, double(out_bytes) / 1e6);
  std::printf("rankscope skew on it: %.2f s, peak RSS %.0f MB, exit %d\n", skew.seconds, skew.peak_mb, skew.rc);
  std::printf("cores: %u, load average %.1f\n", std::thread::hardware_concurrency(), [] {
    double l = 0;
    if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fscanf(f, "%lf", &l) != 1) l = 0;
      std::fclose(f);
    }
    return l;
  }());
  std::filesystem::remove_all(dir);
  return imp.rc == 0 && skew.rc == 0 ? 0 : 1;
}
