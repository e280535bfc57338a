// log_numbers_test.cpp — numbers a log states are distrusted: a rank count, a rank, a SeqNum or a
// time near the ends of what the reader takes neither sizes the job nor wraps (importers/logs; format/saturating.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "log_test_support.h"
#include "rankscope/format/run_metadata.h"
#include "rankscope/logs/log_import.h"

namespace rankscope::logs {
namespace {

namespace fs = std::filesystem;

fs::path numbers_scratch(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rankscope-log-numbers-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Two real ranks on a communicator; a third init line claims two billion ranks (a corrupt or glued
// line): the job is not sized by it (it asked for tens of GB before, and a Release build gave up).
TEST(LogNumbers, AnInitClaimingBillionsOfRanksDoesNotSizeTheJob) {
  const testing::Proc a("n1", 101, 0), b("n1", 102, 1), liar("n1", 103, 2);
  std::string log = a.init("0xa", 0, 2, "0x1", true) + b.init("0xb", 1, 2, "0x1", true) +
                    liar.init("0xc", 1999999999, 2000000000, "0x2", true);
  for (int i = 0; i < 3; ++i) log += a.coll("AllReduce", 1024, 7, "0xa", 2);
  for (int i = 0; i < 2; ++i) log += b.coll("AllReduce", 1024, 7, "0xb", 2);
  log += liar.coll("AllReduce", 1024, 7, "0xc", 2000000000);
  const fs::path p = testing::write_file(numbers_scratch("nranks") / "job.log", log);
  const auto started = std::chrono::steady_clock::now();
  auto r = import_logs({p});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LT(r->run.world_size, 16) << "the world was sized by a number in the log";
  const auto cli = testing::hangdoctor({p.string()});
  EXPECT_EQ(cli.code, 1) << cli.out << cli.err;
  EXPECT_NE(cli.out.find("rank 1"), std::string::npos) << cli.out;  // rank 1 made fewer calls
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
}

// A world as large as an init line may claim (within kMaxWorldSize) whose ranks are almost all
// culprits (they never joined): the text report looked each rank up in the culprit list, quadratic
// (200,000 ranks: 5 s in Release, 1,048,576: 115 s; the fuzzer's 61,000: 39 s under ASan). Now a
// sorted lookup: 0.5 s and 3 s in Release. The bound here is loose enough for sanitizer builds.
TEST(LogNumbers, AHundredThousandClaimedRanksAreReportedInLinearTime) {
  const testing::Proc a("n1", 101, 0), b("n1", 102, 1), c("n1", 103, 2), d("n1", 104, 3);
  const std::string log = a.init("0xa", 0, 4, "0x1", false) + b.init("0xb", 1, 100000, "0x1", false) +
                          c.init("0xc", 2, 4, "0x1", false) + d.init("0xd", 3, 4, "0x1", false);
  const fs::path p = testing::write_file(numbers_scratch("world") / "job.log", log);
  const auto started = std::chrono::steady_clock::now();
  const auto cli = testing::hangdoctor({p.string()});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(cli.code, 1) << cli.err;
  EXPECT_NE(cli.out.find("HANG at init"), std::string::npos) << cli.out.substr(0, 2000);
  EXPECT_LT(took, std::chrono::seconds(30));
}

// The same world with calls in the log: every rank it never heard from was its own group in the text
// report ("rank N printed nothing in this log"), and finding a rank's group by searching them all
// was quadratic too (a 62 kB log naming 61,009 ranks, kept by the fuzzer: 5.0 s in Release, 114 s
// under ASan; 0.4 s with the groups in a map). Now they are one group, with one representative in
// the evidence: the report stays a few lines, whatever world the log claims. The bound is loose
// enough for sanitizer builds.
TEST(LogNumbers, AHundredThousandRanksEachInItsOwnGroupAreReportedInLinearTime) {
  const testing::Proc a("n1", 101, 0), b("n1", 102, 1), c("n1", 103, 2), d("n1", 104, 3), big("n2", 201, 0);
  std::string log = a.init("0xa", 0, 4, "0x1", true) + b.init("0xb", 1, 4, "0x1", true) +
                    c.init("0xc", 2, 4, "0x1", true) + d.init("0xd", 3, 4, "0x1", true) +
                    big.init("0xe", 0, 100000, "0x2", true);
  log += a.coll("AllReduce", 1024, 7, "0xa", 4) + a.coll("AllReduce", 1024, 7, "0xa", 4) +
         b.coll("AllReduce", 1024, 7, "0xb", 4) + c.coll("AllReduce", 1024, 7, "0xc", 4) +
         d.coll("AllReduce", 1024, 7, "0xd", 4);
  log += big.coll("AllReduce", 1024, 7, "0xe", 100000);
  const fs::path p = testing::write_file(numbers_scratch("groups") / "job.log", log);
  const auto started = std::chrono::steady_clock::now();
  const auto cli = testing::hangdoctor({p.string()});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(cli.code, 1) << cli.err;
  // Ranks 1-99999 (the big communicator's but its rank 0) printed nothing: one line in the ranks
  // table and one representative in the evidence, not 99,999 of each.
  EXPECT_NE(cli.out.find("\n  ranks 1-99999 on an unknown host: missing: it printed nothing in this log\n"), std::string::npos)
      << cli.out.substr(0, 3000);
  EXPECT_EQ(cli.out.find("rank 99999 "), std::string::npos);
  EXPECT_LT(cli.out.size(), 10000u) << cli.out.substr(0, 3000);
  EXPECT_LT(took, std::chrono::seconds(30));
}

// PyTorch's "[PG 0 Rank N]" with N past an int: not a rank (world = N + 1 overflowed int before).
TEST(LogNumbers, APgRankPastAnIntIsNotARank) {
  std::string log;
  for (long long r : {0LL, 1LL, 2147483647LL, 99999999999LL})
    log += fmt::format("[E1127 10:00:00.000000 100 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank {0}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, "
                       "NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n",
                       r);
  const fs::path p = testing::write_file(numbers_scratch("pgrank") / "job.log", log);
  auto r = import_logs({p});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GE(r->run.world_size, 0);
  EXPECT_LE(r->run.world_size, format::kMaxWorldSize);
  const auto cli = testing::hangdoctor({p.string(), "--json", "-"});
  EXPECT_TRUE(cli.code == 1 || cli.code == 2) << cli.err;
  EXPECT_FALSE(cli.out.empty() && cli.err.empty());
}

// The largest SeqNum and time the reader takes (18 digits; longer is not a number it reads): the
// time in ns is past INT64_MAX and held there (format/saturating.h), not wrapped to negative.
TEST(LogNumbers, TheLargestSeqNumAndTimeAreHeldNotWrapped) {
  const std::string big = "999999999999999999";
  std::string log;
  for (int r : {0, 1})
    log += fmt::format("[rank{0}]:[E1127 10:00:00.000000 {1} ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank {0}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={2}, "
                       "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for {2} "
                       "milliseconds before timing out.\n"
                       "[rank{0}]:[E1127 10:00:00.000100 {1} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank {0}] Exception (either an error or timeout) detected by watchdog at work: {2}, last "
                       "enqueued NCCL work: {2}, last completed NCCL work: 999999999999999998.\n",
                       r, 100 + r, big);
  log += "[rank2]:[W1127 09:50:00.000000 102 ProcessGroupNCCL.cpp:4000] something unrelated\n";
  const fs::path p = testing::write_file(numbers_scratch("seqmax") / "job.log", log);
  auto r = import_logs({p});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_GE(r->run.ranks.size(), 2u);
  ASSERT_TRUE(r->run.ranks[0].flight.has_value());
  const auto& s = *r->run.ranks[0].flight;
  EXPECT_EQ(s.live.heartbeat_ns, INT64_MAX);  // 1e18 ms is past INT64_MAX ns: held
  ASSERT_FALSE(s.comms.empty());
  EXPECT_EQ(s.comms.front().next_seq, 1'000'000'000'000'000'000u);
  EXPECT_EQ(s.comms.front().completed_count, 999'999'999'999'999'999u);
  const auto cli = testing::hangdoctor({p.string()});
  EXPECT_EQ(cli.code, 1) << cli.out << cli.err;
  EXPECT_NE(cli.out.find("rank 2"), std::string::npos) << cli.out;  // the one that never entered
  EXPECT_EQ(cli.err.find("internal error"), std::string::npos) << cli.err;
  EXPECT_EQ(cli.out.find("-9223372036854775"), std::string::npos) << cli.out;  // no wrapped number
}

}  // namespace
}  // namespace rankscope::logs
