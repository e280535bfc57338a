// skew_gpu_fake_run.h — a small GPU-like run directory with kernel records, for the device-timeline
// skew tests and the checked-in fixture tests/fixtures/analyzers/skew_gpu_kernels.
//
// Is: two ranks on one DP group whose host returns from every range at launch (ranges of 1-2 ms)
// and then waits in grad_sync's all-reduce for the GPU's backlog, as a CUDA trainer does; steps in
// the capture window carry the kernels the GPU really ran: per range, a nested kernel on a second
// stream, an NCCL kernel, a GEMM launched outside every range, and idle gaps. Times are chosen so
// every figure of the device breakdown is a round number (see GpuFakeRunFacts). Is not: the
// lock-step CPU simulator (skew_fake_run.h) or a model of real training.
#pragma once

#include <cstdint>
#include <filesystem>

namespace rankscope::testing {

struct GpuFakeRunSpec {
  int64_t steps = 4;                     // steps 1..steps, 100 ms of wall time each
  int64_t trace_first = 2, trace_last = 3;
  bool nccl_overlaps_compute = false;    // rank 0's NCCL kernel starts 2 ms before the backward kernel ends
  int64_t gelu_starts_early_ns = 0;      // the gelu kernel starts this much before the one it follows ends
  // Adds a memcpy in the idle gap 92-94 (Kineto's name) and a memset on stream 12 at 88-90 beside the
  // NCCL kernel (nsys's name): each rank then has memcpy 4, transfer 2 less, idle 2 less.
  bool memcpys = false;
};

// What the device timeline of a traced step holds, per rank (ms); see the .cpp for the kernels.
struct GpuFakeRunFacts {
  static constexpr double kStepMs = 100;
  static constexpr double kComputeMs[2] = {78, 84};   // some non-NCCL kernel running
  static constexpr double kTransferMs[2] = {12, 6};   // only the NCCL kernel running
  static constexpr double kIdleMs[2] = {10, 10};      // no kernel: the GPU waited for the host
  static constexpr double kKernelMs[2] = {100, 100};  // every kernel's time summed
  static constexpr double kOutsideMs = 10;            // the GEMM launched outside every range
  // backward/block*/attn: two blocks, two streams; the time some kernel of it runs (50-80 | 50-86),
  // a union: the nested dbias kernel adds nothing (the kernels summed are 40 | 46).
  static constexpr double kBackwardAttnMs[2] = {30, 36};
  static constexpr double kHostTransferMinMs = 80;    // what host time books on grad_sync's all-reduce
};

// Writes run.json and rank0000{0,1}.events into `dir` (created). Rank 1's clock runs 2.5 s behind
// rank 0's (its CLOCK record says so), so the analyzers must not mix clocks.
void write_gpu_fake_run(const std::filesystem::path& dir, const GpuFakeRunSpec& spec = {});

}  // namespace rankscope::testing
