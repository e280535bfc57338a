// import_summary_output.cpp — see import_summary_output.h.
#include "import_summary_output.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "option_values.h"

namespace rankscope::cli {

bool read_common_import_options(const char* command, const format::ParsedOptions& parsed,
                                trace_core::ImportOptions& options, bool& quiet) {
  if (parsed.has("--no-trace")) options.traces = false;
  if (parsed.has("--allow-mixed")) options.allow_mixed = true;
  if (parsed.has("--quiet")) quiet = true;
  for (const char* flag : {"--seq-len", "--batch", "--threads"}) {
    for (const std::string_view v : parsed.all_values(flag)) {
      const std::optional<int64_t> n = number_at_least<int64_t>(v, 1);
      if (!n) {
        std::fprintf(stderr, "rankscope %s: %s needs a positive number, got '%s'\n", command, flag,
                     std::string(v).c_str());
        return false;
      }
      if (std::string_view(flag) == "--seq-len")
        options.seq_len = *n;
      else if (std::string_view(flag) == "--batch")
        options.batch = *n;
      else
        options.threads = int(std::min<int64_t>(*n, 1024));
    }
  }
  return true;
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
