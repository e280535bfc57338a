// step_program.cpp — builds the per-step operation list of the synthetic GPT-2 job.
#include "step_program.h"

#include <algorithm>

#include <fmt/format.h>

namespace rankscope::synth {
namespace {

using format::CollectiveOp;
using Kind = ProgramOp::Kind;

// Nominal compute times (ns) of one CPU rank of the `tiny` preset; only their ratios matter.
constexpr int64_t kMs = 1'000'000;

class Builder {
 public:
  explicit Builder(StepProgram& p) : p_(p) {}

  void enter(const std::string& name) {
    int idx = p_.range_index(name);
    if (idx < 0) {
      idx = int(p_.range_names.size());
      p_.range_names.push_back(name);
    }
    stack_.push_back(uint16_t(idx));
    add({.kind = Kind::kEnter, .range = uint16_t(idx)});
  }
  void exit() {
    add({.kind = Kind::kExit, .range = stack_.back()});
    stack_.pop_back();
  }
  void compute(int64_t ns) { add({.kind = Kind::kCompute, .range = stack_.back(), .ns = ns}); }
  void collective(CommRole role, CollectiveOp op, uint64_t count, int bucket = -1) {
    add({.kind = Kind::kCollective, .range = stack_.back(), .role = role, .op = op, .count = count, .bucket = bucket});
  }
  void grad(const std::string& name) {
    add({.kind = Kind::kGradReady, .range = stack_.back(), .param = p_.param_index(name)});
  }
  void marker(Kind k) { add({.kind = k, .range = stack_.back()}); }
  void expert_compute(int64_t ns, int block) {
    add({.kind = Kind::kExpertCompute, .range = stack_.back(), .ns = ns, .moe_block = int16_t(block)});
  }
  void a2a(CollectiveOp op, uint64_t count, int block, A2aDirection dir) {
    const auto dtype = op == CollectiveOp::kAllToAll ? format::DataType::kInt64 : format::DataType::kFloat32;
    add({.kind = Kind::kCollective,
         .range = stack_.back(),
         .role = CommRole::kEp,
         .op = op,
         .dtype = dtype,
         .count = count,
         .moe_block = int16_t(block),
         .a2a = dir});
  }
  // One MoE MLP, forward or backward: router, dispatch (counts, then rows), experts, combine; the
  // backward runs the phases in reverse with the row exchanges' directions swapped.
  void moe(const std::string& pass, int block, int64_t expert_ns, uint64_t experts) {
    const bool fwd = pass == "forward";
    auto phase = [&](const char* name) { enter(fmt::format("{}/block{}/moe/{}", pass, block, name)); };
    auto router = [&] {
      phase("router");
      compute(fwd ? kMs / 2 : kMs);
      exit();
    };
    auto dispatch = [&] {
      phase("dispatch");
      if (fwd) a2a(CollectiveOp::kAllToAll, experts, block, A2aDirection::kNone);  // per-expert counts
      a2a(CollectiveOp::kAllToAllV, 0, block, fwd ? A2aDirection::kDispatch : A2aDirection::kCombine);
      exit();
    };
    auto combine = [&] {
      phase("combine");
      a2a(CollectiveOp::kAllToAllV, 0, block, fwd ? A2aDirection::kCombine : A2aDirection::kDispatch);
      exit();
    };
    auto run_experts = [&] {
      phase("experts");
      expert_compute(expert_ns, block);
      exit();
    };
    if (fwd) {
      router();
      dispatch();
      run_experts();
      combine();
    } else {
      combine();
      run_experts();
      dispatch();
      router();
    }
  }

