// cuda_ops.cpp — CudaOps: creation, memory, scratch, and the ops that are one or two kernel launches
// (embedding, LayerNorm, GELU, residual, AdamW, reductions).
// Is not: GEMMs (cuda_ops_gemm.cpp), attention (cuda_ops_attention.cpp), cross-entropy
// (cuda_ops_crossentropy.cpp) or any kernel (kernels/*.cu).
#include "ops/cuda/cuda_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "ops/cuda/cuda_check.h"

namespace gpt2::cuda {

rankscope::Status to_status(cudaError_t e, const char* what) { return cuda_status(e, what); }

void die_in_op(const rankscope::Status& status, const char* op) {
  if (status.code() == rankscope::StatusCode::kOutOfMemory) {
    // Not a broken kernel: the run asked for more than the device has. The sticky-error advice
    // would mislead; say what to change and exit 2 as for a bad setting (never abort, no core).
    size_t free_bytes = 0, total_bytes = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_bytes, &total_bytes);
    std::fprintf(stderr,
                 "rankscope cuda ops: %s: out of GPU memory: %s\n  %.2f GiB free of %.2f GiB on the device\n"
                 "  hint: a smaller --batch (keep the global batch with --grad-accum), --attention flash, or "
                 "--recompute 2\n",
                 op, status.to_string().c_str(), free_bytes / double(1 << 30), total_bytes / double(1 << 30));
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(2);
  }
  std::fprintf(stderr,
               "rankscope cuda ops: %s failed: %s\n  hint: CUDA errors are sticky; rerun with "
               "CUDA_LAUNCH_BLOCKING=1 or under compute-sanitizer to find the kernel, or --device cpu\n",
               op, status.to_string().c_str());
  std::fflush(stderr);
  std::abort();
}

rankscope::Result<std::unique_ptr<CudaOps>> CudaOps::create(const CudaOpsOptions& options) {
  std::unique_ptr<CudaOps> ops(new CudaOps(options));
  RS_CUDA_CHECK(cudaSetDevice(options.device));
  RS_CUDA_CHECK(cudaStreamCreateWithFlags(&ops->stream_, cudaStreamNonBlocking));
  RS_ASSIGN_OR_RETURN(ops->gemm_, CublasLtGemm::create(options.gemm_workspace_bytes));
  RS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ops->owned_count_), sizeof(int)));
  RS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ops->sum_result_), sizeof(double)));
  RS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ops->sum_partials_), sizeof(double) * reduce_scratch_doubles()));
  return ops;
}

CudaOps::~CudaOps() {
  if (stream_) cudaStreamSynchronize(stream_);
  gemm_.reset();
  for (auto& buf : scratch_) cudaFree(buf.ptr);
  for (auto& [ptr, bytes] : allocations_) cudaFree(ptr);
  cudaFree(weight_mirror_.copy);
  cudaFree(owned_count_);
  cudaFree(sum_result_);
  cudaFree(sum_partials_);
  if (stream_) cudaStreamDestroy(stream_);
}

CudaMemoryStats CudaOps::memory() const {
  CudaMemoryStats m;
  m.allocated_bytes = allocated_bytes_;
  m.peak_allocated_bytes = peak_allocated_bytes_;
  for (const auto& buf : scratch_) m.scratch_bytes += buf.bytes;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    m.device_used_bytes = total_bytes - free_bytes;
    m.device_free_bytes = free_bytes;
  }
  return m;
}

rankscope::Result<void*> CudaOps::scratch(Scratch slot, size_t bytes) {
  DeviceBuffer& buf = scratch_[static_cast<int>(slot)];
  if (buf.bytes >= bytes && buf.ptr != nullptr) return buf.ptr;
  // cudaFree synchronizes the device, so no kernel still reads the old buffer.
  RS_CUDA_CHECK(cudaFree(buf.ptr));
  buf.ptr = nullptr;
  buf.bytes = 0;
  const size_t rounded = (bytes + 255) / 256 * 256;
  RS_CUDA_CHECK(cudaMalloc(&buf.ptr, rounded == 0 ? 256 : rounded));
  buf.bytes = rounded;
  return buf.ptr;
}

ShardParams CudaOps::shard_params(const VocabShardMap& s) {
  // Real columns are a prefix of every shard (same rule as the CPU oracle's real_vocab_columns).
  long real = s.strided ? (static_cast<long>(s.vocab_size) - s.tp_rank + s.tp_size - 1) / s.tp_size
                        : static_cast<long>(s.vocab_size) - static_cast<long>(s.tp_rank) * s.local_rows;
  if (real < 0) real = 0;
  if (real > s.local_rows) real = s.local_rows;
  return {s.strided ? 1 : 0, s.tp_size, s.tp_rank, s.local_rows, static_cast<int>(real)};
}

