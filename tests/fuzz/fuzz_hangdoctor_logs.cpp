// fuzz_hangdoctor_logs.cpp — libFuzzer target: `hangdoctor DIR --json -` on a folder of a job's logs
// (NCCL_DEBUG=INFO output, PyTorch's watchdog lines, torchrun's table, a RAS report), the whole
// command: the log import, diagnose_log, the verdict's wording, the log findings, text and JSON.
//
// Is: the input cut at kFileSeparator into up to four log files (one per node or rank), written as
// node<i>.log in a scratch directory; hangdoctor runs on the directory as its main would. A finding is
// a crash, a sanitizer report, or the command's exception boundary firing (fuzz_command.h). Is not: the
// log reader alone (fuzz_logs).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_command.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto dir = fuzz::scratch().fresh_subdir("logs");
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 4);
  for (size_t i = 0; i < parts.size(); ++i) fuzz::write_bytes(dir / ("node" + std::to_string(i) + ".log"), parts[i]);
  fuzz::check_outcome(fuzz::run_hangdoctor_on({dir.string(), "--json", "-"}), dir.string());
  return 0;
}
