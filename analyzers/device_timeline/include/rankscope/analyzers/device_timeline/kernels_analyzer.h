// kernels_analyzer.h — `rankscope kernels`: the five device-timeline analyses of kernels_report.h
// for every rank of a run directory (probe runs, nsys and Kineto imports alike).
//
// Is: one pass over each rank's event stream keeping only its capture-window GPU ops and launches,
// the analyses per rank (ranks on every core, each rank's memory freed before the next), then the
// spread across ranks and the findings. Each rank is analysed on its own clock: nothing here
// compares times across ranks. Is not: the collective-arrival skew (analyzers/skew) or rendering.
#pragma once

#include <filesystem>

#include "rankscope/analyzers/device_timeline/kernels_report.h"
#include "rankscope/format/status.h"

namespace rankscope::analyzers {

// Fails when the directory is not a run directory or a --comm-kernel pattern is not a regex; a rank
// without an event stream or without traced kernels is reported in its `problem` instead.
Result<KernelsReport> analyze_kernels(const std::filesystem::path& run_dir, const KernelsOptions& options = {});

}  // namespace rankscope::analyzers
