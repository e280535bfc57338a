// fuzz_nccl_plugin_run.cpp — libFuzzer target: a run directory written by the NCCL profiler plugin
// (format/src/nccl_plugin_run.cpp and nccl_plugin_events.cpp): its recorders and process.json files.
//
// Is: the input cut at kFileSeparator into up to six files, each written into RUN/nccl/ as
// f<i>.process.json when it starts with '{' and as f<i>.flight otherwise (the reader keys on the
// suffix, and matches files by the host and pid inside them), then open_nccl_plugin_run() and every
// rank's event stream rebuilt from its collective rings read through scan_rank_events(). Is not:
// the plugin (probe/nccl).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "event_visitor.h"
#include "fuzz_support.h"
#include "rankscope/format/nccl_plugin_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace format = rankscope::format;
  namespace fuzz = rankscope::fuzz;
  const auto run_dir = fuzz::scratch().fresh_subdir("run");
  const auto nccl_dir = run_dir / std::string(format::kNcclPluginDir);
  std::filesystem::create_directories(nccl_dir);
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 6);
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool json = !parts[i].empty() && parts[i][0] == '{';
    fuzz::write_bytes(nccl_dir / ("f" + std::to_string(i) + (json ? ".process.json" : ".flight")), parts[i]);
  }
  auto run = format::open_nccl_plugin_run(run_dir);
  if (!run.ok()) {
    (void)run.status().user_text();
    return 0;
  }
  for (const auto& rank : run->ranks) {
    if (!rank.has_events()) continue;
    fuzz::TouchingVisitor visitor;
    auto scan = format::scan_rank_events(rank, visitor);
    if (!scan.ok()) (void)scan.status().user_text();
  }
  return 0;
}
