// probe_nvtx_test.cpp — probe ranges arrive as NVTX ranges in the "rankscope" domain, as a tool
// (nsys) would receive them. Uses a test injection library (nvtx_test_injection.cpp); its own
// binary because NVTX loads a tool once per process, at the first NVTX call.
#include <stdlib.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

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
  probe.add_range_sink(make_nvtx_range_sink());
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
  std::string expected = "push rankscope forward/block0/attn\npush rankscope " + std::string(63, 'x') +
                         "\npop rankscope\npop rankscope\n";
  EXPECT_EQ(ss.str(), expected);
}

}  // namespace
}  // namespace rankscope::probe
