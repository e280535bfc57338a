// report_output.h — where `rankscope skew` and `rankscope scaling` put their reports: --json FILE
// ('-' for stdout) and --html FILE (self-contained, reports/html). Shared so both say the same.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rankscope::cli {

struct ReportOutputs {
  std::string json_path;  // empty: none; "-": stdout
  std::string html_path;  // empty: none
  bool quiet = false;     // --quiet: no text report (with --json - the text otherwise goes to stderr)
};

// The common command line of a report command: one input path, --json FILE, --html FILE, --help.
// Returns the exit code when the command must stop here (0 after --help, 2 on bad arguments, with
// the message printed), nullopt when `input` and `outputs` are set and the command goes on.
std::optional<int> parse_report_args(std::span<const std::string_view> args, const char* command,
                                     const char* help, const char* input_word, std::string& input,
                                     ReportOutputs& outputs);

// Writes what was asked for; prints an error and returns false on failure.
bool write_report_outputs(const nlohmann::json& report, const ReportOutputs& outputs, const std::string& title);

}  // namespace rankscope::cli
