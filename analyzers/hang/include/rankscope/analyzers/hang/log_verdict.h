// log_verdict.h — hangdoctor's verdict from a job's log.
//
// Is: the classifier run on the log's progress evidence (NCCL COLL lines, PyTorch's watchdog lines,
// as logs::import_logs maps them), then what only the log says laid over it: a rank that printed a
// network or CUDA error is the crash, unless the progress evidence already names who holds the job
// up (then the error is its explanation); a communicator whose init never completed is the hang
// where nothing else is. Settings and topology findings never change the verdict; they are listed.
// Is not: reading the log (importers/logs).
#pragma once

#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/logs/log_import.h"

namespace rankscope::analyzers::hang {

struct LogVerdict {
  Diagnosis diagnosis;
  LogReport report;
};

LogVerdict diagnose_log(const logs::LogImport& log, ClassifyOptions options = {});

// The findings as text lines for the report ("  ! rank 3 on n2 printed a network error ...").
std::string render_log_findings(const LogReport& r);

}  // namespace rankscope::analyzers::hang
