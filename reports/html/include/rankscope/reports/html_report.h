// html_report.h — renders a report's JSON as one self-contained HTML file.
//
// Is: the template (assets/report.html) with Chart.js, the report script and its style inlined and
// the report's JSON embedded as an application/json script block (every '<' escaped, so no data
// can close the block). The script draws the charts that fit the report's "kind":
//   rankscope.skew:    per-rank stacked breakdown, time per top-level range, rank x step heatmap, arrival skew at the
//                      collectives of one step, counters per rank, findings and a rank table;
//   rankscope.scaling: time vs T per range on log-log axes, tokens/s vs T, findings and fits.
// When it has drawn, the script sets data-rankscope-rendered="yes", data-rankscope-charts and
// data-rankscope-points on <body> (errors in data-rankscope-errors), which tests read from the DOM.
// Is not: the analysis (analyzers/) or file writing.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rankscope/format/status.h"

namespace rankscope::reports {

// `data` must be an object with a "kind" named above.
Result<std::string> render_html_report(const nlohmann::json& data, std::string_view title);

// Writes `html` to `file` (through a temporary file and a rename).
Status write_text_file(const std::string& file, std::string_view text);

}  // namespace rankscope::reports
