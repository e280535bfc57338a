// probe_log_test.cpp — the NCCL-style logger: WARN always, INFO only when asked and only for the
// listed subsystems (a leading ^ inverts the list), one line per message on stderr.
#include <gtest/gtest.h>

#include "rankscope/probe/log.h"

namespace rankscope::probe {
namespace {

TEST(ProbeLog, InfoIsFilteredBySubsystem) {
  Logger quiet = Logger::configured(false, "", 0);
  EXPECT_FALSE(quiet.info_enabled(LogSubsys::kWatchdog));

  Logger some = Logger::configured(true, "watchdog,CLOCK", 0);
  EXPECT_TRUE(some.info_enabled(LogSubsys::kWatchdog));
  EXPECT_TRUE(some.info_enabled(LogSubsys::kClock));
  EXPECT_FALSE(some.info_enabled(LogSubsys::kColl));

  Logger all = Logger::configured(true, "ALL", 0);
  EXPECT_TRUE(all.info_enabled(LogSubsys::kCupti));

  Logger but_coll = Logger::configured(true, "^COLL", 0);
  EXPECT_FALSE(but_coll.info_enabled(LogSubsys::kColl));
  EXPECT_TRUE(but_coll.info_enabled(LogSubsys::kRange));
}

TEST(ProbeLog, LinesCarryRankLevelAndSubsystem) {
  Logger log = Logger::configured(true, "CLOCK", 3);
  ::testing::internal::CaptureStderr();
  log.warn(LogSubsys::kColl, "slot {} taken", 7);
  log.info(LogSubsys::kClock, "offset {} ns", -12);
  log.info(LogSubsys::kColl, "filtered out");
  log.notice("GPU kernel timing unavailable (no driver)");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err,
            "rankscope[rank 3] WARN COLL: slot 7 taken\n"
            "rankscope[rank 3] INFO CLOCK: offset -12 ns\n"
            "rankscope: GPU kernel timing unavailable (no driver)\n");
}

TEST(ProbeLog, EnvironmentSelectsInfo) {
  ::setenv("RANKSCOPE_DEBUG", "INFO", 1);
  ::setenv("RANKSCOPE_DEBUG_SUBSYS", "WATCHDOG", 1);
  Logger log = Logger::from_environment(1);
  ::unsetenv("RANKSCOPE_DEBUG");
  ::unsetenv("RANKSCOPE_DEBUG_SUBSYS");
  EXPECT_TRUE(log.info_enabled(LogSubsys::kWatchdog));
  EXPECT_FALSE(log.info_enabled(LogSubsys::kInit));
  EXPECT_FALSE(Logger::from_environment(1).info_enabled(LogSubsys::kWatchdog));
}

}  // namespace
}  // namespace rankscope::probe