 private:
  void add(ProgramOp op) { p_.ops.push_back(op); }
  StepProgram& p_;
  std::vector<uint16_t> stack_;
};

std::string block_param(int i, const char* suffix) { return fmt::format("h.{}.{}", i, suffix); }

}  // namespace

int ModelShape::padded_vocab() const {
  const int multiple = 128 * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

int StepProgram::range_index(const std::string& name) const {
  auto it = std::find(range_names.begin(), range_names.end(), name);
  return it == range_names.end() ? -1 : int(it - range_names.begin());
}

int StepProgram::param_index(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return int(i);
  return -1;
}

int StepProgram::collectives_per_step(CommRole role) const {
  return int(std::count_if(ops.begin(), ops.end(),
                           [&](const ProgramOp& o) { return o.kind == Kind::kCollective && o.role == role; }));
}

StepProgram build_step_program(const ModelShape& s) {
  StepProgram p;
  const uint64_t C = uint64_t(s.channels), tp = uint64_t(s.tp), L = uint64_t(s.layers);
  const uint64_t BTC = uint64_t(s.batch) * uint64_t(s.seq_len) * C;
  const uint64_t BT = uint64_t(s.batch) * uint64_t(s.seq_len);

  // Parameters, HF GPT-2 names, TP-sharded sizes. Bucket 0 (small, first to fill in backward):
  // ln_f and the last block; bucket 1: every other block and the embeddings.
  auto add_param = [&](std::string name, uint64_t numel, int bucket) {
    p.params.push_back({std::move(name), numel, bucket});
  };
  add_param("wte.weight", uint64_t(s.padded_vocab()) * C / tp, 1);
  add_param("wpe.weight", uint64_t(s.seq_len) * C, 1);
  for (uint64_t i = 0; i < L; ++i) {
    const int b = i + 1 == L ? 0 : 1;
    add_param(block_param(int(i), "ln_1.weight"), C, b);
    add_param(block_param(int(i), "ln_1.bias"), C, b);
    add_param(block_param(int(i), "attn.c_attn.weight"), C * 3 * C / tp, b);
    add_param(block_param(int(i), "attn.c_attn.bias"), 3 * C / tp, b);
    add_param(block_param(int(i), "attn.c_proj.weight"), C * C / tp, b);
    add_param(block_param(int(i), "attn.c_proj.bias"), C, b);
    add_param(block_param(int(i), "ln_2.weight"), C, b);
    add_param(block_param(int(i), "ln_2.bias"), C, b);
    add_param(block_param(int(i), "mlp.c_fc.weight"), C * 4 * C / tp, b);
    add_param(block_param(int(i), "mlp.c_fc.bias"), 4 * C / tp, b);
    add_param(block_param(int(i), "mlp.c_proj.weight"), 4 * C * C / tp, b);
    add_param(block_param(int(i), "mlp.c_proj.bias"), C, b);
  }
  add_param("ln_f.weight", C, 0);
  add_param("ln_f.bias", C, 0);
  p.buckets = 2;
  uint64_t bucket_numel[2] = {0, 0};
  for (const auto& prm : p.params) bucket_numel[prm.bucket] += prm.numel;

  const bool has_tp = s.tp > 1, has_dp = s.dp > 1;
  Builder b(p);
  auto tp_allreduce = [&](uint64_t count, CollectiveOp op = CollectiveOp::kAllReduceSum) {
    if (has_tp) b.collective(CommRole::kTp, op, count);
  };

  b.enter("step");
  b.enter("data");
  b.compute(2 * kMs);
  b.exit();
  b.enter("forward/embed");
  b.compute(1 * kMs);
  tp_allreduce(BTC);  // vocab-parallel embedding: partial sums
  b.exit();
  for (uint64_t i = 0; i < L; ++i) {
    b.enter(fmt::format("forward/block{}/attn", i));
    b.compute(5 * kMs);
    tp_allreduce(BTC);  // row-parallel c_proj
    b.exit();
    // An MoE block's MLP is the range forward/block{i}/moe, whose phases nest under it by name
    // (analyzers derive nesting from the names: forward/block{i}/mlp would not be their parent).
    if (s.moe_block(int(i))) {
      b.enter(fmt::format("forward/block{}/moe", i));
      b.moe("forward", int(i), 6 * kMs, uint64_t(s.moe_experts));
    } else {
      b.enter(fmt::format("forward/block{}/mlp", i));
      b.compute(6 * kMs);
      tp_allreduce(BTC);
    }
    b.exit();
  }
  b.enter("forward/head");
  b.compute(4 * kMs);
  tp_allreduce(BT, CollectiveOp::kAllReduceMax);  // vocab-parallel cross-entropy: max, then sums
  tp_allreduce(2 * BT);
  b.exit();

  b.marker(ProgramOp::Kind::kBeginBackward);
  b.enter("backward/head");
  b.compute(8 * kMs);
  b.grad("ln_f.weight");
  b.grad("ln_f.bias");
  tp_allreduce(BTC);  // input gradient of the vocab-parallel LM head
  b.exit();
  for (int64_t i = int64_t(L) - 1; i >= 0; --i) {
    b.enter(fmt::format("backward/block{}/{}", i, s.moe_block(int(i)) ? "moe" : "mlp"));
    if (s.moe_block(int(i)))
      b.moe("backward", int(i), 12 * kMs, uint64_t(s.moe_experts));
    else
      b.compute(12 * kMs);
    for (const char* n :
         {"mlp.c_proj.weight", "mlp.c_proj.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "ln_2.weight", "ln_2.bias"})
      b.grad(block_param(int(i), n));
    if (!s.moe_block(int(i))) tp_allreduce(BTC);  // input gradient of column-parallel c_fc
    b.exit();
    b.enter(fmt::format("backward/block{}/attn", i));
    b.compute(10 * kMs);
    for (const char* n : {"attn.c_proj.weight", "attn.c_proj.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                          "ln_1.weight", "ln_1.bias"})
      b.grad(block_param(int(i), n));
    tp_allreduce(BTC);
    if (has_dp && uint64_t(i) + 1 == L) b.collective(CommRole::kDp, CollectiveOp::kAllReduceSum, bucket_numel[0], 0);
    b.exit();
  }
  b.enter("backward/embed");
  b.compute(2 * kMs);
  b.grad("wpe.weight");
  b.grad("wte.weight");  // tied: after its last contribution
  b.exit();
  b.marker(ProgramOp::Kind::kEndBackward);
  b.enter("grad_sync");
  if (has_dp) b.collective(CommRole::kDp, CollectiveOp::kAllReduceSum, bucket_numel[1], 1);
  b.compute(kMs / 4);
  b.exit();
  b.enter("optimizer");
  b.compute(3 * kMs);
  b.exit();
  b.exit();  // step
  return p;
}

}  // namespace rankscope::synth
