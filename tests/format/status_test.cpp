// status_test.cpp — a Status's breadcrumb is for developers: users see the message alone unless
// they ask (RANKSCOPE_DEBUG), and a CLI error carries no source location.
#include <gtest/gtest.h>

#include <cstdlib>

#include "rankscope/format/status.h"

namespace rankscope {
namespace {

Status failing_step() { return corrupt("rank00003.flight: header torn"); }

Status caller() {
  RS_RETURN_IF_ERROR(failing_step());
  return {};
}

TEST(Status, UsersSeeTheMessageDevelopersTheBreadcrumb) {
  ::unsetenv("RANKSCOPE_DEBUG");
  const Status s = caller();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("(at status_test.cpp:"), std::string::npos) << s.to_string();
  EXPECT_EQ(s.user_text(), "rank00003.flight: header torn");
  ::setenv("RANKSCOPE_DEBUG", "1", 1);
  EXPECT_EQ(s.user_text(), s.to_string());
  ::setenv("RANKSCOPE_DEBUG", "0", 1);
  EXPECT_EQ(s.user_text(), "rank00003.flight: header torn");
  ::unsetenv("RANKSCOPE_DEBUG");
}

}  // namespace
}  // namespace rankscope
