// critical_path_test.cpp — the critical path of a step across ranks.
//
// The walk (analyzers/critical_path/src/path_walk.h) on timelines built by hand, whose paths are
// known by construction: a host-only job whose slow data loader on rank 1 holds everybody's
// all-reduce; a GPU job whose long kernel on rank 1 delays its NCCL kernel; a kernel queued after
// a late launch. Then the whole analysis on a Kineto import (tests/fixtures/kineto/critical-path:
// rank 1's data range is 6 ms longer and each step ends in a sync), and the real pair of the GPU
// machine when it is present.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "path_walk.h"
#include "rankscope/analyzers/critical_path/critical_path.h"
#include "rankscope/kineto/kineto_import.h"
#include "step_timeline.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;
using critical_path_detail::RankStep;
using critical_path_detail::StepTimelines;
using critical_path_detail::TimelineCollective;
using critical_path_detail::TimelineKernel;
using critical_path_detail::TimelineRange;
using Kind = PathSegment::Kind;

constexpr int64_t kMs = 1'000'000, kUs = 1'000;

double ms_on(const StepPath& p, int rank, Kind kind, const std::string& name) {
  int64_t ns = 0;
  for (const PathSegment& s : p.segments)
    if (s.rank == rank && s.kind == kind && s.name == name) ns += s.end_ns - s.begin_ns;
  return double(ns) / kMs;
}

RankStep host_rank(int rank, int64_t end, std::vector<TimelineRange> ranges, int64_t enqueue) {
  RankStep rs;
  rs.rank = rank;
  rs.present = true;
  rs.begin_ns = 0;
  rs.end_ns = end;
  rs.ranges = std::move(ranges);
  rs.collectives.push_back(TimelineCollective{"dp0", 7, "allreduce", "backward", enqueue, enqueue, 85 * kMs, false});
  return rs;
}

TEST(CriticalPathWalk, HostCollectiveLeadsToTheRankThatArrivedLast) {
  StepTimelines st;
  st.step = 3;
  st.ranks.push_back(host_rank(0, 100 * kMs,
                               {{"data", 0, 10 * kMs, 0}, {"forward", 10 * kMs, 40 * kMs, 0}, {"backward", 40 * kMs, 70 * kMs, 0},
                                {"optimizer", 85 * kMs, 100 * kMs, 0}},
                               70 * kMs));
  st.ranks.push_back(host_rank(1, 99 * kMs,
                               {{"data", 0, 40 * kMs, 0}, {"forward", 40 * kMs, 55 * kMs, 0}, {"backward", 55 * kMs, 80 * kMs, 0},
                                {"optimizer", 85 * kMs, 99 * kMs, 0}},
                               80 * kMs));
  st.finalize(CriticalPathOptions{}.touch_ns);
  const StepPath p = critical_path_detail::walk_step(st, CriticalPathOptions{});
  EXPECT_EQ(p.end_rank, 0);
  EXPECT_EQ(p.step_ns, 100 * kMs);
  EXPECT_EQ(p.covered_ns, 100 * kMs);
  EXPECT_EQ(p.hops, 1);
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kHost, "optimizer"), 15.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kCollective, "allreduce dp0 #7"), 5.0);  // from rank 1's arrival to the end
  EXPECT_DOUBLE_EQ(ms_on(p, 1, Kind::kHost, "data"), 40.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 1, Kind::kHost, "forward"), 15.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 1, Kind::kHost, "backward"), 25.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kHost, "data"), 0.0);  // rank 0's own work is off the path
  ASSERT_FALSE(p.segments.empty());
  EXPECT_EQ(p.segments.front().name, "data");  // in time order
  EXPECT_EQ(p.segments.back().name, "optimizer");
}

TimelineKernel kernel(std::string name, uint32_t stream, int64_t begin, int64_t end, format::KernelClass kind = format::KernelClass::kCompute) {
  TimelineKernel k;
  k.name = std::move(name);
  k.stream = stream;
  k.begin_ns = begin;
  k.end_ns = end;
  k.kind = kind;
  return k;
}

RankStep gpu_rank(int rank, int64_t end, int64_t nccl_begin, std::vector<TimelineKernel> compute) {
  RankStep rs;
  rs.rank = rank;
  rs.present = true;
  rs.end_ns = end;
  rs.kernels = std::move(compute);
  rs.kernels.push_back(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 20, nccl_begin, 30 * kMs, format::KernelClass::kCommunication));
  rs.collectives.push_back(TimelineCollective{"default_pg", 1, "allreduce", "backward", nccl_begin - 100 * kUs, nccl_begin, 30 * kMs, false});
  return rs;
}

