// log_verdict_test.cpp — hangdoctor on a job's log.
//
// Our own scenarios are written by log_test_support.h in the line shapes NCCL 2.23+ and PyTorch 2.x
// print (docs/log-formats/): a lagging rank and a mismatch on COLL lines, an init hang, an IB error
// on one host, a socket fallback, watchdog timeouts on some ranks. The real logs are in
// tests/fixtures/logs/nccl (cut from public issues, each named in its SOURCES.md) and
// tests/fixtures/logs/nccl/real-peers (nccl-tests on two A100s, Timez-zx/nccl-tests).
#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "log_test_support.h"
#include "rankscope/analyzers/hang/log_verdict.h"
#include "rankscope/logs/log_import.h"

namespace rankscope::logs {
namespace {

namespace fs = std::filesystem;
using analyzers::hang::Kind;
using analyzers::hang::Verdict;
using testing::Proc;

fs::path scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / fmt::format("rs_logs_{}_{}", ::getpid(), name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

fs::path fixtures() { return fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/logs"; }

analyzers::hang::LogVerdict judge(const std::vector<fs::path>& paths) {
  auto r = import_logs(paths);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  return analyzers::hang::diagnose_log(*r);
}

analyzers::hang::LogVerdict judge_text(const std::string& name, const std::string& text) {
  return judge({testing::write_file(scratch(name) / "job.log", text)});
}

const analyzers::hang::LogReport::Finding* finding(const analyzers::hang::LogVerdict& v, std::string_view kind) {
  for (const auto& f : v.report.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

std::string dump(const analyzers::hang::LogVerdict& v) {
  return analyzers::hang::render_text(v.diagnosis) + analyzers::hang::render_log_findings(v.report);
}

// Four ranks on two hosts, one communicator; every rank makes `calls[r]` all-reduces.
std::string coll_job(const std::vector<int>& calls, int odd_rank = -1, long odd_count = 0, int odd_call = -1) {
  std::string log;
  std::vector<Proc> procs;
  for (int r = 0; r < int(calls.size()); ++r) {
    procs.push_back(Proc{r < 2 ? "n0" : "n1", 1000 + r, r % 2});
    log += procs.back().init(fmt::format("0x55{:04x}", r), r, int(calls.size()), "0x54fe282d32a87d85", true);
  }
  const int most = *std::max_element(calls.begin(), calls.end());
  for (int i = 0; i < most; ++i)
    for (int r = 0; r < int(calls.size()); ++r)
      if (i < calls[r])
        log += procs[r].coll("AllReduce", r == odd_rank && i == odd_call ? odd_count : 1024, 7,
                             fmt::format("0x55{:04x}", r), int(calls.size()));
  return log;
}

TEST(LogVerdict, FewestCallsOnACommunicatorIsTheLaggingRank) {
  const auto v = judge_text("lagging", coll_job({10, 10, 9, 10}));
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kHang) << dump(v);
  EXPECT_EQ(v.diagnosis.kind, Kind::kLaggingRank) << dump(v);
  EXPECT_EQ(v.diagnosis.culprit_ranks, std::vector<int>{2}) << dump(v);
  ASSERT_TRUE(v.diagnosis.collective.has_value());
  EXPECT_EQ(v.diagnosis.collective->seq, 10u);
  EXPECT_EQ(analyzers::hang::host_of(v.diagnosis, 2), "n1");
}

TEST(LogVerdict, SameCallDifferentCountIsAMismatch) {
  const auto v = judge_text("mismatch", coll_job({8, 8, 8, 8}, 1, 2048, 5));
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kDesync) << dump(v);
  EXPECT_EQ(v.diagnosis.kind, Kind::kCollectiveMismatch) << dump(v);
  EXPECT_EQ(v.diagnosis.culprit_ranks, std::vector<int>{1}) << dump(v);
}

TEST(LogVerdict, AllCallsMatchedIsNotAHang) {
  const auto v = judge_text("healthy", coll_job({6, 6, 6, 6}));
  EXPECT_NE(v.diagnosis.verdict, Verdict::kHang) << dump(v);
  EXPECT_NE(v.diagnosis.verdict, Verdict::kDesync) << dump(v);
  EXPECT_EQ(analyzers::hang::exit_code(v.diagnosis), 0) << dump(v);
}

TEST(LogVerdict, InitNeverCompletedNamesTheRanksThatNeverJoined) {
  std::string log;
  for (int r : {0, 1, 3}) log += Proc{r < 2 ? "n0" : "n1", 2000 + r, r % 2}.init("0x7f01", r, 4, "0xabc", false);
  const auto v = judge_text("init", log);
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kHang) << dump(v);
  EXPECT_EQ(v.diagnosis.kind, Kind::kInitIncomplete) << dump(v);
  EXPECT_EQ(v.diagnosis.culprit_ranks, std::vector<int>{2}) << dump(v);
  EXPECT_NE(v.diagnosis.headline.find("init never completed on ranks 0,1,3"), std::string::npos) << v.diagnosis.headline;
}

TEST(LogVerdict, AnIbErrorNamesTheRankTheHostAndThePeerHost) {
  std::string log;
  std::vector<Proc> procs;
  for (int r = 0; r < 8; ++r) {
    procs.push_back(Proc{r < 4 ? "gpu-a" : "gpu-b", 3000 + r, r % 4});
    log += procs.back().line("INFO", fmt::format("Bootstrap : Using ib0:10.0.0.{}<0>", r < 4 ? 1 : 2));
    log += procs.back().init(fmt::format("0x66{:02x}", r), r, 8, "0x77", true);
  }
  log += "\n" + procs[5].line("WARN", "NET/IB : Got completion from peer 10.0.0.1<43134> with status=12 opcode=0 len=0 "
                                      "vendor err 129 (Recv) localGid ::ffff:10.0.0.2 remoteGids::ffff:10.0.0.1",
                              "transport/net_ib.cc:2307");
  log += procs[5].line("WARN", "NET/IB : Got completion from peer 10.0.0.1<43134> with status=5 opcode=0 len=0 "
                               "vendor err 249 (Recv)", "transport/net_ib.cc:2307");
  const auto v = judge_text("ib", log);
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kCrash) << dump(v);
  EXPECT_EQ(v.diagnosis.kind, Kind::kRankError) << dump(v);
  EXPECT_EQ(v.diagnosis.culprit_ranks, std::vector<int>{5}) << dump(v);
  const auto* f = finding(v, "network_error");
  ASSERT_NE(f, nullptr) << dump(v);
  EXPECT_EQ(f->hosts, std::vector<std::string>{"gpu-b"});
  EXPECT_EQ(f->peer, "gpu-a (10.0.0.1<43134>)");
  // The first error is quoted (status 12), not the flushes that follow it.
  EXPECT_NE(f->text.find("status=12"), std::string::npos) << f->text;
  EXPECT_EQ(analyzers::hang::exit_code(v.diagnosis), 1);
}

TEST(LogVerdict, AHostOnSocketsWhereOthersUseIbIsATopologyFinding) {
  std::string log;
  for (int r = 0; r < 4; ++r) {
    Proc p{r < 2 ? "ib-node" : "tcp-node", 4000 + r, r % 2};
    log += p.init(fmt::format("0x88{:02x}", r), r, 4, "0x99", true);
    log += p.line("INFO", fmt::format("Channel 00/0 : {}[{}] -> {}[{}] [send] via {}", r, r % 2, (r + 2) % 4, r % 2,
                                      r < 2 ? "NET/IB/0/GDRDMA" : "NET/Socket/0"));
  }
  const auto v = judge_text("socket", log);
  const auto* f = finding(v, "topology");
  ASSERT_NE(f, nullptr) << dump(v);
  EXPECT_TRUE(f->problem);
  EXPECT_EQ(f->hosts, std::vector<std::string>{"tcp-node"});
  EXPECT_EQ(f->ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kHealthy) << dump(v);  // a finding, not a hang
}

TEST(LogVerdict, WatchdogTimeoutsOnSomeRanksNameTheRankThatNeverEntered) {
  // PyTorch 2.4+ shapes; rank 2 printed (it is in the log) but had nothing pending at #41.
  std::string log;
  for (int r : {0, 1, 3})
    log += fmt::format("[rank{0}]:[E1127 10:00:00.000000 {1} ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank {0}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, "
                       "NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
                       "[rank{0}]:[E1127 10:00:00.000100 {1} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank {0}] Exception (either an error or timeout) detected by watchdog at work: 41, last enqueued "
                       "NCCL work: 41, last completed NCCL work: 40.\n",
                       r, 100 + r);
  log += "[rank2]:[W1127 09:50:00.000000 102 ProcessGroupNCCL.cpp:4000] something unrelated\n";
  const auto v = judge_text("watchdog", log);
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kHang) << dump(v);
  EXPECT_EQ(v.diagnosis.culprit_ranks, std::vector<int>{2}) << dump(v);
  ASSERT_TRUE(v.diagnosis.collective.has_value()) << dump(v);
  EXPECT_EQ(v.diagnosis.collective->seq, 41u);
  EXPECT_NE(v.diagnosis.headline.find("pg 0 (default_pg)"), std::string::npos) << v.diagnosis.headline;
}

// ---- real logs ----

TEST(LogRealNccl, NcclTestsHealthyAndDegradedAreToldApart) {
  // ../shared/data/real-peers/nccl-logs, copied byte for byte (Timez-zx/nccl-tests): NCCL 2.27.7 on
  // two A100s; the degraded run's NCCL_TOPO_FILE cut NVLink from 12 links to 1.
  const fs::path dir = fixtures() / "nccl/real-peers";
  const auto healthy = judge({dir / "nccltests-healthy.log"});
  const auto degraded = judge({dir / "nccltests-degraded.log"});
  for (const auto* v : {&healthy, &degraded}) {
    EXPECT_EQ(v->diagnosis.verdict, Verdict::kHealthy) << dump(*v);
    EXPECT_EQ(analyzers::hang::exit_code(v->diagnosis), 0);
  }
  auto problems = [](const analyzers::hang::LogVerdict& v, std::string_view kind) {
    int n = 0;
    for (const auto& f : v.report.findings) n += f.problem && f.kind == kind;
    return n;
  };
  EXPECT_EQ(problems(healthy, "topology") + problems(healthy, "setting"), 0) << dump(healthy);
  EXPECT_GE(problems(degraded, "topology"), 1) << dump(degraded);
  EXPECT_GE(problems(degraded, "setting"), 1) << dump(degraded);
  const auto* topo = finding(degraded, "topology");
  ASSERT_NE(topo, nullptr);
  EXPECT_NE(topo->text.find("1 ring channel over NVL"), std::string::npos) << topo->text;
  EXPECT_NE(finding(healthy, "topology")->text.find("12 ring channels"), std::string::npos) << dump(healthy);
}

TEST(LogRealNccl, IbCompletionErrorsOnThreeHosts) {
  const auto v = judge({fixtures() / "nccl/nccl928-ib-loc-prot-err-5nodes-2.18.log"});  // NVIDIA/nccl#928
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kCrash) << dump(v);
  std::set<std::string> hosts;
  for (const auto& f : v.report.findings)
    if (f.kind == "network_error")
      for (const auto& h : f.hosts) hosts.insert(h);
  EXPECT_EQ(hosts, (std::set<std::string>{"H100-1", "H100-2", "H100-5"})) << dump(v);
}

