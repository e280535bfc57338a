// fuzz_hangdoctor_rundir.cpp — libFuzzer target: `hangdoctor RUN_DIR --json -` on a run directory our
// probe writes, the whole command (the run directory's discovery, run.json, every rank's flight
// recorder, diagnose, the wording, the text and the JSON report).
//
// Is: the input cut at kFileSeparator into run.json and up to 8 flight recorders (rank00000.flight ...),
// written into a scratch run directory, then hangdoctor on it as its main runs it, with a process
// table that knows no process (fuzz_command.h: pids and hosts come from the input). A finding is a
// crash, a sanitizer report, or the command's exception boundary firing. Is not: the recorder's reader
// alone (fuzz_flight_recorder) or run.json's (fuzz_run_metadata).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_command.h"
#include "fuzz_support.h"
#include "rankscope/format/run_directory_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto dir = fuzz::scratch().fresh_subdir("run");
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 9);
  fuzz::write_bytes(dir / rankscope::format::kRunMetadataFile, parts[0]);
  for (size_t i = 1; i < parts.size(); ++i)
    fuzz::write_bytes(rankscope::format::flight_recorder_path(dir, int(i - 1)), parts[i]);
  fuzz::NoProcesses processes;
  fuzz::check_outcome(fuzz::run_hangdoctor_on({dir.string(), "--json", "-"}, &processes), dir.string());
  return 0;
}
