// nccl_ras_test.cpp — the NCCL RAS report parser on the fixtures in tests/fixtures/logs/ras (real
// reports from public issues and repositories, plus two written in the shape NCCL's source prints;
// each named in its SOURCES.md), on cut and hostile input, and the RAS socket client against a
// fake RAS server that speaks the server side of the protocol (NCCL src/ras/client_support.cc).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "log_test_support.h"
#include "nccl_ras.h"
#include "ras_client.h"

namespace rankscope::logs {
namespace {
// Named: a unity build puts this file's helpers next to the other tests'.
namespace ras_test {

namespace fs = std::filesystem;

std::string ras_fixture(const std::string& name) {
  const fs::path path = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/logs/ras" / name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

RasReport parse_ok(const std::string& text) {
  auto r = parse_nccl_ras(text);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : RasReport{};
}

const LogFinding* find_kind(const std::vector<LogFinding>& fs, LogFinding::Kind kind, bool problem = true) {
  for (const auto& f : fs)
    if (f.kind == kind && f.problem == problem) return &f;
  return nullptr;
}

int problems(const std::vector<LogFinding>& fs) {
  int n = 0;
  for (const auto& f : fs) n += f.problem ? 1 : 0;
  return n;
}

}  // namespace ras_test

using namespace ras_test;  // NOLINT: test helpers

// ---------------------------------------------------------------------------------------------
// Text reports.

TEST(NcclRasText, HealthyJobOf256Ranks) {  // NVIDIA/nccl#1730, NCCL 2.26.2
  const RasReport r = parse_ok(ras_fixture("nccl1730-2.26.2-healthy-256ranks.txt"));
  EXPECT_FALSE(r.json);
  EXPECT_TRUE(r.complete);
  ASSERT_EQ(r.nccl_versions.size(), 1u);
  EXPECT_EQ(r.nccl_versions[0], "2.26.2");
  EXPECT_EQ(r.cuda_compiled, "12.4");
  EXPECT_EQ(r.cuda_runtime, 12040);
  EXPECT_EQ(r.cuda_driver, 12040);
  EXPECT_EQ(r.nodes, 32);
  EXPECT_EQ(r.processes_per_node, 8);
  EXPECT_EQ(r.gpus_per_process, 1);
  EXPECT_EQ(r.processes, 256);
  EXPECT_EQ(r.gpus, 256);
  EXPECT_DOUBLE_EQ(r.collection_time_s, 0.01);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].comms, 1);
  EXPECT_EQ(r.groups[0].nodes, 32);
  EXPECT_EQ(r.groups[0].ranks_per_node, "8");
  EXPECT_EQ(r.groups[0].ranks_per_comm, 256);
  EXPECT_EQ(r.groups[0].status, "RUNNING");
  EXPECT_EQ(r.groups[0].errors, "OK");
  EXPECT_TRUE(r.communicators.empty());
  EXPECT_TRUE(r.messages.empty());

