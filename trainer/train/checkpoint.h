// checkpoint.h — saving and resuming a training run.
//
// Is: a checkpoint directory RUN_DIR/checkpoints/step_NNNNNNNN/ holding
//   model.bin               llm.c model file (magic 20240326, version 3, fp32), full weights
//                           gathered over the TP group, written by world rank 0;
//   optim_rankNNNNN.bin     each rank's AdamW moments of its local slice (header: magic, version,
//                           world rank, tp, dp, element count, AdamW step), written by every rank;
//   state.json              step, data position and layout, written by rank 0 last, after a world
//                           barrier: a checkpoint without state.json is incomplete and ignored.
// Every file goes to "<name>.tmp" and is renamed into place. Resuming needs the same TP/DP layout
// (the moments are per TP slice). Is not: the llm.c file codec itself (model/checkpoint_io.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "model/adamw.h"
#include "model/gpt2.h"

namespace gpt2 {

inline constexpr uint32_t kOptimStateMagic = 0x4f505453;  // "STPO"
inline constexpr uint32_t kOptimStateVersion = 1;

struct TrainState {
  int step = 0;                 // optimizer steps completed
  uint64_t data_position = 0;   // micro-batches the loader served
  int world_size = 1;
  int tp = 1;
  nlohmann::json extra = nlohmann::json::object();  // model / run facts for people reading it
};

std::filesystem::path checkpoint_dir(const std::filesystem::path& run_dir, int step);

// Collective over `world` (and the model's TP group).
Status save_checkpoint(const std::filesystem::path& dir, GPT2& model, AdamW& optimizer, Ops& ops,
                       const TrainState& state, Communicator& world);

// `path` is a checkpoint directory, or a run directory whose newest complete checkpoint is used.
rankscope::Result<std::filesystem::path> find_checkpoint(const std::filesystem::path& path);
rankscope::Result<TrainState> read_train_state(const std::filesystem::path& dir);
// Loads the weights (model.bin) and this rank's moments into model and optimizer.
Status load_checkpoint(const std::filesystem::path& dir, int world_rank, GPT2& model,
                       AdamW& optimizer, Ops& ops, const TrainState& state);

}  // namespace gpt2
