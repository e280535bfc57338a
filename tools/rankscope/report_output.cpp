// report_output.cpp — see report_output.h.
#include "report_output.h"

#include <cstdio>

#include "rankscope/reports/html_report.h"

namespace rankscope::cli {

bool write_report_outputs(const nlohmann::json& report, const ReportOutputs& outputs, const std::string& title) {
  if (!outputs.json_path.empty()) {
    const std::string text = report.dump(2) + "\n";
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
      std::fprintf(stderr, "rankscope: %s\n", html.status().to_string().c_str());
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
