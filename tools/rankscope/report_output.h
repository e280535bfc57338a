// report_output.h — where the report commands (`rankscope skew`, `scaling`, `startup`, `diff`) put
// their reports: --json FILE ('-' for stdout), --html FILE (self-contained, reports/html), --quiet.
// Shared so all say the same. The rows of these options are in each command's table, worded for its
// report.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rankscope/format/option_table.h"

namespace rankscope::cli {

struct ReportOutputs {
  std::string json_path;  // empty: none; "-": stdout
  std::string html_path;  // empty: none
  bool quiet = false;     // --quiet: no text report (with --json - the text otherwise goes to stderr)
};

// What the --json, --html and --quiet (-q) rows of a report command's table were given.
ReportOutputs report_outputs(const format::ParsedOptions& parsed);

// The rest of the common command line of a report command (one input path, --json FILE, --html FILE,
// --quiet, --help), read against its table: the command checks its own options' values first. Returns
// the exit code when the command must stop here (0 after --help, 2 on bad arguments, with the message
// printed), nullopt when `input` and `outputs` are set and the command goes on.
std::optional<int> read_report_args(const format::OptionsRead& read, const char* command, std::string_view help,
                                    const char* input_word, std::string& input, ReportOutputs& outputs);

// Writes what was asked for; prints an error and returns false on failure.
bool write_report_outputs(const nlohmann::json& report, const ReportOutputs& outputs, const std::string& title);

}  // namespace rankscope::cli
