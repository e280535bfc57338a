// kineto_categories_test.cpp — every category spelling Kineto has written is
// read. Fixtures (tests/fixtures/kineto, make_fixtures.py; SOURCES.md names the Kineto commits):
// the 2020-21 `Operator`/`Runtime`/`Kernel`/`Memcpy`/`Memset` trace and the 2021 mixed one, each
// one rank of 2 steps of 10 ms whose device work is known by construction (forward 2 ms, backward
// 3 ms, a 0.5 ms copy and a 0.1 ms fill in data); then HTA's real `Kernel`/`Runtime`-only trace.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "event_categories.h"
#include "rankscope/analyzers/skew/skew_analyzer.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/kineto/kineto_import.h"

namespace rankscope::kineto {
namespace kineto_categories_test {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/kineto";

fs::path scratch(const std::string& name) {
  static int counter = 0;
  const fs::path p = fs::temp_directory_path() /
                     ("rs-kineto-cats-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(p);
  return p;
}

// Range name of each traced kernel of a rank (by kernel name), and every range name seen.
struct Traced {
  std::map<std::string, std::string> kernel_range;
  std::map<std::string, int> ranges;
};

Traced traced(const fs::path& run, int rank) {
  Traced out;
  auto stream = format::read_event_stream(format::event_stream_path(run, rank));
  EXPECT_TRUE(stream.ok()) << stream.status().to_string();
  if (!stream.ok()) return out;
  for (const auto& t : stream->traces) {
    for (const auto& k : t.kernels) out.kernel_range[std::string(stream->name(k.name_id))] = k.range_id ? std::string(stream->name(k.range_id)) : "";
    for (const auto& r : t.ranges) ++out.ranges[std::string(stream->name(r.name_id))];
  }
  return out;
}

class OlderSpellings : public ::testing::TestWithParam<const char*> {};

TEST_P(OlderSpellings, ReadAsTodaysWithTheirRangesAndDeviceTime) {
  const fs::path run = scratch(GetParam());
  auto summary = import_kineto({kFixtures / GetParam() / "rank0.json"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.steps, 2) << r.steps_from;
  EXPECT_EQ(r.kernels, 8) << "2 kernels, a memcpy and a memset per step";
  EXPECT_EQ(r.unlaunched_ops, 0) << "every op joined to its Runtime call";
  EXPECT_NE(r.producer.find("8 device ops CUDA"), std::string::npos) << r.producer;
  // Epoch microseconds without baseTimeNanoseconds are epoch times: no warning about the clock.
  for (const auto& w : r.warnings) EXPECT_EQ(w.find("baseTimeNanoseconds"), std::string::npos) << w;

  const Traced t = traced(run, 0);
  EXPECT_EQ(t.kernel_range.at("volta_sgemm_128x64_nn"), "forward");
  EXPECT_EQ(t.kernel_range.at("volta_sgemm_64x64_nt"), "backward");
  EXPECT_EQ(t.kernel_range.at("Memcpy HtoD (Pageable -> Device)"), "data");
  // Ops among the 2020 `Operator` events are not ranges; the user scopes are.
  EXPECT_EQ(t.ranges.count("aten::mm"), 0u);
  EXPECT_EQ(t.ranges.count("AddmmBackward"), 0u);
  EXPECT_EQ(t.ranges.count("forward"), 1u);

  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  ASSERT_EQ(report->ranks.size(), 1u);
  ASSERT_TRUE(report->ranks[0].device.has_value()) << "the device timeline was read";
  const auto& d = *report->ranks[0].device;
  EXPECT_NEAR(d.step_ms, 10.0, 1e-6);
  EXPECT_NEAR(d.compute_ms, 5.0, 1e-6);
  EXPECT_NEAR(d.memcpy_ms, 0.6, 1e-6);
  EXPECT_NEAR(d.idle_ms, 4.4, 1e-6);
  fs::remove_all(run);
}

INSTANTIATE_TEST_SUITE_P(Kineto, OlderSpellings, ::testing::Values("categories-2020", "categories-2021"));

// HTA's own test trace: only `Kernel` and `Runtime` events (no range at all). Imported empty
// before; now its kernels are the device timeline and the capture is one step.
TEST(KinetoOlderSpellings, RealKernelAndRuntimeOnlyTraceIsNotEmpty) {
  const fs::path run = scratch("hta-old");
  auto summary = import_kineto({kFixtures / "hta/trace_file_list/inference_rank_1.json.gz"}, run);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const auto& r = summary->ranks.at(0);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.kernels, 4);
  EXPECT_EQ(r.unlaunched_ops, 0);
  EXPECT_EQ(r.steps, 1);
  auto report = analyzers::analyze_skew(run);
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  const auto rank1 = std::find_if(report->ranks.begin(), report->ranks.end(), [](const auto& x) { return x.rank == 1; });
  ASSERT_NE(rank1, report->ranks.end());
  ASSERT_TRUE(rank1->device.has_value());
  EXPECT_NEAR(rank1->device->compute_ms, (4 + 6 + 15 + 5) / 1000.0, 1e-9) << "the four kernels' 30 µs";
  fs::remove_all(run);
}

// The table knows every name in Kineto's ActivityType list (libkineto/include/ActivityType.h at
// 114171df, 2026-08) and every older spelling; anything else is "unknown", reported, never guessed.
TEST(KinetoEventCategories, EveryNameKinetoWroteHasARole) {
  for (const char* cat : {"cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
                          "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event", "python_function",
                          "overhead", "mtia_runtime", "mtia_ccp_events", "mtia_insight", "cuda_sync", "cuda_event",
                          "mtia_counters", "glow_runtime", "cuda_profiler_range", "hpu_op", "xpu_runtime", "xpu_driver",
                          "collective_comm", "privateuse1_runtime", "privateuse1_driver", "xpu_scope_profiler", "xpu_sync",
                          "hardware_counters", "mtia_workloadd", "mtia_collective_comm", "gpu_user_Annotation", "Operator",
                          "Runtime", "Kernel", "Memcpy", "Memset", "User", "Trace"}) {
    EXPECT_NE(find_event_category(cat), nullptr) << cat;
  }
  EXPECT_EQ(find_event_category("npu_kernel"), nullptr);
  EXPECT_EQ(find_event_category("KERNEL"), nullptr) << "spellings are exact";
  EXPECT_EQ(find_event_category("Runtime")->role, EventRole::kLaunch);
  EXPECT_EQ(find_event_category("xpu_runtime")->role, EventRole::kLaunch);
  EXPECT_EQ(find_event_category("Memset")->role, EventRole::kMemset);
  EXPECT_EQ(find_event_category("gpu_user_annotation")->role, EventRole::kSkipped) << "a projection, not device work";
}

TEST(KinetoEventCategories, UserScopesAmongTheOldOperators) {
  EXPECT_TRUE(operator_is_user_scope("ProfilerStep#12"));
  EXPECT_TRUE(operator_is_user_scope("forward"));
  EXPECT_TRUE(operator_is_user_scope("Optimizer.step#SGD.step"));
  EXPECT_FALSE(operator_is_user_scope("aten::mm"));
  EXPECT_FALSE(operator_is_user_scope("autograd::engine::evaluate_function: AddmmBackward0"));
  EXPECT_FALSE(operator_is_user_scope("AddmmBackward"));
  EXPECT_FALSE(operator_is_user_scope("MmBackward0"));
  EXPECT_FALSE(operator_is_user_scope("CopyBackwards"));
  EXPECT_FALSE(operator_is_user_scope(""));
  EXPECT_EQ(mtia_event_kind("dma_request"), MtiaEventKind::kCopy);
  EXPECT_EQ(mtia_event_kind("event_wait"), MtiaEventKind::kSync);
  EXPECT_EQ(mtia_event_kind("fc-dtype_Float"), MtiaEventKind::kKernel);
}

}  // namespace kineto_categories_test
}  // namespace rankscope::kineto
