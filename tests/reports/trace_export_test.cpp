// trace_export_test.cpp — the Chrome trace of a fabricated two-rank run: valid JSON, one process
// per rank, ranges of the capture window, collectives with flow arrows from the last arriver, and
// counters, all on the aligned clock although rank 1's own clock runs 3 s ahead.
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rankscope/format/event_stream.h"
#include "rankscope/reports/chrome_trace.h"
#include "skew_fake_run.h"

namespace rankscope::analyzers {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Exported {
  reports::ChromeTraceSummary summary;
  json trace;
};

Exported export_two_ranks(const reports::ChromeTraceOptions& options) {
  testing::FakeRunSpec spec;
  spec.world_size = 2;
  spec.tp = 2;
  spec.steps = 6;
  spec.trace_first = 2;
  spec.trace_last = 3;
  spec.script = testing::standard_step(1, [](int r, int64_t) { return r == 1 ? 18.0 : 0.0; });
  spec.counters = [](int r, int64_t) {
    return std::vector<std::pair<std::string, double>>{{"embed.local_tokens", r == 0 ? 3900.0 : 196.0}};
  };
  spec.clock_offset_ns = [](int r) { return r == 1 ? int64_t(-3'000'000'000) : int64_t(0); };
  const fs::path dir = testing::fresh_temp_dir("trace-export");
  testing::write_fake_run(dir, spec);
  std::ostringstream out;
  auto summary = reports::export_chrome_trace(dir, out, options);
  EXPECT_TRUE(summary.ok()) << summary.status().to_string();
  Exported e{summary.ok() ? *summary : reports::ChromeTraceSummary{}, json::parse(out.str(), nullptr, false)};
  return e;
}

std::vector<json> events(const json& trace, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  }
  return out;
}

TEST(ChromeTrace, TwoRanksOnTheAlignedClockWithFlows) {
  const Exported x = export_two_ranks({});
  ASSERT_FALSE(x.trace.is_discarded()) << "export is not valid JSON";
  ASSERT_TRUE(x.trace.contains("traceEvents"));
  EXPECT_EQ(x.summary.ranks, 2);
  EXPECT_EQ(x.summary.events, x.trace["traceEvents"].size());

  std::map<int, std::string> processes;
  for (const auto& e : events(x.trace, "M")) {
    if (e["name"] == "process_name") processes[e["pid"].get<int>()] = e["args"]["name"];
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));

  // Steps: 6 per rank, and the same step ends at the same aligned time on both ranks.
  std::map<std::pair<int, int64_t>, double> step_end;
  for (const auto& e : events(x.trace, "X", "step")) {
    step_end[{e["pid"].get<int>(), e["args"]["step"].get<int64_t>()}] = e["ts"].get<double>() + e["dur"].get<double>();
  }
  ASSERT_EQ(step_end.size(), 12u);
  for (int64_t s = 0; s < 6; ++s)
    EXPECT_NEAR(step_end[std::make_pair(0, s)], step_end[std::make_pair(1, s)], 1e-3) << "step " << s;
  EXPECT_GT(step_end[std::make_pair(0, int64_t(0))], 0.0);
  EXPECT_LT(step_end[std::make_pair(0, int64_t(0))], 1e6);  // microseconds since the run started, not since 1970

  // Ranges only inside the capture window (steps 2-3); rank 1's mlp is 18 ms longer in compute.
  int mlp_ranges = 0;
  for (const auto& e : events(x.trace, "X", "range")) {
    const int64_t step = e["args"]["step"];
    EXPECT_TRUE(step == 2 || step == 3);
    if (e["name"] == "forward/block0/mlp") ++mlp_ranges;
  }
  EXPECT_EQ(mlp_ranges, 4);

  // The TP all-reduce after forward/block0/mlp: rank 0 arrives 18 ms early and waits.
  std::map<int, json> mlp_allreduce;  // by rank, step 2
  for (const auto& e : events(x.trace, "X", "collective")) {
    if (e["args"]["range"] == "forward/block0/mlp" && e["args"]["step"] == 2) mlp_allreduce[e["pid"].get<int>()] = e;
  }
  ASSERT_EQ(mlp_allreduce.size(), 2u);
  EXPECT_EQ(mlp_allreduce[0]["args"]["seq"], mlp_allreduce[1]["args"]["seq"]);
  EXPECT_NEAR(mlp_allreduce[1]["ts"].get<double>() - mlp_allreduce[0]["ts"].get<double>(), 18000.0, 1.0);
  EXPECT_NEAR(mlp_allreduce[0]["dur"].get<double>() - mlp_allreduce[1]["dur"].get<double>(), 18000.0, 1.0);

  // Flows: one per collective instance (two ranks), from the last arriver to the waiter.
  const auto starts = events(x.trace, "s");
  const auto finishes = events(x.trace, "f");
  ASSERT_EQ(starts.size(), finishes.size());
  EXPECT_EQ(x.summary.flows, starts.size());
  EXPECT_EQ(starts.size(), 6u * 5u);  // 6 steps x 5 TP all-reduces (embed, attn, mlp, bwd mlp, bwd attn)
  std::map<uint64_t, json> start_by_id;
  for (const auto& s : starts) start_by_id[s["id"].get<uint64_t>()] = s;
  bool saw_mlp_flow = false;
  for (const auto& f : finishes) {
    const json& s = start_by_id.at(f["id"].get<uint64_t>());
    EXPECT_NE(s["pid"], f["pid"]);
    EXPECT_EQ(f["bp"], "e");
    if (s["ts"] == mlp_allreduce[1]["ts"]) {
      saw_mlp_flow = true;
      EXPECT_EQ(s["pid"], 1);  // rank 1 arrived last
      EXPECT_EQ(f["pid"], 0);
      const double f_ts = f["ts"];
      EXPECT_GE(f_ts, mlp_allreduce[0]["ts"].get<double>());
      EXPECT_LE(f_ts, mlp_allreduce[0]["ts"].get<double>() + mlp_allreduce[0]["dur"].get<double>());
    }
  }
  EXPECT_TRUE(saw_mlp_flow);

  // Counters per rank per step.
  int counters = 0;
  for (const auto& c : events(x.trace, "C")) {
    EXPECT_EQ(c["name"], "embed.local_tokens");
    EXPECT_EQ(c["args"]["value"].get<double>(), c["pid"] == 0 ? 3900.0 : 196.0);
    ++counters;
  }
  EXPECT_EQ(counters, 12);
}

TEST(ChromeTrace, StepWindow) {
  reports::ChromeTraceOptions window;
  window.first_step = 3;
  window.last_step = 4;
  const Exported x = export_two_ranks(window);
  EXPECT_EQ(events(x.trace, "X", "step").size(), 4u);
  EXPECT_EQ(events(x.trace, "s").size(), 2u * 5u);
  for (const auto& e : events(x.trace, "X", "range")) EXPECT_EQ(e["args"]["step"], 3);
}

TEST(ChromeTrace, KernelsGoOnTheRanksGpuTrack) {
  // One rank written by hand: a step with a traced range and two kernels launched under it.
  const fs::path dir = testing::fresh_temp_dir("trace-kernels");
  auto w = testing::one_rank_run(dir, "kernels", 1'000'000'000);
  auto& writer = *w;
  const uint32_t attn = writer.intern(format::NameKind::kRange, "forward/block0/attn");
  const uint32_t gemm = writer.intern(format::NameKind::kKernel, "sm90_gemm_bf16");
  format::StepRecord step;
  step.step = 7;
  step.begin_ns = 1'000'000'000 + 1'000'000;  // 1 ms after the run started
  step.end_ns = step.begin_ns + 5'000'000;
  step.ranges.push_back({attn, 1, 4'000'000, 3'000'000});
  writer.write_step(step);
  const format::TraceRange range{attn, 42, step.begin_ns, step.begin_ns + 4'000'000, 0, 0};
  writer.write_trace_ranges(7, std::span(&range, 1));
  const format::TraceKernel kernels[] = {{gemm, attn, 3, 0, step.begin_ns + 500'000, step.begin_ns + 2'000'000},
                                         {gemm, attn, 3, 0, step.begin_ns + 2'000'000, step.begin_ns + 3'500'000}};
  writer.write_trace_kernels(7, kernels);
  writer.write_end(step.end_ns);
  ASSERT_TRUE(writer.flush().ok());
  w.reset();

  std::ostringstream out;
  auto summary = reports::export_chrome_trace(dir, out);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  const json trace = json::parse(out.str());
  const auto ks = events(trace, "X", "kernel");
  ASSERT_EQ(ks.size(), 2u);
  for (const auto& k : ks) {
    EXPECT_EQ(k["name"], "sm90_gemm_bf16");
    EXPECT_EQ(k["args"]["range"], "forward/block0/attn");
    EXPECT_DOUBLE_EQ(k["dur"].get<double>(), 1500.0);
    EXPECT_EQ(k["tid"], ks[0]["tid"]);  // one kernel at a time: one track
  }
  EXPECT_DOUBLE_EQ(ks[0]["ts"].get<double>(), 1500.0);  // us since run.json's created_ns
  bool named = false;
  for (const auto& m : events(trace, "M")) named |= m["name"] == "thread_name" && m["args"]["name"] == "gpu 0";
  EXPECT_TRUE(named);
  const auto rs = events(trace, "X", "range");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0]["tid"], 42);
}

TEST(ChromeTrace, MissingRunDirectoryIsAnError) {
  std::ostringstream out;
  auto r = reports::export_chrome_trace(fs::temp_directory_path() / "rankscope-no-such-run", out);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace rankscope::analyzers
