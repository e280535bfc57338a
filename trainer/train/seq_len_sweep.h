// seq_len_sweep.h — gpt2-train --sweep-seq-len 64,128,256: one short run per sequence length.
//
// Is: the sweep driver. It runs the same training once per sequence length T, each into its own
// run directory under the sweep directory (--run-dir), and rank 0 lists every finished point in
// SWEEP_DIR/sweep.json, the layout `rankscope scaling` reads (docs/FORMAT.md, "Sweep directory"):
//   SWEEP_DIR/sweep.json        {"schema_version": 1, "kind": "rankscope.seq_len_sweep",
//                                "parameter": "seq_len", "points": [{"seq_len": 64, "run_dir": "seq_len_00064"}, ...]}
//   SWEEP_DIR/seq_len_00064/    a complete run directory
// All ranks run the points in the same order in one job (the world communicator is renewed per
// point). Is not: the analysis (analyzers/scaling) nor one training run (trainer.cpp).
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "rankscope/format/status.h"
#include "bootstrap.h"
#include "train_options.h"

namespace gpt2 {

// "64,128,256": positive, strictly increasing; a clear error otherwise.
rankscope::Result<std::vector<int>> parse_seq_len_list(std::string_view text);

// Runs `train_once` for every T of options.sweep_seq_lens and returns the first non-zero exit
// code (after which the sweep stops), else 0.
int run_seq_len_sweep(const TrainOptions& options, Bootstrap& boot,
                      const std::function<int(TrainOptions, Bootstrap&)>& train_once);

}  // namespace gpt2
