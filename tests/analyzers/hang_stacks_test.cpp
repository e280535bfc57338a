// hang_stacks_test.cpp — --stacks runs a real stack tool on a real process of this host and
// stores the stacks as run-directory evidence.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "hang_test_support.h"
#include "rankscope/analyzers/hang/stack_capture.h"

namespace rankscope::analyzers::hang {
namespace {

using testing::FakeProcessTable;
using testing::scratch;

class FakeStacks final : public StackCollector {
 public:
  int calls = 0;
  Result<std::string> collect(int pid) override {
    ++calls;
    return std::string("#0  0x1 in fake_frame_for_") + std::to_string(pid) + "\n";
  }
};

Diagnosis one_culprit(const std::string& host, int pid) {
  Diagnosis d;
  d.verdict = Verdict::kHang;
  d.culprit_ranks = {3};
  RankReport r;
  r.rank = 3;
  r.host = host;
  r.pid = pid;
  d.ranks.push_back(r);
  return d;
}

TEST(HangStacks, EvidenceFileUnderRunDir) {
  const auto dir = scratch("st");
  FakeProcessTable procs;
  procs.table[{"nodeA", 77}] = Liveness::kAlive;
  FakeStacks stacks;
  Diagnosis d = one_culprit("nodeA", 77);
  auto report = capture_stacks(d, dir, procs, stacks);
  EXPECT_EQ(report.captured, 1);
  ASSERT_FALSE(d.ranks[0].stacks_file.empty());
  EXPECT_EQ(d.ranks[0].stacks_file.rfind("evidence/rank00003-hangdoctor-", 0), 0u) << d.ranks[0].stacks_file;
  std::ifstream in(dir / d.ranks[0].stacks_file);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(text.find("fake_frame_for_77"), std::string::npos);
}

TEST(HangStacks, RanksNotAliveHereAreSkippedWithAReason) {
  FakeProcessTable procs;  // nodeB unknown: another host
  FakeStacks stacks;
  Diagnosis d = one_culprit("nodeB", 77);
  auto report = capture_stacks(d, scratch("st"), procs, stacks);
  EXPECT_EQ(report.captured, 0);
  EXPECT_EQ(stacks.calls, 0);
  ASSERT_EQ(report.notes.size(), 1u);
  EXPECT_NE(report.notes[0].find("not a live process on this host"), std::string::npos);
}

TEST(HangStacks, RealToolOnARealProcess) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(child, 0);
  ::usleep(200'000);  // let it reach its sleep
  SystemProcessTable procs;
  ExternalStackCollector tool;
  Diagnosis d = one_culprit(procs.local_host(), int(child));
  const auto dir = scratch("st");
  auto report = capture_stacks(d, dir, procs, tool);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_EQ(report.captured, 1) << (report.notes.empty() ? "" : report.notes[0]);
  EXPECT_NE(d.ranks[0].stacks.find("nanosleep"), std::string::npos) << d.ranks[0].stacks;
  EXPECT_TRUE(std::filesystem::exists(dir / d.ranks[0].stacks_file));
}

}  // namespace
}  // namespace rankscope::analyzers::hang
