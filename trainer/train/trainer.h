// trainer.h — gpt2-train as a library: the whole program behind a thin main.
//
// Is: run_gpt2_train(argc, argv): flags, bootstrap (MPI or alone), probe, Megatron groups, model,
// data, DDP, the training loop (warmup + cosine LR, gradient accumulation, clipping, AdamW),
// validation, sampling, metrics.jsonl, checkpoints, and the exit code. Every phase runs under the
// range names of design.md §2 (step, data, forward/..., backward/..., grad_sync, optimizer), and
// every collective through the probed communicators. Is not: the model math (trainer/model) nor
// any communication backend.
#pragma once

namespace gpt2 {

// Returns the process exit code: 0 done, 1 a runtime error, 2 bad command line.
int run_gpt2_train(int argc, char** argv);

}  // namespace gpt2
