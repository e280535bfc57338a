// skew_contention_e2e_test.cpp — a real straggler nobody injected: two ranks
// pinned one per core (`mpirun --bind-to core`), and a busy process pinned to rank 1's core, so
// rank 1 gets about half a core for every range it runs. `rankscope skew` must call that a
// uniform slowdown (the rank's host, not its code) with a factor near 2, not a range-specific
// finding about whichever range happens to precede the collective. Label mpi; runs alone (its
// own ctest RUN_SERIAL) because any other test on the machine would contend for the same cores.
// Skips on a machine with fewer than two usable cores.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "train_job.h"

namespace rankscope::analyzers {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The usable CPUs in order; mpirun --map-by core puts rank r on the r-th of them.
std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// A process spinning on one CPU until killed.
class BusyProcess {
 public:
  explicit BusyProcess(int cpu) {
    pid_ = fork();
    if (pid_ == 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof set, &set);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
  }
  ~BusyProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  BusyProcess(const BusyProcess&) = delete;
  BusyProcess& operator=(const BusyProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The share of `cpu` a process pinned there gets over `window` (1: the core is idle but for it): a
// busy child's CPU time over the wall time it ran.
double available_share(int cpu, std::chrono::milliseconds window) {
  const auto start = std::chrono::steady_clock::now();
  {
    BusyProcess probe(cpu);
    std::this_thread::sleep_for(window);
    // The child's CPU time, read before it is killed: /proc/<pid>/stat utime + stime (clock ticks).
    std::ifstream in("/proc/" + std::to_string(probe.pid()) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) return 1;
    std::istringstream fields(stat.substr(close + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt: fields 3-13
    long utime = 0, stime = 0;
    fields >> utime >> stime;
    const double cpu_s = double(utime + stime) / double(sysconf(_SC_CLK_TCK));
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return wall_s > 0 ? cpu_s / wall_s : 1;
  }
}

TEST(SkewContentionE2E, RankSharingItsCoreWithABusyProcessIsAUniformSlowdown) {
  const std::vector<int> cpus = usable_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two usable cores, has " << cpus.size();
  // The contention is made on rank 1's core and measured against rank 0's, which must be free: on a
  // machine whose other work takes half of rank 0's core, the two cannot be told apart (rank 0 at
  // 1191 ms of compute a step against rank 1's 1222 was seen with four fuzzers running beside it).
  // Skipped there, with the share it found; CI runs this test alone (RUN_SERIAL) on an idle machine.
  if (const double share = available_share(cpus[0], std::chrono::milliseconds(500)); share < 0.85)
    GTEST_SKIP() << "core " << cpus[0] << " is busy with other work: a process there gets " << int(100 * share)
                 << "% of it; this test needs it nearly free";
  const fs::path dir = e2e::fresh_run_dir("skew_contention_rank1");
  // Waiting ranks yield their core: rank 0 waits for rank 1 at every collective.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  std::vector<std::string> argv = {e2e::mpirun_path(), "-np", "2", "--bind-to", "core", "--map-by", "core",
                                   "-x", "OMP_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1",
                                   e2e::gpt2_train_path()};
  for (const char* a : {"--model", "tiny", "--tp", "2", "--vocab-size", "1024", "--data", "synthetic:zipf", "--seq-len", "256",
                        "--batch", "8", "--steps", "14", "--quiet", "--run-dir"})
    argv.push_back(a);
  argv.push_back(dir.string());
  std::string out;
  {
    // Three spinners: a fair scheduler leaves rank 1 a quarter of its core. With one, a rank that
    // sleeps in its collectives got back up to three quarters of it on some kernels (1.37x, too close
    // to the peers' noise to call); with two, other work on the machine (it is shared: builds, other
    // tests' jobs) slowed rank 0 enough that the ratio came near the bounds below (1.7x, 1 run in 4).
    BusyProcess busy(cpus[1]), busy_too(cpus[1]), busy_three(cpus[1]);
    ASSERT_EQ(e2e::run_to_end(argv, dir, 400s, &out), 0) << out;
  }
  SkewOptions after_warmup;
  after_warmup.first_step = 3;
  auto report = analyze_skew(dir, after_warmup);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  for (const auto& f : report->findings) std::printf("finding: [%s %.1f ms/step] %s\n", f.cls.c_str(), f.cost_ms_per_step, f.text.c_str());
  std::printf("compute per step: rank 0 %.1f ms, rank 1 %.1f ms\n", report->ranks[0].compute_ms, report->ranks[1].compute_ms);
  const Finding* straggler = nullptr;
  for (const auto& f : report->findings) {
    if ((f.kind == "late_arrival" || f.kind == "straggler") && !f.ranks.empty()) {
      straggler = &f;
      break;
    }
  }
  ASSERT_NE(straggler, nullptr) << "no straggler finding";
  EXPECT_EQ(straggler->ranks.front(), 1) << straggler->text;
  EXPECT_EQ(straggler->cls, "uniform_slowdown") << straggler->text;
  EXPECT_GT(straggler->slowdown_factor, 1.4) << straggler->text;
  // The factor is the rank's own range times against its peers', so it must agree with the compute
  // each rank measured: a factor read from waits, or from the wrong rank, would not. Its size is
  // the scheduler's business (four runnable processes on one core: ~4x, more on a loaded machine
  // from context switches and a cold cache), so it is compared, not bounded: within a factor of two
  // of the compute ratio. The two measure different things (the factor: the rank's range times
  // against its peers', range by range; the ratio: each rank's compute class, which also holds time
  // outside every range), and work outside this test on a shared machine moves them apart (3.22x
  // against 1.98x seen); a factor read from the wrong rank (below 1) or from waits is outside it.
  const double compute_ratio = report->ranks[1].compute_ms / report->ranks[0].compute_ms;
  EXPECT_GT(compute_ratio, 1.4);
  EXPECT_GT(straggler->slowdown_factor, compute_ratio / 2) << straggler->text;
  EXPECT_LT(straggler->slowdown_factor, compute_ratio * 2) << straggler->text;
}

}  // namespace
}  // namespace rankscope::analyzers
