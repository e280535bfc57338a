// kernels_json.h — the kernels report as one JSON object, kind "rankscope.kernels".
//
// Is: a pure mapping of KernelsReport to nlohmann::json with its own `schema_version`
// (kKernelsJsonSchemaVersion, independent of the program's version), times in ms. Made to be called
// from other reports too (skew's JSON can embed it under a key of its own). Is not: file I/O.
#pragma once

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/device_timeline/kernels_report.h"

namespace rankscope::analyzers {

inline constexpr int kKernelsJsonSchemaVersion = 1;

nlohmann::json kernels_report_json(const KernelsReport& report);

}  // namespace rankscope::analyzers
