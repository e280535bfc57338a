// scaling_text.h — `rankscope scaling`'s text: the sweep's points, each range's top slope, fit and
// crossover, then the findings, the forecasts and the problems.
#pragma once

#include <string>

#include "rankscope/analyzers/scaling/scaling_analyzer.h"

namespace rankscope::analyzers {

std::string scaling_report_text(const ScalingReport& r);

}  // namespace rankscope::analyzers