  const auto f = ras_findings(r);
  EXPECT_EQ(problems(f), 0);
  const LogFinding* v = find_kind(f, LogFinding::Kind::kVersion, false);
  ASSERT_NE(v, nullptr);
  EXPECT_NE(v->text.find("NCCL 2.26.2"), std::string::npos) << v->text;
  const LogFinding* ok = find_kind(f, LogFinding::Kind::kNcclError, false);
  ASSERT_NE(ok, nullptr);
  EXPECT_NE(ok->text.find("RAS sees no problem"), std::string::npos) << ok->text;
}

TEST(NcclRasText, AllGatherCountMismatchNamesTheRanksBehind) {  // NVIDIA/nccl#1911, NCCL 2.26.2
  const RasReport r = parse_ok(ras_fixture("nccl1911-2.26.2-allgather-count-mismatch.txt"));
  EXPECT_TRUE(r.complete);
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  EXPECT_EQ(c.hash, "fa93daea854b060b");
  EXPECT_EQ(c.label, "#0-0");
  EXPECT_EQ(c.size, 32);
  ASSERT_EQ(c.count_mismatches.size(), 1u);
  const RasCountMismatch& m = c.count_mismatches[0];
  EXPECT_EQ(m.collective, "AllGather");
  ASSERT_EQ(m.groups.size(), 2u);
  EXPECT_EQ(m.groups[0].ranks_count, 30);
  EXPECT_EQ(m.groups[0].value, 640);
  EXPECT_TRUE(m.groups[0].ranks.empty());
  EXPECT_EQ(m.groups[1].ranks_count, 2);
  EXPECT_EQ(m.groups[1].value, 641);
  ASSERT_EQ(m.groups[1].ranks.size(), 2u);
  EXPECT_EQ(m.groups[1].ranks[0].rank, 12);
  EXPECT_EQ(m.groups[1].ranks[0].gpus, "4");
  EXPECT_EQ(m.groups[1].ranks[0].pid, 323032);
  EXPECT_EQ(m.groups[1].ranks[0].host, "10.137.190.124");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_FALSE(r.messages[0].error);
  EXPECT_EQ(r.messages[0].title, "#0-0 (fa93daea854b060b) MISMATCH");

  const auto f = ras_findings(r);
  const LogFinding* s = find_kind(f, LogFinding::Kind::kSilentRank);
  ASSERT_NE(s, nullptr);
  // RAS listed only the two ranks ahead; every rank reported, so the 30 behind are the rest.
  EXPECT_EQ(s->ranks.size(), 30u);
  EXPECT_EQ(std::count(s->ranks.begin(), s->ranks.end(), 12), 0);
  EXPECT_EQ(s->text,
            "RAS: communicator fa93daea854b060b (32 ranks): 30 ranks (0-11,14-31) are at AllGather "
            "operation 640 while the other 2 (12,13) are at 641: the ranks behind have not launched what "
            "the others wait in");
}

TEST(NcclRasText, DeadProcessAndItsMissingRank) {  // written in 2.28.7's shape
  const RasReport r = parse_ok(ras_fixture("synth-2.28.7-dead-process.txt"));
  EXPECT_EQ(r.dead_processes_count, 1);
  ASSERT_EQ(r.dead_processes.size(), 1u);
  EXPECT_EQ(r.dead_processes[0].pid, 4242);
  EXPECT_EQ(r.dead_processes[0].host, "10.0.0.2");
  EXPECT_EQ(r.dead_processes[0].gpus, "3");
  EXPECT_DOUBLE_EQ(r.collection_time_s, 5.012);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].ranks_per_node, "7-8");
  EXPECT_EQ(r.groups[0].errors, "INCOMPLETE");
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  EXPECT_EQ(c.missing_ranks_count, 1);
  ASSERT_EQ(c.missing_ranks.size(), 1u);
  EXPECT_EQ(c.missing_ranks[0].where.rank, 11);
  EXPECT_TRUE(c.missing_ranks[0].considered_dead);

  const auto f = ras_findings(r);
  const LogFinding* dead = find_kind(f, LogFinding::Kind::kNetworkError);
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ(dead->ranks, std::vector<int>{11});
  EXPECT_EQ(dead->hosts, std::vector<std::string>{"10.0.0.2"});
  EXPECT_EQ(dead->text,
            "RAS: process 4242 on host 10.0.0.2 (GPU 3), rank 11, is dead: unreachable via the RAS network "
            "for 60 s");
  EXPECT_EQ(problems(f), 1) << "the comm's missing rank is the dead process's: one finding, not two";
}

TEST(NcclRasText, Nccl224ShapesUnreachableProcessTimeoutsAndOldCountLine) {  // written in 2.24.3's shape
  const RasReport r = parse_ok(ras_fixture("synth-2.24.3-unreachable-process-and-count-mismatch.txt"));
  EXPECT_EQ(r.nccl_versions[0], "2.24.3");
  EXPECT_EQ(r.unreachable_processes_count, 1);
  ASSERT_EQ(r.unreachable_processes.size(), 1u);
  EXPECT_EQ(r.unreachable_processes[0].pid, 7001);
  EXPECT_EQ(r.timeouts, 2);
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  EXPECT_EQ(c.hash, "00c0ffee12345678");
  ASSERT_EQ(c.missing_ranks.size(), 1u);
  EXPECT_EQ(c.missing_ranks[0].where.rank, 5);
  ASSERT_EQ(c.count_mismatches.size(), 1u);
  EXPECT_EQ(c.count_mismatches[0].collective, "collective");
  ASSERT_EQ(c.count_mismatches[0].groups.size(), 2u);
  EXPECT_EQ(c.count_mismatches[0].groups[1].value, 1202);
  ASSERT_EQ(c.count_mismatches[0].groups[1].ranks.size(), 1u);
  EXPECT_EQ(c.count_mismatches[0].groups[1].ranks[0].rank, 2);

  const auto f = ras_findings(r);
  const LogFinding* behind = find_kind(f, LogFinding::Kind::kSilentRank);
  ASSERT_NE(behind, nullptr);
  EXPECT_EQ(behind->ranks, std::vector<int>{2});
  EXPECT_NE(behind->text.find("rank 2 is at collective operation 1202 while the other 6 are at 1203"),
            std::string::npos)
      << behind->text;
  bool unreachable = false, missing_rank = false, timeouts = false;
  for (const auto& x : f) {
    unreachable |= x.text.find("process 7001 on host 10.1.0.2 (GPU 1) sent no data") != std::string::npos;
    missing_rank |= x.text.find("rank 5 sent no data") != std::string::npos;
    timeouts |= x.text.find("2 communication timeouts") != std::string::npos;
  }
  EXPECT_TRUE(unreachable);
  EXPECT_TRUE(missing_rank) << "2.24 names the missing rank without its process: its own finding";
  EXPECT_TRUE(timeouts);
}

