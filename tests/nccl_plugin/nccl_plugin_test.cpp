// nccl_plugin_test.cpp — the NCCL profiler plugin end to end, on the fake NCCL driver (no GPU).
//
// Each test runs fake_nccl_driver (4 forked ranks, TP2xDP2, the plugin dlopened and driven through
// one ABI version, with a plugin unload and reload) and then reads what the plugin wrote: the run
// directory as every analyzer opens it, and hangdoctor's verdict (its JSON) for a clean run, a rank
// held back, a rank stopped with SIGSTOP and a rank killed with SIGKILL.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/run_directory.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kDriver = FAKE_NCCL_DRIVER;
const std::string kPlugin = NCCL_PLUGIN_SO;
const std::string kHangdoctor = HANGDOCTOR_BIN;
const std::string kRankscope = RANKSCOPE_BIN;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(RANKSCOPE_BINARY_DIR) / "tests" / "nccl_plugin_runs" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The driver running in the background (a held-back job), stopped by the destructor.
struct Driver {
  pid_t pid = -1;
  int out = -1;
  ~Driver() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }
};

std::vector<std::string> driver_args(const fs::path& dir, int abi, std::vector<std::string> extra) {
  std::vector<std::string> a = {kDriver, "--plugin", kPlugin, "--run-dir", dir.string(), "--abi", std::to_string(abi),
                                "--ranks", "4", "--tp", "2", "--reload", "--reload-after", "1"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

pid_t spawn(const std::vector<std::string>& args, int* stdout_fd) {
  std::vector<char*> argv;
  for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int pipefd[2] = {-1, -1};
  if (stdout_fd) {
    EXPECT_EQ(pipe(pipefd), 0);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
  }
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  if (stdout_fd) {
    close(pipefd[1]);
    *stdout_fd = pipefd[0];
  }
  return pid;
}

int run_to_end(const std::vector<std::string>& args) {
  const pid_t pid = spawn(args, nullptr);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Starts a held-back job and returns once the driver says it is in place ("READY <culprit pid>").
void start_held(Driver& d, const std::vector<std::string>& args, int* culprit_pid) {
  d.pid = spawn(args, &d.out);
  std::string line;
  char ch = 0;
  while (read(d.out, &ch, 1) == 1 && ch != '\n') line += ch;
  ASSERT_EQ(line.rfind("READY ", 0), 0u) << "driver said: " << line;
  *culprit_pid = std::stoi(line.substr(6));
}

std::string output_of(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

nlohmann::json hangdoctor(const fs::path& dir, const std::string& extra = "--stuck-after 1") {
  const std::string out = output_of(kHangdoctor + " " + dir.string() + " --json - --quiet " + extra + " 2>/dev/null");
  auto j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out;
  return j;
}

class NcclPluginAbi : public ::testing::TestWithParam<int> {};

TEST_P(NcclPluginAbi, CleanRunReadsAsFinishedTp2Dp2RunWithMembershipFromTheFiles) {
  const int abi = GetParam();
  const fs::path dir = fresh_dir("clean_v" + std::to_string(abi));
  ASSERT_EQ(run_to_end(driver_args(dir, abi, {"--steps", "3"})), 0);

  auto run = rankscope::format::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->world_size, 4);
  ASSERT_EQ(run->ranks_readable(), 4);
  ASSERT_TRUE(run->metadata.has_value());
  // Communicators before and after the reload, all finalized now: each name is shared by two
  // communicators, so each carries its hash. ABI v3 has no commName: the hash is the name.
  const std::string tp0 = abi == 3 ? "nccl-" : "tp0@";
  int tp0_groups = 0, dp1_groups = 0, world_groups = 0;
  for (const auto& g : run->metadata->groups) {
    if (g.ranks == std::vector<int>{0, 1}) {
      ++tp0_groups;
      EXPECT_EQ(g.name.rfind(tp0, 0), 0u) << g.name;
    }
    if (g.ranks == std::vector<int>{1, 3}) ++dp1_groups;
    if (g.ranks == std::vector<int>{0, 1, 2, 3}) ++world_groups;
  }
  EXPECT_EQ(run->metadata->groups.size(), 10u);
  EXPECT_EQ(tp0_groups, 2);
  EXPECT_EQ(dp1_groups, 2);
  EXPECT_EQ(world_groups, 2);
  for (const auto& rf : run->ranks) {
    ASSERT_TRUE(rf.flight.has_value());
    EXPECT_EQ(rf.flight->live.process_state, rankscope::format::ProcessState::kFinished);
    ASSERT_EQ(rf.flight->comms.size(), 6u) << "world, tp, dp before and after the reload";
    uint64_t completed = 0, issued = 0;
    for (const auto& c : rf.flight->comms) {
      ASSERT_TRUE(c.nccl.has_value());
      EXPECT_EQ(c.nccl->abi_version, uint32_t(abi));
      EXPECT_EQ(c.nccl->dropped_events, 0u);
      issued += c.next_seq;
      completed += c.completed_count;
      for (const auto& rec : c.ring) {
        EXPECT_EQ(rec.state, rankscope::format::CollectiveState::kCompleted) << c.name << " #" << rec.seq;
        EXPECT_TRUE(rec.host_returned);
      }
      if (c.name.rfind("tp", 0) == 0) {
        // Per generation: steps x (AllReduce, AllGather); send/recv counted per peer, not in the ring.
        EXPECT_TRUE(c.next_seq == 2 || c.next_seq == 4) << c.name << " " << c.next_seq;
        ASSERT_EQ(c.nccl->peers.size(), 1u);
        EXPECT_EQ(c.nccl->peers[0].peer, rf.rank % 2 ^ 1);
        EXPECT_EQ(c.nccl->peers[0].send_launched, c.nccl->peers[0].send_completed);
        EXPECT_EQ(c.nccl->peers[0].send_launched, c.next_seq / 2);
        // NCCL's per-function seqNumber rides in `step`: AllReduce #k and AllGather #k alternate.
        ASSERT_GE(c.ring.size(), 2u);
        EXPECT_EQ(c.ring[0].op, rankscope::format::CollectiveOp::kAllReduce);
        EXPECT_EQ(c.ring[1].op, rankscope::format::CollectiveOp::kAllGather);
        EXPECT_EQ(c.ring.back().step, int64_t(c.next_seq / 2 - 1));
      }
      EXPECT_EQ(c.nccl->api_begin_ns, 0) << "no thread left inside an NCCL call";
    }
    EXPECT_EQ(issued, completed);
    EXPECT_EQ(issued, 3u * 4u) << "4 collectives a step on tp, dp and world";
  }
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j.value("verdict", ""), "finished") << j.dump(2);
}

INSTANTIATE_TEST_SUITE_P(Versions, NcclPluginAbi, ::testing::Values(5, 4, 3),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

// Rank 2 stops calling NCCL before step 2 (its first call would be tp1's AllReduce, ring seq 2 of
// the communicators made after the reload): everyone else ends up waiting for it.
void expect_culprit_at_tp1(const nlohmann::json& j) {
  EXPECT_EQ(j["culprit_ranks"], nlohmann::json::array({2})) << j.dump(2);
  ASSERT_TRUE(j["collective"].is_object()) << j.dump(2);
  EXPECT_EQ(j["collective"]["comm"], "tp1");
  EXPECT_EQ(j["collective"]["op"], "allreduce");
  EXPECT_EQ(j["collective"]["seq"], 2);
}

TEST(NcclPluginHang, HeldBackRankIsTheLaggingRank) {
  const fs::path dir = fresh_dir("held");
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 5, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2"}), &culprit);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past --stuck-after 1
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["kind"], "lagging_rank");
  expect_culprit_at_tp1(j);
}

TEST(NcclPluginHang, StoppedRankIsFrozen) {
  const fs::path dir = fresh_dir("sigstop");
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 5, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2", "--signal", "STOP",
                                     "--callback-thread"}), &culprit);
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));  // its heartbeat falls 2 s behind
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["kind"], "rank_frozen");
  expect_culprit_at_tp1(j);
}

