// fuzz_nccl_ras.cpp — libFuzzer target: an NCCL RAS report (`ncclras`, text or JSON) read from memory
// (importers/logs/src/nccl_ras.cpp), as hangdoctor reads the answer of a live job's RAS thread.
//
// Is: import_nccl_ras() on the input as the report's text. Is not: the socket client (ras_client.h)
// or a log file holding a report (fuzz_logs.cpp reaches that path too).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "rankscope/logs/log_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view report(reinterpret_cast<const char*>(data), size);
  auto imported = rankscope::logs::import_nccl_ras(report, "fuzz");
  if (!imported.ok()) (void)imported.status().user_text();
  return 0;
}
