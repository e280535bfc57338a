// device_path_test.cpp — the GPU path's logic, tested without a GPU: the --device/--comm/--precision
// decision for every machine shape (DevicePlan over fake device probes), host staging of device
// buffers for ranks that share a GPU (over a fake "device" arena and the CPU ops' copies), the
// asynchronous completion seam a stream-ordered backend hands the probe (read back from a real
// flight recorder), and the gpu-stall fault's parsing and its device hook.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "comm/host_staging_communicator.h"
#include "comm/loopback_communicator.h"
#include "comm/probed_communicator.h"
#include "faults/fault_injector.h"
#include "faults/fault_spec.h"
#include "ops/cpu/cpu_ops.h"
#include "rankscope/format/flight_recorder_reader.h"
#include "rankscope/format/run_directory_layout.h"
#include "train/device_plan.h"
#include "train/train_options.h"

namespace gpt2 {
namespace {

// ---------------------------------------------------------------- device plan

DeviceProbe no_gpu() {
  DeviceProbe p;
  p.built_with_cuda = true;
  p.reason = "no CUDA device (cudaGetDeviceCount: insufficient driver)";
  return p;
}

DeviceProbe gpus(int count) {
  DeviceProbe p;
  p.usable = true;
  p.built_with_cuda = true;
  p.device_count = count;
  p.device = 0;
  p.name = "NVIDIA H100 80GB HBM3";
  p.reason = "cuda device 0 of 1: NVIDIA H100 80GB HBM3";
  return p;
}

HostPlacement on_host(int local_rank, int local_size) {
  return {local_rank, local_size, local_size, /*has_mpi=*/true};
}

TEST(DevicePlan, AutoFallsBackToCpuAndSaysWhyInOneLine) {
  auto plan = plan_device({}, no_gpu(), on_host(0, 2));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_FALSE(plan->cuda);
  EXPECT_EQ(plan->comm, CommBackend::kMpi);
  EXPECT_FALSE(plan->host_staging);
  EXPECT_NE(plan->device_line.find("cpu"), std::string::npos);
  EXPECT_NE(plan->device_line.find("insufficient driver"), std::string::npos);
  EXPECT_EQ(plan->device_line.find("CUPTI"), std::string::npos);
  EXPECT_EQ(plan->device_line.find('\n'), std::string::npos);
}

TEST(DevicePlan, AutoTakesTheGpuWithBf16AndNcclWhenEachRankHasOne) {
  auto plan = plan_device({}, gpus(8), on_host(5, 8));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->cuda);
  EXPECT_EQ(plan->device_index, 5);
  EXPECT_EQ(plan->precision, CudaPrecision::kBf16);
  EXPECT_EQ(plan->comm, CommBackend::kNccl);
  EXPECT_NE(plan->device_line.find("H100"), std::string::npos);
  EXPECT_NE(plan->device_line.find("bf16"), std::string::npos);
  EXPECT_NE(plan->comm_line.find("nccl"), std::string::npos);
}

TEST(DevicePlan, RanksSharingOneGpuUseMpiWithHostStaging) {
  // 4 ranks on one H100 (TP2xDP2 on a single-GPU machine): NCCL would refuse duplicate devices.
  auto plan = plan_device({"auto", "auto", "fp32"}, gpus(1), on_host(3, 4));
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->cuda);
  EXPECT_EQ(plan->device_index, 0);  // LOCAL_RANK % device_count
  EXPECT_EQ(plan->precision, CudaPrecision::kFp32);
  EXPECT_EQ(plan->comm, CommBackend::kMpi);
  EXPECT_TRUE(plan->host_staging);
  EXPECT_NE(plan->comm_line.find("4 ranks on this host share 1 GPU"), std::string::npos) << plan->comm_line;
}

