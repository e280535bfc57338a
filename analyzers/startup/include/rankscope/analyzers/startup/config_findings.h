// config_findings.h — behaviour-changing settings that are known to hurt, and settings that differ
// between ranks, from run.json's "config" block (written by gpt2-train: docs/FORMAT.md).
//
// Is: one function over the block, shared by `rankscope startup` and `rankscope skew`:
//   - CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for the GPU (serialised host and device);
//   - OMP_WAIT_POLICY=ACTIVE (busy-waiting OpenMP threads) where the ranks' threads outnumber the cores;
//   - debug levels left on (NCCL_DEBUG=INFO|TRACE, NCCL_DEBUG_SUBSYS, TORCH_NCCL_DESYNC_DEBUG,
//     RANKSCOPE_DEBUG), which slow every collective or log line;
//   - a setting whose value differs across ranks.
// Is not: reading the environment (the trainer records it) nor any timing.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankscope::analyzers {

struct ConfigFinding {
  std::string setting;     // "CUDA_LAUNCH_BLOCKING"
  std::string value;       // as set ("1"), or "differs"
  std::vector<int> ranks;  // where it is set (empty: every rank)
  std::string effect;      // what it does to the job
  std::string text;        // one sentence naming the setting, the ranks and the effect
};

// `config` is run.json's "config" object ({"settings": {...}, "settings_by_rank": {"1": {...}}});
// anything else gives no findings. `ranks_per_host` helps judge oversubscription (0: unknown).
std::vector<ConfigFinding> config_findings(const nlohmann::json& config, int world_size, int ranks_per_host);

}  // namespace rankscope::analyzers
