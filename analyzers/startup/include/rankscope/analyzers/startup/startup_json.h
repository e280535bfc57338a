// startup_json.h — the start-up report as JSON (reports/schemas/startup_report.schema.json).
#pragma once

#include <nlohmann/json.hpp>

#include "rankscope/analyzers/startup/startup_report.h"

namespace rankscope::analyzers {

nlohmann::json startup_report_json(const StartupReport& report);

}  // namespace rankscope::analyzers