TEST(NcclPluginHang, KilledRankIsDead) {
  const fs::path dir = fresh_dir("sigkill");
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 4, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2", "--signal", "KILL"}),
             &culprit);
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "crash") << j.dump(2);
  EXPECT_EQ(j["kind"], "rank_dead");
  expect_culprit_at_tp1(j);
}

// New evidence from NCCL's own events.
TEST(NcclPluginEvidence, LaunchedWithoutKernelChannelStartIsAGpuStreamBlockedBeforeNccl) {
  const fs::path dir = fresh_dir("gpu_stall");
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 5, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2", "--hold-in", "gpu"}), &culprit);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["kind"], "gpu_behind_host");
  expect_culprit_at_tp1(j);
  EXPECT_NE(j["explanation"].get<std::string>().find("GPU stream is blocked before NCCL"), std::string::npos) << j.dump(2);
}

TEST(NcclPluginEvidence, AllKernelsStartedNoneFinishedIsStuckInTheTransport) {
  const fs::path dir = fresh_dir("transport");
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 5, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2", "--hold-in", "transport"}),
             &culprit);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["kind"], "stuck_in_collective");
  EXPECT_EQ(j["culprit_ranks"], nlohmann::json::array());
  EXPECT_EQ(j["collective"]["comm"], "tp1");
  EXPECT_EQ(j["collective"]["seq"], 2);
  EXPECT_NE(j["explanation"].get<std::string>().find("stuck in the transport"), std::string::npos) << j.dump(2);
}