TEST(NcclRasText, StatusMismatchAndErrorsFromTheSourceShapes) {
  // Lines as client_support.cc (2.26+) prints them for a comm whose ranks differ in status and
  // report errors.
  const std::string text =
      "NCCL version 2.27.7 compiled with CUDA 12.9\n"
      "CUDA runtime version 12090, driver version 12090\n\n"
      "Job summary\n===========\n\n"
      "  Nodes  Processes         GPUs  Processes     GPUs\n"
      "(total)   per node  per process    (total)  (total)\n"
      "      1          4            1          4        4\n\n"
      "Communicators... (0.002s)\n=============\n\n"
      "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
      "    #  in group  per comm  per node  per comm  in group\n"
      "    0         1         1         4         4         4      INIT  ERROR,MISMATCH\n\n"
      "Errors\n======\n\n"
      "#0-0 (0000000000abcdef) ERROR\n"
      "  Asynchronous error on 1 rank\n"
      "  Rank 3 reported Remote process error -- GPU 3 managed by process 900 on node 10.2.0.1\n\n"
      "Warnings\n========\n\n"
      "#0-0 (0000000000abcdef) MISMATCH\n"
      "  Communicator ranks have different status\n"
      "  3 ranks have status RUNNING\n"
      "  Rank 2 has status INIT -- GPU 2 managed by process 899 on node 10.2.0.1\n\n";
  const RasReport r = parse_ok(text);
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  EXPECT_EQ(c.errors, (std::vector<std::string>{"ERROR", "MISMATCH"}));
  ASSERT_EQ(c.status_groups.size(), 2u);
  EXPECT_EQ(c.status_groups[1].status, "INIT");
  ASSERT_EQ(c.error_ranks.size(), 1u);
  EXPECT_EQ(c.error_ranks[0].rank, 3);

  const auto f = ras_findings(r);
  const LogFinding* init = find_kind(f, LogFinding::Kind::kInitIncomplete);
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(init->ranks, std::vector<int>{2});
  const LogFinding* err = find_kind(f, LogFinding::Kind::kNcclError);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->ranks, std::vector<int>{3});
  EXPECT_NE(err->text.find("Remote process error"), std::string::npos) << err->text;
}

// ---------------------------------------------------------------------------------------------
// JSON reports.

TEST(NcclRasJson, FourNodeAllReduceMismatch) {  // ray-project/ray test data, NCCL 2.28.9, A10G
  const RasReport r = parse_ok(ras_fixture("ray-2.28.9-a10g-4node-allreduce-mismatch.json"));
  EXPECT_TRUE(r.json);
  EXPECT_EQ(r.nccl_versions, std::vector<std::string>{"2.28.9"});
  EXPECT_EQ(r.timestamp, "2026-09-23 11:55:37");
  EXPECT_EQ(r.nodes, 4);
  EXPECT_EQ(r.processes, 4);
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  EXPECT_EQ(c.hash, "f31e5874c3f25459");
  EXPECT_EQ(c.size, 4);
  ASSERT_EQ(c.ranks.size(), 4u);
  EXPECT_EQ(c.ranks[1].collective_counts.at("AllReduce"), 100u);
  EXPECT_EQ(c.ranks[1].status(), "RUNNING");
  EXPECT_EQ(c.errors, std::vector<std::string>{"MISMATCH"});

  const auto f = ras_findings(r);
  const LogFinding* s = find_kind(f, LogFinding::Kind::kSilentRank);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->ranks, std::vector<int>{1});
  EXPECT_EQ(s->hosts, std::vector<std::string>{"10.0.109.86"});
  EXPECT_EQ(s->text,
            "RAS: communicator f31e5874c3f25459 (4 ranks): rank 1 is at AllReduce operation 100 while the "
            "other 3 (0,2,3) are at 101: the ranks behind have not launched what the others wait in");
}

