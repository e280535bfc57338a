// skew_text.h — the skew report as the text `rankscope skew` prints: findings, the line of what
// stayed below the run's noise, what-ifs, the table of ranks (the 16 slowest), overlap and each
// group's traffic. Is not: the provenance, settings or device analyses the command adds around it.
#pragma once

#include <string>

#include "rankscope/analyzers/skew/skew_report.h"

namespace rankscope::analyzers {

std::string skew_report_text(const SkewReport& report);

}  // namespace rankscope::analyzers
