// probe_nvtx_test.cpp — probe ranges arrive as NVTX ranges in the "rankscope" domain, as a tool
// (nsys) would receive them. Uses a test injection library (nvtx_test_injection.cpp); its own
// binary because NVTX loads a tool once per process, at the first NVTX call.
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "rankscope/format/clock.h"

#include "probe_test_util.h"
#include "rankscope/probe/nvtx_range_sink.h"
#include "rankscope/probe/plugins.h"

namespace rankscope::probe {
namespace {

TEST(ProbeNvtx, RangesReachAnNvtxToolInTheRankscopeDomain) {
  testing::ScratchDir dir;
  std::filesystem::path log = dir.path() / "nvtx.log";
  ::setenv("NVTX_INJECTION64_PATH", RANKSCOPE_NVTX_TEST_INJECTION, 1);
  ::setenv("RANKSCOPE_NVTX_TEST_LOG", log.c_str(), 1);
  auto created = Probe::create(testing::test_options(dir.path() / "run"));
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  probe.add_range_sink(make_nvtx_range_sink(1, 4));
  probe.begin_step(0);
  {
    ScopedRange a(&probe, "forward/block0/attn");
    // Longer than the flight recorder keeps (63 bytes): NVTX gets the same cut name.
    ScopedRange b(&probe, std::string(80, 'x'));
  }
  probe.end_step();

  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  // The rank mark once; a sync mark carrying the probe's clock after the top-level (no '/') push.
  const int64_t before = rankscope::now_unix_ns();
  std::string text = ss.str();
  const std::string head = "mark rankscope rankscope:rank=1/4\npush rankscope forward/block0/attn\npush rankscope " +
                           std::string(63, 'x') + "\nmark rankscope rankscope:sync ";
  ASSERT_EQ(text.substr(0, head.size()), head) << text;
  const size_t eol = text.find('\n', head.size());
  ASSERT_NE(eol, std::string::npos) << text;
  const int64_t payload = std::stoll(text.substr(head.size(), eol - head.size()));
  EXPECT_GT(payload, before - int64_t(60e9));  // the probe's clock (unix ns), read a moment ago
  EXPECT_LE(payload, before);
  EXPECT_EQ(text.substr(eol + 1), "pop rankscope\npop rankscope\n");
}

}  // namespace
}  // namespace rankscope::probe