TEST(NcclRasJson, HealthyTwoRanks) {  // ray-project/ray test data, NCCL 2.28.9
  const RasReport r = parse_ok(ras_fixture("ray-2.28.9-healthy-2ranks.json"));
  ASSERT_EQ(r.communicators.size(), 1u);
  EXPECT_TRUE(r.communicators[0].errors.empty());
  EXPECT_EQ(problems(ras_findings(r)), 0);
}

TEST(NcclRasJson, RepairsTheMissingCommaOf2289AndReportsTheUnresponsiveRank) {
  const std::string text = ras_fixture("ray-2.28.9-dead-rank-missing-comma.json");
  const RasReport r = parse_ok(text);
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  ASSERT_EQ(c.missing_ranks.size(), 1u);
  EXPECT_EQ(c.missing_ranks[0].where.rank, 1);
  EXPECT_EQ(c.missing_ranks[0].where.pid, 10017);
  EXPECT_TRUE(c.missing_ranks[0].unresponsive);
  EXPECT_FALSE(c.missing_ranks[0].considered_dead);
  EXPECT_EQ(c.errors, std::vector<std::string>{"INCOMPLETE"});
  ASSERT_EQ(r.unreachable_processes.size(), 1u);

  const auto f = ras_findings(r);
  const LogFinding* lost = find_kind(f, LogFinding::Kind::kNetworkError);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->ranks, std::vector<int>{1});
  EXPECT_EQ(lost->text,
            "RAS: process 10017 on host 10.0.77.184 (GPU 1), rank 1, sent no data to RAS: unreachable or "
            "too slow (RAS calls it dead after 60 s)");
}

TEST(NcclRasJson, OnlyTheSubCommunicatorThatDiverges) {  // ray-project/ray test data, NCCL 2.28.9
  const RasReport r = parse_ok(ras_fixture("ray-2.28.9-multicomm-subcomm-mismatch.json"));
  ASSERT_EQ(r.communicators.size(), 3u);
  EXPECT_EQ(r.gpus, 4);
  const auto f = ras_findings(r);
  ASSERT_EQ(problems(f), 1);
  const LogFinding* s = find_kind(f, LogFinding::Kind::kSilentRank);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s->text.find("communicator 4e0104c2022fa2f9 (2 ranks): rank 1 is at AllReduce operation 3"),
            std::string::npos)
      << s->text;
  EXPECT_TRUE(s->ranks.empty()) << "a 2-rank comm in a 4-rank job: its ranks are not global ranks";
}

TEST(NcclRasJson, StatusFlagsAndErrorsPerRank) {
  const std::string text = R"({
  "nccl_version": "2.30.7", "cuda_runtime_version": 13000, "cuda_driver_version": 13000,
  "timestamp": "2026-01-01 00:00:00", "communicators_count": 1,
  "communicators": [ { "hash": "0xabc", "secondary_hash": "0x1:0x2", "size": 3, "ranks_count": 2,
    "missing_ranks_count": 1,
    "ranks": [
      { "rank": 0, "host": "10.0.0.1", "pid": 1, "cuda_dev": 0, "nvml_dev": 0,
        "status": { "init_state": 0, "async_error": 2, "finalize_called": false, "destroy_flag": false,
                    "abort_flag": true },
        "collective_counts": { "AllReduce": 5 } },
      { "rank": 1, "host": "10.0.0.1", "pid": 2, "cuda_dev": 1, "nvml_dev": 1,
        "status": { "init_state": 7, "async_error": 0, "finalize_called": false, "destroy_flag": false,
                    "abort_flag": false },
        "collective_counts": { "AllReduce": 5 } } ],
    "missing_ranks": [
      { "rank": 2, "host": "10.0.0.2", "pid": 3, "cuda_dev": 0, "nvml_dev": 0,
        "status": { "unresponsive": false, "considered_dead": false } } ] } ],
  "ras": { "collection_time_sec": 0.5, "timeouts_count": 0 } })";
  const RasReport r = parse_ok(text);
  ASSERT_EQ(r.communicators.size(), 1u);
  const RasCommunicator& c = r.communicators[0];
  EXPECT_EQ(c.hash, "0000000000000abc");
  EXPECT_EQ(c.ranks[0].status(), "ABORT");
  EXPECT_EQ(c.ranks[1].status(), "INIT");
  EXPECT_EQ(c.errors, (std::vector<std::string>{"ERROR", "MISMATCH"}));
  const auto f = ras_findings(r);
  ASSERT_NE(find_kind(f, LogFinding::Kind::kInitIncomplete), nullptr);
  bool system_error = false, nocomm = false;
  for (const auto& x : f) {
    system_error |= x.text.find("rank 0 (host 10.0.0.1, pid 1, GPU 0) reported System error") != std::string::npos;
    nocomm |= x.text.find("rank 2 answered RAS but no longer report") != std::string::npos;
  }
  EXPECT_TRUE(system_error);
  EXPECT_TRUE(nocomm);
}

