// tiny_sweep.h — the seq-len sweep the scaling e2e test and the scaling sweep benchmark both run:
// gpt2-train --sweep-seq-len 128,256,512,1024 on `tiny`, batch 4, one process, one OpenMP thread.
//
// Is: the sweep's command and the forecast from its lower points, shared so that the test (what the
// report must contain, whatever the machine's load) and the benchmark (the timings: slopes and
// forecast accuracy, printed) measure the same run. Is not: an assertion about speed.
#pragma once

#include <filesystem>
#include <string>

#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/sweep.h"
#include "rankscope/format/status.h"

namespace tiny_sweep {

// The sweep's seq lens; the forecast is made from all but the last, at the last.
inline constexpr long long kTopSeqLen = 1024;

// Runs the sweep into a fresh directory named `name` under the build tree. Returns the directory, or
// an error with the trainer's output when it did not exit 0 within the deadline.
rankscope::Result<std::filesystem::path> run(const std::string& name);

// Writes a sweep index of the points below kTopSeqLen into a fresh directory `name` and forecasts
// kTopSeqLen from them.
rankscope::Result<rankscope::analyzers::ScalingReport> forecast_top_from_lower(
    const rankscope::analyzers::Sweep& index, const std::string& name);

const rankscope::analyzers::ScalingRange* find_range(const rankscope::analyzers::ScalingReport& r,
                                                      const std::string& name);

}  // namespace tiny_sweep
