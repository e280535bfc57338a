// fuzz_command.h — what the whole-command fuzz targets share: run hangdoctor as its main does, with its
// output kept in memory, and treat its exception boundary firing as a finding.
//
// Is: run_hangdoctor_on(args[, processes]): hangdoctor's own entry point (rankscope::cli::run_hangdoctor: discovery,
// the import, diagnose, the wording, the text and the JSON report), stdout and stderr in memory; and
// boundary_fired(err, input): the line format/command_boundary.cpp writes when anything was thrown.
// A throw is a clean exit 2 for the user, but for the fuzzer it is a bug a file found, so the targets
// trap on it and libFuzzer keeps the input. Is not: a fuzz target (fuzz_hangdoctor_*.cpp).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/analyzers/hang/process_table.h"
#include "rankscope/cli/hangdoctor_app.h"

namespace rankscope::fuzz {

struct CommandRun {
  int code = -1;
  std::string out, err;
};

// A process table that knows no process: every writer is on another machine as far as a fuzzed
// input can tell. The system's table would ask /proc about pids and hosts taken from the input (real
// processes of this machine, a different answer each run: findings would not reproduce).
class NoProcesses final : public analyzers::hang::ProcessTable {
 public:
  analyzers::Liveness liveness(const std::string&, int) override { return analyzers::Liveness::kUnknown; }
  std::string local_host() override { return "fuzz-host-that-is-no-writer"; }
};

inline CommandRun run_hangdoctor_on(const std::vector<std::string>& argv,
                                    analyzers::hang::ProcessTable* processes = nullptr) {
  char* out_buf = nullptr;
  char* err_buf = nullptr;
  size_t out_len = 0, err_len = 0;
  std::FILE* out = open_memstream(&out_buf, &out_len);
  std::FILE* err = open_memstream(&err_buf, &err_len);
  rankscope::cli::HangdoctorEnv env;
  env.processes = processes;
  env.out = out;
  env.err = err;
  const std::vector<std::string_view> args(argv.begin(), argv.end());
  CommandRun run;
  run.code = rankscope::cli::run_hangdoctor(args, env);
  std::fclose(out);
  std::fclose(err);
  run.out.assign(out_buf, out_len);
  run.err.assign(err_buf, err_len);
  std::free(out_buf);
  std::free(err_buf);
  return run;
}

// The command's exception boundary wrote its line (format/command_boundary.cpp): the last line of
// `err` starts "hangdoctor: INPUT: could not be analysed: ". Compared byte by byte with coverage off:
// a string compare would hand the line to libFuzzer's dictionary (its memcmp hooks and trace-cmp),
// and the fuzzer then writes it into a log line the report quotes: a false finding, the first
// campaign's second. INPUT is the scratch folder, a new random name in every process.
__attribute__((no_sanitize("coverage"))) inline bool boundary_fired(const std::string& err, const std::string& input) {
  const std::string expected = "hangdoctor: " + input + ": could not be analysed: ";
  size_t end = err.size();
  if (end > 0 && err[end - 1] == '\n') --end;
  size_t begin = end;
  while (begin > 0 && err[begin - 1] != '\n') --begin;
  if (end - begin < expected.size()) return false;
  for (size_t i = 0; i < expected.size(); ++i)
    if (err[begin + i] != expected[i]) return false;
  return true;
}

// Exit codes a command may give: 0 healthy, 1 a problem found, 2 bad input; anything else, or a
// throw caught by the boundary, or an exit 2 without a word, is a finding.
inline void check_outcome(const CommandRun& run, const std::string& input) {
  if (boundary_fired(run.err, input)) {
    std::fprintf(stderr, "the command threw:\n%s", run.err.c_str());
    __builtin_trap();
  }
  if (run.code < 0 || run.code > 2) __builtin_trap();
  if (run.code == 2 && run.err.empty()) __builtin_trap();
}

}  // namespace rankscope::fuzz
