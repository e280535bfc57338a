// fr_hangdoctor_run.h — test utility: runs hangdoctor's main (cli::run_hangdoctor) in-process on a path
// and returns its exit status, its text streams and, with --json -, the parsed JSON report.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankscope/cli/hangdoctor_app.h"

namespace rankscope::torch_fr::testing {

struct HangdoctorRun {
  int code = -1;
  std::string out, err;
  nlohmann::json report;  // null unless --json - was passed and stdout parsed
};

inline std::string drain(std::FILE* f) {
  std::string text;
  std::rewind(f);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

inline HangdoctorRun run_hangdoctor_on(const std::vector<std::string>& argv) {
  std::vector<std::string_view> args(argv.begin(), argv.end());
  rankscope::cli::HangdoctorEnv env;
  env.out = std::tmpfile();
  env.err = std::tmpfile();
  HangdoctorRun r;
  r.code = rankscope::cli::run_hangdoctor(args, env);
  r.out = drain(env.out);
  r.err = drain(env.err);
  const bool json = argv.size() >= 2 && argv[argv.size() - 2] == "--json" && argv.back() == "-";
  if (json) r.report = nlohmann::json::parse(r.out, nullptr, false);
  return r;
}

// The dumps at `path` with the JSON report on stdout (the text and summary go to stderr).
inline HangdoctorRun hangdoctor_json(const std::string& path) { return run_hangdoctor_on({path, "--json", "-"}); }

}  // namespace rankscope::torch_fr::testing
