// fuzz_skew.cpp — libFuzzer target: `rankscope skew RUN --quiet --json F --html F` on a run imported
// from PyTorch profiler (Kineto) traces: the import, then the whole command (the skew analysis, run.json's
// settings, the kernel and critical-path analyses of the traced steps, the JSON and the HTML report).
//
// Is: the input cut at kFileSeparator into up to two traces (plain JSON or gzip), imported as
// fuzz_kineto does into a scratch run directory; where the import reads, the skew subcommand itself
// (tools/rankscope/skew_command.cpp, compiled in) runs on it. Anything it throws reaches libFuzzer: the
// target calls the subcommand without rankscope's exception boundary, so a throw is a finding. Is not:
// the import alone (fuzz_kineto) or a check of the numbers (tests/analyzers).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "rankscope/kineto/kineto_import.h"
#include "subcommands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto traces = fuzz::scratch().fresh_subdir("traces");
  const auto run_dir = fuzz::scratch().path() / "run";
  std::error_code ignored;
  std::filesystem::remove_all(run_dir, ignored);
  std::vector<std::filesystem::path> inputs;
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 2);
  for (size_t i = 0; i < parts.size(); ++i) {
    inputs.push_back(traces / ("rank" + std::to_string(i) + ".json"));
    fuzz::write_bytes(inputs.back(), parts[i]);
  }
  rankscope::kineto::ImportOptions options;
  options.threads = 1;  // the fuzzer's process stays single-threaded: findings reproduce
  auto summary = rankscope::kineto::import_kineto(inputs, run_dir, options);
  if (!summary.ok()) return 0;
  const std::string run = run_dir.string(), json = (traces / "skew.json").string(), html = (traces / "skew.html").string();
  const std::vector<std::string_view> args = {run, "--quiet", "--json", json, "--html", html};
  const int code = rankscope::cli::skew_command(args);
  if (code != 0 && code != 1 && code != 2) __builtin_trap();
  return 0;
}