// ---------------------------------------------------------------------------------------------
// Cut and hostile input: a Status for a user, never a crash.

TEST(NcclRasHostile, NotRasEmptyAndCut) {
  EXPECT_FALSE(parse_nccl_ras("").ok());
  EXPECT_FALSE(parse_nccl_ras("OK\n").ok());
  EXPECT_FALSE(parse_nccl_ras("hello world\nthis is not RAS\n").ok());
  EXPECT_FALSE(parse_nccl_ras("[1,2,3]").ok());
  EXPECT_FALSE(parse_nccl_ras("{\"foo\": 1}").ok());

  // Text cut before its communicator table: what a client that gave up too early holds.
  const std::string healthy = ras_fixture("nccl1730-2.26.2-healthy-256ranks.txt");
  const auto cut = parse_nccl_ras(healthy.substr(0, healthy.find("Group")));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("ends before its communicator table"), std::string::npos);
  EXPECT_EQ(cut.status().message().find(".cpp"), std::string::npos) << "no source locations for users";

  // Cut after the table but before Warnings: a report, flagged incomplete.
  const std::string mismatch = ras_fixture("nccl1911-2.26.2-allgather-count-mismatch.txt");
  const RasReport partial = parse_ok(mismatch.substr(0, mismatch.find("Warnings")));
  EXPECT_FALSE(partial.complete);
  bool says_cut = false;
  for (const auto& f : ras_findings(partial)) says_cut |= f.text.find("cut before its Warnings") != std::string::npos;
  EXPECT_TRUE(says_cut);

  // JSON cut anywhere is an error that says so.
  const std::string json = ras_fixture("ray-2.28.9-a10g-4node-allreduce-mismatch.json");
  const auto jcut = parse_nccl_ras(json.substr(0, json.size() / 2));
  ASSERT_FALSE(jcut.ok());
  EXPECT_NE(jcut.status().message().find("cut or malformed"), std::string::npos) << jcut.status().message();
}

TEST(NcclRasHostile, EveryPrefixOfEveryFixtureParsesOrFailsCleanly) {
  for (const char* name : {"nccl1730-2.26.2-healthy-256ranks.txt", "nccl1911-2.26.2-allgather-count-mismatch.txt",
                           "synth-2.28.7-dead-process.txt",
                           "synth-2.24.3-unreachable-process-and-count-mismatch.txt",
                           "ray-2.28.9-dead-rank-missing-comma.json"}) {
    const std::string text = ras_fixture(name);
    for (size_t n = 0; n <= text.size(); ++n) {
      const auto r = parse_nccl_ras(std::string_view(text).substr(0, n));
      if (r.ok()) (void)ras_findings(*r);
      else EXPECT_FALSE(r.status().message().empty());
    }
  }
}

