// fuzz_hangdoctor_dumps.cpp — libFuzzer target: `hangdoctor DIR --json -` on a folder of PyTorch Flight
// Recorder dumps, the whole command (discovery, import, diagnose, wording, text and JSON report).
//
// Is: the input cut at kFileSeparator into 1-8 dumps, written as comm_lib_trace_rank_0..N-1 in a
// scratch directory (the split of the 2026-12-02 findings' unpack.py, so a finding here unpacks the same
// way), then hangdoctor on the directory as its main runs it. A finding is a crash, a sanitizer report,
// or the command's exception boundary firing (fuzz_command.h). Is not: the reader alone (fuzz_fr_dump,
// fuzz_fr_import).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_command.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto dir = fuzz::scratch().fresh_subdir("dumps");
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 8);
  for (size_t i = 0; i < parts.size(); ++i) fuzz::write_bytes(dir / ("comm_lib_trace_rank_" + std::to_string(i)), parts[i]);
  fuzz::check_outcome(fuzz::run_hangdoctor_on({dir.string(), "--json", "-"}), dir.string());
  return 0;
}
