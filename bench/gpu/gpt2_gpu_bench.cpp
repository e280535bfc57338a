// gpt2_gpu_bench.cpp — GPT-2 training throughput on one GPU: tokens/s, MFU and peak GPU memory of full
// training steps (forward, backward, grad-norm clip, AdamW) through the model and the CUDA backend,
// with the probe off and on (interleaved rounds, so drift hits both), and the probe's overhead.
//
// Prints numbers; asserts nothing about speed. Without a usable device it prints one line saying
// why and exits 0 (ctest label `bench`). MFU counts 6*N + 6*L*C*T FLOPs per token (N parameters
// including the padded vocabulary; the attention term is PaLM's 12*L*C*T halved for the causal
// mask) against the device's dense peak: H100/H200 989 TFLOP/s for bf16 tensor cores and 67 TFLOP/s
// for fp32 (GEMMs of --precision fp32 are true fp32, not TF32); --peak-tflops overrides.
// --precision bf16 stores activations and their gradients in bf16 (fp32 master weights, AdamW state
// and reductions), as gpt2-train does on cuda; fp32 keeps everything fp32.
// Usage: gpt2_gpu_bench [--model d12] [--seq 1024] [--batch 0 (= largest that fits)] [--steps 20]
//                       [--warmup 3] [--rounds 2] [--precision bf16|fp32] [--attention flash|naive]
//                       [--probe off|on|both] [--run-dir DIR] [--peak-tflops X]
// Last line: the attention of one step timed alone (all layers' forwards and backwards of the same
// kind and shape, bench/gpu/attention_step_timing.h), so attention's share is read off directly.
// Is not: the comparison with llm.c (bench/gpu/compare_with_llmc.sh runs this beside its train_gpt2.cu).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "model/adamw.h"
#include "model/gpt2.h"
#include "attention_step_timing.h"
#include "model/memory_estimate.h"
#include "ops/cuda/cuda_backend.h"
#include "rankscope/probe/plugins.h"
#include "rankscope/probe/probe.h"

namespace {

using gpt2::GPT2;

struct Args {
  std::string model = "d12";
  int seq = 1024;
  int batch = 0;
  int steps = 20;
  int warmup = 3;
  int rounds = 2;
  std::string precision = "bf16";
  std::string attention = "flash";
  std::string probe = "both";
  std::string run_dir;
  double peak_tflops = 0;
};

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; i++) {
    std::string k = argv[i];
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--seq") a.seq = std::atoi(v.c_str());
    else if (k == "--batch") a.batch = std::atoi(v.c_str());
    else if (k == "--steps") a.steps = std::atoi(v.c_str());
    else if (k == "--warmup") a.warmup = std::atoi(v.c_str());
    else if (k == "--rounds") a.rounds = std::atoi(v.c_str());
    else if (k == "--precision") a.precision = v;
    else if (k == "--attention") a.attention = v;
    else if (k == "--probe") a.probe = v;
    else if (k == "--run-dir") a.run_dir = v;
    else if (k == "--peak-tflops") a.peak_tflops = std::atof(v.c_str());
    else return false;
  }
  return a.steps > 0 && a.seq > 0 && a.rounds > 0 && (a.probe == "off" || a.probe == "on" || a.probe == "both") &&
         (a.attention == "flash" || a.attention == "naive");
}