TEST(NcclRasHostile, RandomBytesAndMangledLines) {
  std::mt19937 rng(32);
  const std::string base = ras_fixture("synth-2.24.3-unreachable-process-and-count-mismatch.txt") +
                           ras_fixture("nccl1911-2.26.2-allgather-count-mismatch.txt");
  for (int i = 0; i < 2000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 40);
    for (int e = 0; e < edits; ++e) text[rng() % text.size()] = static_cast<char>(rng() % 256);
    const auto r = parse_nccl_ras(text);
    if (r.ok()) (void)ras_findings(*r);
  }
  for (int i = 0; i < 500; ++i) {
    std::string text(rng() % 4096, '\0');
    for (char& ch : text) ch = static_cast<char>(rng() % 256);
    if (i % 2 == 0) text = "{" + text;
    const auto r = parse_nccl_ras(text);
    if (r.ok()) (void)ras_findings(*r);
  }
  // Wrong JSON types where numbers and objects belong.
  const auto r = parse_nccl_ras(
      R"({"nccl_version": 5, "communicators": [1, {"hash": 7, "size": "x", "ranks": [null, {"rank": "a",
          "collective_counts": {"AllReduce": -4, "Reduce": 1e300}}], "missing_ranks": {"rank": 1}}]})");
  ASSERT_TRUE(r.ok() || !r.status().message().empty());
  const auto huge = parse_nccl_ras("Rank 99999999999999999999999 -- GPU 1\nGroup\n");
  EXPECT_FALSE(huge.ok());
}

// ---------------------------------------------------------------------------------------------
// The socket client against a fake RAS server.

namespace ras_test {

// A RAS server on 127.0.0.1:<ephemeral> that serves one connection in a thread, the way
// client_support.cc does: one reply line per command line, then the report and a close.
class FakeRasServer {
 public:
  enum class Mode { kServe, kServeWithoutJson, kSilent };

