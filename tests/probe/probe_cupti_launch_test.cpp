// probe_cupti_launch_test.cpp — the CUPTI leaf without a GPU: which callbacks count as kernel
// launches (runtime and driver API, graph launches), the callback body and the kernel-record
// decoder driven with fabricated CUPTI callback data and activity records into a real probe, and a
// replay of a PyTorch job's launch correlations seen on an H100 (checked-in cut of it, and the
// whole shared trace when that folder is present).
#include <cupti.h>
#include <zlib.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../probe/src/cupti/cupti_kernel_records.h"
#include "../../probe/src/cupti/cupti_launch_callbacks.h"
#include "probe_test_util.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/kernel_counters.h"
#include "rankscope/format/run_directory_layout.h"

namespace rankscope::probe {
namespace {

namespace fs = std::filesystem;
constexpr CUpti_CallbackDomain kRuntime = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr CUpti_CallbackDomain kDriver = CUPTI_CB_DOMAIN_DRIVER_API;

TEST(ProbeCuptiLaunch, LaunchApisOfBothDomainsAreWatched) {
  using cupti::launches_kernels;
  // What cuBLASLt, cuDNN and Triton call (the nvjet GEMMs came through cuLaunchKernelEx).
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz));
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz));
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel));
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  EXPECT_TRUE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz));
  // Our own kernels (<<<>>> is __cudaLaunchKernel in CUDA 13) and graph replays.
  EXPECT_TRUE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_TRUE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
  EXPECT_TRUE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060));
  EXPECT_TRUE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
  EXPECT_TRUE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000));
  // Not launches: copies, host functions, queries.
  EXPECT_FALSE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  EXPECT_FALSE(launches_kernels(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000));
  EXPECT_FALSE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc));
  EXPECT_FALSE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2));
  // Callback ids are per domain: driver id 311 is cuProfilerInitialize, runtime 311 cudaGraphLaunch.
  static_assert(static_cast<int>(CUPTI_DRIVER_TRACE_CBID_cuProfilerInitialize) ==
                static_cast<int>(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
  EXPECT_FALSE(launches_kernels(kDriver, CUPTI_DRIVER_TRACE_CBID_cuProfilerInitialize));
  EXPECT_FALSE(launches_kernels(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  for (const cupti::LaunchApi& api : cupti::kernel_launch_apis()) {
    EXPECT_TRUE(api.domain == kRuntime || api.domain == kDriver) << api.name;
    EXPECT_TRUE(launches_kernels(api.domain, api.id)) << api.name;
  }
}

// Collects what the callback body hands to the probe.
class RecordingSink final : public KernelSink {
 public:
  void on_launch(uint32_t correlation_id) override { launched.push_back(correlation_id); }
  void on_kernels(std::span<const KernelActivity>) override {}
  std::vector<uint32_t> launched;
};

CUpti_CallbackData callback_data(uint32_t correlation_id, CUpti_ApiCallbackSite site = CUPTI_API_ENTER) {
  CUpti_CallbackData d{};
  d.callbackSite = site;
  d.correlationId = correlation_id;
  return d;
}

TEST(ProbeCuptiLaunch, OnlyTheEntryOfALaunchIsReported) {
  RecordingSink sink;
  const auto enter = callback_data(11);
  const auto exit = callback_data(11, CUPTI_API_EXIT);
  const auto copy = callback_data(12);
  cupti::report_launch(sink, kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &enter);
  cupti::report_launch(sink, kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &exit);
  cupti::report_launch(sink, kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, &copy);
  cupti::report_launch(sink, kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, nullptr);
  EXPECT_EQ(sink.launched, std::vector<uint32_t>{11});
}

// A kernel record as CUPTI writes it (CONCURRENT_KERNEL); `name` must outlive the record's use.
CUpti_ActivityKernel10 kernel_record(const char* name, uint32_t correlation_id, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.correlationId = correlation_id;
  k.streamId = 7;
  k.deviceId = 0;
  k.start = start;
  k.end = end;
  return k;
}

template <class Record>
const CUpti_Activity& as_activity(const Record& r) {
  return reinterpret_cast<const CUpti_Activity&>(r);
}

TEST(ProbeCuptiLaunch, KernelRecordsAreDecodedAndOtherRecordsSkipped) {
  const auto k = kernel_record("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 42, 1'000, 5'000);
  std::optional<KernelActivity> a = cupti::kernel_activity_of(as_activity(k));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->name, "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT");
  EXPECT_EQ(a->correlation_id, 42u);
  EXPECT_EQ(a->stream, 7u);
  EXPECT_EQ(a->begin_ns, 1'000);
  EXPECT_EQ(a->end_ns, 5'000);
  auto unnamed = kernel_record(nullptr, 43, 0, 1);
  unnamed.kind = CUPTI_ACTIVITY_KIND_KERNEL;  // the serialising kind reads the same
  ASSERT_TRUE(cupti::kernel_activity_of(as_activity(unnamed)).has_value());
  EXPECT_EQ(cupti::kernel_activity_of(as_activity(unnamed))->name, "?");

  CUpti_ActivityExternalCorrelation ext{};
  ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  ext.externalId = 74;
  ext.correlationId = 42;
  EXPECT_FALSE(cupti::kernel_activity_of(as_activity(ext)).has_value());
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  api.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
  api.correlationId = 42;
  EXPECT_FALSE(cupti::kernel_activity_of(as_activity(api)).has_value());
}

// The CUPTI tracer's two halves without CUPTI: launches go through the real callback body, kernel
// records through the real decoder; the "GPU" is the test. Tracer clock = probe clock.
class FabricatedCuptiTracer final : public KernelTracer {
 public:
  std::string_view name() const override { return "fabricated-cupti"; }
  Status start(KernelSink& sink) override {
    sink_ = &sink;
    return {};
  }
  int64_t timestamp_ns() override { return now_unix_ns(); }
  void flush() override {
    std::vector<KernelActivity> batch;
    for (const auto& r : buffer_) {
      if (auto k = cupti::kernel_activity_of(*r)) batch.push_back(*k);
    }
    if (!batch.empty()) sink_->on_kernels(batch);
    buffer_.clear();
    names_.clear();
  }
  void stop() override {}

  void api_call(CUpti_CallbackDomain domain, CUpti_CallbackId id, uint32_t correlation_id) {
    const CUpti_CallbackData enter = callback_data(correlation_id);
    cupti::report_launch(*sink_, domain, id, &enter);
  }
  void kernel(const std::string& name, uint32_t correlation_id, int64_t start_ns, int64_t duration_ns) {
    names_.push_back(std::make_unique<std::string>(name));
    auto k = std::make_unique<CUpti_ActivityKernel10>(kernel_record(
        names_.back()->c_str(), correlation_id, static_cast<uint64_t>(start_ns), static_cast<uint64_t>(start_ns + duration_ns)));
    buffer_.push_back(std::unique_ptr<const CUpti_Activity, void (*)(const CUpti_Activity*)>(
        &as_activity(*k.release()), [](const CUpti_Activity* a) { delete reinterpret_cast<const CUpti_ActivityKernel10*>(a); }));
  }
  void external_correlation(uint32_t correlation_id, uint64_t external_id) {
    auto e = std::make_unique<CUpti_ActivityExternalCorrelation>();
    e->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e->externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e->externalId = external_id;
    e->correlationId = correlation_id;
    buffer_.push_back(std::unique_ptr<const CUpti_Activity, void (*)(const CUpti_Activity*)>(
        &as_activity(*e.release()),
        [](const CUpti_Activity* a) { delete reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a); }));
  }

 private:
  KernelSink* sink_ = nullptr;
  std::vector<std::unique_ptr<const CUpti_Activity, void (*)(const CUpti_Activity*)>> buffer_;
  std::vector<std::unique_ptr<std::string>> names_;
};

struct StepKernelTime {
  std::map<std::string, int64_t> per_range;
  std::map<std::string, double> counters;
  std::map<std::string, std::string> range_of_kernel;  // "" outside any range
};

StepKernelTime read_step0(const fs::path& run_dir) {
  StepKernelTime out;
  auto es = format::read_event_stream(format::event_stream_path(run_dir, 0));
  EXPECT_TRUE(es.ok()) << es.status().to_string();
  if (!es.ok() || es->steps.empty()) return out;
  for (const auto& r : es->steps[0].ranges) out.per_range[std::string(es->name(r.name_id))] = r.kernel_ns;
  for (const auto& c : es->steps[0].counters) out.counters[std::string(es->name(c.name_id))] = c.value;
  if (!es->traces.empty()) {
    for (const auto& k : es->traces[0].kernels)
      out.range_of_kernel[std::string(es->name(k.name_id))] = k.range_id ? std::string(es->name(k.range_id)) : "";
  }
  return out;
}

TEST(ProbeCuptiLaunch, EveryLaunchPathLandsInTheRangeOpenAtLaunch) {
  testing::KernelTracedRun<FabricatedCuptiTracer> run;
  ASSERT_NE(run.probe, nullptr);
  Probe& probe = *run.probe;
  FabricatedCuptiTracer* gpu = run.tracer;
  const int64_t t0 = now_unix_ns();

  probe.begin_step(0);
  {
    ScopedRange r(&probe, "forward/block0/attn/qkv");
    gpu->api_call(kRuntime, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, 501);  // our <<<>>>
    gpu->api_call(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 502);            // cuBLASLt GEMM
  }
  {
    ScopedRange r(&probe, "forward/block0/attn/sdpa");
    gpu->api_call(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 503);  // cuDNN / Triton style
    gpu->api_call(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 504);  // not a launch
  }
  {
    ScopedRange r(&probe, "optimizer");
    gpu->api_call(kRuntime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 505);  // a captured optimizer
  }
  {
    ScopedRange r(&probe, "backward/block0/mlp/fc");
    gpu->api_call(kDriver, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, 506);
  }
  gpu->api_call(kDriver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, 507);  // no range open

  gpu->kernel("layernorm_forward_kernel", 501, t0 + 1'000, 2'000);
  gpu->external_correlation(502, 74);  // records of other kinds share the buffer: skipped
  gpu->kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 502, t0 + 4'000, 10'000);
  gpu->kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 503, t0 + 15'000, 30'000);
  gpu->kernel("unknown_after_copy", 504, t0 + 46'000, 500);  // id of a copy call: no launch seen
  gpu->external_correlation(505, 1059);
  gpu->kernel("adamw_kernel", 505, t0 + 50'000, 3'000);      // three kernels, one graph launch
  gpu->kernel("grad_norm_kernel", 505, t0 + 54'000, 1'000);
  gpu->kernel("clip_kernel", 505, t0 + 56'000, 500);
  gpu->kernel("nvjet_sm90_tss_128x128_64x6_2x4_h_badd_NTT", 506, t0 + 60'000, 4'000);
  gpu->kernel("splitKreduce_kernel", 506, t0 + 65'000, 1'000);
  gpu->kernel("nvjet_sm90_tst_64x32_64x16_1x2_h_bz_NTT", 507, t0 + 70'000, 6'000);
  probe.end_step();
  probe.shutdown();

  const StepKernelTime s = read_step0(run.dir.path());
  EXPECT_EQ(s.per_range.at("forward/block0/attn/qkv"), 12'000);
  EXPECT_EQ(s.per_range.at("forward/block0/attn/sdpa"), 30'000);
  EXPECT_EQ(s.per_range.at("optimizer"), 4'500);
  EXPECT_EQ(s.per_range.at("backward/block0/mlp/fc"), 5'000);
  EXPECT_EQ(s.counters.at(std::string(format::kKernelNsOutsideRangesCounter)), 6'000.0);
  EXPECT_EQ(s.counters.at(std::string(format::kKernelNsNoLaunchSeenCounter)), 500.0);
  EXPECT_EQ(s.range_of_kernel.at("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"), "forward/block0/attn/qkv");
  EXPECT_EQ(s.range_of_kernel.at("cudnn_generated_fort_native_sdpa_sm90_flash_fprop"), "forward/block0/attn/sdpa");
  EXPECT_EQ(s.range_of_kernel.at("clip_kernel"), "optimizer");
  EXPECT_EQ(s.range_of_kernel.at("splitKreduce_kernel"), "backward/block0/mlp/fc");
  EXPECT_EQ(s.range_of_kernel.at("nvjet_sm90_tst_64x32_64x16_1x2_h_bz_NTT"), "");
  EXPECT_EQ(s.range_of_kernel.at("unknown_after_copy"), "");
  EXPECT_EQ(s.range_of_kernel.size(), 10u) << "the external-correlation records are not kernels";
}

// --- replay of a PyTorch job's launches (Kineto trace: API events and kernels by correlation id) ---

std::optional<std::string> read_maybe_gzipped(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files as they are
  if (f == nullptr) return std::nullopt;
  std::string text;
  char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(f, chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
  const bool ok = n == 0;
  gzclose(f);
  if (!ok) return std::nullopt;
  return text;
}

struct ReplayResult {
  int kernels = 0;
  int kernels_with_launch_event = 0;
  int driver_launched_kernels = 0;  // of those, launched through the driver API
  int nvjet_kernels = 0;
  int64_t kernel_ns_total = 0;
  StepKernelTime step;
};

// Plays every runtime/driver API event of a Kineto trace through the CUPTI callback body inside one
// probe range, then hands its kernels to the probe: each kernel's time lands in the range if its
// launch API is watched, and under "no launch seen" if it was launched before tracing began.
ReplayResult replay_kineto_trace(const fs::path& trace, const fs::path& run_dir) {
  ReplayResult out;
  auto text = read_maybe_gzipped(trace);
  EXPECT_TRUE(text.has_value()) << trace;
  if (!text) return out;
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(doc.is_object() && doc.contains("traceEvents")) << trace;
  if (!doc.is_object() || !doc.contains("traceEvents")) return out;
  auto owned = std::make_unique<FabricatedCuptiTracer>();
  FabricatedCuptiTracer* gpu = owned.get();
  std::unique_ptr<Probe> traced = testing::kernel_traced_probe(run_dir, std::move(owned));
  if (traced == nullptr) return out;
  Probe& probe = *traced;

  std::map<uint32_t, CUpti_CallbackDomain> domain_of_call;
  probe.begin_step(0);
  {
    ScopedRange r(&probe, "train/step");
    for (const auto& e : doc["traceEvents"]) {
      const std::string cat = e.value("cat", "");
      if (cat != "cuda_runtime" && cat != "cuda_driver") continue;
      const auto& args = e.at("args");
      const auto corr = args.at("correlation").get<uint32_t>();
      const CUpti_CallbackDomain domain = cat == "cuda_driver" ? kDriver : kRuntime;
      domain_of_call[corr] = domain;
      gpu->api_call(domain, args.at("cbid").get<CUpti_CallbackId>(), corr);
    }
  }
  const int64_t t0 = now_unix_ns();
  int64_t at = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "kernel") continue;
    const auto corr = e.at("args").at("correlation").get<uint32_t>();
    const std::string name = e.value("name", "?");
    // Kineto's durations are µs with ns decimals; keep whole ns so the sums are exact.
    const auto duration_ns = static_cast<int64_t>(e.value("dur", 0.0) * 1000.0 + 0.5);
    gpu->kernel(name, corr, t0 + at, duration_ns);
    at += duration_ns;
    out.kernels++;
    out.kernel_ns_total += duration_ns;
    auto call = domain_of_call.find(corr);
    if (call != domain_of_call.end()) {
      out.kernels_with_launch_event++;
      if (call->second == kDriver) out.driver_launched_kernels++;
    }
    if (name.rfind("nvjet", 0) == 0) out.nvjet_kernels++;
  }
  probe.end_step();
  probe.shutdown();
  out.step = read_step0(run_dir);
  return out;
}

void expect_every_launched_kernel_in_the_range(const ReplayResult& r) {
  ASSERT_GT(r.kernels, 0);
  EXPECT_GT(r.driver_launched_kernels, 0) << "the trace has driver-API launches (cuBLASLt)";
  EXPECT_GT(r.nvjet_kernels, 0);
  const double unseen = r.step.counters.at(std::string(format::kKernelNsNoLaunchSeenCounter));
  EXPECT_EQ(r.step.counters.at(std::string(format::kKernelNsOutsideRangesCounter)), 0.0);
  // Every kernel whose launch call is in the trace is in the range; only those launched before the
  // trace began (no API event) are not.
  EXPECT_EQ(static_cast<double>(r.step.per_range.at("train/step")) + unseen, static_cast<double>(r.kernel_ns_total));
  int in_range = 0;
  for (const auto& [kernel, range] : r.step.range_of_kernel) {
    if (kernel.rfind("nvjet", 0) == 0) {
      EXPECT_EQ(range, "train/step") << kernel;
    }
    in_range += range == "train/step";
  }
  EXPECT_GT(in_range, 0);
}

TEST(ProbeCuptiLaunch, KinetoLaunchCorrelationsFixture) {
  testing::ScratchDir dir;
  const ReplayResult r = replay_kineto_trace(
      fs::path(RANKSCOPE_SOURCE_DIR) / "tests/fixtures/probe/kineto_launch_correlation.json", dir.path());
  expect_every_launched_kernel_in_the_range(r);
  EXPECT_EQ(r.kernels, 9);
  EXPECT_EQ(r.kernels_with_launch_event, 8);
  EXPECT_EQ(r.driver_launched_kernels, 4);  // three nvjet GEMMs and cuDNN's SDPA
  EXPECT_EQ(r.nvjet_kernels, 3);
  EXPECT_GT(r.step.counters.at(std::string(format::kKernelNsNoLaunchSeenCounter)), 0.0);
}

TEST(ProbeCuptiLaunch, KinetoLaunchCorrelationsOfTheH100Job) {
  const fs::path trace = fs::path(RANKSCOPE_SOURCE_DIR) / "../shared/data/real-gpu/kineto-gloo-2ranks/rank0.json.gz";
  if (!fs::exists(trace)) GTEST_SKIP() << "real GPU data not present (" << trace << ")";
  testing::ScratchDir dir;
  const ReplayResult r = replay_kineto_trace(trace, dir.path());
  expect_every_launched_kernel_in_the_range(r);
  EXPECT_EQ(r.kernels, 1312);
  EXPECT_EQ(r.kernels_with_launch_event, 1308);
  EXPECT_EQ(r.driver_launched_kernels, 268);
}

}  // namespace
}  // namespace rankscope::probe
