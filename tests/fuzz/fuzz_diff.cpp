// fuzz_diff.cpp — libFuzzer target: `rankscope diff BASE NEW --quiet --json F --html F` on two runs
// imported from PyTorch profiler (Kineto) traces: the imports, then the whole command (steps and their
// warm-up, ranks matched by rank or by role, the waterfall of parts and their causes, settings, the
// JSON and the HTML report).
//
// Is: the input cut at kFileSeparator into two traces (plain JSON or gzip), each imported as a
// one-rank run the way fuzz_skew imports; where both import, the diff subcommand itself
// (tools/rankscope/diff_command.cpp, compiled in) runs on BASE = the first, NEW = the second. It is
// called without rankscope's exception boundary, so a throw is a finding. Is not: the import alone
// (fuzz_kineto) or a check of the numbers (tests/diff).
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
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 2);
  if (parts.size() < 2) return 0;
  std::vector<std::string> runs;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto trace = traces / ("trace" + std::to_string(i) + ".json");
    fuzz::write_bytes(trace, parts[i]);
    const auto run_dir = fuzz::scratch().path() / ("run" + std::to_string(i));
    std::error_code ignored;
    std::filesystem::remove_all(run_dir, ignored);
    rankscope::kineto::ImportOptions options;
    options.threads = 1;  // the fuzzer's process stays single-threaded: findings reproduce
    if (!rankscope::kineto::import_kineto({trace}, run_dir, options).ok()) return 0;
    runs.push_back(run_dir.string());
  }
  const std::string json = (traces / "diff.json").string(), html = (traces / "diff.html").string();
  const std::vector<std::string_view> args = {runs[0], runs[1], "--quiet", "--json", json, "--html", html};
  const int code = rankscope::cli::diff_command(args);
  if (code != 0 && code != 1 && code != 2) __builtin_trap();
  return 0;
}
