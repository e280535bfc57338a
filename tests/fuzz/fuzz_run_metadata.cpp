// fuzz_run_metadata.cpp — libFuzzer target: run.json (format/src/run_metadata.cpp), written by whoever
// made the run directory: our trainer, an importer, or a hand.
//
// Is: the input written as RUN/run.json and read with read_run_metadata(); a readable one is asked
// for each rank's groups and written back with write_run_metadata(), then read again: what was read
// must survive a rewrite. Is not: the run-directory reader around it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_support.h"
#include "rankscope/format/run_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace format = rankscope::format;
  const auto dir = rankscope::fuzz::scratch().fresh_subdir("run");
  rankscope::fuzz::write_bytes(dir / "run.json", std::span<const uint8_t>(data, size));
  auto meta = format::read_run_metadata(dir);
  if (!meta.ok()) {
    (void)meta.status().user_text();
    return 0;
  }
  for (int rank = 0; rank < std::min(meta->world_size, 64); ++rank) (void)meta->groups_of(rank);
  const auto again_dir = rankscope::fuzz::scratch().fresh_subdir("again");
  if (!format::write_run_metadata(again_dir, meta.value()).ok()) __builtin_trap();
  auto again = format::read_run_metadata(again_dir);
  if (!again.ok() || again->world_size != meta->world_size || again->groups.size() != meta->groups.size()) __builtin_trap();
  return 0;
}
