// report_output.h — where `rankscope skew` and `rankscope scaling` put their reports: --json FILE
// ('-' for stdout) and --html FILE (self-contained, reports/html). Shared so both say the same.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace rankscope::cli {

struct ReportOutputs {
  std::string json_path;  // empty: none; "-": stdout
  std::string html_path;  // empty: none
};

// Writes what was asked for; prints an error and returns false on failure.
bool write_report_outputs(const nlohmann::json& report, const ReportOutputs& outputs, const std::string& title);

}  // namespace rankscope::cli