// --- memory ---

void* CudaOps::alloc(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = bytes == 0 ? kAllocGranularity
                                    : (bytes + kAllocGranularity - 1) / kAllocGranularity * kAllocGranularity;
  RS_CUDA_OP_MUST(cudaMalloc(&p, rounded));
  RS_CUDA_OP_MUST(cudaMemsetAsync(p, 0, rounded, stream_));
  allocations_[p] = rounded;
  allocated_bytes_ += rounded;
  if (allocated_bytes_ > peak_allocated_bytes_) peak_allocated_bytes_ = allocated_bytes_;
  return p;
}

// What scratch() will have grown to once a step of this shape has run (memory_estimate.h), slot by
// slot as the ops below and in cuda_ops_gemm.cpp / cuda_ops_attention.cpp ask for it. The cuBLASLt
// workspace is not counted: create() allocated it, so the device's free memory already excludes it.
size_t CudaOps::workspace_bytes(const WorkspaceShape& s) const {
  const size_t N = size_t(s.B) * size_t(s.T), C = size_t(s.C), Cl = size_t(s.Cl), Fl = 4 * Cl;
  const size_t Vl = size_t(s.Vl);
  size_t total = 0;
  if (s.attention == AttentionKind::kNaive) {
    const size_t heads = N * Cl;                 // (B,NH,T,hs) floats
    total += 2 * 4 * heads * sizeof(float);      // kAttentionHeads (q,k,v,y) + kAttentionGrads (dq,dk,dv,dy)
  }
  const bool bf16_gemms = options_.precision != CudaPrecision::kFp32 || s.activations == ActType::kBF16;
  if (bf16_gemms) {
    const size_t widest = std::max({Vl, Fl, 3 * Cl, C});
    // kGemmB: the weights (wte (Vl,C) the largest), and fp32 activations as the weight-gradient GEMM's B.
    size_t b_span = Vl * C;
    size_t a_span = 0;
    if (s.activations == ActType::kF32) {
      a_span = N * widest;                     // kGemmA: fp32 activations (the logits' gradient the largest)
      b_span = std::max(b_span, N * std::max(C, Fl));
    }
    total += (a_span + b_span) * 2;            // bf16
    total += s.parameters * 2;                 // the bf16 weight mirror AdamW refreshes
  }
  const size_t widest_bias = std::max({Fl, 3 * Cl, C});
  total += sizeof(float) * std::max(column_sums_scratch_floats(int(N), int(widest_bias)),
                                    layernorm_backward_scratch_floats(int(N), int(C)));  // kPartials
  total += embedding_backward_scratch_bytes(int(N), int(Vl));                           // kEmbeddingSort
  return total;
}

void CudaOps::release(void* ptr) {
  if (ptr == nullptr) return;
  auto it = allocations_.find(ptr);
  if (it != allocations_.end()) {
    allocated_bytes_ -= it->second;
    allocations_.erase(it);
  }
  RS_CUDA_OP_MUST(cudaStreamSynchronize(stream_));  // no op of ours may still use it
  if (ptr == weight_mirror_.base) {
    RS_CUDA_OP_MUST(cudaFree(weight_mirror_.copy));
    weight_mirror_ = WeightMirror{};
  }
  RS_CUDA_OP_MUST(cudaFree(ptr));
}

// --- the bf16 weight mirror (cuda_ops.h) ---

const void* CudaOps::mirrored_bf16(const float* p, int64_t span) const {
  const WeightMirror& m = weight_mirror_;
  if (!m.valid || p < m.base || span < 0 || p + span > m.base + m.count) return nullptr;
  return static_cast<const __nv_bfloat16*>(m.copy) + (p - m.base);
}

void CudaOps::refresh_weight_mirror(const float* params, size_t count) {
  WeightMirror& m = weight_mirror_;
  if (m.base != params || m.count < count) {
    RS_CUDA_OP_MUST(cudaStreamSynchronize(stream_));
    RS_CUDA_OP_MUST(cudaFree(m.copy));
    m = WeightMirror{};
    RS_CUDA_OP_MUST(cudaMalloc(&m.copy, count * sizeof(__nv_bfloat16)));
    m.base = params;
    m.count = count;
  }
  RS_CUDA_OP_MUST(launch_cast_to_bf16(static_cast<__nv_bfloat16*>(m.copy), params, m.count, stream_));
  m.valid = true;
}

void CudaOps::invalidate_weight_mirror(const void* dst, size_t bytes) {
  WeightMirror& m = weight_mirror_;
  const char* lo = static_cast<const char*>(dst);
  const char* base = reinterpret_cast<const char*>(m.base);
  if (m.valid && lo < base + m.count * sizeof(float) && lo + bytes > base) m.valid = false;
}

