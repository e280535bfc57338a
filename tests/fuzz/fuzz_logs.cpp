// fuzz_logs.cpp — libFuzzer target: a job's logs (importers/logs: NCCL_DEBUG=INFO output, PyTorch's
// watchdog lines, tracebacks, torchrun's table, and an NCCL RAS report when a file holds one).
//
// Is: the input cut at kFileSeparator into up to three log files (one per node or rank, as jobs
// write them), written in a scratch directory and read by import_logs() on the directory: line
// splitting, both message readers, the merge across files, the run model and the findings. Is not:
// the RAS report reader alone (fuzz_nccl_ras.cpp).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz_support.h"
#include "rankscope/logs/log_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto dir = fuzz::scratch().fresh_subdir("logs");
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 3);
  for (size_t i = 0; i < parts.size(); ++i) {
    fuzz::write_bytes(dir / ("node" + std::to_string(i) + ".log"), parts[i]);
  }
  auto imported = rankscope::logs::import_logs({dir});
  if (!imported.ok()) (void)imported.status().user_text();
  return 0;
}
