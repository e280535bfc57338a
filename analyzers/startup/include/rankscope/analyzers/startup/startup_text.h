// startup_text.h — `rankscope startup`'s text: each rank's launch, first step and slowest phase, then
// the findings and the problems.
#pragma once

#include <string>

#include "rankscope/analyzers/startup/startup_report.h"

namespace rankscope::analyzers {

std::string startup_report_text(const StartupReport& r);

}  // namespace rankscope::analyzers
