// probe_gpu_test.cpp — on a machine with a GPU (ctest label `gpu`; skips without one): CUPTI
// kernel timing lands on the range open at launch, whoever launches (runtime <<<>>>, the driver's
// cuLaunchKernel/cuLaunchKernelEx as cuBLASLt and cuDNN do, a CUDA graph launch), kernels launched
// outside every range are counted as such, and a CUDA-event CompletionSource completes an
// asynchronous collective when the GPU is done.
#include <cuda.h>  // driver types only: the entry points come from the runtime, no libcuda link
#include <cuda_runtime.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/format/event_stream.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/kernel_counters.h"
#include "rankscope/format/run_directory_layout.h"
#include "rankscope/probe/cuda_event_completion.h"
#include "rankscope/probe/cupti_kernel_tracer.h"

namespace rankscope::probe::testing {
cudaError_t launch_spin_kernel(cudaStream_t stream, long long cycles);
const void* spin_kernel_symbol();
}

namespace rankscope::probe {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(ProbeGpu, CuptiKernelTimeIsAttributedToTheLaunchingRange) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  testing::KernelTracedRun<> run(make_cupti_kernel_tracer());
  ASSERT_NE(run.probe, nullptr);
  Probe& probe = *run.probe;
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

  auto es = format::read_event_stream(format::event_stream_path(run.dir.path(), 0));
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

// A driver entry point through the runtime, so the test needs no link to libcuda.
template <class Fn>
Fn driver_entry_point(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

TEST(ProbeGpu, DriverApiAndGraphLaunchesLandInTheRangeOpenAtLaunch) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  using LaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**);
  using LaunchKernelEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
  auto cu_launch_kernel = driver_entry_point<LaunchKernel>("cuLaunchKernel");
  auto cu_launch_kernel_ex = driver_entry_point<LaunchKernelEx>("cuLaunchKernelEx");
  ASSERT_NE(cu_launch_kernel, nullptr);
  ASSERT_NE(cu_launch_kernel_ex, nullptr);
  cudaFunction_t spin_function = nullptr;
  ASSERT_EQ(cudaGetFuncBySymbol(&spin_function, testing::spin_kernel_symbol()), cudaSuccess);
  CUfunction spin = reinterpret_cast<CUfunction>(spin_function);

  testing::KernelTracedRun<> run(make_cupti_kernel_tracer());
  ASSERT_NE(run.probe, nullptr);
  Probe& probe = *run.probe;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // A graph of three kernels, captured outside every range: its kernels belong to the range open
  // when the graph is launched, since they all carry that launch's correlation id.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graph_exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(testing::launch_spin_kernel(stream, 10'000), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&graph_exec, graph, 0), cudaSuccess);

  long long cycles = 10'000;
  void* args[] = {&cycles};
  probe.begin_step(0);
  {
    ScopedRange r(&probe, "forward/block0/attn/qkv");
    ASSERT_EQ(cu_launch_kernel(spin, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(stream), args, nullptr),
              CUDA_SUCCESS);
  }
  {
    ScopedRange r(&probe, "forward/block0/mlp/fc");
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = reinterpret_cast<CUstream>(stream);
    ASSERT_EQ(cu_launch_kernel_ex(&config, spin, args, nullptr), CUDA_SUCCESS);
  }
  {
    ScopedRange r(&probe, "optimizer");
    ASSERT_EQ(cudaGraphLaunch(graph_exec, stream), cudaSuccess);
  }
  ASSERT_EQ(testing::launch_spin_kernel(stream, 10'000), cudaSuccess);  // no range open
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  probe.end_step();
  probe.shutdown();
  cudaGraphExecDestroy(graph_exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);

  auto es = format::read_event_stream(format::event_stream_path(run.dir.path(), 0));
  ASSERT_TRUE(es.ok());
  ASSERT_EQ(es->steps.size(), 1u);
  ASSERT_EQ(es->traces.size(), 1u);
  std::map<std::string, int> kernels_in;  // range name ("" none) -> kernels
  for (const format::TraceKernel& k : es->traces[0].kernels) {
    kernels_in[k.range_id ? std::string(es->name(k.range_id)) : std::string()]++;
  }
  EXPECT_EQ(kernels_in["forward/block0/attn/qkv"], 1) << "cuLaunchKernel";
  EXPECT_EQ(kernels_in["forward/block0/mlp/fc"], 1) << "cuLaunchKernelEx";
  EXPECT_EQ(kernels_in["optimizer"], 3) << "cudaGraphLaunch of three kernels";
  EXPECT_EQ(kernels_in[""], 1) << "the launch outside every range";
  std::map<std::string, int64_t> kernel_ns;
  for (const auto& r : es->steps[0].ranges) kernel_ns[std::string(es->name(r.name_id))] = r.kernel_ns;
  EXPECT_GT(kernel_ns["forward/block0/attn/qkv"], 0);
  EXPECT_GT(kernel_ns["forward/block0/mlp/fc"], 0);
  EXPECT_GT(kernel_ns["optimizer"], 0);
  std::map<std::string, double> counters;
  for (const auto& c : es->steps[0].counters) counters[std::string(es->name(c.name_id))] = c.value;
  EXPECT_GT(counters[std::string(format::kKernelNsOutsideRangesCounter)], 0.0);
  EXPECT_EQ(counters[std::string(format::kKernelNsNoLaunchSeenCounter)], 0.0);
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
