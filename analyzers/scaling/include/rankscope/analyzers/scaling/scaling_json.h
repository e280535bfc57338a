// scaling_json.h — the scaling report as JSON (schema: reports/schemas/scaling_report.schema.json).
//
// Is: a pure mapping with schema_version and kind "rankscope.scaling"; absent values are null.
// Is not: file I/O or HTML.
#pragma once

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/scaling/scaling_analyzer.h"

namespace rankscope::analyzers {

nlohmann::json to_json(const ScalingReport& report);

}  // namespace rankscope::analyzers
