// torch_fr_bench.cpp — hangdoctor on 1024 ranks of PyTorch Flight Recorder dumps (budget:
// < 2 s on a 2-core machine). Writes the dumps with the test fixture writer (TP 8 x DP 128, rank 5
// never enqueues its last TP all-reduce, 2 entries per step, 100 steps unless told), then times `hangdoctor DIR --json
// FILE` in-process: discovery, unpickling every dump, import, classification, text and JSON.
// Prints numbers; asserts only that the verdict names rank 5.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <unistd.h>

#include "fr_scenarios.h"
#include "rankscope/cli/hangdoctor_app.h"
#include "rankscope/torch_fr/fr_import.h"

int main(int argc, char** argv) {
  using namespace rankscope;
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 100;
  const int tp = ranks % 8 == 0 ? 8 : 1;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("rs_torch_fr_bench_{}", ::getpid());
  std::filesystem::remove_all(dir);
  size_t bytes = 0;
  for (const auto& r : torch_fr::testing::tp_dp_job(tp, ranks / tp, 5, steps, "2.10")) {
    const auto b = torch_fr::testing::write_pickle(r);
    bytes += b.size();
    torch_fr::testing::write_file(dir / fmt::format("comm_lib_trace_rank_{}", r.rank), b);
  }
  const std::string d = dir.string(), json = (dir / "diagnosis.json").string();
  std::vector<std::string_view> args = {d, "--json", json};
  std::FILE* sink = std::fopen("/dev/null", "w");
  std::FILE* text = std::tmpfile();
  rankscope::cli::HangdoctorEnv env;
  env.out = text;
  env.err = sink;
  const auto ti = std::chrono::steady_clock::now();
  const bool imported = torch_fr::import_fr_dumps(dir).ok();
  const double import_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - ti).count();
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = rankscope::cli::run_hangdoctor(args, env);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::rewind(text);
  char line[4096] = {0};
  std::string first, second;
  if (std::fgets(line, sizeof line, text)) first = line;
  if (std::fgets(line, sizeof line, text)) second = line;
  std::printf("torch_fr_bench: %d ranks, %d entries per rank, %.1f MB of dumps\n", ranks, 2 * steps - 1,
              double(bytes) / 1e6);
  std::printf("hangdoctor on Flight Recorder dumps: %.3f s (budget 2 s), exit %d; of which reading the dumps "
              "(discover, unpickle, import) alone: %.3f s\n", s, rc, import_s);
  std::printf("  %s  %s", first.c_str(), second.c_str());
  std::filesystem::remove_all(dir);
  const bool right = second.find("rank 5 never entered allreduce") != std::string::npos;
  if (!right) std::printf("WRONG VERDICT\n");
  return right && imported && rc == 1 ? 0 : 1;
}
