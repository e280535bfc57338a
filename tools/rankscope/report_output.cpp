// report_output.cpp — see report_output.h.
#include "report_output.h"

#include <cstdio>

#include "rankscope/reports/html_report.h"
#include "rankscope/format/json_text.h"

namespace rankscope::cli {

std::optional<int> parse_report_args(std::span<const std::string_view> args, const char* command,
                                     const char* help, const char* input_word, std::string& input,
                                     ReportOutputs& outputs) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(help, stdout);
      return 0;
    } else if (a == "--quiet" || a == "-q") {
      outputs.quiet = true;
    } else if (a == "--json" || a == "--html") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "rankscope %s: %s needs a file name\n", command, std::string(a).c_str());
        return 2;
      }
      (a == "--json" ? outputs.json_path : outputs.html_path) = std::string(args[++i]);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "rankscope %s: unknown option '%s'\n\n%s", command, std::string(a).c_str(), help);
      return 2;
    } else if (input.empty()) {
      input = std::string(a);
    } else {
      std::fprintf(stderr, "rankscope %s: one %s only\n", command, input_word);
      return 2;
    }
  }
  if (input.empty()) {
    std::fprintf(stderr, "rankscope %s: no %s given\n\n%s", command, input_word, help);
    return 2;
  }
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