TEST(LogRealNccl, RetryExceededIsQuotedBeforeTheFlushes) {
  const auto v = judge({fixtures() / "nccl/nccl1814-ibplugin-status12-then-5.log"});  // NVIDIA/nccl#1814
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kCrash) << dump(v);
  const auto* f = finding(v, "network_error");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->hosts, std::vector<std::string>{"hostname-test"});
  EXPECT_NE(f->peer.find("172.36.143.59"), std::string::npos) << f->peer;
  EXPECT_NE(f->text.find("status=12"), std::string::npos) << f->text;
}

TEST(LogRealNccl, RasBindWarningIsNotBlamed) {
  const auto v = judge({fixtures() / "nccl/vllm19204-2.26-timestamped-warn-ras-bind.log"});  // vllm#19204
  EXPECT_NE(v.diagnosis.verdict, Verdict::kCrash) << dump(v);
  for (const auto& f : v.report.findings) {
    if (f.text.find("RAS") != std::string::npos) EXPECT_FALSE(f.problem) << f.text;
  }
}

TEST(LogRealNccl, TwoNodeInitHang) {
  const auto v = judge({fixtures() / "nccl/vllm8447-2.20.5-2node-init-hang.log"});  // vllm#8447
  EXPECT_EQ(v.diagnosis.verdict, Verdict::kHang) << dump(v);
  EXPECT_EQ(v.diagnosis.kind, Kind::kInitIncomplete) << dump(v);
}

