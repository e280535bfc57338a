// flash_attention.h — causal flash-style attention on the CPU: the readable reference of the
// algorithm the CUDA kernels (trainer/ops/cuda/kernels/flash_attention.cu) implement.
//
// Is: FlashAttention-2 (Dao, 2023) as the paper describes it, per (batch, head): queries in tiles
// of `q_rows`, keys/values in tiles of `kv_rows`; forward keeps a running row max m and row sum l
// (online softmax), rescales the output accumulator when m grows, and stores only the logsumexp
// lse = m + log(l) per query row. Backward never holds more than one (q_rows, kv_rows) tile of
// probabilities: for each key tile it recomputes P = exp(S - lse) for the query tiles at or below
// the diagonal and accumulates dV += P^T dO, dS = P * (dO V^T - D), dK += dS^T Q, dQ += dS K, with
// D = rowsum(dO * O). Every tile product is an OpenBLAS sgemm; OpenMP over (batch, head). Fully
// masked tiles (key tile entirely after the query tile) are skipped, so the work is ~half of naive's.
// Is not: faster than the naive path at small T (it recomputes S in backward); dq is accumulated in
// key-tile order, so results are deterministic but not bit-identical to naive (fp32 rounding only).
#pragma once

namespace gpt2::cpu {

struct FlashTiles {
  int q_rows = 64;   // Br: query rows per tile
  int kv_rows = 64;  // Bc: key/value rows per tile
};

// qkv (B,T,3C) = [Q | K | V]; out (B,T,C) =; lse (B,NH,T) = logsumexp of each scaled, masked row.
void flash_attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH,
                             FlashTiles tiles = {});
// dqkv (B,T,3C) = gradient given dout (B,T,C), the forward's out and lse; dsum (B,NH,T) is
// scratch (it receives D = rowsum(dout * out) per head).
void flash_attention_backward(float* dqkv, float* dsum, const float* dout, const float* qkv,
                              const float* out, const float* lse, int B, int T, int C, int NH,
                              FlashTiles tiles = {});

}  // namespace gpt2::cpu
