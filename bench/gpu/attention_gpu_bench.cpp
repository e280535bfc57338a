// attention_gpu_bench.cpp — causal attention alone on one GPU, one training step's worth (forward
// of every layer, then backward of every layer): ms per step and TFLOP/s (FlashAttention's FLOP
// convention) for flash on tensor cores, the scalar flash kernels and naive, with bf16 activations.
// Default shape: GPT-2 d12 (C 768, 12 heads of 64, 12 layers), B=16, T=1024: the budget of
// design.md §4 is <= 6 ms a step there.
// Usage: attention_gpu_bench [--batch 16] [--seq 1024] [--channels 768] [--heads 12] [--layers 12]
//                            [--reps 10]
// Prints numbers; asserts nothing. Without a usable device it prints why and exits 0 (label bench).
// Is not: a correctness test (tests/gpu/cuda_flash_attention_test.cpp).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "attention_step_timing.h"
#include "ops/cuda/cuda_backend.h"

namespace {

struct Args {
  gpt2::bench::AttentionShape shape{16, 1024, 768, 12, 12};
  int reps = 10;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--batch") a.shape.B = v;
    else if (k == "--seq") a.shape.T = v;
    else if (k == "--channels") a.shape.C = v;
    else if (k == "--heads") a.shape.NH = v;
    else if (k == "--layers") a.shape.layers = v;
    else if (k == "--reps") a.reps = v;
    else return false;
  }
  return argc % 2 == 1 && a.shape.B > 0 && a.shape.T > 0 && a.shape.NH > 0 && a.shape.C % a.shape.NH == 0 &&
         a.shape.layers > 0 && a.reps > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr, "usage: attention_gpu_bench [--batch 16] [--seq 1024] [--channels 768] [--heads 12] "
                         "[--layers 12] [--reps 10]\n");
    return 2;
  }
  const gpt2::DeviceProbe dev = gpt2::probe_cuda_device(0);
  if (!dev.usable) {
    std::printf("attention_gpu_bench: skipped: %s\n", dev.reason.c_str());
    return 0;
  }
  const auto& s = args.shape;
  std::printf("attention_gpu_bench: %s | B=%d T=%d C=%d heads=%d (head size %d) layers=%d, bf16, causal\n",
              dev.reason.c_str(), s.B, s.T, s.C, s.NH, s.C / s.NH, s.layers);
  struct Row {
    const char* name;
    gpt2::AttentionKind kind;
    bool tensor_cores;
  };
  for (const Row& row : {Row{"flash, tensor cores", gpt2::AttentionKind::kFlash, true},
                         Row{"flash, scalar kernels", gpt2::AttentionKind::kFlash, false},
                         Row{"naive", gpt2::AttentionKind::kNaive, true}}) {
    gpt2::CudaOpsOptions options;
    options.precision = gpt2::CudaPrecision::kBf16;
    options.attention_tensor_cores = row.tensor_cores;
    auto ops = gpt2::make_cuda_ops(options);
    if (!ops.ok()) {
      std::fprintf(stderr, "make_cuda_ops: %s\n", ops.status().to_string().c_str());
      return 1;
    }
    if (auto ok = gpt2::check_cuda_attention(row.kind, s.C / s.NH); !ok.ok()) {
      std::printf("  %-22s: n/a (%s)\n", row.name, ok.to_string().c_str());
      continue;
    }
    const auto ms = gpt2::bench::attention_ms_per_step(**ops, row.kind, gpt2::ActType::kBF16, s, args.reps);
    if (!ms.ok()) {
      std::printf("  %-22s: n/a (%s)\n", row.name, ms.status().to_string().c_str());
      continue;
    }
    std::printf("  %-22s: %8.2f ms/step (fwd+bwd, %d layers)  %6.1f TFLOP/s\n", row.name, *ms, s.layers,
                gpt2::bench::attention_step_flops(s) / (*ms * 1e-3) / 1e12);
  }
  return 0;
}