TEST(DevicePlan, AttentionAutoIsFlashOnTheGpuAndTheCpuDefaultOnTheCpu) {
  EXPECT_EQ(plan_device({}, gpus(1), on_host(0, 1))->attention, AttentionKind::kFlash);
  EXPECT_EQ(plan_device({}, no_gpu(), on_host(0, 1))->attention, kCpuDefaultAttention);
  EXPECT_EQ(plan_device({"cuda", "auto", "auto", "naive"}, gpus(1), on_host(0, 1))->attention, AttentionKind::kNaive);
  EXPECT_EQ(plan_device({"cpu", "auto", "auto", "flash"}, gpus(1), on_host(0, 1))->attention, AttentionKind::kFlash);
  EXPECT_EQ(plan_device({"cpu", "auto", "auto", "naive"}, gpus(1), on_host(0, 1))->attention, AttentionKind::kNaive);
  auto bad = plan_device({"cpu", "auto", "auto", "fused"}, gpus(1), on_host(0, 1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("attention"), std::string::npos) << bad.status().to_string();
  // Flash on the GPU has kernels for some head sizes only; the refusal names the way out.
  EXPECT_TRUE(check_cuda_attention(AttentionKind::kFlash, 64).ok());
  EXPECT_NE(check_cuda_attention(AttentionKind::kFlash, 48).message().find("--attention naive"), std::string::npos);
}

TEST(DevicePlan, ImpossibleRequestsAreClearErrors) {
  auto cuda_without_gpu = plan_device({"cuda", "auto", "auto"}, no_gpu(), on_host(0, 1));
  ASSERT_FALSE(cuda_without_gpu.ok());
  EXPECT_NE(cuda_without_gpu.status().message().find("insufficient driver"), std::string::npos);

  auto nccl_on_cpu = plan_device({"cpu", "nccl", "auto"}, gpus(1), on_host(0, 1));
  ASSERT_FALSE(nccl_on_cpu.ok());
  EXPECT_NE(nccl_on_cpu.status().message().find("--device cuda"), std::string::npos);

  auto bf16_on_cpu = plan_device({"cpu", "auto", "bf16"}, gpus(1), on_host(0, 1));
  ASSERT_FALSE(bf16_on_cpu.ok());

  auto nccl_shared = plan_device({"cuda", "nccl", "auto"}, gpus(1), on_host(1, 2));
  ASSERT_FALSE(nccl_shared.ok());
  EXPECT_NE(nccl_shared.status().message().find("--comm mpi"), std::string::npos);

  EXPECT_FALSE(plan_device({"tpu", "auto", "auto"}, gpus(1), on_host(0, 1)).ok());
}

TEST(DevicePlan, PlacementCountsRanksPerHost) {
  const std::vector<std::string> hosts = {"a", "a", "b", "a", "b"};
  HostPlacement p3 = placement_from_hosts(hosts, 3, true);
  EXPECT_EQ(p3.local_rank, 2);
  EXPECT_EQ(p3.local_size, 3);
  EXPECT_EQ(p3.world_size, 5);
  HostPlacement p4 = placement_from_hosts(hosts, 4, true);
  EXPECT_EQ(p4.local_rank, 1);
  EXPECT_EQ(p4.local_size, 2);
}

TEST(TrainOptions, DeviceCommPrecisionAndProfileSteps) {
  const char* ok_argv[] = {"gpt2-train", "--device", "cuda", "--comm", "mpi", "--precision", "bf16",
                           "--profile-steps", "3-5"};
  auto o = parse_train_options(9, ok_argv);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->device, "cuda");
  EXPECT_EQ(o->comm, "mpi");
  EXPECT_EQ(o->precision, "bf16");
  EXPECT_EQ(o->profile_steps, "3-5");
  const char* bad_device[] = {"gpt2-train", "--device", "gpu"};
  auto bad = parse_train_options(3, bad_device);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto, cpu, cuda"), std::string::npos) << bad.status().message();
  const char* bad_window[] = {"gpt2-train", "--profile-steps", "5-3"};
  EXPECT_FALSE(parse_train_options(3, bad_window).ok());
}

// ---------------------------------------------------------------- host staging

