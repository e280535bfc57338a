// tiny_sweep.cpp — see tiny_sweep.h.
#include "tiny_sweep.h"

#include <chrono>
#include <cstdlib>
#include <vector>

#include "train_job.h"

namespace tiny_sweep {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using rankscope::analyzers::ScalingOptions;
using rankscope::analyzers::ScalingRange;
using rankscope::analyzers::ScalingReport;
using rankscope::analyzers::Sweep;
using rankscope::analyzers::SweepPoint;

rankscope::Result<fs::path> run(const std::string& name) {
  // One OpenMP thread: on a shared 2-core machine a second thread mostly measures the other
  // processes. Batch 4: at batch 1 GELU's buffer crosses a cache size (1 to 2 MB) at the top of the
  // sweep, which bends the MLP's slope there; at batch 4 that step falls at T=128..256.
  setenv("OMP_NUM_THREADS", "1", 1);
  const fs::path sweep = e2e::fresh_run_dir(name);
  const std::vector<std::string> args = {"--model", "tiny", "--vocab-size", "1024", "--data", "synthetic:zipf",
                                         "--batch", "4", "--steps", "8", "--quiet", "--sweep-seq-len",
                                         "128,256,512,1024", "--run-dir", sweep.string()};
  std::string out;
  const int rc = e2e::run_to_end(e2e::train_command(0, args), sweep, 600s, &out);
  if (rc != 0) return rankscope::internal_error("gpt2-train sweep exited " + std::to_string(rc) + ":\n" + out);
  return sweep;
}

rankscope::Result<ScalingReport> forecast_top_from_lower(const Sweep& index, const std::string& name) {
  const fs::path partial = e2e::fresh_run_dir(name);
  std::vector<SweepPoint> lower;
  for (const auto& p : index.points) {
    if (p.seq_len < kTopSeqLen) lower.push_back({p.seq_len, fs::absolute(p.run_dir)});
  }
  RS_RETURN_IF_ERROR(rankscope::analyzers::write_sweep_index(partial, lower));
  ScalingOptions options;
  options.forecast_seq_lens = {kTopSeqLen};
  return rankscope::analyzers::analyze_scaling(partial, options);
}

const ScalingRange* find_range(const ScalingReport& r, const std::string& name) {
  for (const auto& x : r.ranges) {
    if (x.name == name) return &x;
  }
  return nullptr;
}

}  // namespace tiny_sweep
