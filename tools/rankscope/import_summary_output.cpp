// import_summary_output.cpp — see import_summary_output.h.
#include "import_summary_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace rankscope::cli {

int parse_common_import_option(const char* command, Args args, size_t& i, trace_core::ImportOptions& options, bool& quiet) {
  const std::string_view a = args[i];
  if (a == "--no-trace") {
    options.traces = false;
    return 1;
  }
  if (a == "--allow-mixed") {
    options.allow_mixed = true;
    return 1;
  }
  if (a == "--quiet" || a == "-q") {
    quiet = true;
    return 1;
  }
  if (a != "--seq-len" && a != "--batch" && a != "--threads") return 0;
  const std::string_view v = i + 1 < args.size() ? args[++i] : std::string_view();
  int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n <= 0) {
    std::fprintf(stderr, "rankscope %s: %s needs a positive number, got '%s'\n", command, std::string(a).c_str(), std::string(v).c_str());
    return -1;
  }
  if (a == "--seq-len") options.seq_len = n;
  else if (a == "--batch") options.batch = n;
  else options.threads = int(std::min<int64_t>(n, 1024));
  return 1;
}

void print_import_summary(const char* command, const trace_core::ImportSummary& summary, const std::string& run_dir) {
  std::printf("rankscope %s: %zu ranks of a world of %d written to %s in %.2f s\n", command, summary.ranks.size(),
              summary.world_size, run_dir.c_str(), summary.seconds);
  std::fputs(trace_core::provenance_text(trace_core::provenance_json(summary)).c_str(), stdout);
  for (const auto& r : summary.ranks) {
    for (const auto& w : r.warnings) std::printf("rank %d: %s\n", r.rank, w.c_str());
    for (const auto& f : r.flagged) std::printf("rank %d: flagged: %s\n", r.rank, f.c_str());
    for (const auto& d : r.diagnostics) std::printf("rank %d: nsys diagnostic: %s\n", r.rank, d.c_str());
  }
  std::printf("next: rankscope skew %s   (also: scaling, export --chrome, inspect)\n", run_dir.c_str());
}

}  // namespace rankscope::cli
