// probe_gpu_test.cpp — on a machine with a GPU (ctest label `gpu`; skips without one): CUPTI
// kernel timing lands on the range open at launch, and a CUDA-event CompletionSource completes an
// asynchronous collective when the GPU is done.
#include <cuda_runtime.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/cuda_event_completion.h"
#include "rankscope/probe/cupti_kernel_tracer.h"

namespace rankscope::probe::testing {
cudaError_t launch_spin_kernel(cudaStream_t stream, long long cycles);
}

namespace rankscope::probe {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(ProbeGpu, CuptiKernelTimeIsAttributedToTheLaunchingRange) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  testing::ScratchDir dir;
  Options o = testing::test_options(dir.path());
  o.trace_step_begin = 0;
  o.trace_step_end = 0;
  auto created = Probe::create(o);
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  Status started = probe.set_kernel_tracer(make_cupti_kernel_tracer());
  ASSERT_TRUE(started.ok()) << started.to_string();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  probe.begin_step(0);
  {
    ScopedRange r(&probe, "forward/block0/mlp");
    ASSERT_EQ(testing::launch_spin_kernel(stream, 1'000'000), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  probe.end_step();
  probe.shutdown();
  cudaStreamDestroy(stream);

  auto es = format::read_event_stream(format::event_stream_path(dir.path(), 0));
  ASSERT_TRUE(es.ok());
  ASSERT_EQ(es->steps.size(), 1u);
  int64_t kernel_ns = 0;
  for (const auto& r : es->steps[0].ranges)
    if (es->name(r.name_id) == "forward/block0/mlp") kernel_ns = r.kernel_ns;
  EXPECT_GT(kernel_ns, 0);
  ASSERT_EQ(es->traces.size(), 1u);
  ASSERT_FALSE(es->traces[0].kernels.empty());
  const format::TraceKernel& k = es->traces[0].kernels[0];
  EXPECT_NE(es->name(k.name_id).find("rankscope_test_spin_kernel"), std::string_view::npos) << es->name(k.name_id);
  EXPECT_EQ(es->name(k.range_id), "forward/block0/mlp");
  // Converted to the probe clock: inside the step.
  EXPECT_GE(k.begin_ns, es->steps[0].begin_ns);
  EXPECT_LE(k.end_ns, es->steps[0].end_ns);
}

TEST(ProbeGpu, CudaEventCompletesAnAsynchronousCollective) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  testing::ScratchDir dir;
  auto created = Probe::create(testing::test_options(dir.path()));
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  CommHandle tp = probe.register_comm("tp0", 1, 0);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllReduceSum;
  CollectiveHandle h = probe.collective_enqueue(tp, d);
  ASSERT_EQ(testing::launch_spin_kernel(stream, 200'000'000), cudaSuccess);  // ~0.1 s of "NCCL"
  auto source = make_cuda_event_completion(stream);
  ASSERT_TRUE(source.ok()) << source.status().to_string();
  probe.collective_complete_when(h, std::move(*source));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  format::CollectiveState state = format::CollectiveState::kEmpty;
  while (std::chrono::steady_clock::now() < deadline) {
    auto fr = format::read_flight_recorder(format::flight_recorder_path(dir.path(), 0));
    ASSERT_TRUE(fr.ok());
    const format::CommSnapshot* c = fr->comm("tp0");
    state = c && c->last() ? c->last()->state : format::CollectiveState::kEmpty;
    if (state == format::CollectiveState::kCompleted) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(state, format::CollectiveState::kCompleted);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace rankscope::probe
