// kernels_fake_run.h — run directories whose device timelines are written op by op, so each kernel
// analysis test states its ops and the answer follows by construction.
//
// Is: a writer (through the format library's own EventStreamWriter) of run.json and one event
// stream per rank holding, per step, a STEP record (the step's wall window), TRACE_KERNELS and, for
// the ops given a launch, TRACE_LAUNCHES. Times are given in µs from the run's start; every rank's
// clock is offset differently (the analyses must not compare clocks). Is not: a model of training.
#pragma once

#include "rankscope/analyzers/device_timeline/kernels_analyzer.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rankscope::testing {

struct FakeOp {
  std::string name;
  uint32_t stream = 7;
  double begin_us = 0, end_us = 0;
  std::optional<double> launch_begin_us;  // none: the launch was not seen (no TRACE_LAUNCHES entry)
  double launch_end_us = 0;
  int64_t step = 1;
  std::string api = "cudaLaunchKernel";
  uint32_t device = 0;
};

// An op with its launch call [lb, le].
inline FakeOp launched(std::string name, uint32_t stream, double begin, double end, double lb, double le,
                       int64_t step = 1) {
  FakeOp o;
  o.name = std::move(name), o.stream = stream, o.begin_us = begin, o.end_us = end, o.launch_begin_us = lb,
  o.launch_end_us = le;
  o.step = step;
  return o;
}
// An op whose launch was not seen.
inline FakeOp unlaunched(std::string name, uint32_t stream, double begin, double end, int64_t step = 1) {
  FakeOp o;
  o.name = std::move(name), o.stream = stream, o.begin_us = begin, o.end_us = end, o.step = step;
  return o;
}

struct FakeRank {
  std::vector<FakeOp> ops;
};

inline constexpr double kFakeStepUs = 1000;  // step s spans [(s-1) * 1000, s * 1000) µs

// Writes `dir` (created): world size = ranks.size().
void write_kernels_run(const std::filesystem::path& dir, const std::vector<FakeRank>& ranks);

// A fresh temporary directory for one test.
std::filesystem::path kernels_test_dir(const std::string& tag);

// Writes `ranks` under a fresh directory named by `tag`, analyses it with `options`, removes it.
Result<analyzers::KernelsReport> analyze_fake_run(const std::string& tag, const std::vector<FakeRank>& ranks,
                                                  const analyzers::KernelsOptions& options = {});

}  // namespace rankscope::testing
