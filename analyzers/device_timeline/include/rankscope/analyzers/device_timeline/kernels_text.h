// kernels_text.h — the kernels report as text for a terminal: a table per analysis, one row per
// rank (streams below their rank), then the findings. Is not: JSON (kernels_json.h).
#pragma once

#include <string>

#include "rankscope/analyzers/device_timeline/kernels_report.h"

namespace rankscope::analyzers {

std::string kernels_report_text(const KernelsReport& report);

}  // namespace rankscope::analyzers
