// scaling_command.cpp — `rankscope scaling`: how a step and each range grow with sequence length,
// over a sweep directory (gpt2-train --sweep-seq-len). Thin: rankscope_analyzers_scaling.
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "command_line.h"
#include "rankscope/analyzers/scaling/scaling_analyzer.h"
#include "rankscope/analyzers/scaling/scaling_json.h"
#include "rankscope/analyzers/scaling/scaling_text.h"
#include "rankscope/format/option_table.h"
#include "report_output.h"
#include "subcommands.h"

namespace rankscope::cli {
namespace {

constexpr format::Option kScalingOptions[] = {
    {"--forecast", "T,T",
     "step time, tokens/s and peak memory at these sequence lengths (e.g.\n"
     "2048,4096), each with a ~95% interval from the fit's residuals and the\n"
     "points' noise, and the range whose T^2 term drives the step there"},
    {"--json", "FILE", "write the report as JSON (schema reports/schemas/scaling_report.schema.json); '-' = stdout"},
    {"--html", "FILE", "write a self-contained HTML report (opens offline)"},
    {"--quiet", "", "no text report", "-q"},
};

const std::string& scaling_help() {
  static const std::string text =
      "usage: rankscope scaling SWEEP_DIR [--forecast T,T...] [--json FILE] [--html FILE]\n\n"
      "Sequence-length scaling over a sweep directory (written by gpt2-train --sweep-seq-len\n"
      "64,128,256: SWEEP_DIR/sweep.json and one run directory per point). Per point: tokens/s, step\n"
      "time, peak memory. Per range, and per range summed over blocks (forward/block*/attn): the fit\n"
      "t(T) = c + aT + bT^2 with R^2, log-log slopes between points, the crossover T* = a/b. Findings\n"
      "flag superlinear ranges and throughput cliffs, and a memory cliff: peak memory whose growth\n"
      "above its fixed part is faster than T^1.5 (the headline gives the exponent: 1 linear, 2 the\n"
      "(B,NH,T,T) buffers of naive attention).\n\n" +
      format::options_help(kScalingOptions, 16) +
      "\nexit status: 0 report made, 2 bad arguments or no readable sweep\n";
  return text;
}

// "2048,4096" -> {2048, 4096}; nullopt (after saying why) on anything else.
std::optional<std::vector<int64_t>> parse_seq_lens(std::string_view text) {
  std::vector<int64_t> out;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v <= 0) {
      std::fprintf(stderr, "rankscope scaling: --forecast takes positive sequence lengths separated by commas, not '%s'\n",
                   std::string(item).c_str());
      return std::nullopt;
    }
    out.push_back(v);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (out.empty()) {
    std::fprintf(stderr, "rankscope scaling: --forecast needs sequence lengths (e.g. --forecast 2048,4096)\n");
    return std::nullopt;
  }
  return out;
}

}  // namespace

std::span<const format::Option> scaling_options() { return kScalingOptions; }

int scaling_command(Args args) {
  format::OptionsRead read = format::read_options(kScalingOptions, args);
  // --forecast is this command's own option, said the same of with no value and an empty one; the rest
  // are the reports' common ones.
  if (read.refused && read.refused->arg == "--forecast") read_missing_value_as_empty(kScalingOptions, read);
  analyzers::ScalingOptions options;
  for (const std::string_view v : read.parsed.all_values("--forecast")) {
    auto lens = parse_seq_lens(v);
    if (!lens) return 2;
    options.forecast_seq_lens = std::move(*lens);
  }
  std::string sweep_dir;
  ReportOutputs outputs;
  if (auto stop = read_report_args(read, "scaling", scaling_help(), "sweep directory", sweep_dir, outputs))
    return *stop;
  auto report = analyzers::analyze_scaling(sweep_dir, options);
  if (!report.ok()) {
    std::fprintf(stderr, "rankscope scaling: %s\n", report.status().user_text().c_str());
    return 2;
  }
  if (!outputs.quiet)
    std::fputs(analyzers::scaling_report_text(*report).c_str(), outputs.json_path == "-" ? stderr : stdout);
  if (!write_report_outputs(analyzers::to_json(*report), outputs, "rankscope scaling: " + sweep_dir)) return 2;
  return 0;
}

}  // namespace rankscope::cli