// A host-memory backend for one rank that pretends its peers hold 1s: all-reduce adds 1, all-gather
// appends a block of 7s for a second rank. It remembers the pointers it was handed.
class RecordingHostComm final : public Communicator {
 public:
  const std::string& name() const override { return name_; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Status all_reduce(void* buf, size_t count, DataType, ReduceOp) override {
    seen.push_back(buf);
    for (size_t i = 0; i < count; ++i) static_cast<float*>(buf)[i] += 1.0f;
    return {};
  }
  Status all_gather(const void* send, void* recv, size_t count, DataType) override {
    seen.push_back(send);
    seen.push_back(recv);
    for (size_t i = 0; i < count; ++i) {
      static_cast<float*>(recv)[i] = static_cast<const float*>(send)[i];
      static_cast<float*>(recv)[count + i] = 7.0f;
    }
    return {};
  }
  Status reduce_scatter(const void*, void*, size_t, DataType) override { return {}; }
  Status broadcast(void*, size_t, DataType, int) override { return {}; }
  Status all_to_all(const void*, void*, size_t, DataType) override { return {}; }
  Status all_to_all_v(const void*, std::span<const size_t>, std::span<const size_t>, void*,
                      std::span<const size_t>, std::span<const size_t>, DataType) override {
    return {};
  }
  Status barrier() override { return {}; }
  std::unique_ptr<Communicator> split(const std::string&, int, int) override {
    return std::make_unique<RecordingHostComm>();
  }
  std::vector<const void*> seen;

 private:
  std::string name_ = "tp0";
};

TEST(HostStagingCommunicator, DeviceBuffersGoThroughHostMemoryHostPointersPassThrough) {
  auto ops = make_cpu_ops();
  std::vector<float> device_arena(64, 0.0f);  // stands in for GPU memory
  auto on_device = [&](const void* p) {
    auto* f = static_cast<const float*>(p);
    return f >= device_arena.data() && f < device_arena.data() + device_arena.size();
  };
  auto inner = std::make_unique<RecordingHostComm>();
  RecordingHostComm* raw = inner.get();
  HostStagingCommunicator staging(std::move(inner), *ops, on_device);

  float* dev = device_arena.data();
  for (int i = 0; i < 8; ++i) dev[i] = static_cast<float>(i);
  ASSERT_TRUE(staging.all_reduce(dev, 8, DataType::kFloat32, ReduceOp::kSum).ok());
  ASSERT_EQ(raw->seen.size(), 1u);
  EXPECT_FALSE(on_device(raw->seen[0])) << "the host backend must never see device memory";
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dev[i], static_cast<float>(i) + 1.0f);
  EXPECT_EQ(staging.staged_bytes(), 2u * 8 * sizeof(float));

