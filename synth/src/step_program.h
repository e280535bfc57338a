// step_program.h — one training step of a GPT-2-like TP x DP job, as a flat list of operations.
//
// Is: the order in which every rank enters and leaves ranges (design.md §2 names), computes,
// calls collectives (Megatron TP all-reduces per block, the vocab-parallel cross-entropy's max and
// sum, DDP bucket all-reduces over dp), and reports gradients ready (HF GPT-2 parameter names). All
// ranks run the same program, which is what makes a lockstep simulation faithful. Is not: timing
// policy or faults (synth_run.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankscope/format/vocabulary.h"

namespace rankscope::synth {

enum class CommRole : uint8_t { kWorld, kTp, kDp, kEp };

// Which all_to_all_v of an MoE block a collective is (its rows go to the experts or come back).
enum class A2aDirection : uint8_t { kNone, kDispatch, kCombine };

struct ProgramOp {
  // kExpertCompute: a kCompute whose duration scales with the rows the rank received (MoE experts).
  enum class Kind : uint8_t {
    kEnter,
    kExit,
    kCompute,
    kCollective,
    kBeginBackward,
    kGradReady,
    kEndBackward,
    kExpertCompute
  };
  Kind kind = Kind::kCompute;
  uint16_t range = 0;  // range entered/left; for other kinds the innermost open range
  int64_t ns = 0;      // kCompute: nominal duration on an unloaded rank
  CommRole role = CommRole::kTp;
  format::CollectiveOp op = format::CollectiveOp::kUnknown;
  format::DataType dtype = format::DataType::kFloat32;
  uint64_t count = 0;                      // elements
  int bucket = -1;                         // dp collectives: the DDP bucket they reduce
  int param = -1;                          // kGradReady
  int16_t moe_block = -1;                  // MoE ops: the block; its routing decides counts and expert time
  A2aDirection a2a = A2aDirection::kNone;  // kAllToAllV of an MoE block: which way the rows go
};

struct ParamInfo {
  std::string name;
  uint64_t numel = 0;  // this rank's shard
  int bucket = 0;
};

struct ModelShape {
  int layers = 2;
  int tp = 1;
  int dp = 1;
  int channels = 128;
  int heads = 4;
  int seq_len = 64;
  int batch = 4;
  int vocab = 50257;
  int moe_experts = 0;  // 0: dense MLP everywhere
  int moe_every = 1;    // block i is MoE when i % moe_every == 0
  int padded_vocab() const;
  bool moe_block(int i) const { return moe_experts > 0 && i % moe_every == 0; }
};

struct StepProgram {
  std::vector<std::string> range_names;  // index 0 is "step"
  std::vector<ParamInfo> params;         // registration (model) order
  std::vector<ProgramOp> ops;
  int buckets = 0;

  int range_index(const std::string& name) const;  // -1 when unknown
  int param_index(const std::string& name) const;
  int collectives_per_step(CommRole role) const;
};

StepProgram build_step_program(const ModelShape& shape);

}  // namespace rankscope::synth
