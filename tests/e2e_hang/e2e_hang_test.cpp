// e2e_hang_test.cpp — the acceptance matrix of hangdoctor on real jobs: gpt2-train (tiny, CPU)
// under mpirun with 2 and 4 ranks, TP and DP, each --inject fault, diagnosed live with
// `hangdoctor RUN_DIR --wait S --json FILE`. Each test checks verdict, kind, culprit rank,
// collective (comm, seq, op) and the culprit's range; the expected seq is read independently from
// the culprit's own flight recorder. The time from the hang to the verdict is printed.
#include <gtest/gtest.h>
#include <signal.h>
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

#include "rankscope/analyzers/hang/hangdoctor_app.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::hang {
namespace {

using nlohmann::json;

constexpr double kQuietS = 4.0;  // --wait: no progress for this long means stuck

std::filesystem::path scratch() {
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
Verdict hangdoctor(const std::filesystem::path& run_dir, bool wait, bool stacks = false) {
  const auto json_file = run_dir.parent_path() / "diagnosis.json";
  std::vector<std::string> argv = {run_dir.string(), "--json", json_file.string()};
  if (wait) {
    argv.push_back("--wait");
    argv.push_back(std::to_string(kQuietS));
  }
  if (stacks) argv.push_back("--stacks");
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  HangdoctorEnv env;
  env.out = out;
  std::vector<std::string_view> args(argv.begin(), argv.end());
  Verdict v;
  v.code = run_hangdoctor(args, env);
  std::fclose(out);
  v.text.assign(buf, len);
  std::free(buf);
  std::printf("%s", v.text.c_str());
  std::ifstream in(json_file);
  if (in) v.j = json::parse(in, nullptr, false);
  if (v.j.contains("wait") && v.j["wait"]["hang_to_verdict_s"].is_number())
    std::printf("[e2e] time from the hang to the verdict (--wait %.0f): %.2f s\n", kQuietS,
                v.j["wait"]["hang_to_verdict_s"].get<double>());
  return v;
}

// What the culprit's own recorder says it issued on `comm` (the seq it never entered).
uint64_t issued_on(const std::filesystem::path& run_dir, int rank, const std::string& comm) {
  auto run = format::open_run_directory(run_dir);
  EXPECT_TRUE(run.ok());
  const auto* c = run->ranks[rank].flight->comm(comm);
  EXPECT_NE(c, nullptr) << comm;
  return c ? c->next_seq : 0;
}

void expect_verdict(const Verdict& v, const std::string& verdict, const std::string& kind, std::vector<int> culprits) {
  ASSERT_TRUE(v.j.is_object()) << v.text;
  EXPECT_EQ(v.j.at("verdict"), verdict) << v.text;
  EXPECT_EQ(v.j.at("kind"), kind) << v.text;
  EXPECT_EQ(v.j.at("culprit_ranks"), json(culprits)) << v.text;
  EXPECT_EQ(v.code, 1);
}

// The verdict's collective is (comm, seq, op).
void expect_collective(const Verdict& v, const std::string& comm, uint64_t seq, const std::string& op = "allreduce_sum") {
  ASSERT_TRUE(v.j.at("collective").is_object()) << v.text;
  const auto& c = v.j.at("collective");
  EXPECT_EQ(c.at("comm"), comm) << v.text;
  EXPECT_EQ(c.at("seq"), seq) << v.text;
  EXPECT_EQ(c.at("op"), op) << v.text;
}

TEST(E2eHang, StallInEmbeddingTp2) {
  const auto base = scratch();
  Job job(base, 2, 2, 20, {"--inject", "stall:rank=1,range=forward/embed,step=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true, /*stacks=*/true);
  expect_verdict(v, "hang", "lagging_rank", {1});
  expect_collective(v, "tp0", issued_on(job.run_dir(), 1, "tp0"));
  const auto& c = v.j.at("collective");
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "forward/embed");
  EXPECT_EQ(v.j.at("ranks")[0].at("state"), "waiting");
  EXPECT_EQ(v.j.at("ranks")[0].at("seq"), c.at("seq"));
  EXPECT_EQ(v.text.rfind("HANG: rank 1 never entered allreduce #", 0), 0u) << job.log();
  // --stacks: the culprit's native stacks, with function names, stored as run-directory evidence.
  ASSERT_TRUE(v.j.at("ranks")[1].contains("stacks_file")) << v.text;
  std::ifstream in(job.run_dir() / v.j.at("ranks")[1].at("stacks_file").get<std::string>());
  const std::string stacks(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(stacks.find("on_range_enter"), std::string::npos) << stacks;  // the injected stall's frame
}

TEST(E2eHang, StallInBackwardTp2Dp2) {
  const auto base = scratch();
  Job job(base, 4, 2, 20, {"--inject", "stall:rank=3,range=backward/block1/mlp,step=2"});
  ASSERT_TRUE(job.wait_step(1, 4, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "lagging_rank", {3});
  expect_collective(v, "tp1", issued_on(job.run_dir(), 3, "tp1"));  // innermost, not the DP ranks downstream
  EXPECT_EQ(v.j.at("ranks")[3].at("range"), "backward/block1/mlp");
}

TEST(E2eHang, StallInDataIsAHostStallDp2) {
  const auto base = scratch();
  Job job(base, 2, 1, 20, {"--inject", "stall:rank=1,range=data,step=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "host_stall", {1});
  expect_collective(v, "dp0", issued_on(job.run_dir(), 1, "dp0"));
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "data");
}

// MPI matches calls by order, so the skipping rank's shifted calls pair with the others' until an
// op or size differs (then MPI aborts the job). The desync began at the skipped seq.
TEST(E2eHang, SkipTp2) {
  const auto base = scratch();
  Job job(base, 2, 2, 20, {"--inject", "skip:rank=1,comm=tp0,seq=15"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "desync", "collective_mismatch", {1});
  expect_collective(v, "tp0", 15);
  const auto& c = v.j.at("collective");
  ASSERT_TRUE(v.j.at("mismatch").is_object()) << v.text;
  EXPECT_EQ(v.j.at("mismatch").at("field"), "range");
  const auto& by_rank = v.j.at("mismatch").at("values_by_rank");
  EXPECT_NE(by_rank.at("0"), by_rank.at("1"));
  EXPECT_EQ(c.at("range"), by_rank.at("0"));  // the call the others made at the skipped seq
}

TEST(E2eHang, ResizeTp2) {
  const auto base = scratch();
  Job job(base, 2, 2, 20, {"--inject", "resize:rank=1,comm=tp0,seq=15,factor=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "desync", "collective_mismatch", {1});
  expect_collective(v, "tp0", 15);
  const auto& c = v.j.at("collective");
  EXPECT_EQ(v.j.at("mismatch").at("field"), "count");
  const auto& by_rank = v.j.at("mismatch").at("values_by_rank");
  EXPECT_EQ(std::stoull(by_rank.at("1").get<std::string>()), 2 * std::stoull(by_rank.at("0").get<std::string>()));
  // The culprit is inside the resized call: its innermost range is that call's site.
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), c.at("range"));
}

TEST(E2eHang, CrashTp2Dp2) {
  const auto base = scratch();
  Job job(base, 4, 2, 20, {"--inject", "crash:rank=2,step=2"}, /*keep_survivors=*/true);
  ASSERT_TRUE(job.wait_step(1, 4, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "crash", "rank_dead", {2});
  expect_collective(v, "tp1", issued_on(job.run_dir(), 2, "tp1"));
  EXPECT_EQ(v.j.at("ranks")[2].at("alive"), false);
  EXPECT_EQ(v.j.at("ranks")[3].at("alive"), true);
  EXPECT_EQ(v.j.at("ranks")[2].at("range"), "step");  // it died entering the step
}

TEST(E2eHang, DropGradDp2) {
  const auto base = scratch();
  Job job(base, 2, 1, 20, {"--inject", "drop-grad:rank=1,param=h.0.mlp.c_fc.weight,step=2"});
  ASSERT_TRUE(job.wait_step(1, 2, 120)) << job.log();  // past start-up, which makes no progress
  const Verdict v = hangdoctor(job.run_dir(), true);
  expect_verdict(v, "hang", "missing_gradient", {1});
  expect_collective(v, "dp0", issued_on(job.run_dir(), 1, "dp0"));
  ASSERT_EQ(v.j.at("missing_gradients").size(), 1u) << v.text;
  const auto& g = v.j.at("missing_gradients")[0];
  EXPECT_EQ(g.at("rank"), 1);
  EXPECT_EQ(g.at("param"), "h.0.mlp.c_fc.weight");
  auto run = format::open_run_directory(job.run_dir());
  int bucket = -2;
  for (const auto& p : run->ranks[1].flight->params)
    if (p.name == "h.0.mlp.c_fc.weight") bucket = p.bucket;
  EXPECT_EQ(g.at("bucket"), bucket);
  EXPECT_EQ(v.j.at("ranks")[1].at("range"), "grad_sync");
}

TEST(E2eHang, StragglerDelayIsHealthyThenFinished) {
  const auto base = scratch();
  Job job(base, 2, 2, 12, {"--inject", "delay:rank=1,range=forward/block0/mlp,ms=40"});
  ASSERT_TRUE(job.wait_step(3, 2, 60)) << job.log();
  const Verdict live = hangdoctor(job.run_dir(), false);
  EXPECT_EQ(live.j.at("verdict"), "healthy") << live.text;
  EXPECT_EQ(live.code, 0);
  ASSERT_TRUE(job.wait_exit(120)) << job.log();
  const Verdict done = hangdoctor(job.run_dir(), false);
  EXPECT_EQ(done.j.at("verdict"), "finished") << done.text;
  EXPECT_EQ(done.code, 0);
}

TEST(E2eHang, CleanRunFinished) {
  const auto base = scratch();
  Job job(base, 2, 2, 5, {});
  int status = 0;
  ASSERT_TRUE(job.wait_exit(120, &status)) << job.log();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << job.log();
  const Verdict v = hangdoctor(job.run_dir(), true);  // --wait on a finished job returns at once
  EXPECT_EQ(v.j.at("verdict"), "finished") << v.text;
  EXPECT_EQ(v.code, 0);
}

}  // namespace
}  // namespace rankscope::hang
