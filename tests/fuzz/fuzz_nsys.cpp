// fuzz_nsys.cpp — libFuzzer target: an Nsight Systems SQLite export imported into a run directory
// (importers/nsys: the schema and META_DATA_EXPORT checks, the row readers, ranks, the rank builder).
//
// Is: the input written as an .sqlite file in a scratch directory, then import_nsys() into a fresh run
// directory. SQLite itself is Debian's and is not instrumented: the target finds what our code does
// with whatever rows, types and values a corrupt or odd export yields. Is not: a fuzzer of SQLite.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "fuzz_support.h"
#include "rankscope/nsys/nsys_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto exports = fuzz::scratch().fresh_subdir("exports");
  const auto run_dir = fuzz::scratch().path() / "run";
  const std::filesystem::path file = exports / "report_rank0.sqlite";
  fuzz::write_bytes(file, std::span<const uint8_t>(data, size));
  rankscope::nsys::ImportOptions options;
  options.threads = 1;
  auto summary = rankscope::nsys::import_nsys({file}, run_dir, options);
  if (!summary.ok()) (void)summary.status().user_text();
  return 0;
}
