// kernels_import_test.cpp — launches through both imports into TRACE_LAUNCHES, checked against the
// producers' own rows, and `rankscope kernels` on the real pair from an H100
// (shared/data/real-gpu/kineto-gloo-2ranks: PyTorch 2.11, DDP over Gloo, rank 1's data sleeps 30 ms),
// skipped when that folder is absent.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels_fake_run.h"
#include "nsys_fixture.h"
#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"
#include "rankscope/analyzers/device_timeline/kernels_json.h"
#include "rankscope/analyzers/device_timeline/kernels_text.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/kineto/kineto_import.h"
#include "rankscope/nsys/nsys_import.h"

namespace rankscope::testing {
namespace kernels_import_test {

namespace fs = std::filesystem;

const fs::path kKinetoFixtures = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto";
const fs::path kRealPair = fs::path(RANKSCOPE_SOURCE_DIR) / "../shared/data/real-gpu/kineto-gloo-2ranks";

int64_t round_ns(double us) { return std::llround(us * 1000); }

nlohmann::json read_gzip_json(const fs::path& file) {
  gzFile gz = gzopen(file.c_str(), "rb");
  std::string text;
  char buffer[1 << 16];
  for (int n; gz && (n = gzread(gz, buffer, sizeof(buffer))) > 0;) text.append(buffer, size_t(n));
  if (gz) gzclose(gz);
  return nlohmann::json::parse(text);
}

// GPU ops of a Kineto trace, from its first ProfilerStep on, whose correlation id no runtime or
// driver call of the trace carries (launched before the profiler started: HTA drops them).
int64_t unlaunched_ops(const nlohmann::json& trace) {
  std::set<int64_t> calls;
  double first_step = INFINITY;
  for (const auto& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if ((cat == "cuda_runtime" || cat == "cuda_driver") && e.contains("args") && e["args"].contains("correlation"))
      calls.insert(e["args"]["correlation"].get<int64_t>());
    if (cat == "user_annotation" && e.value("name", "").rfind("ProfilerStep#", 0) == 0)
      first_step = std::min(first_step, e["ts"].get<double>());
  }
  int64_t n = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset") continue;
    if (e["ts"].get<double>() >= first_step && !calls.count(e["args"].value("correlation", int64_t(-1)))) ++n;
  }
  return n;
}

// Every launch record of rank 0 matches the trace's runtime call and GPU op of its correlation id:
// the call's duration, and the op's begin and end relative to the call's begin.
TEST(KernelsImport, KinetoLaunchesAreTheTracesRuntimeCalls) {
  const fs::path run = kernels_test_dir("kineto");
  auto summary = kineto::import_kineto({kKinetoFixtures / "nccl-2ranks"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();

  std::ifstream in(kKinetoFixtures / "nccl-2ranks/rank0.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  struct Event {
    double ts, dur;
    std::string name;
  };
  std::map<int64_t, Event> calls, ops;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.contains("cat") || !e.contains("args") || !e["args"].contains("correlation")) continue;
    const std::string cat = e["cat"];
    const Event ev{e["ts"].get<double>(), e["dur"].get<double>(), e["name"].get<std::string>()};
    const int64_t id = e["args"]["correlation"].get<int64_t>();
    if (cat == "cuda_runtime" || cat == "cuda_driver")
      calls[id] = ev;
    else if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset")
      ops[id] = ev;
  }

  auto stream = format::read_event_stream(format::event_stream_path(run, 0));
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  size_t checked = 0, kernels = 0;
  std::set<std::string> apis;
  for (const auto& t : stream->traces) {
    kernels += t.kernels.size();
    for (const format::TraceLaunch& l : t.launches) {
      ASSERT_TRUE(calls.count(l.correlation) && ops.count(l.correlation)) << l.correlation;
      const Event& c = calls[l.correlation];
      const Event& o = ops[l.correlation];
      EXPECT_EQ(stream->name(l.api_id), c.name);
      EXPECT_EQ(stream->name(l.kernel_id), o.name);
      EXPECT_EQ(l.launch_end_ns - l.launch_begin_ns, round_ns(c.dur));
      EXPECT_NEAR(double(l.gpu_begin_ns - l.launch_begin_ns), (o.ts - c.ts) * 1000, 1.0);
      EXPECT_NEAR(double(l.gpu_end_ns - l.gpu_begin_ns), o.dur * 1000, 1.0);
      apis.insert(std::string(stream->name(l.api_id)));
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
  EXPECT_EQ(checked, kernels) << "every GPU op of this trace has its launch call";
  EXPECT_EQ(apis, (std::set<std::string>{"cudaLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync"}));
  fs::remove_all(run);
}

// nsys: the runtime rows' names lose their API-version suffix; each kernel with a launch has one.
TEST(KernelsImport, NsysLaunchesCarryTheCallName) {
  const fs::path dir = kernels_test_dir("nsys");
  nsys::testing::FixtureSpec spec;
  spec.world = 2;
  spec.steps = 3;
  spec.script = nsys::testing::standard_script(1, true);
  const auto files = nsys::testing::write_nsys_fixture(dir / "exports", spec);
  auto summary = nsys::import_nsys(files, dir / "run");
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  auto stream = format::read_event_stream(format::event_stream_path(dir / "run", 0));
  ASSERT_TRUE(stream.ok());
  size_t launches = 0;
  for (const auto& t : stream->traces) {
    for (const auto& l : t.launches) {
      EXPECT_EQ(stream->name(l.api_id), "cudaLaunchKernel");
      EXPECT_GE(l.gpu_begin_ns, l.launch_begin_ns);
      ++launches;
    }
  }
  EXPECT_GT(launches, 0u);
  auto report = analyzers::analyze_kernels(dir / "run");
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->ranks[0].launches.launches, int64_t(launches));
  fs::remove_all(dir);
}

TEST(KernelsRealPair, GlooJobOnAnH100) {
  if (!fs::exists(kRealPair / "rank0.json.gz")) GTEST_SKIP() << "no real Kineto traces at " << kRealPair.string();
  const fs::path run = kernels_test_dir("real");
  auto summary = kineto::import_kineto({kRealPair}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  auto report = analyzers::analyze_kernels(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->ranks.size(), 2u);
  for (const auto& r : report->ranks) {
    SCOPED_TRACE(r.rank);
    ASSERT_TRUE(r.problem.empty()) << r.problem;
    EXPECT_EQ(r.traced_steps, 4);
    // Gloo moves the gradients on the CPU: no communication kernel, so no overlap ratio.
    EXPECT_FALSE(r.overlap.ratio.has_value());
    EXPECT_EQ(r.kinds[1].count, 0);
    EXPECT_GT(r.kinds[0].count, 0);
    EXPECT_GT(r.kinds[2].count, 0) << "the trace has memcpys and memsets";
    // Every op has its launch call, except those the trace recorded without one (we keep them in
    // the breakdown and the idle time; HTA drops them).
    EXPECT_EQ(r.launches.launches + r.launches.ops_without_launch, r.ops);
    EXPECT_EQ(r.launches.ops_without_launch,
              unlaunched_ops(read_gzip_json(kRealPair / fmt::format("rank{}.json.gz", r.rank))));
    EXPECT_GT(r.launches.ops_without_launch, 0) << "this pair has some: the test would not see them dropped";
    std::set<std::string> apis;
    for (const auto& [name, n] : r.launches.apis) apis.insert(name);
    for (const char* a : {"cudaLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync", "cudaMemsetAsync"})
      EXPECT_TRUE(apis.count(a)) << a;
    EXPECT_GE(r.launches.delay.min_ns, 0);
    // The GPU works a few ms of a ~108 ms step and waits for the host (data, Gloo) the rest: its
    // idle time is mostly host wait, and the rank is host-bound.
    EXPECT_GT(r.idle.device.total_ns(), r.idle.span_ns / 2);
    EXPECT_GT(r.idle.device.host_wait_ns, r.idle.device.total_ns() / 2);
    EXPECT_TRUE(r.idle.host_bound);
    EXPECT_LE(r.idle.device.total_ns(), r.idle.span_ns);
    ASSERT_FALSE(r.queues.empty());
    for (const auto& q : r.queues) {
      EXPECT_GE(q.max_length, 1);
      EXPECT_GT(q.time_at_max_ns, 0);
    }
  }
  bool host_bound_named = false;
  for (const auto& f : report->findings) host_bound_named |= f.kind == "host_bound" && f.ranks.size() == 2;
  EXPECT_TRUE(host_bound_named);
  const std::string text = analyzers::kernels_report_text(*report);
  EXPECT_NE(text.find("host-bound"), std::string::npos);
  EXPECT_EQ(analyzers::kernels_report_json(*report)["ranks"].size(), 2u);
  fs::remove_all(run);
}

}  // namespace kernels_import_test
}  // namespace rankscope::testing
