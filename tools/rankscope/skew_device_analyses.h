// skew_device_analyses.h — what `rankscope skew` adds from the kernel and critical-path analyzers
// (every analysis in skew's JSON, text and HTML).
//
// Is: one call that runs `analyze_kernels` (where the run has kernel records) and
// `analyze_critical_path` (over the last ten traced steps), puts their JSON under `kernels` and
// `critical_path` (the latter without per-step segments: `rankscope critical-path --json` has them),
// and prints a short text summary. Is not: either analysis (analyzers/device_timeline, analyzers/critical_path).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankscope::cli {

struct DeviceAnalysesInput {
  std::string run_dir;
  std::vector<std::string> comm_kernel_patterns;
  // The traced steps (skew's device breakdown), when the run has kernel records.
  std::optional<std::pair<int64_t, int64_t>> traced_steps;
};

// Adds `kernels` and `critical_path` to `json` (each absent when it does not apply) and writes the
// text summary to `text` (null: none). Problems of either analysis go to json["problems"].
void add_device_analyses(const DeviceAnalysesInput& in, nlohmann::json& json, std::FILE* text);

}  // namespace rankscope::cli