TEST(LogRealNccl, EveryFixtureReadsWithoutCrashing) {
  int read = 0;
  for (const auto& e : fs::directory_iterator(fixtures() / "nccl")) {
    if (e.path().extension() != ".log") continue;
    auto r = import_logs({e.path()});
    ASSERT_TRUE(r.ok()) << e.path() << ": " << r.status().message();
    EXPECT_GT(r->nccl_lines, 0u) << e.path();
    const auto v = analyzers::hang::diagnose_log(*r);
    EXPECT_FALSE(v.diagnosis.headline.empty()) << e.path();
    ++read;
  }
  EXPECT_GE(read, 10);
}

// PyTorch's lines: tests/fixtures/logs/torch. gloo-* were made on this project's machine by
// scripts/log-fixtures/gloo_timeout_job.py (PyTorch 2.15, CPU, Gloo, torchrun) with a known fault;
// the others are cut from public issues (each named in that folder's SOURCES.md, which gives what
// the thread says happened).
struct TorchCase {
  const char* file;
  Verdict verdict;
  std::vector<int> culprits;  // empty: the log singles no rank out
};

class LogRealTorch : public ::testing::TestWithParam<TorchCase> {};

TEST_P(LogRealTorch, NamesWhatTheLogShows) {
  const TorchCase& c = GetParam();
  const auto v = judge({fixtures() / "torch" / c.file});
  EXPECT_EQ(v.diagnosis.verdict, c.verdict) << dump(v);
  EXPECT_EQ(v.diagnosis.culprit_ranks, c.culprits) << dump(v);
  EXPECT_EQ(analyzers::hang::exit_code(v.diagnosis), c.verdict == Verdict::kHealthy ? 0 : 1);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LogRealTorch,
    ::testing::Values(
        // Injected here: rank 1 skips an all_reduce; only its traceback is in barrier.
        TorchCase{"gloo-skip.log", Verdict::kDesync, {1}},
        // The same with TORCH_DISTRIBUTED_DEBUG=DETAIL: three ranks name rank 1.
        TorchCase{"gloo-skip-detail.log", Verdict::kDesync, {1}},
        // Rank 2 sleeps past the timeout: the only rank with no error of its own.
        TorchCase{"gloo-sleep.log", Verdict::kHang, {2}},
        // Rank 3 SIGKILLs itself: the others' lost connections follow from it.
        TorchCase{"gloo-crash.log", Verdict::kCrash, {3}},
        // Rank 1 returns early with exit code 0: absent from every error and from torchrun's table.
        TorchCase{"gloo-exit.log", Verdict::kHang, {1}},
        // ai2cm/ace#348: ranks 1-3 time out on SeqNum 1132079, rank 0 reports nothing.
        TorchCase{"nccl-2.1-ace-three-of-four.log", Verdict::kHang, {0}},
        // NVIDIA/nccl#1409: SeqNum 80078 is a broadcast on rank 7 and an all-reduce on rank 3.
        TorchCase{"nccl-2.4-desync-broadcast-vs-allreduce.log", Verdict::kDesync, {7}},
        // BasicSR#737: every rank that printed waits in 808: no rank behind it is in the log.
        TorchCase{"nccl-2.5-pgguid-all-ranks.log", Verdict::kHang, {}},
        // DiffSynth-Studio#458: a coalesced op of different sizes per rank is not a mismatch.
        TorchCase{"nccl-2.5-coalesced-timeout-at.log", Verdict::kHang, {}},
        // pytorch#118369: SeqNums of lines that name no group are not compared.
        TorchCase{"nccl-2.0-progressbar-two-pgs.log", Verdict::kHang, {}},
        // ColossalAI#3514: local rank 3 SIGKILLed (one node).
        TorchCase{"elastic-1.x-colossalai-sigkill.log", Verdict::kCrash, {3}},
        // picotron#6: every rank -6 alike: a crash that singles no one out.
        TorchCase{"elastic-picotron-sigabrt-table.log", Verdict::kCrash, {}},
        // sglang#1693: PG 3's rank 5 aborted on a timed-out all-gather.
        TorchCase{"nccl-2.4-terminate-distbackenderror.log", Verdict::kHang, {}},
        // DEIM#105: the heartbeat monitor fired with 84 works outstanding on rank 0, 103 on ranks 1-2.
        TorchCase{"nccl-2.3-heartbeat-monitor.log", Verdict::kHang, {0}},
        // pipedream#39: a Gloo receive timed out; Gloo names no peer.
        TorchCase{"gloo-1.x-pipedream-recv-timeout.log", Verdict::kHang, {}}),
    [](const ::testing::TestParamInfo<TorchCase>& i) {
      std::string n = i.param.file;
      n = n.substr(0, n.find(".log"));
      for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

TEST(LogRealTorch, EveryFixtureReadsWithoutCrashing) {
  int read = 0;
  for (const auto& e : fs::directory_iterator(fixtures() / "torch")) {
    if (e.path().extension() != ".log") continue;
    auto r = import_logs({e.path()});
    ASSERT_TRUE(r.ok()) << e.path() << ": " << r.status().message();
    EXPECT_FALSE(analyzers::hang::diagnose_log(*r).diagnosis.headline.empty()) << e.path();
    ++read;
  }
  EXPECT_GE(read, 15);
}

// ---- hostile input ----

TEST(LogHostile, CutAndRandomBytesGiveAPartialResultNeverACrash) {
  const std::string good = coll_job({5, 5, 4, 5});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::string s = good.substr(0, rng() % good.size());
    for (int flips = 0; flips < trial; ++flips) s[rng() % std::max<size_t>(1, s.size())] = char(rng());
    if (trial % 5 == 0) s += std::string(200000, 'x');  // a line longer than the reader keeps
    const fs::path p = testing::write_file(scratch("hostile") / "job.log", s);
    auto r = import_logs({p});
    if (r.ok()) (void)analyzers::hang::diagnose_log(*r);
  }
}

// ---- the CLI ----

TEST(LogCli, ExitCodesJsonAndErrors) {
  const fs::path dir = scratch("cli");
  const fs::path lagging = testing::write_file(dir / "lagging.log", coll_job({4, 3, 4, 4}));
  auto c = testing::hangdoctor({lagging.string(), "--json", "-"});
  EXPECT_EQ(c.code, 1) << c.err;
  const auto j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j.at("verdict"), "hang");
  EXPECT_EQ(j.at("culprit_ranks"), nlohmann::json::array({1}));
  ASSERT_TRUE(j.contains("log")) << c.out;
  EXPECT_TRUE(j.at("log").at("summary").get<std::string>().starts_with("read ")) << c.out;

  const fs::path plain = testing::write_file(dir / "notes.txt", "nothing here\njust words\n");
  c = testing::hangdoctor({plain.string()});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("none of them NCCL's"), std::string::npos) << c.err;
  c = testing::hangdoctor({lagging.string(), (dir / "absent.log").string()});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("no such file"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find(".cpp"), std::string::npos) << c.err;  // no source location for users
}

}  // namespace
}  // namespace rankscope::logs
