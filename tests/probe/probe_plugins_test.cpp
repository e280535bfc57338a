// probe_plugins_test.cpp — attach_default_plugins on this build: NVTX on when compiled in, CUPTI
// either on (a GPU with a driver) or off with exactly one line saying why; the probe works either way.
#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/plugins.h"

namespace rankscope::probe {
namespace {

TEST(ProbePlugins, AttachDegradesWithOneLineForTheJob) {
  testing::ScratchDir dir;
  auto created = Probe::create(testing::test_options(dir.path()));
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Probe& probe = **created;
  ::testing::internal::CaptureStderr();
  PluginReport report = attach_default_plugins(probe);
  std::string err = ::testing::internal::GetCapturedStderr();
  std::printf("[ plugins ] nvtx=%d cupti=%d; stderr: %s", report.nvtx, report.cupti, err.c_str());
#if RANKSCOPE_TEST_HAVE_CUDA
  EXPECT_TRUE(report.nvtx);
  if (!report.cupti) {
    EXPECT_EQ(err.rfind("rankscope: GPU kernel timing unavailable (", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
#else
  EXPECT_FALSE(report.nvtx);
  EXPECT_FALSE(report.cupti);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("NVTX ranges unavailable"), std::string::npos) << err;
  EXPECT_NE(err.find("GPU kernel timing unavailable"), std::string::npos) << err;
#endif
  // Ranges flow through the NVTX sink (if any) and are still recorded.
  probe.begin_step(0);
  {
    ScopedRange r(&probe, "forward/embed");
    ScopedRange n(&probe, "forward/embed/wte");
  }
  probe.end_step();
  probe.shutdown();
  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok());
  ASSERT_EQ(es->steps.size(), 1u);
  EXPECT_EQ(es->steps[0].ranges.size(), 2u);
}

TEST(ProbePlugins, OnlyRankZeroSpeaksForTheJob) {
  testing::ScratchDir dir;
  Options o = testing::test_options(dir.path());
  o.rank = 1;
  o.world_size = 2;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  ::testing::internal::CaptureStderr();
  attach_default_plugins(**created);
  const std::string err = ::testing::internal::GetCapturedStderr();
#if RANKSCOPE_TEST_HAVE_CUDA
  // The CUPTI tracer reports its own failure on every rank (a per-device fact).
  EXPECT_EQ(err.find("NVTX"), std::string::npos) << err;
#else
  EXPECT_TRUE(err.empty()) << err;
#endif
}

TEST(ProbePlugins, OptionsTurnPluginsOff) {
  testing::ScratchDir dir;
  Options o = testing::test_options(dir.path());
  o.nvtx = false;
  o.cupti = false;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok());
  PluginReport report = attach_default_plugins(**created);
  EXPECT_FALSE(report.nvtx);
  EXPECT_FALSE(report.cupti);
}

}  // namespace
}  // namespace rankscope::probe