TEST(CriticalPathWalk, NcclKernelLeadsToTheRankWhoseGpuStartedItLast) {
  StepTimelines st;
  // rank 0: gemm, then the all-reduce waits from 10.5 ms; the optimizer kernel right after it; the
  // host's step ends as that kernel does (a sync).
  st.ranks.push_back(gpu_rank(0, 35 * kMs + 30 * kUs, 10 * kMs + 500 * kUs,
                              {kernel("gemm", 7, 1 * kMs, 10 * kMs), kernel("adam", 7, 30 * kMs + 5 * kUs, 35 * kMs + 10 * kUs)}));
  // rank 1: a 15 ms kernel before its all-reduce.
  st.ranks.push_back(gpu_rank(1, 35 * kMs + 20 * kUs, 25 * kMs + 5 * kUs,
                              {kernel("gemm", 7, 1 * kMs, 10 * kMs), kernel("slow_kernel", 7, 10 * kMs, 25 * kMs),
                               kernel("adam", 7, 30 * kMs + 5 * kUs, 35 * kMs)}));
  st.finalize(CriticalPathOptions{}.touch_ns);
  const StepPath p = critical_path_detail::walk_step(st, CriticalPathOptions{});
  EXPECT_EQ(p.end_rank, 0);
  EXPECT_EQ(p.hops, 1);
  EXPECT_NEAR(ms_on(p, 0, Kind::kKernel, "adam"), 5.005, 1e-9);
  EXPECT_NEAR(ms_on(p, 0, Kind::kCollective, "allreduce default_pg #1"), 4.995, 1e-9);  // rank 1's start to the end
  EXPECT_DOUBLE_EQ(ms_on(p, 1, Kind::kKernel, "slow_kernel"), 15.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 1, Kind::kKernel, "gemm"), 9.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 1, Kind::kHost, "(no range)"), 1.0);  // before its first kernel: the host
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kKernel, "gemm"), 0.0);
  EXPECT_EQ(p.covered_ns, 35 * kMs + 30 * kUs);
}

TEST(CriticalPathWalk, AKernelQueuedAfterALateLaunchIsALaunchDelayThenTheHost) {
  StepTimelines st;
  RankStep rs;
  rs.present = true;
  rs.end_ns = 20 * kMs;
  rs.ranges = {{"forward", 0, 12 * kMs, 0}};
  TimelineKernel late = kernel("late_kernel", 7, 12 * kMs, 20 * kMs);
  late.launch_end_ns = 11 * kMs;  // the stream was idle since 5 ms: the host launched it late
  rs.kernels = {kernel("early", 7, 1 * kMs, 5 * kMs), late};
  st.ranks.push_back(rs);
  st.finalize(CriticalPathOptions{}.touch_ns);
  const StepPath p = critical_path_detail::walk_step(st, CriticalPathOptions{});
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kKernel, "late_kernel"), 8.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kLaunchDelay, "late_kernel"), 1.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kHost, "forward"), 11.0);
  EXPECT_DOUBLE_EQ(ms_on(p, 0, Kind::kKernel, "early"), 0.0);  // off the path: the host held the late one
}

fs::path fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rs-critpath-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

TEST(CriticalPath, KinetoImportOfANcclJobGoesThroughTheSlowDataRank) {
  const fs::path dir = fresh_dir("nccl");
  auto imported = kineto::import_kineto({fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto/critical-path"}, dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  auto report = analyze_critical_path(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->steps.size(), 3u);
  // Rank 1's data range is 6 ms longer: its all-reduce kernel starts last, so the path crosses to
  // rank 1 and its data range (7 ms) is on it in every step; rank 0's data is not.
  double rank1_data = 0, rank0_data = 0;
  for (const PathShare& s : report->by_range) {
    if (s.what == "rank 1 data") rank1_data = s.ms_per_step;
    if (s.what == "rank 0 data") rank0_data = s.ms_per_step;
  }
  std::string path;  // the first step's path, for a failure's message
  for (const PathSegment& s : report->steps.front().segments)
    path += "\n  rank " + std::to_string(s.rank) + " " + std::string(segment_kind_name(s.kind)) + " " +
            std::to_string(double(s.end_ns - s.begin_ns) / kMs) + " ms " + s.name;
  EXPECT_GT(rank1_data, 6.0) << path;
  EXPECT_EQ(rank0_data, 0.0) << path;
  for (const StepPath& p : report->steps) EXPECT_GE(p.hops, 1) << "step " << p.step;
  const nlohmann::json j = critical_path_json(*report);
  EXPECT_EQ(j["schema_version"], kCriticalPathSchemaVersion);
  EXPECT_EQ(j["steps"].size(), 3u);
  EXPECT_FALSE(j["summary"].get<std::string>().empty());
  fs::remove_all(dir);
}

TEST(CriticalPath, RealKinetoPairGoesThroughRank1sData) {
  const fs::path pair = fs::path(RANKSCOPE_SOURCE_DIR) / "../shared/data/real-gpu/kineto-gloo-2ranks";
  if (!fs::exists(pair)) GTEST_SKIP() << "the real pair is not beside this checkout";
  const fs::path dir = fresh_dir("real");
  auto imported = kineto::import_kineto({pair}, dir / "run");
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  auto report = analyze_critical_path(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_FALSE(report->by_range.empty());
  // Rank 1's data loader sleeps 30 ms a step; the Gloo all-reduce in backward waits for it.
  double rank1_data = 0;
  for (const PathShare& s : report->by_range)
    if (s.what.rfind("rank 1 ", 0) == 0 && s.what.find("data") != std::string::npos) rank1_data += s.ms_per_step;
  EXPECT_GT(rank1_data, 25.0) << report->summary;
  fs::remove_all(dir);
}

TEST(CriticalPath, NoRunIsAClearError) {
  auto r = analyze_critical_path(fs::temp_directory_path() / "rankscope-no-such-run-critpath");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().user_text().find(".cpp:"), std::string::npos) << r.status().user_text();
}

}  // namespace
}  // namespace rankscope::analyzers
