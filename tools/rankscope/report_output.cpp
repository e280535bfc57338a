// report_output.cpp — see report_output.h.
#include "report_output.h"

#include <cstdio>

#include "command_line.h"
#include "rankscope/format/json_text.h"
#include "rankscope/reports/html_report.h"

namespace rankscope::cli {

ReportOutputs report_outputs(const format::ParsedOptions& parsed) {
  return ReportOutputs{std::string(parsed.value("--json").value_or("")),
                       std::string(parsed.value("--html").value_or("")), parsed.has("--quiet")};
}

std::optional<int> read_report_args(const format::OptionsRead& read, const char* command, std::string_view help,
                                    const char* input_word, std::string& input, ReportOutputs& outputs) {
  // What came before a refused argument is checked first, as the loop over the arguments did.
  const OneInput one = one_input(read.parsed.positionals);
  if (one.dash) return unknown_option(command, "-", help);
  if (one.second) {
    std::fprintf(stderr, "rankscope %s: one %s only\n", command, input_word);
    return 2;
  }
  // A value flag left last with nothing after it is --json or --html: the command has said what its own
  // options lack.
  if (read.refused && read.refused->missing_value) {
    std::fprintf(stderr, "rankscope %s: %s needs a file name\n", command, std::string(read.refused->arg).c_str());
    return 2;
  }
  if (read.refused) return unknown_option(command, read.refused->arg, help);
  if (read.parsed.help) {
    std::fwrite(help.data(), 1, help.size(), stdout);
    return 0;
  }
  if (one.path.empty()) {
    std::fprintf(stderr, "rankscope %s: no %s given\n\n%.*s", command, input_word, int(help.size()), help.data());
    return 2;
  }
  input = one.path;
  outputs = report_outputs(read.parsed);
  return std::nullopt;
}

bool write_report_outputs(const nlohmann::json& report, const ReportOutputs& outputs, const std::string& title) {
  if (!outputs.json_path.empty()) {
    const std::string text = format::json_text(report, 2) + "\n";
    if (outputs.json_path == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else if (Status s = reports::write_text_file(outputs.json_path, text); !s.ok()) {
      std::fprintf(stderr, "rankscope: %s\n", s.to_string().c_str());
      return false;
    }
  }
  if (!outputs.html_path.empty()) {
    auto html = reports::render_html_report(report, title);
    if (!html.ok()) {
      std::fprintf(stderr, "rankscope: %s\n", html.status().user_text().c_str());
      return false;
    }
    if (Status s = reports::write_text_file(outputs.html_path, *html); !s.ok()) {
      std::fprintf(stderr, "rankscope: %s\n", s.to_string().c_str());
      return false;
    }
  }
  return true;
}

}  // namespace rankscope::cli
