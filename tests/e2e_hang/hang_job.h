// hang_job.h — what the end-to-end hang tests share: a `mpirun ... gpt2-train` job in its own
// process group (killed with its ranks on destruction), hangdoctor run in process with the real
// process table, and the checks on its JSON verdict.
// Is not: a test; the tests are e2e_hang_test.cpp (the --inject matrix) and
// e2e_diagnosis_test.cpp (frozen ranks, one process, learned bounds).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::analyzers::hang::e2e {

using nlohmann::json;

inline std::filesystem::path scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() / ("rs_e2e_hang_" + std::to_string(::getpid()) + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// One `mpirun ... gpt2-train ...` in its own process group; killed (with its ranks) on destruction.
class Job {
 public:
  Job(const std::filesystem::path& base, int np, int tp, int steps, const std::vector<std::string>& extra,
      bool keep_survivors = false)
      : run_dir_(base / "run") {
    // One compute thread per rank: two cores are shared by every rank (and whatever else runs).
    std::vector<std::string> argv = {RANKSCOPE_MPIEXEC, "-np", std::to_string(np), "--oversubscribe", "--bind-to", "none",
                                     "-x", "OMP_NUM_THREADS=1", "-x", "OPENBLAS_NUM_THREADS=1"};
    // A rank that kills itself would make mpirun kill the others; a crash test wants them stuck.
    if (keep_survivors) {
      argv.push_back("--mca");
      argv.push_back("orte_enable_recovery");
      argv.push_back("1");
    }
    for (const std::string& a : {std::string(RANKSCOPE_BINARY_DIR) + "/bin/gpt2-train", std::string("--model"),
                                 std::string("tiny"), std::string("--data"), std::string("synthetic:zipf"),
                                 std::string("--batch"), std::string("2"), std::string("--seq-len"), std::string("32"),
                                 std::string("--quiet"), std::string("--watchdog-timeout"), std::string("600")})
      argv.push_back(a);
    for (const std::string& a : {std::string("--tp"), std::to_string(tp), std::string("--steps"), std::to_string(steps),
                                 std::string("--run-dir"), run_dir_.string()})
      argv.push_back(a);
    argv.insert(argv.end(), extra.begin(), extra.end());
    log_ = base / "job.log";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      std::FILE* f = std::freopen(log_.c_str(), "w", stdout);
      (void)f;
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
  }
  ~Job() {
    // Kill the ranks (pids from their recorders: they may sit in another process group), then mpirun.
    if (auto run = format::open_run_directory(run_dir_); run.ok())
      for (const auto& r : run->ranks)
        if (r.flight && r.flight->pid > 0) ::kill(r.flight->pid, SIGKILL);
    if (!exited_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // True when mpirun exited within `seconds`; its exit status in `status`.
  bool wait_exit(double seconds, int* status = nullptr) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        if (status) *status = st;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // Waits until every rank's recorder shows at least `step`.
  bool wait_step(int64_t step, int world, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (auto run = format::open_run_directory(run_dir_); run.ok() && run->ranks_readable() == world) {
        bool all = true;
        for (const auto& r : run->ranks) all = all && r.flight && r.flight->live.step >= step;
        if (all) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::filesystem::path run_dir_, log_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

struct Verdict {
  int code = -1;
  json j;
  std::string text;
};

// `hangdoctor RUN_DIR [--wait S] --json FILE`, in process, with the real process table.
inline Verdict hangdoctor(const std::filesystem::path& run_dir, bool wait, bool stacks = false, double quiet_s = 4.0) {
  const auto json_file = run_dir.parent_path() / "diagnosis.json";
  std::vector<std::string> argv = {run_dir.string(), "--json", json_file.string()};
  if (wait) {
    argv.push_back("--wait");
    argv.push_back(std::to_string(quiet_s));
  }
  if (stacks) argv.push_back("--stacks");
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  cli::HangdoctorEnv env;
  env.out = out;
  std::vector<std::string_view> args(argv.begin(), argv.end());
  Verdict v;
  v.code = cli::run_hangdoctor(args, env);
  std::fclose(out);
  v.text.assign(buf, len);
  std::free(buf);
  std::printf("%s", v.text.c_str());
  std::ifstream in(json_file);
  if (in) v.j = json::parse(in, nullptr, false);
  if (v.j.contains("wait") && v.j["wait"]["hang_to_verdict_s"].is_number())
    std::printf("[e2e] time from the hang to the verdict (--wait %.0f): %.2f s\n", quiet_s,
                v.j["wait"]["hang_to_verdict_s"].get<double>());
  return v;
}

// What the culprit's own recorder says it issued on `comm` (the seq it never entered).
inline uint64_t issued_on(const std::filesystem::path& run_dir, int rank, const std::string& comm) {
  auto run = format::open_run_directory(run_dir);
  EXPECT_TRUE(run.ok());
  const auto* c = run->ranks[rank].flight->comm(comm);
  EXPECT_NE(c, nullptr) << comm;
  return c ? c->next_seq : 0;
}

inline void expect_verdict(const Verdict& v, const std::string& verdict, const std::string& kind, std::vector<int> culprits) {
  ASSERT_TRUE(v.j.is_object()) << v.text;
  EXPECT_EQ(v.j.at("verdict"), verdict) << v.text;
  EXPECT_EQ(v.j.at("kind"), kind) << v.text;
  EXPECT_EQ(v.j.at("culprit_ranks"), json(culprits)) << v.text;
  EXPECT_EQ(v.code, 1);
}

// The verdict's collective is (comm, seq, op).
inline void expect_collective(const Verdict& v, const std::string& comm, uint64_t seq, const std::string& op = "allreduce_sum") {
  ASSERT_TRUE(v.j.at("collective").is_object()) << v.text;
  const auto& c = v.j.at("collective");
  EXPECT_EQ(c.at("comm"), comm) << v.text;
  EXPECT_EQ(c.at("seq"), seq) << v.text;
  EXPECT_EQ(c.at("op"), op) << v.text;
}

// `n` processes that spin on a core each until destroyed: a machine at load n for what runs beside.
class BusyLoad {
 public:
  explicit BusyLoad(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        volatile uint64_t x = 0;
        for (;;) x = x + 1;
      }
      pids_.push_back(pid);
    }
  }
  ~BusyLoad() {
    for (pid_t p : pids_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  }

 private:
  std::vector<pid_t> pids_;
};

inline double load_average_1min() {
  double l = -1;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

inline int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The learned-bounds acceptance scenario: tiny TP2, rank 1 stalls in `range` (forward/embed) at
// `step`; hangdoctor with no flags is polled every `poll_s` until it says hang. The time is from the
// stall's start (rank 1's `range` begin, from its recorder) to the verdict. Step 0 is start-up
// (e.g. range init/model).
struct StallTiming {
  Verdict verdict;
  double stall_to_verdict_s = -1;
  std::string log;
};
inline StallTiming stall_to_verdict(const std::filesystem::path& base, int64_t step = 25, double poll_s = 0.25,
                                    double give_up_s = 120, const std::string& range = "forward/embed") {
  StallTiming out;
  Job job(base, 2, 2, 100000, {"--inject", "stall:rank=1,range=" + range + ",step=" + std::to_string(step)});
  // Start-up (step 0) is before the first step: the recorders say step -1 until then.
  if (!job.wait_step(step > 0 ? step : -1, 2, give_up_s)) {
    out.log = job.log();
    return out;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(give_up_s);
  while (std::chrono::steady_clock::now() < end) {
    const std::filesystem::path json_file = base / "diagnosis.json";
    std::vector<std::string> argv = {job.run_dir().string(), "--json", json_file.string()};
    std::vector<std::string_view> args(argv.begin(), argv.end());
    std::FILE* devnull = std::fopen("/dev/null", "w");
    cli::HangdoctorEnv env;
    env.out = devnull;
    env.err = devnull;
    const int code = cli::run_hangdoctor(args, env);
    const int64_t verdict_ns = unix_now_ns();
    std::fclose(devnull);
    if (code == 1) {
      std::ifstream in(json_file);
      out.verdict.j = json::parse(in, nullptr, false);
      out.verdict.code = code;
      if (out.verdict.j.is_object() && out.verdict.j.value("verdict", "") == "hang") {
        auto run = format::open_run_directory(job.run_dir());
        const auto* main = run.ok() && run->ranks[1].flight ? run->ranks[1].flight->main_thread() : nullptr;
        if (main && !main->stack.empty() && main->stack.back().name == range)
          out.stall_to_verdict_s = double(verdict_ns - main->stack.back().begin_ns) * 1e-9;
        out.verdict.text = out.verdict.j.value("headline", "");
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
  out.log = job.log();
  return out;
}

}  // namespace rankscope::analyzers::hang::e2e
