// fuzz_hangdoctor_mix.cpp — libFuzzer target: `hangdoctor JOB_DIR --json -` on one job's artifacts
// together, the folder a user hands over after a hang (dumps/, the launcher's job.log, stacks/): the
// whole command, each artifact read by its own reader and the verdicts joined per rank.
//
// Is: the input cut at kFileSeparator into up to 9 parts: part 0 the log (job.log), parts 1-4 ranks
// 0-3's Flight Recorder dumps (dumps/comm_lib_trace_rank_N), parts 5-8 their stacks
// (stacks/rankN.txt, py-spy's text); an empty part is a file the job did not leave. The layout of
// tests/fixtures/torch-jobs, whose runs are the seeds. A finding is a crash, a sanitizer report, or
// the command's exception boundary firing (fuzz_command.h). Is not: one artifact alone
// (fuzz_hangdoctor_dumps, fuzz_hangdoctor_logs).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "fuzz_command.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = rankscope::fuzz;
  const auto job = fuzz::scratch().fresh_subdir("job");
  std::filesystem::create_directories(job / "dumps");
  std::filesystem::create_directories(job / "stacks");
  const auto parts = fuzz::split_files(std::span<const uint8_t>(data, size), 9);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) continue;
    const int rank = i <= 4 ? int(i) - 1 : int(i) - 5;
    const auto file = i == 0   ? job / "job.log"
                      : i <= 4 ? job / "dumps" / ("comm_lib_trace_rank_" + std::to_string(rank))
                               : job / "stacks" / ("rank" + std::to_string(rank) + ".txt");
    fuzz::write_bytes(file, parts[i]);
  }
  fuzz::check_outcome(fuzz::run_hangdoctor_on({job.string(), "--json", "-"}), job.string());
  return 0;
}
