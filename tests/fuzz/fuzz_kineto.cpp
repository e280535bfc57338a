// fuzz_kineto.cpp — libFuzzer target: PyTorch profiler (Kineto) traces imported into a run directory
// (importers/kineto: zlib under a streambuf, nlohmann's SAX parser, ranks, clocks, the rank builder).
//
// Is: the input cut at kFileSeparator into up to two traces (plain JSON or gzip: zlib's gzread reads
// both, whatever the name), written as rank0.json and rank1.json in a scratch directory, then
// import_kineto() into a fresh run directory: reading, clock alignment and writing run.json, the
// event streams and the recorders, where the trace cut inside a UTF-8 character aborted.
// Is not: a check of what was imported (tests/importers/kineto_import_test.cpp).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "rankscope/kineto/kineto_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto traces = fuzz::scratch().fresh_subdir("traces");
  const auto run_dir = fuzz::scratch().path() / "run";
  std::vector<std::filesystem::path> inputs;
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 2);
  for (size_t i = 0; i < parts.size(); ++i) {
    inputs.push_back(traces / ("rank" + std::to_string(i) + ".json"));
    fuzz::write_bytes(inputs.back(), parts[i]);
  }
  rankscope::kineto::ImportOptions options;
  options.threads = 1;  // the fuzzer's process stays single-threaded: findings reproduce
  auto summary = rankscope::kineto::import_kineto(inputs, run_dir, options);
  if (!summary.ok()) (void)summary.status().user_text();
  return 0;
}