  float loss = 2.5f;  // a host scalar, as the trainer reduces its loss
  ASSERT_TRUE(staging.all_reduce(&loss, 1, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(raw->seen.back(), &loss);
  EXPECT_EQ(loss, 3.5f);

  float* dev_send = device_arena.data() + 16;
  float* dev_recv = device_arena.data() + 32;
  for (int i = 0; i < 4; ++i) dev_send[i] = 10.0f + static_cast<float>(i);
  ASSERT_TRUE(staging.all_gather(dev_send, dev_recv, 4, DataType::kFloat32).ok());
  EXPECT_FALSE(on_device(raw->seen[raw->seen.size() - 2]));
  EXPECT_FALSE(on_device(raw->seen.back()));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(dev_recv[i], 10.0f + static_cast<float>(i));
    EXPECT_EQ(dev_recv[4 + i], 7.0f);
  }
  auto sub = staging.split("tp1", 0, 0);
  ASSERT_TRUE(sub);
  float* dev_sub = device_arena.data() + 48;
  dev_sub[0] = 1.0f;
  ASSERT_TRUE(sub->all_reduce(dev_sub, 1, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(dev_sub[0], 2.0f) << "splits stage too";
}

// ---------------------------------------------------------------- asynchronous completion

// Completes when the test says so, as a CUDA event on a stream would once the GPU got there.
class ManualCompletion final : public rankscope::probe::CompletionSource {
 public:
  explicit ManualCompletion(std::shared_ptr<std::atomic<bool>> done) : done_(std::move(done)) {}
  bool poll_done() override { return done_->load(); }

 private:
  std::shared_ptr<std::atomic<bool>> done_;
};

// A loopback that returns with its collective "enqueued on a stream".
class AsyncLoopback final : public Communicator {
 public:
  explicit AsyncLoopback(std::shared_ptr<std::atomic<bool>> done) : done_(std::move(done)) {}
  const std::string& name() const override { return inner_.name(); }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status all_reduce(void* b, size_t n, DataType t, ReduceOp o) override {
    pending_ = true;
    return inner_.all_reduce(b, n, t, o);
  }
  Status all_gather(const void* s, void* r, size_t n, DataType t) override { return inner_.all_gather(s, r, n, t); }
  Status reduce_scatter(const void* s, void* r, size_t n, DataType t) override {
    return inner_.reduce_scatter(s, r, n, t);
  }
  Status broadcast(void* b, size_t n, DataType t, int root) override { return inner_.broadcast(b, n, t, root); }
  Status all_to_all(const void* s, void* r, size_t n, DataType t) override { return inner_.all_to_all(s, r, n, t); }
  Status all_to_all_v(const void* s, std::span<const size_t> sc, std::span<const size_t> sd, void* r,
                      std::span<const size_t> rc, std::span<const size_t> rd, DataType t) override {
    return inner_.all_to_all_v(s, sc, sd, r, rc, rd, t);
  }
  Status barrier() override { return inner_.barrier(); }
  std::unique_ptr<Communicator> split(const std::string&, int, int) override { return nullptr; }
  std::unique_ptr<rankscope::probe::CompletionSource> take_pending_completion() override {
    if (!pending_) return nullptr;
    pending_ = false;
    return std::make_unique<ManualCompletion>(done_);
  }

 private:
  LoopbackCommunicator inner_{"world"};
  std::shared_ptr<std::atomic<bool>> done_;
  bool pending_ = false;
};

TEST(ProbedCommunicator, StreamOrderedCollectiveCompletesWhenTheDeviceSaysSo) {
  auto dir = std::filesystem::path(RANKSCOPE_BINARY_DIR) / "runtime-unit" / "async_completion";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rankscope::probe::Options po;
  po.run_dir = dir;
  po.nvtx = false;
  po.cupti = false;
  po.watchdog_poll_s = 0.01;
  auto probe = rankscope::probe::Probe::create(po);
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  auto done = std::make_shared<std::atomic<bool>>(false);
  ProbedCommunicator world(std::make_unique<AsyncLoopback>(done), probe->get(), nullptr);
  float x = 1.0f;
  ASSERT_TRUE(world.all_reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum).ok());

  const auto path = rankscope::format::flight_recorder_path(dir, 0);
  auto state_now = [&] {
    auto snap = rankscope::format::read_flight_recorder(path);
    EXPECT_TRUE(snap.ok()) << snap.status().to_string();
    return snap.ok() && snap->comm("world") ? snap->comm("world")->ring.at(0).state
                                            : rankscope::format::CollectiveState::kEmpty;
  };
  // The host returned; the "GPU" has not finished: the recorder must not call it completed.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(state_now(), rankscope::format::CollectiveState::kCompleted);
  done->store(true);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (state_now() != rankscope::format::CollectiveState::kCompleted &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(state_now(), rankscope::format::CollectiveState::kCompleted);
}

// ---------------------------------------------------------------- gpu-stall

TEST(FaultSpec, GpuStallParsesAndNeedsEveryKey) {
  auto f = parse_fault_spec("gpu-stall:rank=2,range=backward/block1/mlp,step=3,seconds=30");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->kind, FaultKind::kGpuStall);
  EXPECT_EQ(f->rank, 2);
  EXPECT_EQ(f->range, "backward/block1/mlp");
  EXPECT_EQ(f->step, 3);
  EXPECT_DOUBLE_EQ(f->seconds, 30.0);
  auto missing = parse_fault_spec("gpu-stall:rank=2,range=forward/embed,step=3");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("seconds"), std::string::npos);
  EXPECT_FALSE(parse_fault_spec("gpu-stall:rank=0,range=x,step=1,seconds=-1").ok());
}

TEST(FaultInjector, GpuStallCallsTheDeviceHookOnlyInItsRangeAndStep) {
  std::vector<FaultSpec> specs = {*parse_fault_spec("gpu-stall:rank=0,range=forward/embed,step=2,seconds=1.5")};
  FaultInjector inj(specs, 0, nullptr);
  EXPECT_TRUE(inj.wants_gpu());
  std::vector<double> calls;
  inj.set_gpu_stall_hook([&](double s) {
    calls.push_back(s);
    return rankscope::Status::ok_status();
  });
  inj.set_step(1);
  inj.on_range_enter("forward/embed");
  inj.set_step(2);
  inj.on_range_enter("forward/block0/attn");
  EXPECT_TRUE(calls.empty());
  inj.on_range_enter("forward/embed");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_DOUBLE_EQ(calls[0], 1.5);
  FaultInjector none(std::vector<FaultSpec>{*parse_fault_spec("stall:rank=0,range=x,step=1")}, 0, nullptr);
  EXPECT_FALSE(none.wants_gpu());
}

}  // namespace
}  // namespace gpt2
