// import_summary_output.h — what `rankscope import-nsys` and `import-kineto` share on the command
// line: the options both take, and what they print after an import (the provenance table, each
// rank's warnings and flags, the next command). Shared so both imports read alike.
#pragma once

#include <string>

#include "subcommands.h"

#include "rankscope/trace_core/import_summary.h"

namespace rankscope::cli {

// Options both imports take (--seq-len, --batch, --threads, --no-trace, --allow-mixed, --quiet/-q); args[i] is
// the option, and `i` moves past its value. 1: handled; 0: not one of them; -1: a bad value (printed).
int parse_common_import_option(const char* command, Args args, size_t& i, trace_core::ImportOptions& options, bool& quiet);

void print_import_summary(const char* command, const trace_core::ImportSummary& summary, const std::string& run_dir);

}  // namespace rankscope::cli