void CudaOps::fill_zero(void* ptr, size_t bytes) {
  invalidate_weight_mirror(ptr, bytes);
  RS_CUDA_OP_MUST(cudaMemsetAsync(ptr, 0, bytes, stream_));
}

void CudaOps::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  invalidate_weight_mirror(dst, bytes);
  RS_CUDA_OP_MUST(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  // The caller may reuse host_src as soon as we return.
  RS_CUDA_OP_MUST(cudaStreamSynchronize(stream_));
}

void CudaOps::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  RS_CUDA_OP_MUST(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  RS_CUDA_OP_MUST(cudaStreamSynchronize(stream_));
}

void CudaOps::copy(void* dst, const void* src, size_t bytes) {
  invalidate_weight_mirror(dst, bytes);
  RS_CUDA_OP_MUST(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

// --- embedding ---

int64_t CudaOps::embedding_lookup(ActPtr out, const int* ids, const float* wte_local, int N, int C,
                                  const VocabShardMap& shard) {
  if (out.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_embedding_lookup(act_bf16(out), owned_count_, ids, wte_local, N, C, shard_params(shard),
                                            stream_));
  } else {
    RS_CUDA_OP_MUST(launch_embedding_lookup(out.f32(), owned_count_, ids, wte_local, N, C, shard_params(shard),
                                            stream_));
  }
  int owned = 0;
  RS_CUDA_OP_MUST(cudaMemcpyAsync(&owned, owned_count_, sizeof(int), cudaMemcpyDeviceToHost, stream_));
  RS_CUDA_OP_MUST(cudaStreamSynchronize(stream_));
  return owned;
}

void CudaOps::add_position(ActPtr out, const float* wpe, int B, int T, int C) {
  if (out.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_add_position(act_bf16(out), wpe, B, T, C, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_add_position(out.f32(), wpe, B, T, C, stream_));
  }
}

void CudaOps::embedding_backward(float* dwte_local, float* dwpe, ConstActPtr dout, const int* ids, int B,
                                 int T, int C, const VocabShardMap& shard) {
  const size_t bytes = embedding_backward_scratch_bytes(B * T, shard.local_rows);
  auto buf = scratch(Scratch::kEmbeddingSort, bytes);
  RS_CUDA_OP_MUST(buf.status());
  if (dout.type() == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_embedding_backward(dwte_local, dwpe, act_bf16(dout), ids, B, T, C, shard_params(shard),
                                              *buf, bytes, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_embedding_backward(dwte_local, dwpe, dout.f32(), ids, B, T, C, shard_params(shard),
                                              *buf, bytes, stream_));
  }
}

// --- layernorm and residual: fp32 or bf16 activations, dispatched on the call's one ActType ---

void CudaOps::layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp, const float* weight,
                                const float* bias, int N, int C) {
  if (one_act_type("layernorm_forward", {out.type(), inp.type()}) == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_layernorm_forward(act_bf16(out), mean, rstd, act_bf16(inp), weight, bias, N, C, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_layernorm_forward(act_f32(out), mean, rstd, act_f32(inp), weight, bias, N, C, stream_));
  }
}

void CudaOps::residual_layernorm_forward(ActPtr residual_out, ActPtr ln_out, float* mean, float* rstd,
                                         ConstActPtr a, ConstActPtr b, const float* weight, const float* bias,
                                         int N, int C) {
  const ActType type =
      one_act_type("residual_layernorm_forward", {residual_out.type(), ln_out.type(), a.type(), b.type()});
  if (type == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_residual_layernorm_forward(act_bf16(residual_out), act_bf16(ln_out), mean, rstd, act_bf16(a),
                                                      act_bf16(b), weight, bias, N, C, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_residual_layernorm_forward(act_f32(residual_out), act_f32(ln_out), mean, rstd, act_f32(a), act_f32(b),
                                                      weight, bias, N, C, stream_));
  }
}

void CudaOps::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                 const float* weight, const float* mean, const float* rstd, int N, int C) {
  const ActType type = one_act_type("layernorm_backward", {dinp.type(), dout.type(), inp.type()});
  auto buf = scratch(Scratch::kPartials, sizeof(float) * layernorm_backward_scratch_floats(N, C));
  RS_CUDA_OP_MUST(buf.status());
  float* partials = static_cast<float*>(*buf);
  if (type == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_layernorm_backward(act_bf16(dinp), dweight, dbias, act_bf16(dout), act_bf16(inp),
                                              weight, mean, rstd, N, C, partials, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_layernorm_backward(act_f32(dinp), dweight, dbias, act_f32(dout), act_f32(inp),
                                              weight, mean, rstd, N, C, partials, stream_));
  }
}

// --- element-wise ---

