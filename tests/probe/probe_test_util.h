// probe_test_util.h — a scratch run directory per test and Options that ignore the environment.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "rankscope/probe/probe.h"

namespace rankscope::probe::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rs_probe_XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!::getenv("RANKSCOPE_KEEP_TEST_DIRS")) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Options for a test probe: explicit run dir, no environment, a watchdog that stays quiet.
inline Options test_options(const std::filesystem::path& run_dir, int rank = 0, int world_size = 1) {
  Options o;
  o.read_environment = false;
  o.run_dir = run_dir;
  o.run_id = "test-run";
  o.rank = rank;
  o.world_size = world_size;
  o.watchdog_timeout_s = 600;
  o.watchdog_poll_s = 0.02;
  return o;
}

}  // namespace rankscope::probe::testing
