// skew_gpu_fake_run.cpp — see skew_gpu_fake_run.h. Writes through the format library's own writer.
//
// One step, ms from its begin (both ranks; rank 1 differs where two values are given):
//   host ranges: data 0-1, forward/block0/attn 1-2, forward/block1/attn 2-3, forward/block0/mlp 3-5,
//     backward/block1/attn 5-6, backward/block0/attn 6-7, grad_sync 7-95 (dp0 all-reduce called at
//     7.2, done at 94.8: the host waits there for the GPU), optimizer 95-97.
//   kernels (traced steps; stream 7 unless said):
//     flash_forward      forward/block0/attn   2-12
//     flash_forward      forward/block1/attn  12-22
//     gelu_forward       forward/block0/mlp   22-37
//     (idle 37-40)
//     nvjet_gemm         no range             40-50   (cuBLASLt: its launch is not seen)
//     flash_backward     backward/block1/attn 50-65 | 50-68
//     dbias (stream 9)   backward/block1/attn 52-62   (concurrent, nested: no extra busy time)
//     flash_backward     backward/block0/attn 65-80 | 68-86
//     ncclDevKernel_…    grad_sync (stream 11) 80-92 | 86-92   (78-92 on rank 0 with nccl_overlaps_compute)
//     (idle 92-94)
//     adamw              optimizer            94-97
//     (idle 97-100)
// So rank 0: busy 90 = compute 78 + transfer 12, idle 10; rank 1: compute 84 + transfer 6, idle 10.
#include "skew_gpu_fake_run.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rankscope/format/event_stream.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/format/run_metadata.h"

namespace rankscope::testing {
namespace {

namespace fs = std::filesystem;
using format::NameKind;

constexpr int64_t kGpuStartNs = 1'700'000'000'000'000'000;
constexpr int64_t kRank1OffsetNs = 2'500'000'000;  // rank 1's clock + this = rank 0's
int64_t ms(double v) { return int64_t(v * 1e6 + 0.5); }

struct HostRange {
  const char* name;
  double begin, end;
};
constexpr HostRange kHostRanges[] = {
    {"data", 0, 1},           {"forward/block0/attn", 1, 2},  {"forward/block1/attn", 2, 3},
    {"forward/block0/mlp", 3, 5}, {"backward/block1/attn", 5, 6}, {"backward/block0/attn", 6, 7},
    {"grad_sync", 7, 95},     {"optimizer", 95, 97},
};

struct Kernel {
  const char* name;
  const char* range;  // nullptr: launched outside every range
  uint32_t stream;
  double begin, end;
};

std::vector<Kernel> kernels_of(int rank, const GpuFakeRunSpec& spec) {
  const bool r1 = rank == 1;
  const double nccl_begin = r1 ? 86 : (spec.nccl_overlaps_compute ? 78 : 80);
  std::vector<Kernel> kernels = {
      {"flash_forward_kernel<__nv_bfloat16, 64>", "forward/block0/attn", 7, 2, 12},
      {"flash_forward_kernel<__nv_bfloat16, 64>", "forward/block1/attn", 7, 12, 22},
      {"gelu_forward_kernel<__nv_bfloat16>", "forward/block0/mlp", 7, 22, 37},
      {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", nullptr, 7, 40, 50},
      {"flash_backward_kernel<__nv_bfloat16, 64>", "backward/block1/attn", 7, 50, r1 ? 68.0 : 65.0},
      {"dbias_kernel<__nv_bfloat16>", "backward/block1/attn", 9, 52, 62},
      {"flash_backward_kernel<__nv_bfloat16, 64>", "backward/block0/attn", 7, r1 ? 68.0 : 65.0, r1 ? 86.0 : 80.0},
      {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "grad_sync", 11, nccl_begin, 92},
      {"adamw_kernel", "optimizer", 7, 94, 97},
  };
  if (spec.memcpys) {
    kernels.push_back({"Memcpy HtoD (Pinned -> Device)", "optimizer", 7, 92, 94});
    kernels.push_back({"[CUDA memset]", "grad_sync", 12, 88, 90});
  }
  return kernels;
}

}  // namespace

void write_gpu_fake_run(const fs::path& dir, const GpuFakeRunSpec& spec) {
  fs::create_directories(dir);
  format::RunMetadata meta;
  meta.run_id = "gpu-kernels";
  meta.created_ns = kGpuStartNs;
  meta.program = "skew_gpu_fake_run";
  meta.world_size = 2;
  meta.tp = 1;
  meta.dp = 2;
  meta.groups = {{"dp0", {0, 1}}, {"world", {0, 1}}};
  meta.training = {{"device", "cuda"}, {"precision", "bf16"}, {"comm", "nccl"}};
  if (auto st = format::write_run_metadata(dir, meta); !st.ok()) throw std::runtime_error(st.to_string());

  for (int rank = 0; rank < 2; ++rank) {
    format::EventStreamHeader h;
    h.rank = rank;
    h.world_size = 2;
    h.created_ns = kGpuStartNs;
    h.run_id = meta.run_id;
    auto created = format::EventStreamWriter::create(format::event_stream_path(dir, rank), h);
    if (!created.ok()) throw std::runtime_error(created.status().to_string());
    format::EventStreamWriter& w = **created;
    const int64_t offset = rank == 1 ? kRank1OffsetNs : 0;
    w.write_clock({offset, 20'000, kGpuStartNs - offset, 16, 0});
    const uint32_t dp0 = w.intern(NameKind::kComm, "dp0");
    for (int64_t step = 1; step <= spec.steps; ++step) {
      const int64_t begin = kGpuStartNs + (step - 1) * ms(GpuFakeRunFacts::kStepMs) - offset;  // own clock
      format::StepRecord rec;
      rec.step = step;
      rec.begin_ns = begin;
      rec.end_ns = begin + ms(GpuFakeRunFacts::kStepMs);
      for (const HostRange& r : kHostRanges) {
        rec.ranges.push_back({w.intern(NameKind::kRange, r.name), 1, ms(r.end - r.begin), 0});
      }
      format::CollectiveEvent c{};
      c.comm_id = dp0;
      c.op = uint8_t(format::CollectiveOp::kAllReduceSum);
      c.dtype = uint8_t(format::DataType::kFloat32);
      c.state = uint8_t(format::CollectiveState::kCompleted);
      c.range_id = w.intern(NameKind::kRange, "grad_sync");
      c.seq = uint64_t(step - 1);
      c.bytes = 4 << 20;
      c.enqueue_ns = begin + ms(7.2);
      c.start_ns = c.enqueue_ns;
      c.end_ns = begin + ms(94.8);
      rec.collectives.push_back(c);
      w.write_step(rec);
      if (step < spec.trace_first || step > spec.trace_last) continue;
      std::vector<format::TraceKernel> traced;
      for (const Kernel& k : kernels_of(rank, spec)) {
        format::TraceKernel t{};
        t.name_id = w.intern(NameKind::kKernel, k.name);
        t.range_id = k.range ? w.intern(NameKind::kRange, k.range) : 0;
        t.stream = k.stream;
        t.device = 0;
        t.begin_ns = begin + ms(k.begin) - (std::string_view(k.name).rfind("gelu", 0) == 0 ? spec.gelu_starts_early_ns : 0);
        t.end_ns = begin + ms(k.end);
        traced.push_back(t);
      }
      w.write_trace_kernels(step, traced);
    }
    w.write_end(kGpuStartNs + spec.steps * ms(GpuFakeRunFacts::kStepMs) - offset);
    if (auto st = w.flush(); !st.ok()) throw std::runtime_error(st.to_string());
  }
}

}  // namespace rankscope::testing