double gib(size_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

// Dense peak FLOP/s of the GEMM precision on this device, 0 when unknown.
double peak_flops(const gpt2::DeviceProbe& dev, gpt2::CudaPrecision p, double override_tflops) {
  if (override_tflops > 0) return override_tflops * 1e12;
  const bool hopper = dev.name.find("H100") != std::string::npos || dev.name.find("H200") != std::string::npos;
  const bool ampere = dev.name.find("A100") != std::string::npos;
  if (hopper) return p == gpt2::CudaPrecision::kBf16 ? 989.4e12 : 66.9e12;
  if (ampere) return p == gpt2::CudaPrecision::kBf16 ? 312e12 : 19.5e12;
  return 0;
}

// What the measured model is besides its shape: the same in the batch search and the timed run.
struct Variant {
  gpt2::AttentionKind attention = gpt2::AttentionKind::kFlash;
  gpt2::ActType activations = gpt2::ActType::kBF16;
};

GPT2::Options options_for(const gpt2::ModelConfig& config, int batch, int seq, const Variant& v) {
  GPT2::Options o;
  o.config = config;
  o.batch = batch;
  o.seq_len = seq;
  o.attention = v.attention;
  o.activations = v.activations;
  return o;
}

// Bytes the backend holds for a model of batch B (params, grads, activations), measured.
size_t measured_bytes(gpt2::Ops& ops, const gpt2::ModelConfig& config, int batch, int seq, const Variant& v) {
  const size_t before = gpt2::cuda_ops_memory(ops)->allocated_bytes;
  auto model = GPT2::create(options_for(config, batch, seq, v), ops, nullptr);
  if (!model.ok()) return 0;
  return gpt2::cuda_ops_memory(ops)->allocated_bytes - before;
}

// Largest batch of {64, 48, 32, 24, 16, 12, 8, 4, 2, 1} whose measured-and-extrapolated footprint
// (model at B=1 and B=2 give the per-sequence slope; plus AdamW moments and the backend's scratch:
// attention heads and bf16 GEMM operand copies) fits in 90% of the free memory.
int largest_batch(gpt2::Ops& ops, const gpt2::ModelConfig& config, int seq, size_t param_bytes, const Variant& v) {
  const size_t one = measured_bytes(ops, config, 1, seq, v), two = measured_bytes(ops, config, 2, seq, v);
  const size_t slope = two > one ? two - one : one;
  const size_t fixed = one > slope ? one - slope : 0;
  const size_t Vp = static_cast<size_t>(config.padded_vocab_size(1));
  const size_t scratch_per_seq = static_cast<size_t>(seq) * (32 * config.channels + 4 * Vp);
  const size_t free_bytes = gpt2::cuda_ops_memory(ops)->device_free_bytes;
  for (int b : {64, 48, 32, 24, 16, 12, 8, 4, 2, 1}) {
    const size_t need = fixed + 2 * param_bytes + b * (slope + scratch_per_seq);
    if (static_cast<double>(need) < 0.9 * static_cast<double>(free_bytes)) return b;
  }
  return 1;
}

struct Timing {
  double seconds = 0;
  int steps = 0;
};

// One training step; probe may be null (probe off).
bool train_step(GPT2& model, gpt2::AdamW& opt, gpt2::Ops& ops, const std::vector<int>& in,
                const std::vector<int>& tg, rankscope::probe::Probe* probe, int64_t step) {
  if (probe) probe->begin_step(step);
  model.params().zero_grads();
  auto stats = model.forward(in.data(), tg.data(), probe, /*backward_loss_scale=*/1.0f);  // fused classifier
  if (!stats.ok()) {
    std::fprintf(stderr, "forward: %s\n", stats.status().to_string().c_str());
    return false;
  }
  if (!model.backward(1.0f, {}, probe).ok()) return false;
  auto norm = gpt2::global_grad_norm(model.params(), ops, nullptr);
  if (!norm.ok()) return false;
  gpt2::clip_grads_to_norm(model.params(), ops, *norm, 1.0f);
  opt.step(6e-4f);
  if (!gpt2::cuda_ops_synchronize(ops).ok()) return false;
  if (probe) probe->end_step();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr, "usage: gpt2_gpu_bench [--model d12] [--seq 1024] [--batch 0] [--steps 20] [--warmup 3] "
                         "[--rounds 2] [--precision bf16|fp32] [--attention flash|naive] [--probe off|on|both] [--run-dir DIR] "
                         "[--peak-tflops X]\n");
    return 2;
  }
  const gpt2::DeviceProbe dev = gpt2::probe_cuda_device(0);
  if (!dev.usable) {
    std::printf("gpt2_gpu_bench: skipped: %s\n", dev.reason.c_str());
    return 0;
  }
  auto precision = gpt2::parse_cuda_precision(args.precision);
  auto config = gpt2::ModelConfig::preset(args.model);
  if (!precision.ok() || !config.ok()) {
    std::fprintf(stderr, "%s\n", (!precision.ok() ? precision.status() : config.status()).to_string().c_str());
    return 2;
  }
  auto ops_r = gpt2::make_cuda_ops({.device = 0, .precision = *precision});
  if (!ops_r.ok()) {
    std::fprintf(stderr, "make_cuda_ops: %s\n", ops_r.status().to_string().c_str());
    return 1;
  }
  gpt2::Ops& ops = **ops_r;
  const size_t n_params = [&] {
    gpt2::ParameterSet ps(*config, {}, ops);
    return ps.total_numel();
  }();
  Variant variant;
  variant.attention = args.attention == "naive" ? gpt2::AttentionKind::kNaive : gpt2::AttentionKind::kFlash;
  variant.activations = *precision == gpt2::CudaPrecision::kBf16 ? gpt2::ActType::kBF16 : gpt2::ActType::kF32;
  if (auto ok = gpt2::check_cuda_attention(variant.attention, config->head_size()); !ok.ok()) {
    std::fprintf(stderr, "%s\n", ok.to_string().c_str());
    return 2;
  }
  const int B = args.batch > 0 ? args.batch
                               : largest_batch(ops, *config, args.seq, n_params * sizeof(float), variant);
  const int T = args.seq;

  // The trainer's up-front estimate, printed beside what was measured so a GPU run
  // checks the CUDA backend's workspace_bytes() too.
  const auto estimate = gpt2::estimate_training_memory(options_for(*config, B, T, variant), ops);
  auto model_r = GPT2::create(options_for(*config, B, T, variant), ops, nullptr);
  if (!model_r.ok()) {
    std::fprintf(stderr, "model: %s\n", model_r.status().to_string().c_str());
    return 1;
  }
  GPT2& model = **model_r;
  if (!model.init_weights(1337).ok()) return 1;
  gpt2::AdamW opt(model.params(), ops, gpt2::AdamWConfig{0.9f, 0.95f, 1e-8f, 0.1f});

  std::unique_ptr<rankscope::probe::Probe> probe;
  if (args.probe != "off") {
    rankscope::probe::Options po;
    po.run_dir = args.run_dir.empty()
                     ? std::filesystem::temp_directory_path() / ("gpt2_gpu_bench." + std::to_string(::getpid()))
                     : std::filesystem::path(args.run_dir);
    auto p = rankscope::probe::Probe::create(po);
    if (!p.ok()) {
      std::fprintf(stderr, "probe: %s\n", p.status().to_string().c_str());
      return 1;
    }
    probe = std::move(p).value();
    rankscope::probe::attach_default_plugins(*probe);
  }

  std::mt19937 rng(42);
  std::uniform_int_distribution<int> tok(0, config->vocab_size - 1);
  std::vector<int> in(static_cast<size_t>(B) * T), tg(in.size());
  for (size_t i = 0; i < in.size(); i++) {
    in[i] = tok(rng);
    tg[i] = tok(rng);
  }

  int64_t step = 0;
  for (int i = 0; i < args.warmup; i++) {
    if (!train_step(model, opt, ops, in, tg, probe.get(), step++)) return 1;
  }
  Timing off, on;
  for (int r = 0; r < args.rounds; r++) {
    for (bool with_probe : {false, true}) {
      if (with_probe && args.probe == "off") continue;
      if (!with_probe && args.probe == "on") continue;
      Timing& t = with_probe ? on : off;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < args.steps; i++) {
        if (!train_step(model, opt, ops, in, tg, with_probe ? probe.get() : nullptr, step++)) return 1;
      }
      t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      t.steps += args.steps;
    }
  }

  const auto mem = *gpt2::cuda_ops_memory(ops);
  const double flops_per_token = 6.0 * static_cast<double>(n_params) +
                                 6.0 * config->num_layers * config->channels * static_cast<double>(T);
  const double peak = peak_flops(dev, *precision, args.peak_tflops);
  std::printf("gpt2_gpu_bench: %s | %s T=%d B=%d precision=%s activations=%s attention=%s | %.1fM parameters\n",
              dev.reason.c_str(), args.model.c_str(), T, B, args.precision.c_str(),
              gpt2::act_type_name(variant.activations), gpt2::attention_kind_name(variant.attention),
              static_cast<double>(n_params) / 1e6);
  auto report = [&](const char* label, const Timing& t) {
    if (t.steps == 0) return 0.0;
    const double tps = static_cast<double>(B) * T * t.steps / t.seconds;
    std::printf("  probe %-3s: %10.0f tokens/s  %7.2f ms/step  MFU %s\n", label, tps, 1e3 * t.seconds / t.steps,
                peak > 0 ? (std::to_string(100.0 * tps * flops_per_token / peak).substr(0, 5) + "%").c_str()
                         : "n/a (unknown peak; pass --peak-tflops)");
    return tps;
  };
  const double tps_off = report("off", off), tps_on = report("on", on);
  if (tps_off > 0 && tps_on > 0) {
    std::printf("  probe overhead: %+.2f%% tokens/s (budget: <= 1%%)\n", 100.0 * (tps_off - tps_on) / tps_off);
  }
  std::printf("  peak memory: %.2f GiB allocated by the model (params, grads, moments, activations) + %.2f GiB "
              "backend scratch; device in use %.2f GiB (incl. context and cuBLASLt workspace)\n",
              gib(mem.peak_allocated_bytes), gib(mem.scratch_bytes), gib(mem.device_used_bytes));
  const gpt2::bench::AttentionShape attention{B, T, config->channels, config->num_heads, config->num_layers};
  const auto attention_ms = gpt2::bench::attention_ms_per_step(ops, variant.attention, variant.activations, attention, 5);
  if (attention_ms.ok()) {
    std::printf("  attention alone: %.2f ms/step (forward + backward, %d layers; %.1f TFLOP/s)\n", *attention_ms,
                attention.layers, gpt2::bench::attention_step_flops(attention) / (*attention_ms * 1e-3) / 1e12);
  } else {
    std::printf("  attention alone: n/a (%s)\n", attention_ms.status().to_string().c_str());
  }
  if (estimate.ok()) {
    std::printf("  memory estimate: %.2f GiB allocated by the model + %.2f GiB backend scratch (measured: %.2f + %.2f)\n",
                gib(estimate->total() - estimate->backend_workspace), gib(estimate->backend_workspace),
                gib(mem.peak_allocated_bytes), gib(mem.scratch_bytes));
  }
  return 0;
}
