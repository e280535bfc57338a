// attention_step_timing.cpp — see attention_step_timing.h. Shapes: qkv (B,T,3C), out and dout
// (B,T,C), dqkv (B,T,3C) in `type`; saved and scratch as the backend asks for `kind`.
#include "attention_step_timing.h"

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "rankscope/format/bfloat16.h"

namespace gpt2::bench {
namespace {

// A backend buffer of n activations of `type` holding normal(0, 1) values (rounded for bf16).
void* random_activations(Ops& ops, size_t n, ActType type, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  void* p = ops.alloc(n * act_type_bytes(type));
  if (type == ActType::kBF16) {
    std::vector<uint16_t> host(n);
    for (auto& x : host) x = rankscope::format::float_to_bf16(dist(rng));
    ops.copy_from_host(p, host.data(), n * 2);
  } else {
    std::vector<float> host(n);
    for (auto& x : host) x = dist(rng);
    ops.copy_from_host(p, host.data(), n * 4);
  }
  return p;
}

}  // namespace

double attention_step_flops(const AttentionShape& s) {
  const double forward = 4.0 * s.B * static_cast<double>(s.T) * s.T * s.C / 2.0;
  return 3.5 * forward * s.layers;
}

rankscope::Result<double> attention_ms_per_step(Ops& ops, AttentionKind kind, ActType type, const AttentionShape& s,
                                                int reps) {
  const size_t btc = static_cast<size_t>(s.B) * s.T * s.C;
  const size_t saved_floats = ops.attention_saved_floats(kind, s.B, s.T, s.NH);
  const size_t scratch_floats = ops.attention_scratch_floats(kind, s.B, s.T, s.NH);
  const size_t need = 8 * btc * act_type_bytes(type) + 4 * (saved_floats + scratch_floats);
  // Naive's (B,NH,T,T) buffers can exceed what the model left free: say so instead of failing inside.
  if (auto mem = cuda_ops_memory(ops); mem.ok() && need > mem->device_free_bytes) {
    return rankscope::unsupported("attention timing needs " + std::to_string(need >> 20) + " MiB, " +
                                  std::to_string(mem->device_free_bytes >> 20) + " MiB free");
  }
  void* qkv = random_activations(ops, 3 * btc, type, 1);
  void* dout = random_activations(ops, btc, type, 2);
  void* out = ops.alloc(btc * act_type_bytes(type));
  void* dqkv = ops.alloc(3 * btc * act_type_bytes(type));
  auto* saved = static_cast<float*>(ops.alloc(4 * saved_floats));
  auto* scratch = static_cast<float*>(ops.alloc(4 * scratch_floats));
  auto step = [&] {
    for (int l = 0; l < s.layers; l++)
      ops.attention_forward(kind, ActPtr(out, type), saved, ConstActPtr(qkv, type), s.B, s.T, s.C, s.NH);
    for (int l = 0; l < s.layers; l++)
      ops.attention_backward(kind, ActPtr(dqkv, type), scratch, ConstActPtr(dout, type), ConstActPtr(qkv, type),
                             ConstActPtr(out, type), saved, s.B, s.T, s.C, s.NH);
  };
  step();  // warm-up: first launches, cuBLASLt heuristics
  rankscope::Status synced = cuda_ops_synchronize(ops);
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps && synced.ok(); r++) step();
  if (synced.ok()) synced = cuda_ops_synchronize(ops);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (void* p : {qkv, dout, out, dqkv, static_cast<void*>(saved), static_cast<void*>(scratch)}) ops.release(p);
  if (!synced.ok()) return synced;
  return 1e3 * seconds / reps;
}

}  // namespace gpt2::bench