// gelu_forward / gelu_backward: cuda_ops_gemm.cpp (also the GELU epilogues' fallback).
void CudaOps::residual_forward(ActPtr out, ConstActPtr a, ConstActPtr b, size_t n) {
  if (one_act_type("residual_forward", {out.type(), a.type(), b.type()}) == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_residual_forward(act_bf16(out), act_bf16(a), act_bf16(b), n, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_residual_forward(act_f32(out), act_f32(a), act_f32(b), n, stream_));
  }
}
void CudaOps::add_inplace(ActPtr acc, ConstActPtr x, size_t n) {
  if (one_act_type("add_inplace", {acc.type(), x.type()}) == ActType::kBF16) {
    RS_CUDA_OP_MUST(launch_add_inplace(act_bf16(acc), act_bf16(x), n, stream_));
  } else {
    RS_CUDA_OP_MUST(launch_add_inplace(act_f32(acc), act_f32(x), n, stream_));
  }
}
void CudaOps::scale(float* x, float s, size_t n) { RS_CUDA_OP_MUST(launch_scale(x, s, n, stream_)); }

// --- cross-entropy: cuda_ops_crossentropy.cpp ---

// --- optimizer and reductions ---

void CudaOps::adamw_update(float* params, const float* grads, float* m, float* v, size_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  // Bias corrections in double on the host, as the CPU oracle computes them.
  const float bc1 = 1.0f - static_cast<float>(std::pow(beta1, static_cast<double>(t)));
  const float bc2 = 1.0f - static_cast<float>(std::pow(beta2, static_cast<double>(t)));
  RS_CUDA_OP_MUST(launch_adamw(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2, stream_));
}

void CudaOps::adamw_update_segments(float* params, const float* grads, float* m, float* v, const AdamWSegment* segments,
                                    size_t n_segments, float lr, float beta1, float beta2, float eps,
                                    float weight_decay, int64_t t) {
  std::vector<AdamWChunk> chunks;
  for (size_t i = 0; i < n_segments; i++) {
    for (size_t done = 0; done < segments[i].numel; done += kAdamWChunkElements) {
      const size_t count = std::min<size_t>(kAdamWChunkElements, segments[i].numel - done);
      chunks.push_back({segments[i].offset + done, static_cast<uint32_t>(count), segments[i].decay ? 1u : 0u});
    }
  }
  const size_t bytes = chunks.size() * sizeof(AdamWChunk);
  auto table = scratch(Scratch::kAdamWChunks, bytes);
  if (!table.ok()) die_in_op(table.status(), __func__);
  // The same segments every step: upload the table once (scratch keeps it), again only if it changed.
  const char* raw = reinterpret_cast<const char*>(chunks.data());
  if (adamw_chunk_count_ != chunks.size() || !std::equal(raw, raw + bytes, adamw_chunks_host_.begin())) {
    RS_CUDA_OP_MUST(cudaMemcpyAsync(*table, chunks.data(), bytes, cudaMemcpyHostToDevice, stream_));
    RS_CUDA_OP_MUST(cudaStreamSynchronize(stream_));  // `chunks` is pageable host memory about to go
    adamw_chunks_host_.assign(raw, raw + bytes);
    adamw_chunk_count_ = chunks.size();
  }
  const float bc1 = 1.0f - static_cast<float>(std::pow(beta1, static_cast<double>(t)));
  const float bc2 = 1.0f - static_cast<float>(std::pow(beta2, static_cast<double>(t)));
  RS_CUDA_OP_MUST(launch_adamw_chunks(params, grads, m, v, static_cast<const AdamWChunk*>(*table), chunks.size(), lr,
                                      beta1, beta2, eps, weight_decay, bc1, bc2, stream_));
  // One cast of all the weights per step, instead of one per weight per GEMM call.
  if (bf16_gemms_seen_) {
    size_t covered = 0;
    for (size_t i = 0; i < n_segments; i++) covered = std::max(covered, segments[i].offset + segments[i].numel);
    refresh_weight_mirror(params, covered);
  }
}

rankscope::Status CudaOps::sum_impl(double* result, const float* x, size_t n, bool squares) {
  RS_CUDA_CHECK(launch_sum(sum_result_, x, n, squares, sum_partials_, stream_));
  RS_CUDA_CHECK(cudaMemcpyAsync(result, sum_result_, sizeof(double), cudaMemcpyDeviceToHost, stream_));
  RS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return rankscope::Status::ok_status();
}

double CudaOps::sum_squares(const float* x, size_t n) {
  double r = 0;
  RS_CUDA_OP_MUST(sum_impl(&r, x, n, true));
  return r;
}

double CudaOps::sum(const float* x, size_t n) {
  double r = 0;
  RS_CUDA_OP_MUST(sum_impl(&r, x, n, false));
  return r;
}

}  // namespace gpt2::cuda
