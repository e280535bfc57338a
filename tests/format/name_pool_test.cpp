// name_pool_test.cpp — the reader's pooled names: one copy per content, shared across threads, and
// views that outlive every snapshot they were read into.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "rankscope/format/name_pool.h"

namespace rankscope::format {
namespace {

TEST(NamePool, EqualContentIsOneCopyAndDifferentContentIsNot) {
  std::string a = "backward/block3/mlp/fc", b = a;  // two buffers, one content
  const std::string_view pa = intern_name(a), pb = intern_name(b);
  EXPECT_EQ(pa, "backward/block3/mlp/fc");
  EXPECT_EQ(pa.data(), pb.data());
  EXPECT_NE(pa.data(), a.data());  // a copy, not the caller's buffer
  const std::string_view other = intern_name("backward/block3/mlp/proj");
  EXPECT_NE(other.data(), pa.data());
  EXPECT_EQ(other, "backward/block3/mlp/proj");
  EXPECT_TRUE(intern_name("").empty());
}

TEST(NamePool, ViewsStayValidAfterTheSourceIsGone) {
  std::string_view kept;
  {
    std::string temporary(40, 'x');
    temporary += "-name-pool-lifetime";
    kept = intern_name(temporary);
    temporary.assign(temporary.size(), '?');
  }
  EXPECT_EQ(kept, std::string(40, 'x') + "-name-pool-lifetime");
}

TEST(NamePool, ThreadsInterningTheSameNamesGetTheSameCopies) {
  constexpr int kThreads = 4, kNames = 500;
  std::vector<std::vector<const char*>> seen(kThreads, std::vector<const char*>(kNames));
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t)
    workers.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)  // the second and third rounds come from the thread's cache
        for (int i = 0; i < kNames; ++i) {
          const std::string name = "threaded/site/" + std::to_string((i * 7 + t) % kNames);
          const std::string_view v = intern_name(name);
          ASSERT_EQ(v, name);
          if (round == 0) seen[t][(i * 7 + t) % kNames] = v.data();
          else ASSERT_EQ(seen[t][(i * 7 + t) % kNames], v.data());
        }
    });
  for (auto& w : workers) w.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t], seen[0]) << "thread " << t;
}

}  // namespace
}  // namespace rankscope::format
