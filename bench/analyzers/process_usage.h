// process_usage.h — hangdoctor's command line run in-process and timed, with this process's CPU
// seconds and peak resident memory (getrusage), for the benchmarks that run it in a fresh process
// so the numbers are its alone.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string_view>
#include <vector>

#include "rankscope/cli/hangdoctor_app.h"
#include "self_usage.h"

namespace rankscope::bench {

struct TimedRun {
  int exit_code = -1;
  double wall_s = 0;
  ProcessUsage usage;  // after the run
};

// `hangdoctor ARGS...` with its text to `out` (nullptr: discarded) and its errors discarded.
inline TimedRun time_hangdoctor_cli(std::vector<std::string_view> args, std::FILE* out) {
  std::FILE* sink = std::fopen("/dev/null", "w");
  rankscope::cli::HangdoctorEnv env;
  env.out = out ? out : sink;
  env.err = sink;
  const auto t0 = std::chrono::steady_clock::now();
  TimedRun r;
  r.exit_code = rankscope::cli::run_hangdoctor(args, env);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.usage = self_usage();
  std::fclose(sink);
  return r;
}

}  // namespace rankscope::bench