TEST(NcclPluginEvidence, HostThreadInsideGroupEndTooLong) {
  const fs::path dir = fresh_dir("group_end");
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 5, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2", "--hold-in", "group_end"}),
             &culprit);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["culprit_ranks"], nlohmann::json::array({2}));
  // It launched tp1's collectives of the step and never got out of its send/recv group: dp0 (one
  // AllReduce a step, #1 after the reload) is the innermost collective others wait in for it.
  EXPECT_EQ(j["collective"]["comm"], "dp0");
  EXPECT_EQ(j["collective"]["seq"], 1);
  const std::string note = j["ranks"][2]["note"].get<std::string>();
  EXPECT_NE(note.find("inside ncclGroupEnd on tp1"), std::string::npos) << j.dump(2);
  EXPECT_NE(j["explanation"].get<std::string>().find("blocked inside NCCL"), std::string::npos);
}

#ifdef NVTX_EMITTER
// A program using only NVTX's headers: its ranges land in RUN_DIR/nccl/<host>.<pid>.nvtx.flight.
TEST(NvtxInjection, RecordsAProgramsRangesWithDomainPrefixAndCappedDepth) {
  const fs::path dir = fresh_dir("nvtx");
  setenv("NVTX_INJECTION64_PATH", NVTX_INJECTION_SO, 1);
  setenv("RANKSCOPE_RUN_DIR", dir.c_str(), 1);
  const int status = run_to_end({NVTX_EMITTER});
  unsetenv("NVTX_INJECTION64_PATH");
  unsetenv("RANKSCOPE_RUN_DIR");
  ASSERT_EQ(status, 0);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "nccl")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].filename().string().find(".nvtx.flight"), std::string::npos);
  auto snap = rankscope::format::read_flight_recorder(files[0]);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->threads.size(), 2u);
  const auto& main = snap->threads[0];
  EXPECT_EQ(main.depth, 2u) << "30 nested levels pushed and popped again";
  ASSERT_EQ(main.stack.size(), 2u);
  EXPECT_EQ(main.stack[0].name, "train");
  EXPECT_EQ(main.stack[1].name, "megatron/forward");
  ASSERT_EQ(snap->threads[1].stack.size(), 1u);
  EXPECT_EQ(snap->threads[1].stack[0].name, "data/loader");
}

// The plugin and the NVTX library together: the held-back rank is in its data loading.
TEST(NcclPluginHang, HeldBackInDataLoadingIsAHostStall) {
  const fs::path dir = fresh_dir("held_nvtx");
  setenv("NVTX_INJECTION64_PATH", NVTX_INJECTION_SO, 1);
  Driver d;
  int culprit = 0;
  start_held(d, driver_args(dir, 5, {"--steps", "4", "--hold-rank", "2", "--hold-step", "2", "--nvtx"}), &culprit);
  unsetenv("NVTX_INJECTION64_PATH");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const auto j = hangdoctor(dir);
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["kind"], "host_stall");
  expect_culprit_at_tp1(j);
  ASSERT_TRUE(j["ranks"].is_array());
  EXPECT_EQ(j["ranks"][2]["range"], "data/next_batch");
}

