// log_run.h — a log's progress evidence as the run-directory model (log_import.h says the rules).
#pragma once

#include "log_ranks.h"
#include "rankscope/logs/log_import.h"

namespace rankscope::logs {

// Fills out.run, out.has_progress, out.pending, out.world_size and out.cannot_tell.
void build_run(const LogJob& job, const RankMap& ranks, LogImport& out);

// Fills out.findings (log_findings.cpp).
void add_findings(const LogJob& job, const RankMap& ranks, LogImport& out);

}  // namespace rankscope::logs
