// import_summary_output.h — what `rankscope import-nsys` and `import-kineto` share on the command
// line: the options both take, and what they print after an import (the provenance table, each
// rank's warnings and flags, the next command). Shared so both imports read alike.
#pragma once

#include <string>

#include "subcommands.h"

#include "rankscope/format/option_table.h"
#include "rankscope/trace_core/import_summary.h"

namespace rankscope::cli {

// The options both imports take (--seq-len, --batch, --threads, --no-trace, --allow-mixed, --quiet/-q),
// rows of each import's table, read from what it parsed into `options` and `quiet`; false after saying
// which value is bad.
bool read_common_import_options(const char* command, const format::ParsedOptions& parsed,
                                trace_core::ImportOptions& options, bool& quiet);

void print_import_summary(const char* command, const trace_core::ImportSummary& summary, const std::string& run_dir);

}  // namespace rankscope::cli