// The one-rank PyTorch job of real-gpu/plugin-p2p-run (send/recv to itself inside NVTX ranges, no
// RANK, NCCL's NVTX module first), replayed by self_p2p_job, stopped in its last exchange.
fs::path start_self_p2p_job(Driver& d, const std::string& name, int iterations) {
  const fs::path dir = fresh_dir(name);
  setenv("NVTX_INJECTION64_PATH", NVTX_INJECTION_SO, 1);
  setenv("RANKSCOPE_RUN_DIR", dir.c_str(), 1);
  int pid = 0;
  start_held(d, {SELF_P2P_JOB, "--plugin", kPlugin, "--iterations", std::to_string(iterations)}, &pid);
  unsetenv("NVTX_INJECTION64_PATH");
  unsetenv("RANKSCOPE_RUN_DIR");
  return dir;
}

nlohmann::json inspect_json(const fs::path& dir) {
  const std::string out = output_of(kRankscope + " inspect " + dir.string() + " --json 2>/dev/null");
  auto j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out;
  return j;
}

// What inspect must show of that job: rank 0 of 1 without RANK, 11 sends and 11 recvs to itself
// whose completion is unknowable, and the open ranges train/step > exchange.
void expect_self_p2p_inspect(const nlohmann::json& j, uint64_t exchanges) {
  EXPECT_EQ(j["world_size"], 1) << j.dump(2);
  ASSERT_EQ(j["ranks"].size(), 1u);
  const auto& r = j["ranks"][0];
  ASSERT_EQ(r["comms"].size(), 1u) << j.dump(2);
  const auto& p2p = r["comms"][0]["p2p"];
  ASSERT_EQ(p2p.size(), 1u) << j.dump(2);
  EXPECT_EQ(p2p[0]["peer"], 0);
  EXPECT_EQ(p2p[0]["to_self"], true);
  EXPECT_EQ(p2p[0]["completion_observable"], false);
  EXPECT_EQ(p2p[0]["send_issued"], exchanges);
  EXPECT_EQ(p2p[0]["recv_issued"], exchanges);
  EXPECT_EQ(r["comms"][0]["nccl_call"], nullptr) << "the host left ncclGroupEnd";
  ASSERT_FALSE(r["threads"].empty()) << j.dump(2);
  const auto& stack = r["threads"][0]["ranges"];
  ASSERT_EQ(stack.size(), 2u) << j.dump(2);
  EXPECT_EQ(stack[0]["name"], "train/step");
  EXPECT_EQ(stack[1]["name"], "exchange");
  for (const auto& p : j["problems"]) EXPECT_EQ(p.get<std::string>().find("no launcher rank"), std::string::npos) << p;
}