  FakeRasServer(Mode mode, std::string report) : mode_(mode), report_(std::move(report)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeRasServer() {
    finish();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  // Stops the server thread and returns the command lines it received.
  std::vector<std::string> finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return commands_;
  }

 private:
  void serve() {
    pollfd p{listen_fd_, POLLIN, 0};
    while (!stop_ && ::poll(&p, 1, 50) == 0) {
    }
    if (stop_) return;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::string buffer;
    char chunk[512];
    bool done = false;
    while (!done && !stop_) {
      pollfd q{fd, POLLIN, 0};
      if (::poll(&q, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while (!done && (nl = buffer.find('\n')) != std::string::npos) {
        std::string cmd = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        if (!cmd.empty() && cmd.back() == '\r') cmd.pop_back();
        commands_.push_back(cmd);
        if (mode_ == Mode::kSilent) continue;  // accepts, reads, never answers
        std::string reply;
        if (cmd.rfind("CLIENT PROTOCOL ", 0) == 0) reply = "SERVER PROTOCOL 2\n";
        else if (cmd.rfind("TIMEOUT ", 0) == 0) reply = "OK\n";
        else if (cmd.rfind("SET FORMAT ", 0) == 0)
          reply = mode_ == Mode::kServeWithoutJson ? "ERROR: Unknown command " + cmd + "\n" : "OK\n";
        else if (cmd == "STATUS" || cmd == "VERBOSE STATUS") {
          reply = report_;
          done = true;
        } else reply = "ERROR: Unknown command " + cmd + "\n";
        ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
    }
    if (mode_ == Mode::kSilent) {
      while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::close(fd);
  }

  Mode mode_;
  std::string report_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::string> commands_;
};

}  // namespace ras_test

TEST(NcclRasClient, TextQueryHandshakeAndReport) {
  const std::string fixture = ras_fixture("nccl1911-2.26.2-allgather-count-mismatch.txt");
  std::vector<std::string> commands;
  Result<std::string> got = std::string();
  {
    FakeRasServer server(FakeRasServer::Mode::kServe, fixture);
    got = query_nccl_ras("127.0.0.1", server.port(), /*json=*/false, 2.0, /*verbose=*/false);
    commands = server.finish();
  }
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, fixture);
  EXPECT_EQ(commands, (std::vector<std::string>{"CLIENT PROTOCOL 2", "TIMEOUT 2", "STATUS"}));
  EXPECT_TRUE(parse_nccl_ras(*got).ok());
}

TEST(NcclRasClient, JsonVerboseQuery) {
  const std::string fixture = ras_fixture("ray-2.28.9-a10g-4node-allreduce-mismatch.json");
  std::vector<std::string> commands;
  Result<std::string> got = std::string();
  {
    FakeRasServer server(FakeRasServer::Mode::kServe, fixture);
    got = query_nccl_ras("127.0.0.1", server.port(), /*json=*/true, 0.4, /*verbose=*/true);
    commands = server.finish();
  }
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, fixture);
  EXPECT_EQ(commands,
            (std::vector<std::string>{"CLIENT PROTOCOL 2", "TIMEOUT 1", "SET FORMAT json", "VERBOSE STATUS"}));
}

// hangdoctor --nccl-ras against a live (fake) RAS thread, and on a saved report: the ranks behind.
TEST(NcclRasHangdoctor, AsksALiveJobAndNamesTheRankBehind) {
  const std::string fixture = ras_fixture("ray-2.28.9-a10g-4node-allreduce-mismatch.json");
  testing::Cli c;
  {
    FakeRasServer server(FakeRasServer::Mode::kServe, fixture);
    c = testing::hangdoctor({"--nccl-ras", fmt::format("127.0.0.1:{}", server.port()), "--json", "-"});
    server.finish();
  }
  EXPECT_EQ(c.code, 1) << c.err;
  const auto j = nlohmann::json::parse(c.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << c.out;
  EXPECT_EQ(j.at("verdict"), "hang");
  EXPECT_EQ(j.at("culprit_ranks"), nlohmann::json::array({1})) << c.out;

  const auto saved = testing::hangdoctor(
      {(std::filesystem::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/logs/ras/ray-2.28.9-a10g-4node-allreduce-mismatch.json").string()});
  EXPECT_EQ(saved.code, 1) << saved.err;
  EXPECT_NE(saved.out.find("rank 1 is at AllReduce operation 100"), std::string::npos) << saved.out;

  const auto refused = testing::hangdoctor({"--nccl-ras", "127.0.0.1:1"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("nothing listens"), std::string::npos) << refused.err;
}

TEST(NcclRasClient, ServerWithoutJsonFallsBackToText) {  // NCCL 2.24 .. 2.28.3
  const std::string fixture = ras_fixture("synth-2.24.3-unreachable-process-and-count-mismatch.txt");
  FakeRasServer server(FakeRasServer::Mode::kServeWithoutJson, fixture);
  const auto got = query_nccl_ras("127.0.0.1", server.port(), /*json=*/true, 2.0, false);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, fixture);
}

TEST(NcclRasClient, SilentServerTimesOut) {
  FakeRasServer server(FakeRasServer::Mode::kSilent, "");
  const auto start = std::chrono::steady_clock::now();
  const auto got = query_nccl_ras("127.0.0.1", server.port(), false, 0.3, false);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("did not answer \"CLIENT PROTOCOL 2\" in time"), std::string::npos)
      << got.status().message();
  EXPECT_LT(took, 3.0);
}

TEST(NcclRasClient, RefusedConnectionSaysNothingListens) {
  // Bind an ephemeral port, then close it: nothing listens there.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  const auto got = query_nccl_ras("127.0.0.1", port, false, 1.0, false);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("nothing listens on 127.0.0.1:" + std::to_string(port) +
                                        ": is the job running NCCL >= 2.24 with RAS enabled (NCCL_RAS_ENABLE"),
            std::string::npos)
      << got.status().message();
}

TEST(NcclRasClient, BadArguments) {
  EXPECT_FALSE(query_nccl_ras("127.0.0.1", 28028, false, 0, false).ok());
  EXPECT_FALSE(query_nccl_ras("127.0.0.1", 0, false, 1, false).ok());
}

TEST(NcclRasAddress, Forms) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(parse_ras_address("28028", host, port).ok());
  EXPECT_EQ(host, "localhost");
  EXPECT_EQ(port, 28028);
  ASSERT_TRUE(parse_ras_address("n2:29000", host, port).ok());
  EXPECT_EQ(host, "n2");
  EXPECT_EQ(port, 29000);
  ASSERT_TRUE(parse_ras_address("[::1]:28028", host, port).ok());
  EXPECT_EQ(host, "::1");
  ASSERT_TRUE(parse_ras_address("[fe80::1%eth0]:1", host, port).ok());
  EXPECT_EQ(host, "fe80::1%eth0");
  EXPECT_EQ(port, 1);
  for (const char* bad : {"", "n2", "n2:", ":28028", "n2:0", "n2:65536", "n2:28a", "::1:28028", "[::1]",
                          "[::1]28028", "[]:1", "[::1:28028"}) {
    EXPECT_FALSE(parse_ras_address(bad, host, port).ok()) << bad;
  }
}

}  // namespace
}  // namespace rankscope::logs
