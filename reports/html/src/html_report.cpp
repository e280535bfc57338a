// html_report.cpp — see html_report.h.
#include "rankscope/reports/html_report.h"

#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "rankscope/reports/html_assets.h"

namespace rankscope::reports {
namespace {

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON text safe inside <script>: '<' only occurs in strings, where \u003c means the same.
std::string script_safe_json(const nlohmann::json& data) {
  const std::string text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

struct Slot {
  std::string_view marker;
  std::string_view value;
};

// Walks the template once, copying it and putting each slot's value where its marker is. Values
// are never searched, so Chart.js or the data cannot be mistaken for a marker. Each marker must
// occur exactly once, in the order given (the template is ours: a miss is a bug).
Result<std::string> fill_template(std::string_view tmpl, std::initializer_list<Slot> slots) {
  std::string out;
  size_t total = tmpl.size();
  for (const Slot& s : slots) total += s.value.size();
  out.reserve(total);
  size_t pos = 0;
  for (const Slot& s : slots) {
    const size_t at = tmpl.find(s.marker, pos);
    if (at == std::string_view::npos) return internal_error(fmt::format("report template lacks {} (in order)", s.marker));
    out.append(tmpl.substr(pos, at - pos));
    out.append(s.value);
    pos = at + s.marker.size();
  }
  out.append(tmpl.substr(pos));
  return out;
}

}  // namespace

Result<std::string> render_html_report(const nlohmann::json& data, std::string_view title) {
  const std::string kind = data.is_object() ? data.value("kind", std::string()) : std::string();
  if (kind != "rankscope.skew" && kind != "rankscope.scaling" && kind != "rankscope.startup" && kind != "rankscope.diff" &&
      kind != "rankscope.hang") {
    return invalid_argument(fmt::format("cannot render a report of kind '{}' as HTML (rankscope.skew, rankscope.scaling, "
                                        "rankscope.startup, rankscope.diff or rankscope.hang)", kind));
  }
  const std::string escaped_title = html_escape(title);
  const std::string json = script_safe_json(data);
  return fill_template(embedded::kReportTemplate, {{"@@TITLE@@", escaped_title},
                                                   {"@@STYLE@@", embedded::kReportStyle},
                                                   {"@@HEADING@@", escaped_title},
                                                   {"@@CHARTJS@@", embedded::kChartJs},
                                                   {"@@DATA@@", json},
                                                   {"@@SCRIPT@@", embedded::kReportScript}});
}

Status write_text_file(const std::string& file, std::string_view text) {
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return io_error(fmt::format("{}: cannot write; hint: does the directory exist?", file));
    out.write(text.data(), std::streamsize(text.size()));
    if (!out) return io_error(fmt::format("{}: write failed (disk full?)", tmp));
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) return io_error(fmt::format("{}: cannot rename into place", file));
  return {};
}

}  // namespace rankscope::reports