void expect_self_p2p_diagnosis(const nlohmann::json& j) {
  EXPECT_EQ(j["verdict"], "hang") << j.dump(2);
  EXPECT_EQ(j["culprit_ranks"], nlohmann::json::array({0})) << j.dump(2);
  EXPECT_EQ(j["ranks"][0]["range"], "exchange") << j.dump(2);
  EXPECT_NE(j["ranks"][0]["note"].get<std::string>().find("11 send(s), 11 recv(s) to itself"), std::string::npos)
      << j.dump(2);
  const std::string why = j["explanation"].get<std::string>();
  EXPECT_NE(why.find("sent to and received from itself on nccl-f0ec67fd6fd098a2 (11 sends, 11 recvs)"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCL reports no GPU progress"), std::string::npos) << why;
  // The plugin records no step: the headline names the range and no step number.
  const std::string headline = j["headline"].get<std::string>();
  EXPECT_NE(headline.find("stuck in compute in exchange for"), std::string::npos) << headline;
}

TEST(NcclPluginSelfP2p, SendRecvToSelfAndNvtxRangesReachInspectAndHangdoctor) {
  Driver d;
  const fs::path dir = start_self_p2p_job(d, "self_p2p", 10);
  expect_self_p2p_inspect(inspect_json(dir), 11);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past --stuck-after 1
  const auto j = hangdoctor(dir);
  expect_self_p2p_diagnosis(j);
  const std::string why = j["explanation"].get<std::string>();
  EXPECT_NE(why.find("all handed to the GPU"), std::string::npos) << why;
  auto run = rankscope::format::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (const auto& p : run->problems) EXPECT_EQ(p.find("lost its claim"), std::string::npos) << p;
}

// NCCL sends no KernelCh for a send/recv to self: its in-flight slot must be freed at the host stop,
// or 256 slots run out after 128 exchanges and every later event is dropped.
TEST(NcclPluginSelfP2p, SendRecvToSelfDoesNotExhaustTheInflightSlots) {
  Driver d;
  const fs::path dir = start_self_p2p_job(d, "self_p2p_many", 300);
  std::vector<fs::path> recorders;
  for (const auto& e : fs::directory_iterator(dir / "nccl"))
    if (e.path().filename().string().find(".r0.flight") != std::string::npos) recorders.push_back(e.path());
  ASSERT_EQ(recorders.size(), 1u);
  auto snap = rankscope::format::read_flight_recorder(recorders[0]);
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->comms.size(), 1u);
  const auto& n = *snap->comms[0].nccl;
  EXPECT_EQ(n.dropped_events, 0u);
  ASSERT_EQ(n.peers.size(), 1u);
  EXPECT_EQ(n.peers[0].send_launched, 301u);
  EXPECT_EQ(n.peers[0].send_completed, 0u) << "completion of a send to self is never known";
}
#endif

// The real run directory of that job, written on an H100 by NCCL 2.28.9 and the plugin and NVTX
// library of 9f2fed4: its NVTX recorder's slot lost its claim (the file was created twice).
TEST(NcclPluginRealGpu, PluginP2pRunShowsSendRecvToSelfAndOpenRanges) {
  const fs::path dir = fs::path(REAL_GPU_DATA) / "plugin-p2p-run";
  if (!fs::exists(dir)) GTEST_SKIP() << dir << " absent: real GPU data not beside the source tree";
  expect_self_p2p_inspect(inspect_json(dir), 11);
  const auto j = hangdoctor(dir);
  expect_self_p2p_diagnosis(j);
  EXPECT_TRUE(j["ranks"][0]["alive"].is_null()) << "pid 456 of another machine's boot says nothing here";
}

// No hang: rank 1's host work takes 30 ms longer every step, so its peers wait for it in their first
// collective of each step. The plugin records no step and no range; skew and export read the event
// streams rebuilt from the collective rings (one step = one period of the world all-reduce).
TEST(NcclPluginSkew, SlowRankIsTheStragglerInSkewAndEveryRankIsInTheExport) {
  const fs::path dir = fresh_dir("slow_rank");
  ASSERT_EQ(run_to_end({kDriver, "--plugin", kPlugin, "--run-dir", dir.string(), "--abi", "5", "--ranks", "4", "--tp",
                        "2", "--steps", "12", "--compute-ms", "5", "--slow-rank", "1", "--slow-ms", "30"}),
            0);
  auto run = rankscope::format::open_run_directory(dir);
  ASSERT_TRUE(run.ok()) << run.status().message();
  for (const auto& rf : run->ranks) EXPECT_TRUE(rf.has_events()) << "rank " << rf.rank;

  const std::string text = output_of(kRankscope + " skew " + dir.string() + " 2>&1");
  const auto j = nlohmann::json::parse(output_of(kRankscope + " skew " + dir.string() + " --json - --quiet 2>/dev/null"),
                                       nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << text;
  // 12 steps make 11 whole periods between world all-reduces; the first may be cut by warm-up.
  EXPECT_GE(j["steps"]["count"].get<int>(), 9) << text;
  ASSERT_FALSE(j["findings"].empty()) << text;
  EXPECT_EQ(j["findings"][0]["ranks"], nlohmann::json::array({1})) << text;
  // Its step is no longer than the others' (they wait for it), but its time outside collectives is.
  double slow = 0, fast = 1e9;
  for (const auto& r : j["ranks"]) {
    const double ms = r["noncomm_ms_median"].get<double>();
    if (r["rank"] == 1) slow = ms;
    else fast = std::min(fast, ms);
  }
  EXPECT_GT(slow, fast + 20) << text;

  const fs::path trace = dir / "trace.json";
  const std::string exported = output_of(kRankscope + " export " + dir.string() + " --chrome " + trace.string() + " 2>&1");
  std::ifstream in(trace);
  const auto t = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(t.is_discarded()) << exported;
  std::set<int> ranks_with_collectives;
  for (const auto& e : t["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("cat", "").find("collective") != std::string::npos)
      ranks_with_collectives.insert(e["pid"].get<int>());
  EXPECT_EQ(ranks_with_collectives, (std::set<int>{0, 1, 2, 3})) << exported;
}

}  // namespace
