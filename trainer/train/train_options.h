// train_options.h — gpt2-train's command line: every flag, its default, and its validation.
//
// Is: the TrainOptions struct, the parser (clear errors with a hint, never a crash, on a missing
// value, a bad number or an unknown flag) and the --help text. Flags are parsed the same on every
// rank. Is not: the effect of the flags (trainer.cpp) nor model-shape validation beyond the flags'
// own ranges (ModelConfig::validate does that once the TP degree is known).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "faults/fault_spec.h"
#include "model/config.h"

namespace gpt2 {

struct TrainOptions {
  // model
  std::string model = "tiny";           // d12 | d6 | tiny
  std::optional<int> layers, heads, channels, vocab_size;
  int seq_len = 64;                     // T
  // optimisation
  int batch = 4;                        // B: micro-batch per DP rank
  int grad_accum = 1;
  int steps = 50;
  float lr = 1e-3f;
  int warmup = -1;                      // steps of linear warmup; -1: 10% of --steps
  float min_lr_frac = 0.1f;             // cosine decays to lr * this
  float weight_decay = 0.0f;
  float grad_clip = 1.0f;               // 0 disables clipping
  uint64_t seed = 1337;
  // parallelism
  int tp = 1;
  int ep = 1;                           // expert-parallel degree, carved out of the DP ranks
  MoeConfig moe;                        // --moe-*: experts 0 = dense MLP
  VocabShard vocab_shard = VocabShard::kContiguous;
  Recompute recompute = Recompute::kNone;
  std::string attention = "auto";       // auto | naive | flash (device_plan.h decides auto)
  // data
  std::string data;                     // "" = shipped tinyshakespeare shard, else synthetic:zipf
  std::string val_data;                 // "" = the val shard next to the default train shard
  bool shuffle = false;
  int val_every = 0;                    // 0: no validation
  int val_batches = 4;
  int sample = 0;                       // tokens to generate at the end
  int sample_top_k = 40;
  // run directory, checkpoints
  std::string run_dir;                  // "" = runs/<date-time>
  int save_every = 0;
  std::string resume;                   // checkpoint directory (or a run directory: its latest)
  std::string init_from;                // llm.c model file
  // probe
  std::vector<FaultSpec> inject;
  std::string trace_steps;              // "A-B"
  std::vector<int> sweep_seq_lens;      // --sweep-seq-len: one run per T into --run-dir (seq_len_sweep.h)
  double watchdog_timeout_s = -1;       // -1: the probe's default
  bool no_probe = false;
  std::string device = "auto";          // auto | cpu | cuda (device_plan.h decides)
  std::string comm = "auto";            // auto | mpi | nccl
  std::string precision = "auto";       // auto | fp32 | bf16
  std::string profile_steps;            // "A-B": cudaProfilerStart/Stop around these steps
  bool quiet = false;                   // no progress lines

  bool help = false;
  std::vector<std::string> command_line;  // argv as given
};

// Parses argv (argv[0] is the program). On --help, returns options with help = true.
rankscope::Result<TrainOptions> parse_train_options(int argc, const char* const* argv);
std::string train_usage();

}  // namespace gpt2
