// skew_json.h — the skew report as JSON (schema: reports/schemas/skew_report.schema.json).
//
// Is: a pure mapping of SkewReport to nlohmann::json, with schema_version and kind
// "rankscope.skew"; NaN becomes null. Is not: file I/O or HTML (tools/rankscope, reports/html).
#pragma once

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/skew/skew_report.h"

namespace rankscope::analyzers {

nlohmann::json to_json(const SkewReport& report);

}  // namespace rankscope::analyzers
