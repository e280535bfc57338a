// probe_options_test.cpp — Options::apply_environment, launcher ranks, and the step-window parser.
#include <stdlib.h>

#include <gtest/gtest.h>

#include "rankscope/probe/probe.h"

namespace rankscope::probe {
namespace {

// Sets variables for one test and removes them afterwards, so tests do not leak into each other.
class EnvGuard {
 public:
  ~EnvGuard() {
    for (const std::string& n : names_) ::unsetenv(n.c_str());
  }
  void set(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    names_.push_back(name);
  }

 private:
  std::vector<std::string> names_;
};

TEST(ProbeOptions, ParsesStepWindows) {
  auto both = parse_step_window("10-12");
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_EQ(both->first, 10);
  EXPECT_EQ(both->second, 12);
  auto single = parse_step_window("7");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->first, 7);
  EXPECT_EQ(single->second, 7);
  EXPECT_FALSE(parse_step_window("x").ok());
  EXPECT_FALSE(parse_step_window("12-10").ok());
  EXPECT_FALSE(parse_step_window("3-").ok());
  EXPECT_FALSE(parse_step_window("").ok());
}

TEST(ProbeOptions, EnvironmentOverridesFields) {
  EnvGuard env;
  env.set("RANKSCOPE_RUN_DIR", "/tmp/some_run");
  env.set("RANKSCOPE_RUN_ID", "abc");
  env.set("RANKSCOPE_WATCHDOG_TIMEOUT", "2.5");
  env.set("RANKSCOPE_WATCHDOG_POLL", "0.25");
  env.set("RANKSCOPE_WATCHDOG_ABORT", "1");
  env.set("RANKSCOPE_WATCHDOG_STACKS", "0");
  env.set("RANKSCOPE_TRACE_STEPS", "3-5");
  env.set("RANKSCOPE_NVTX", "off");
  env.set("RANKSCOPE_CUPTI", "false");
  Options o;
  Status s = o.apply_environment();
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(o.run_dir, "/tmp/some_run");
  EXPECT_EQ(o.run_id, "abc");
  EXPECT_DOUBLE_EQ(o.watchdog_timeout_s, 2.5);
  EXPECT_DOUBLE_EQ(o.watchdog_poll_s, 0.25);
  EXPECT_TRUE(o.watchdog_abort);
  EXPECT_FALSE(o.watchdog_stacks);
  EXPECT_EQ(o.trace_step_begin, 3);
  EXPECT_EQ(o.trace_step_end, 5);
  EXPECT_FALSE(o.nvtx);
  EXPECT_FALSE(o.cupti);
  EXPECT_TRUE(o.enabled);
}

TEST(ProbeOptions, MalformedValuesAreErrorsNamingTheVariable) {
  {
    EnvGuard env;
    env.set("RANKSCOPE_WATCHDOG_TIMEOUT", "soon");
    Options o;
    Status s = o.apply_environment();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("RANKSCOPE_WATCHDOG_TIMEOUT"), std::string::npos) << s.message();
  }
  {
    EnvGuard env;
    env.set("RANKSCOPE_TRACE_STEPS", "x");
    Options o;
    EXPECT_FALSE(o.apply_environment().ok());
  }
  {
    EnvGuard env;
    env.set("RANKSCOPE_DISABLE", "maybe");
    Options o;
    EXPECT_FALSE(o.apply_environment().ok());
  }
}

TEST(ProbeOptions, DisableTurnsTheProbeOff) {
  EnvGuard env;
  env.set("RANKSCOPE_DISABLE", "1");
  Options o;
  ASSERT_TRUE(o.apply_environment().ok());
  EXPECT_FALSE(o.enabled);
}

struct LauncherCase {
  std::vector<std::pair<std::string, std::string>> env;
  int rank, world_size, local_rank;
};

TEST(ProbeOptions, RankComesFromTheFirstLauncherPresent) {
  const LauncherCase cases[] = {
      // OpenMPI wins over the torchrun-style variables also present.
      {{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"RANK", "5"}, {"WORLD_SIZE", "6"}},
       3, 8, 1},
      {{{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}}, 2, 4, 0},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}, 1, 2, 1},
  };
  for (const LauncherCase& c : cases) {
    EnvGuard env;
    for (const auto& [name, value] : c.env) env.set(name, value);
    Options o;
    ASSERT_TRUE(o.apply_environment().ok()) << c.env.front().first;
    EXPECT_EQ(o.rank, c.rank) << c.env.front().first;
    EXPECT_EQ(o.world_size, c.world_size) << c.env.front().first;
    EXPECT_EQ(o.local_rank, c.local_rank) << c.env.front().first;
  }
}

TEST(ProbeOptions, ProgramRankWinsOverLauncher) {
  EnvGuard env;
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  Options o;
  o.rank = 5;
  o.world_size = 16;
  ASSERT_TRUE(o.apply_environment().ok());
  EXPECT_EQ(o.rank, 5);
  EXPECT_EQ(o.world_size, 16);
}

TEST(ProbeOptions, InconsistentLauncherRankIsAnError) {
  EnvGuard env;
  env.set("RANK", "4");
  env.set("WORLD_SIZE", "2");
  Options o;
  EXPECT_FALSE(o.apply_environment().ok());
}

}  // namespace
}  // namespace rankscope::probe
