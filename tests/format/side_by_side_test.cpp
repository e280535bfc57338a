// side_by_side_test.cpp — format::side_by_side (side_by_side.h): both pieces of work are done when it
// returns, each writing its own result; what the second thread throws is thrown again on the caller's,
// after both are done; what the caller's piece throws still leaves no thread running. The
// ThreadSanitizer stage of test.sh runs these.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "rankscope/format/side_by_side.h"

namespace rankscope::format {
namespace {

TEST(SideBySide, BothAreDoneWhenItReturns) {
  std::vector<int> a(100000), b(100000);
  uint64_t sum_a = 0, sum_b = 0;
  side_by_side([&] { std::iota(a.begin(), a.end(), 0), sum_a = std::accumulate(a.begin(), a.end(), uint64_t(0)); },
               [&] { std::iota(b.begin(), b.end(), 1), sum_b = std::accumulate(b.begin(), b.end(), uint64_t(0)); });
  EXPECT_EQ(sum_a, 4999950000u);
  EXPECT_EQ(sum_b, 5000050000u);
}

TEST(SideBySide, WhatTheOtherThreadThrowsIsThrownHereAfterBoth) {
  std::atomic<bool> here_done{false};
  EXPECT_THROW(side_by_side([] { throw std::runtime_error("there"); }, [&] { here_done = true; }), std::runtime_error);
  EXPECT_TRUE(here_done);
}

TEST(SideBySide, WhatThisThreadThrowsLeavesNoThreadRunning) {
  std::atomic<bool> there_done{false};
  try {
    side_by_side([&] { there_done = true; }, [] { throw std::logic_error("here"); });
    ADD_FAILURE() << "nothing thrown";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "here");
  }
  EXPECT_TRUE(there_done);  // joined before the exception left side_by_side
}

}  // namespace
}  // namespace rankscope::format
