// comm_mpi_test.cpp — runs comm_mpi_check under mpirun on 4 ranks (TP=2 x DP=2 groups).
#include <gtest/gtest.h>

#include "train_job.h"

namespace {

using namespace std::chrono_literals;

TEST(MpiCommunicator, EveryCollectiveOnWorldTpAndDpGroups) {
  auto dir = e2e::fresh_run_dir("comm_mpi_check");
  const std::string exe = std::string(RANKSCOPE_BINARY_DIR) + "/tests/comm_mpi_check";
  std::vector<std::string> argv = {e2e::mpirun_path(), "-np", "4", "--oversubscribe", "--bind-to", "none", exe};
  std::string out;
  EXPECT_EQ(e2e::run_to_end(argv, dir, 120s, &out), 0) << out;
  EXPECT_NE(out.find("all collectives agree on 4 ranks"), std::string::npos) << out;
}

}  // namespace
